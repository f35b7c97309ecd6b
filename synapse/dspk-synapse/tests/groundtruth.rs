//! Ground truth: the comparison against SpikeInterface's numbers
//! (`tests/reference/comparison.json`, made by `tests/reference/make_comparison.py`), the
//! assignment solver against brute force, and the synthetic recording's properties.

mod common;

use common::f64s;
use dspk_core::SampleRate;
use dspk_core::test_util::assert_close_f64;
use dspk_synapse::Error;
use dspk_synapse::groundtruth::{
    CompareOptions, MatchMode, Performance, SpikeTrains, compare_to_ground_truth, delta_frames,
    linear_sum_assignment,
};
use serde_json::Value;

fn reference() -> Value {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/comparison.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .expect("array")
        .iter()
        .map(|v| v.as_str().expect("string").to_string())
        .collect()
}

fn optional_strings(value: &Value) -> Vec<Option<String>> {
    value
        .as_array()
        .expect("array")
        .iter()
        .map(|v| v.as_str().map(str::to_string))
        .collect()
}

fn integers(value: &Value) -> Vec<u64> {
    value
        .as_array()
        .expect("array")
        .iter()
        .map(|v| v.as_u64().expect("whole number"))
        .collect()
}

fn sorting(value: &Value) -> SpikeTrains {
    let ids = strings(&value["ids"]);
    let trains = value["trains"].as_array().expect("trains");
    SpikeTrains::new(
        ids.into_iter()
            .zip(trains)
            .map(|(id, t)| {
                let train = t
                    .as_array()
                    .expect("train")
                    .iter()
                    .map(|v| v.as_i64().expect("sample"))
                    .collect();
                (id, train)
            })
            .collect(),
    )
    .expect("reference trains are valid")
}

/// `f64` Hz as an exact rational (the reference rates are dyadic or whole).
fn rate(hz: f64) -> SampleRate {
    hz.to_string().parse().expect("rate")
}

/// SpikeInterface's figures are matched to this absolute difference.
const TOLERANCE: f64 = 1e-12;

/// One per-unit figure of a [`Performance`].
type Figure = fn(&Performance) -> f64;

#[test]
fn comparison_matches_spikeinterface() {
    let reference = reference();
    let cases = reference["cases"].as_array().expect("cases");
    assert!(cases.len() >= 5);
    for case in cases {
        let name = case["name"].as_str().expect("name");
        let gt = sorting(&case["gt"]);
        let tested = sorting(&case["tested"]);
        let o = &case["options"];
        let options = CompareOptions {
            delta_time_ms: o["delta_time"].as_f64().unwrap(),
            match_score: o["match_score"].as_f64().unwrap(),
            chance_score: o["chance_score"].as_f64().unwrap(),
            well_detected_score: o["well_detected_score"].as_f64().unwrap(),
            redundant_score: o["redundant_score"].as_f64().unwrap(),
            overmerged_score: o["overmerged_score"].as_f64().unwrap(),
        };
        let rate = rate(case["sampling_frequency"].as_f64().unwrap());
        let c = compare_to_ground_truth(&gt, &tested, rate, &options).unwrap();
        assert_eq!(
            c.delta_frames(),
            case["delta_frames"].as_u64().unwrap(),
            "{name}"
        );

        let counts: Vec<u64> = case["match_count"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(integers)
            .collect();
        assert_eq!(c.match_counts(), counts, "{name}: match counts");
        let agreement: Vec<f64> = case["agreement"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(f64s)
            .collect();
        assert_close_f64(
            &format!("{name}: agreement"),
            c.agreement_scores(),
            &agreement,
            TOLERANCE,
            0.0,
        );

        let tested_id = |j: &Option<usize>| j.map(|j| tested.ids()[j].clone());
        let gt_id = |i: &Option<usize>| i.map(|i| gt.ids()[i].clone());
        let hungarian: Vec<_> = c.hungarian_match().iter().map(tested_id).collect();
        assert_eq!(
            hungarian,
            optional_strings(&case["hungarian_match_12"]),
            "{name}"
        );
        let best: Vec<_> = c.best_match().iter().map(tested_id).collect();
        assert_eq!(best, optional_strings(&case["best_match_12"]), "{name}");
        let best21: Vec<_> = c.best_match_tested().iter().map(gt_id).collect();
        assert_eq!(best21, optional_strings(&case["best_match_21"]), "{name}");

        let unit_counts = c.counts(MatchMode::Hungarian);
        let tp: Vec<u64> = unit_counts.iter().map(|u| u.true_positives).collect();
        let fn_: Vec<u64> = unit_counts.iter().map(|u| u.false_negatives).collect();
        let fp: Vec<u64> = unit_counts.iter().map(|u| u.false_positives).collect();
        assert_eq!(tp, integers(&case["tp"]), "{name}: tp");
        assert_eq!(fn_, integers(&case["fn"]), "{name}: fn");
        assert_eq!(fp, integers(&case["fp"]), "{name}: fp");

        for (mode, key) in [
            (MatchMode::Hungarian, "performance"),
            (MatchMode::Best, "performance_best"),
        ] {
            let perf = c.performance(mode);
            let e = &case[key];
            let fields: [(&str, Figure); 5] = [
                ("accuracy", |p| p.accuracy),
                ("recall", |p| p.recall),
                ("precision", |p| p.precision),
                ("false_discovery_rate", |p| p.false_discovery_rate),
                ("miss_rate", |p| p.miss_rate),
            ];
            for (field, get) in fields {
                let actual: Vec<f64> = perf.iter().map(get).collect();
                assert_close_f64(
                    &format!("{name}: {key}.{field}"),
                    &actual,
                    &f64s(&e[field]),
                    TOLERANCE,
                    0.0,
                );
            }
            let mean = c.mean_performance(mode);
            let accuracy = f64s(&e["accuracy"]);
            let expected_mean = accuracy.iter().sum::<f64>() / accuracy.len() as f64;
            assert!(
                (mean.accuracy - expected_mean).abs() <= TOLERANCE,
                "{name}: mean accuracy"
            );
        }

        let ids = |units: Vec<usize>| -> Vec<String> {
            units.into_iter().map(|j| tested.ids()[j].clone()).collect()
        };
        for (category, units) in [
            ("well_detected", c.well_detected_units()),
            ("redundant", c.redundant_units()),
            ("overmerged", c.overmerged_units()),
            ("false_positive", c.false_positive_units()),
            ("bad", c.bad_units()),
        ] {
            assert_eq!(ids(units), strings(&case[category]), "{name}: {category}");
        }
        let categories = c.unit_categories();
        let e = &case["categories"];
        let n = |k: &str| e[k].as_u64().unwrap() as usize;
        assert_eq!(
            [
                categories.num_gt,
                categories.num_tested,
                categories.well_detected,
                categories.overmerged,
                categories.redundant,
                categories.false_positive,
                categories.bad
            ],
            [
                n("num_gt"),
                n("num_sorter"),
                n("num_well_detected"),
                n("num_overmerged"),
                n("num_redundant"),
                n("num_false_positive"),
                n("num_bad")
            ],
            "{name}: categories"
        );
    }
}

#[test]
fn delta_frames_truncate_as_spikeinterface() {
    let hz = |h: u64| SampleRate::from_hz(h).unwrap();
    assert_eq!(delta_frames(0.4, hz(30_000)).unwrap(), 12);
    assert_eq!(delta_frames(0.4, hz(32_000)).unwrap(), 12);
    assert_eq!(delta_frames(0.5, hz(30_000)).unwrap(), 15);
    assert_eq!(delta_frames(0.0, hz(30_000)).unwrap(), 0);
    assert!(matches!(
        delta_frames(-0.1, hz(30_000)),
        Err(Error::Argument(_))
    ));
    assert!(matches!(
        delta_frames(f64::NAN, hz(30_000)),
        Err(Error::Argument(_))
    ));
}

#[test]
fn spike_trains_are_checked() {
    let unit = |id: &str, t: &[i64]| (id.to_string(), t.to_vec());
    assert!(SpikeTrains::new(vec![unit("a", &[1, 1, 5]), unit("b", &[])]).is_ok());
    let unsorted = SpikeTrains::new(vec![unit("a", &[1, 7, 5])]).unwrap_err();
    assert!(unsorted.to_string().contains("not sorted"), "{unsorted}");
    let negative = SpikeTrains::new(vec![unit("a", &[-3, 5])]).unwrap_err();
    assert!(negative.to_string().contains("negative"), "{negative}");
    let twice = SpikeTrains::new(vec![unit("a", &[1]), unit("a", &[2])]).unwrap_err();
    assert!(twice.to_string().contains("twice"), "{twice}");

    let labelled = SpikeTrains::from_labels(&[30, 10, 20, 40], &[7, 2, 7, 2]).unwrap();
    assert_eq!(labelled.ids(), ["2", "7"]);
    assert_eq!(labelled.train(0), [10, 40]);
    assert_eq!(labelled.train(1), [20, 30]);
    assert_eq!(labelled.num_spikes(), 4);
    assert!(SpikeTrains::from_labels(&[1, 2], &[0]).is_err());
    assert!(SpikeTrains::from_labels(&[-1], &[0]).is_err());

    let played = labelled.repeated(50, 3).unwrap();
    assert_eq!(played.ids(), ["2", "7"]);
    assert_eq!(played.train(0), [10, 40, 60, 90, 110, 140]);
    assert_eq!(played.train(1), [20, 30, 70, 80, 120, 130]);
    assert_eq!(labelled.repeated(50, 0).unwrap().num_spikes(), 0);
    let overlapping = labelled.repeated(40, 2).unwrap_err();
    assert!(
        overlapping.to_string().contains("sample 40"),
        "{overlapping}"
    );
    assert!(labelled.repeated(0, 2).is_err());
    assert!(labelled.repeated(50, u64::MAX).is_err());
}

/// Every assignment of `min(rows, cols)` pairs, by recursion; the least total cost.
fn brute_force(cost: &[f64], rows: usize, cols: usize) -> f64 {
    fn go(cost: &[f64], rows: usize, cols: usize, row: usize, used: &mut Vec<bool>) -> f64 {
        if row == rows {
            return 0.0;
        }
        let mut best = f64::INFINITY;
        // A row may stay unassigned only while enough rows remain to fill the columns.
        let assigned = used.iter().filter(|&&u| u).count();
        if rows - row > cols - assigned {
            best = go(cost, rows, cols, row + 1, used);
        }
        for c in 0..cols {
            if !used[c] {
                used[c] = true;
                best = best.min(cost[row * cols + c] + go(cost, rows, cols, row + 1, used));
                used[c] = false;
            }
        }
        best
    }
    go(cost, rows, cols, 0, &mut vec![false; cols])
}

#[test]
fn assignment_is_optimal() {
    let mut state = 0x1234_5678_u64;
    let mut next = || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    for rows in 1..=6 {
        for cols in 1..=6 {
            for trial in 0..4 {
                // Trial 3 has many equal costs (ties).
                let cost: Vec<f64> = (0..rows * cols)
                    .map(|_| {
                        if trial == 3 {
                            (next() * 3.0).floor()
                        } else {
                            next() * 10.0 - 5.0
                        }
                    })
                    .collect();
                let pairs = linear_sum_assignment(&cost, rows, cols).unwrap();
                assert_eq!(pairs.len(), rows.min(cols));
                let mut used_rows = vec![false; rows];
                let mut used_cols = vec![false; cols];
                for &(r, c) in &pairs {
                    assert!(!used_rows[r] && !used_cols[c], "{rows}x{cols}: {pairs:?}");
                    used_rows[r] = true;
                    used_cols[c] = true;
                }
                let total: f64 = pairs.iter().map(|&(r, c)| cost[r * cols + c]).sum();
                let best = brute_force(&cost, rows, cols);
                assert!(
                    (total - best).abs() < 1e-9,
                    "{rows}x{cols} trial {trial}: {total} vs {best}"
                );
            }
        }
    }
    assert!(linear_sum_assignment(&[1.0, 2.0], 2, 2).is_err());
    assert!(linear_sum_assignment(&[1.0, f64::NAN], 1, 2).is_err());
    assert!(linear_sum_assignment(&[], 0, 3).unwrap().is_empty());
}

// ---- Synthetic ground truth ----

use dspk_core::RecordingSource;
use dspk_core::test_util::check_recording_source;
use dspk_synapse::groundtruth::{Drift, GroundTruthConfig, GroundTruthRecording, NoiseConfig};

fn small() -> GroundTruthConfig {
    GroundTruthConfig {
        channels: 12,
        num_samples: 12_000,
        units: 5,
        firing_rate_hz: [10.0, 30.0],
        seed: 9,
        ..GroundTruthConfig::default()
    }
}

fn stored(
    source: &GroundTruthRecording,
    channels: &[usize],
    range: std::ops::Range<u64>,
) -> Vec<i16> {
    let n = (range.end - range.start) as usize;
    let mut bytes = vec![0u8; channels.len() * n * 2];
    source.read_stored(channels, range, &mut bytes).unwrap();
    bytes
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect()
}

#[test]
fn synthetic_recording_is_a_recording_source() {
    let recording = GroundTruthRecording::generate(&small()).unwrap();
    check_recording_source(&recording);
    let info = recording.info();
    assert_eq!(info.num_channels(), 12);
    assert_eq!(info.num_samples, 12_000);
    assert!(
        info.channels
            .iter()
            .all(|c| c.gain == 0.195 && c.unit == "uV")
    );
    assert_eq!(recording.probe().num_contacts(), 12);
    // Neuropixels 1.0 checkerboard: rows alternate x = 16, 48 and 0, 32.
    assert_eq!(
        recording.probe().channel_positions(4).unwrap(),
        vec![[16.0, 0.0], [48.0, 0.0], [0.0, 20.0], [32.0, 20.0]]
    );
}

#[test]
fn synthetic_windows_are_deterministic() {
    let config = small();
    let a = GroundTruthRecording::generate(&config).unwrap();
    let b = GroundTruthRecording::generate(&config).unwrap();
    let n = config.num_samples;
    let all: Vec<usize> = (0..config.channels).collect();
    let whole = stored(&a, &all, 0..n);
    assert_eq!(whole, stored(&b, &all, 0..n), "same seed, same values");
    assert_eq!(a.spikes(), b.spikes());
    // Any split of the window, channel by channel, gives the whole read's values.
    let cuts = [0, 1, 777, 778, 5001, 11_999, n];
    for channel in [0, 5, 11] {
        let row = &whole[channel * n as usize..(channel + 1) * n as usize];
        let mut pieces = Vec::new();
        for w in cuts.windows(2) {
            pieces.extend(stored(&a, &[channel], w[0]..w[1]));
        }
        assert_eq!(
            pieces, row,
            "channel {channel}: split reads differ from the whole"
        );
    }
    let other = GroundTruthRecording::generate(&GroundTruthConfig { seed: 10, ..config }).unwrap();
    assert_ne!(
        stored(&other, &all, 0..n),
        whole,
        "another seed, other values"
    );
}

#[test]
fn synthetic_trains_respect_refractory_and_rates() {
    let config = GroundTruthConfig {
        channels: 4,
        num_samples: 30_000 * 400,
        units: 6,
        firing_rate_hz: [5.0, 40.0],
        refractory_ms: 2.5,
        ..GroundTruthConfig::default()
    };
    let recording = GroundTruthRecording::generate(&config).unwrap();
    let trains = recording.spike_trains();
    let before = recording.trough_index() as i64;
    let waveform = recording.units()[0].waveform.len() as i64;
    let span = (config.num_samples as i64 - waveform + 1 - before) as f64 / 30_000.0;
    for (u, unit) in recording.units().iter().enumerate() {
        let train = trains.train(u);
        assert!(
            train.windows(2).all(|w| w[1] - w[0] >= 75),
            "unit {u}: refractory violated"
        );
        assert!(train.first().is_some_and(|&s| s >= before));
        assert!(
            train
                .last()
                .is_some_and(|&s| s + waveform - before <= config.num_samples as i64)
        );
        let expected = unit.firing_rate_hz * span;
        let tolerance = 5.0 * expected.sqrt();
        assert!(
            (train.len() as f64 - expected).abs() < tolerance,
            "unit {u}: {} spikes, expected {expected:.0} +- {tolerance:.0} at {} Hz",
            train.len(),
            unit.firing_rate_hz
        );
    }
}

#[test]
fn synthetic_spikes_are_their_templates() {
    // Without noise or amplitude variation, an isolated spike is its template rounded to
    // stored steps.
    let config = GroundTruthConfig {
        channels: 16,
        num_samples: 30_000,
        units: 1,
        firing_rate_hz: [5.0, 5.0],
        amplitude_jitter: 0.0,
        noise: NoiseConfig {
            independent_uv: 0.0,
            neighbour_uv: 0.0,
            common_uv: 0.0,
            slow_wave_uv: 0.0,
            ..NoiseConfig::default()
        },
        ..GroundTruthConfig::default()
    };
    let recording = GroundTruthRecording::generate(&config).unwrap();
    let spikes = recording.spikes();
    assert!(spikes.len() > 1);
    let spike = spikes[0];
    let width = recording.units()[0].waveform.len() as u64;
    let first = spike.sample - recording.trough_index() as u64;
    assert!(
        spikes[1].sample >= spike.sample + width,
        "second spike overlaps the first"
    );
    let all: Vec<usize> = (0..16).collect();
    let values = stored(&recording, &all, first..first + width);
    let template = recording.template(0, spike.sample);
    for (k, (&v, &t)) in values.iter().zip(&template).enumerate() {
        assert_eq!(
            f64::from(v),
            (t / 0.195).round(),
            "channel {} sample {}",
            k / width as usize,
            k % width as usize
        );
    }
    // The trough is on the spike's channel.
    let troughs: Vec<i16> = (0..16)
        .map(|c| values[c * width as usize + recording.trough_index()])
        .collect();
    let peak = (0..16).min_by_key(|&c| troughs[c]).unwrap();
    assert_eq!(peak, spike.channel);
    assert!(f64::from(troughs[peak]) * 0.195 < -0.5 * config.amplitude_uv[0]);
}

#[test]
fn synthetic_noise_has_the_configured_levels() {
    let config = GroundTruthConfig {
        channels: 32,
        num_samples: 60_000,
        units: 0,
        noise: NoiseConfig {
            slow_wave_uv: 0.0,
            ..NoiseConfig::default()
        },
        ..GroundTruthConfig::default()
    };
    let recording = GroundTruthRecording::generate(&config).unwrap();
    let n = config.num_samples as usize;
    let mut values = vec![0f32; 32 * n];
    recording
        .read(&(0..32).collect::<Vec<_>>(), 0..n as u64, &mut values)
        .unwrap();
    let channel = |c: usize| &values[c * n..(c + 1) * n];
    let covariance = |a: usize, b: usize| {
        channel(a)
            .iter()
            .zip(channel(b))
            .map(|(x, y)| f64::from(*x) * f64::from(*y))
            .sum::<f64>()
            / n as f64
    };
    let noise = config.noise;
    let total = noise.independent_uv.powi(2) + noise.neighbour_uv.powi(2) + noise.common_uv.powi(2);
    for c in [0, 13, 31] {
        let variance = covariance(c, c);
        assert!(
            (variance / total - 1.0).abs() < 0.05,
            "channel {c}: variance {variance} vs {total}"
        );
    }
    // Far channels share only the common noise; neighbours also the neighbour noise.
    let far = covariance(0, 31);
    assert!(
        (far - noise.common_uv.powi(2)).abs() < 0.1 * total,
        "far covariance {far}"
    );
    let near = covariance(10, 12);
    assert!(
        near > far + 0.3 * noise.neighbour_uv.powi(2),
        "neighbour covariance {near} vs far {far}"
    );
}

#[test]
fn drift_moves_the_peak_channel() {
    let config = GroundTruthConfig {
        channels: 64,
        num_samples: 30_000 * 40,
        units: 8,
        firing_rate_hz: [8.0, 12.0],
        drift: Drift::Linear { total_um: 200.0 },
        seed: 4,
        ..GroundTruthConfig::default()
    };
    let recording = GroundTruthRecording::generate(&config).unwrap();
    let unit = (0..8)
        .find(|&u| (40.0..360.0).contains(&recording.units()[u].position[1]))
        .expect("a unit with room to drift");
    let y = |c: usize| recording.channel_positions()[c][1];
    // The channel with the deepest mean trough over a unit's spikes in a time span, from the
    // recorded values.
    let peak_channel = |span: std::ops::Range<u64>| {
        let spikes: Vec<u64> = recording
            .spikes()
            .iter()
            .filter(|s| s.unit == unit && span.contains(&s.sample))
            .map(|s| s.sample)
            .collect();
        assert!(spikes.len() >= 20);
        let mut sum = vec![0f64; 64];
        let all: Vec<usize> = (0..64).collect();
        for &s in &spikes {
            let v = stored(&recording, &all, s..s + 1);
            for (total, v) in sum.iter_mut().zip(v) {
                *total += f64::from(v);
            }
        }
        (0..64).min_by(|&a, &b| sum[a].total_cmp(&sum[b])).unwrap()
    };
    let n = config.num_samples;
    let early = peak_channel(0..n / 8);
    let late = peak_channel(n - n / 8..n);
    let moved = y(late) - y(early);
    assert!(
        (moved - 175.0).abs() <= 45.0,
        "peak moved {moved} um (from channel {early} to {late})"
    );
    assert!((recording.drift_um(n - 1) - 200.0).abs() < 1e-9);
    // The true spikes' channels follow.
    let channels: Vec<usize> = recording
        .spikes()
        .iter()
        .filter(|s| s.unit == unit)
        .map(|s| s.channel)
        .collect();
    assert!(y(*channels.last().unwrap()) - y(channels[0]) > 150.0);
}

#[test]
fn synthetic_config_is_checked() {
    let bad = [
        GroundTruthConfig {
            channels: 0,
            ..small()
        },
        GroundTruthConfig {
            firing_rate_hz: [10.0, 300.0],
            ..small()
        },
        GroundTruthConfig {
            firing_rate_hz: [10.0, 5.0],
            ..small()
        },
        GroundTruthConfig {
            gain_uv: 0.0,
            ..small()
        },
        GroundTruthConfig {
            footprint_um: f64::NAN,
            ..small()
        },
        GroundTruthConfig {
            units: 5000,
            num_samples: u64::MAX / 2,
            ..small()
        },
        GroundTruthConfig {
            sample_rate_hz: 10,
            ..small()
        },
        GroundTruthConfig {
            drift: Drift::Sine {
                amplitude_um: 10.0,
                period_s: 0.0,
            },
            ..small()
        },
        GroundTruthConfig {
            noise: NoiseConfig {
                common_uv: -1.0,
                ..NoiseConfig::default()
            },
            ..small()
        },
    ];
    for config in bad {
        let error = GroundTruthRecording::generate(&config).unwrap_err();
        assert!(matches!(error, Error::Argument(_)), "{config:?}: {error}");
    }
}

#[test]
fn synthetic_truth_compares_perfectly_with_itself() {
    let recording = GroundTruthRecording::generate(&small()).unwrap();
    let trains = recording.spike_trains();
    assert_eq!(trains.num_spikes(), recording.spikes().len());
    let rate = SampleRate::from_hz(30_000).unwrap();
    let c = compare_to_ground_truth(&trains, &trains, rate, &CompareOptions::default()).unwrap();
    assert!(
        c.performance(MatchMode::Hungarian)
            .iter()
            .all(|p| p.accuracy == 1.0)
    );
    assert_eq!(c.well_detected_units().len(), trains.num_units());
}
