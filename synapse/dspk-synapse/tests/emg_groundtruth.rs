//! The EMG-like ground-truth generator and lag-aligned scoring (lags checked against the
//! benchmark scorer's, `tests/reference/lag_alignment.json`, made by
//! `tests/reference/make_lag_alignment.py`).

use dspk_core::test_util::check_recording_source;
use dspk_core::{RecordingSource, SampleRate};
use dspk_synapse::groundtruth::{
    CompareOptions, DelayMode, EmgConfig, EmgNoise, EmgRecording, MatchMode, SpikeTrains,
    align_lags, compare_to_ground_truth,
};

/// A short recording (fast in debug builds).
fn small() -> EmgConfig {
    EmgConfig {
        channels: 8,
        units: 5,
        duration_s: 2.0,
        seed: 3,
        ..EmgConfig::default()
    }
}

#[test]
fn is_a_recording_source_with_the_scripts_layout() {
    let recording = EmgRecording::generate(&small()).unwrap();
    check_recording_source(&recording);
    let info = recording.info();
    assert_eq!(info.num_channels(), 8);
    assert_eq!(info.num_samples, 60_000);
    assert!(
        info.channels
            .iter()
            .all(|c| c.gain == 0.195 && c.unit == "uV")
    );
    assert_eq!(recording.gain_uv(), 0.195);
    assert_eq!(recording.sample_rate_hz(), 30_000);
    // chanMap.json: x = 0, y = pitch * c in µm.
    assert_eq!(recording.channel_positions()[3], [0.0, 3000.0]);
    assert_eq!(
        recording.probe().channel_positions(8).unwrap(),
        recording.channel_positions()
    );
    // Interleaved samples agree with channel-major stored reads.
    let interleaved = recording.interleaved_samples();
    assert_eq!(interleaved.len(), 8 * 60_000);
    let mut bytes = vec![0u8; 2 * 100];
    recording.read_stored(&[5], 1000..1100, &mut bytes).unwrap();
    for (s, pair) in bytes.chunks_exact(2).enumerate() {
        assert_eq!(
            i16::from_le_bytes([pair[0], pair[1]]),
            interleaved[(1000 + s) * 8 + 5]
        );
    }
    // The templates' shape and the trains agree with the spike list.
    let len = recording.template_len();
    assert_eq!(recording.templates().len(), 5 * len * 8);
    assert_eq!(recording.template(4).map(<[f64]>::len), Some(len * 8));
    assert!(recording.template(5).is_none());
    let trains = recording.spike_trains();
    assert_eq!(trains.num_units(), 5);
    assert_eq!(trains.num_spikes(), recording.spike_times().len());
    assert!(recording.spike_times().is_sorted());
    let center = recording.template_center() as i64;
    assert!(
        recording
            .spike_times()
            .iter()
            .all(|&t| t >= center && t + (len as i64 - center) <= 60_000)
    );
}

#[test]
fn same_seed_same_samples_other_seed_differs() {
    let a = EmgRecording::generate(&small()).unwrap();
    let b = EmgRecording::generate(&small()).unwrap();
    assert_eq!(a.interleaved_samples(), b.interleaved_samples());
    assert_eq!(a.spike_times(), b.spike_times());
    assert_eq!(a.templates(), b.templates());
    let c = EmgRecording::generate(&EmgConfig { seed: 4, ..small() }).unwrap();
    assert_ne!(a.interleaved_samples(), c.interleaved_samples());
    assert_ne!(a.spike_times(), c.spike_times());
}

#[test]
fn delays_are_zero_on_the_best_channel_and_within_the_bound() {
    for (max_delay_ms, mode) in [
        (2.0, DelayMode::Unit),
        (0.5, DelayMode::Unit),
        (2.0, DelayMode::Shared),
        (0.3, DelayMode::Shared),
    ] {
        let config = EmgConfig {
            channels: 16,
            units: 8,
            max_delay_ms,
            delay_mode: mode,
            noise: EmgNoise::none(),
            ..small()
        };
        let recording = EmgRecording::generate(&config).unwrap();
        let bound = (max_delay_ms * 30.0).floor() as i64;
        let mut spread = 0;
        for unit in recording.units() {
            assert_eq!(unit.delays_samples.len(), 16);
            assert_eq!(unit.delays_samples[unit.best_channel], 0);
            assert!(
                unit.delays_samples.iter().all(|d| d.abs() <= bound),
                "{mode:?} {max_delay_ms} ms: {:?}",
                unit.delays_samples
            );
            spread = spread.max(unit.delays_samples.iter().map(|d| d.abs()).max().unwrap());
            // The potential leaves the innervation zone both ways: delays do not decrease
            // away from it.
            let iz_channel = (unit.innervation_zone_um / 1000.0).round() as usize;
            for c in iz_channel + 1..16 {
                assert!(unit.delays_samples[c] >= unit.delays_samples[c - 1]);
            }
            for c in 1..=iz_channel.min(15) {
                assert!(unit.delays_samples[c - 1] >= unit.delays_samples[c]);
            }
        }
        // A 15 mm line at 3-5 m/s spans up to several ms: the bound is reached.
        assert!(
            spread > bound / 2,
            "{mode:?} {max_delay_ms} ms: spread {spread}"
        );
    }
}

#[test]
fn shared_mode_gives_one_delay_profile() {
    let config = EmgConfig {
        channels: 16,
        units: 8,
        delay_mode: DelayMode::Shared,
        ..small()
    };
    let recording = EmgRecording::generate(&config).unwrap();
    let units = recording.units();
    let reference = &units[0];
    for unit in units {
        assert_eq!(unit.innervation_zone_um, reference.innervation_zone_um);
        assert_eq!(unit.velocity_m_s, reference.velocity_m_s);
        // Up to the best-channel offset: d_u[c] - d_0[c] is the same for every channel.
        let offset = unit.delays_samples[0] - reference.delays_samples[0];
        for (d, r) in unit.delays_samples.iter().zip(&reference.delays_samples) {
            assert_eq!(d - r, offset);
        }
    }
    // In unit mode the profiles differ.
    let unit_mode = EmgRecording::generate(&EmgConfig {
        delay_mode: DelayMode::Unit,
        ..config
    })
    .unwrap();
    let units = unit_mode.units();
    assert!(units.iter().any(|u| {
        let offset = u.delays_samples[0] - units[0].delays_samples[0];
        u.delays_samples
            .iter()
            .zip(&units[0].delays_samples)
            .any(|(d, r)| d - r != offset)
    }));
}

#[test]
fn spike_times_sit_at_the_largest_peak_on_the_best_channel() {
    let config = EmgConfig {
        amplitude_jitter: 0.0,
        gain_uv: 0.03,
        noise: EmgNoise::none(),
        ..small()
    };
    let recording = EmgRecording::generate(&config).unwrap();
    assert_eq!(recording.clipped_samples(), 0);
    let channels = config.channels;
    let len = recording.template_len();
    let center = recording.template_center();
    for (u, unit) in recording.units().iter().enumerate() {
        let template = recording.template(u).unwrap();
        let column: Vec<f64> = (0..len)
            .map(|k| template[k * channels + unit.best_channel])
            .collect();
        let peak = (0..len)
            .max_by(|&a, &b| column[a].abs().total_cmp(&column[b].abs()).then(b.cmp(&a)))
            .unwrap();
        assert_eq!(peak, center, "unit {u}");
        assert!((column[center].abs() - unit.amplitude_uv).abs() < 1e-9 * unit.amplitude_uv);
    }
    // In the noiseless recording, an isolated spike's largest |value| on its unit's best
    // channel (over its template window) is at its time.
    let samples = recording.interleaved_samples();
    let times = recording.spike_times();
    let units = recording.spike_units();
    let mut checked = 0;
    for (k, (&t, &u)) in times.iter().zip(units).enumerate() {
        let isolated = |other: Option<&i64>| other.is_none_or(|&o| (o - t).abs() > len as i64);
        if !(isolated(k.checked_sub(1).and_then(|j| times.get(j))) && isolated(times.get(k + 1))) {
            continue;
        }
        let best = recording.units()[u].best_channel;
        let first = t as usize - center;
        let peak = (first..first + len)
            .max_by_key(|&s| {
                (
                    samples[s * channels + best].unsigned_abs(),
                    std::cmp::Reverse(s),
                )
            })
            .unwrap();
        assert_eq!(peak as i64, t, "spike {k} of unit {u}");
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} isolated spikes");
}

#[test]
fn firing_rates_rise_over_time() {
    let config = EmgConfig {
        duration_s: 6.0,
        noise: EmgNoise::none(),
        ..small()
    };
    let recording = EmgRecording::generate(&config).unwrap();
    let n = 6 * 30_000;
    let mut thirds = [0usize; 3];
    for &t in recording.spike_times() {
        thirds[(t as usize * 3 / n).min(2)] += 1;
    }
    assert!(thirds[0] < thirds[1] && thirds[1] < thirds[2], "{thirds:?}");
    // Unit 0 (threshold 0) fires from the start; the last unit (highest threshold) starts
    // later, and smaller units come first.
    let units = recording.units();
    assert_eq!(units[0].recruitment_threshold, 0.0);
    assert!(
        units
            .windows(2)
            .all(|w| w[0].recruitment_threshold <= w[1].recruitment_threshold)
    );
    assert!(
        units
            .windows(2)
            .all(|w| w[0].amplitude_uv <= w[1].amplitude_uv)
    );
    let trains = recording.spike_trains();
    let first = |u: usize| trains.train(u).first().copied().unwrap_or(i64::MAX);
    assert!(first(0) < 30_000 / 4, "unit 0 starts at {}", first(0));
    assert!(first(4) > first(0));
    // A flat drive below every threshold but the first recruits unit 0 alone.
    let flat = EmgRecording::generate(&EmgConfig {
        drive_start: 0.0,
        drive_end: 0.0,
        ..config
    })
    .unwrap();
    assert!(flat.spike_units().iter().all(|&u| u == 0));
    assert!(!flat.spike_units().is_empty());
    // A falling drive: rates fall, and units stop as it drops below their thresholds.
    let falling = EmgRecording::generate(&EmgConfig {
        drive_start: 1.0,
        drive_end: 0.0,
        ..config
    })
    .unwrap();
    let mut thirds = [0usize; 3];
    for &t in falling.spike_times() {
        thirds[(t as usize * 3 / n).min(2)] += 1;
    }
    assert!(thirds[0] > thirds[1] && thirds[1] > thirds[2], "{thirds:?}");
    let trains = falling.spike_trains();
    let last = |u: usize| trains.train(u).last().copied().unwrap_or(0);
    let top = falling.units()[4].recruitment_threshold;
    // Unit 4 stops where the drive 1 - t / 6 s falls below its threshold.
    let stop = ((1.0 - top) * n as f64) as i64;
    assert!(
        last(4) <= stop && last(4) > stop - 30_000,
        "{} vs {stop}",
        last(4)
    );
}

#[test]
fn generation_stays_fast() {
    // 16 channels x 10 s with the default noise: about a second in a debug build.
    let started = std::time::Instant::now();
    let recording = EmgRecording::generate(&EmgConfig {
        duration_s: 10.0,
        ..EmgConfig::default()
    })
    .unwrap();
    let elapsed = started.elapsed().as_secs_f64();
    assert_eq!(recording.num_samples(), 300_000);
    assert!(elapsed < 20.0, "{elapsed} s");
}

/// RMS of channel `c` and the correlation of channels `c` and `d` in interleaved samples.
fn rms_and_correlation(samples: &[i16], channels: usize, c: usize, d: usize) -> (f64, f64) {
    let column = |k: usize| -> Vec<f64> {
        samples
            .iter()
            .skip(k)
            .step_by(channels)
            .map(|&v| f64::from(v) * 0.195)
            .collect()
    };
    let (x, y) = (column(c), column(d));
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let sxy: f64 = x.iter().zip(&y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let sxx: f64 = x.iter().map(|a| (a - mx).powi(2)).sum();
    let syy: f64 = y.iter().map(|b| (b - my).powi(2)).sum();
    ((sxx / n).sqrt(), sxy / (sxx * syy).sqrt())
}

#[test]
fn noise_has_the_models_levels_and_correlations() {
    // Negligible spikes: the samples are the noise.
    let quiet = EmgConfig {
        channels: 16,
        amplitude_uv: [1e-3, 1e-3],
        ..small()
    };
    let recording = EmgRecording::generate(&quiet).unwrap();
    let samples = recording.interleaved_samples();
    // White 10 uV + low-pass 15 uV: sqrt(325) = 18.0 uV RMS. Neighbours share the low-pass
    // part: its mixing rows exp(-|i - j| / 2) correlate neighbours by about 0.887 away from
    // the ends, so the sum by 0.887 * 225 / 325 = 0.61; channels 10 apart hardly at all.
    let (rms, near) = rms_and_correlation(&samples, 16, 7, 8);
    assert!((rms - 18.03).abs() < 0.9, "rms {rms}");
    assert!((near - 0.61).abs() < 0.08, "neighbour correlation {near}");
    let (_, far) = rms_and_correlation(&samples, 16, 2, 12);
    assert!(far.abs() < 0.08, "far correlation {far}");
    // White noise alone: independent channels.
    let white = EmgRecording::generate(&EmgConfig {
        noise: EmgNoise {
            lowpass_uv: 0.0,
            ..EmgNoise::default()
        },
        ..quiet
    })
    .unwrap();
    let (rms, near) = rms_and_correlation(&white.interleaved_samples(), 16, 7, 8);
    assert!((rms - 10.0).abs() < 0.3, "white rms {rms}");
    assert!(near.abs() < 0.03, "white neighbour correlation {near}");
    // Mains hum alone: a 60 Hz sinusoid of 50 uV on every channel, phase per channel.
    let hum = EmgRecording::generate(&EmgConfig {
        noise: EmgNoise {
            line_uv: 50.0,
            ..EmgNoise::none()
        },
        ..quiet
    })
    .unwrap();
    let samples = hum.interleaved_samples();
    let (rms, _) = rms_and_correlation(&samples, 16, 3, 4);
    assert!((rms - 50.0 / 2f64.sqrt()).abs() < 0.2, "hum rms {rms}");
    let period = 30_000 / 60;
    for s in [1000, 20_000] {
        assert!((samples[s * 16 + 3] - samples[(s + period) * 16 + 3]).abs() <= 1);
    }
}

#[test]
fn bad_configurations_are_refused() {
    let base = small();
    for (what, config) in [
        (
            "channels",
            EmgConfig {
                channels: 0,
                ..base
            },
        ),
        ("units", EmgConfig { units: 0, ..base }),
        (
            "duration_s",
            EmgConfig {
                duration_s: 0.0,
                ..base
            },
        ),
        (
            "shorter than one potential window",
            EmgConfig {
                duration_s: 0.01,
                ..base
            },
        ),
        (
            "shorter than one potential window",
            EmgConfig {
                duration_s: 0.03,
                max_delay_ms: 10.0,
                ..base
            },
        ),
        (
            "max_delay_ms",
            EmgConfig {
                max_delay_ms: 0.0,
                ..base
            },
        ),
        (
            "max_delay_ms",
            EmgConfig {
                max_delay_ms: 50.0,
                ..base
            },
        ),
        (
            "sample_rate_hz",
            EmgConfig {
                sample_rate_hz: 10,
                ..base
            },
        ),
        (
            "amplitude_uv",
            EmgConfig {
                amplitude_uv: [600.0, 80.0],
                ..base
            },
        ),
        (
            "sigma_ms",
            EmgConfig {
                sigma_ms: [0.5, 3.0],
                ..base
            },
        ),
        (
            "velocity_m_s",
            EmgConfig {
                velocity_m_s: [0.0, 5.0],
                ..base
            },
        ),
        (
            "rate_max_hz",
            EmgConfig {
                rate_max_hz: 4.0,
                ..base
            },
        ),
        (
            "drive_end",
            EmgConfig {
                drive_end: 1.5,
                ..base
            },
        ),
        (
            "gain_uv",
            EmgConfig {
                gain_uv: f64::NAN,
                ..base
            },
        ),
        (
            "lowpass_cutoff_hz",
            EmgConfig {
                noise: EmgNoise {
                    lowpass_cutoff_hz: 20_000.0,
                    ..EmgNoise::default()
                },
                ..base
            },
        ),
        (
            "white_uv",
            EmgConfig {
                noise: EmgNoise {
                    white_uv: -1.0,
                    ..EmgNoise::default()
                },
                ..base
            },
        ),
        (
            "spikes",
            EmgConfig {
                units: 10_000,
                duration_s: 1.0e5,
                ..base
            },
        ),
    ] {
        let error = EmgRecording::generate(&config).unwrap_err().to_string();
        assert!(error.contains(what), "{what}: {error}");
    }
    // The smallest configurations work: one channel, one unit, a recording just one
    // potential window long (2 x (2 x 150 + 60) + 1 samples at 30 kHz).
    let single = EmgRecording::generate(&EmgConfig {
        channels: 1,
        units: 1,
        ..base
    })
    .unwrap();
    assert_eq!(single.units()[0].delays_samples, vec![0]);
    assert!(!single.spike_times().is_empty());
    let shortest = EmgRecording::generate(&EmgConfig {
        duration_s: 721.0 / 30_000.0,
        ..base
    })
    .unwrap();
    assert_eq!(shortest.num_samples(), 721);
}

/// Ground truth with three units and a sorting of it whose clusters are late by fixed lags.
fn shifted_copy(lags: [i64; 3]) -> (SpikeTrains, SpikeTrains) {
    let recording = EmgRecording::generate(&small()).unwrap();
    let gt = recording.spike_trains();
    let sorted = SpikeTrains::new(
        (0..3)
            .map(|u| {
                let train = gt.train(u).iter().map(|&t| t + lags[u]).collect();
                (format!("c{u}"), train)
            })
            .collect(),
    )
    .unwrap();
    (gt, sorted)
}

#[test]
fn lag_alignment_recovers_a_planted_shift() {
    let rate = SampleRate::from_hz(30_000).unwrap();
    let lags = [25, -40, 0];
    let (gt, sorted) = shifted_copy(lags);
    // Unaligned, the shifted clusters miss (25 and 40 samples are beyond 0.4 ms).
    let options = CompareOptions::default();
    let before = compare_to_ground_truth(&gt, &sorted, rate, &options).unwrap();
    assert_eq!(before.performance(MatchMode::Hungarian)[0].accuracy, 0.0);
    let aligned = align_lags(&gt, &sorted, rate, 2.0, 0.4).unwrap();
    for (u, lag) in aligned.lags.iter().enumerate() {
        assert_eq!(lag.lag_samples, lags[u], "cluster {u}");
        assert_eq!(lag.gt_unit, Some(u));
        assert_eq!(lag.clamped, 0);
        assert!(lag.coincidences >= gt.train(u).len() as u64);
    }
    for u in 0..3 {
        assert_eq!(aligned.trains.train(u), gt.train(u));
    }
    assert_eq!(aligned.trains.ids(), sorted.ids());
    let after = compare_to_ground_truth(&gt, &aligned.trains, rate, &options).unwrap();
    for u in 0..3 {
        assert_eq!(
            after.performance(MatchMode::Hungarian)[u].accuracy,
            1.0,
            "unit {u}"
        );
    }
    // A lag beyond the range is not found.
    let narrow = align_lags(&gt, &sorted, rate, 1.0, 0.4).unwrap();
    assert_ne!(narrow.lags[1].lag_samples, -40);
}

#[test]
fn zero_max_lag_leaves_trains_unchanged() {
    let rate = SampleRate::from_hz(30_000).unwrap();
    let (gt, sorted) = shifted_copy([25, -40, 7]);
    let aligned = align_lags(&gt, &sorted, rate, 0.0, 0.4).unwrap();
    assert_eq!(aligned.trains, sorted);
    assert!(aligned.lags.iter().all(|l| l.lag_samples == 0));
    assert!(align_lags(&gt, &sorted, rate, -1.0, 0.4).is_err());
    assert!(align_lags(&gt, &sorted, rate, 1.0, f64::NAN).is_err());
}

#[test]
fn lag_alignment_matches_the_benchmark_scorer() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/lag_alignment.json");
    let reference: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let samples = |value: &serde_json::Value| -> Vec<i64> {
        value
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect()
    };
    let cases = reference["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 3);
    for (n, case) in cases.iter().enumerate() {
        let gt =
            SpikeTrains::from_labels(&samples(&case["gt_samples"]), &samples(&case["gt_labels"]))
                .unwrap();
        let sorted = SpikeTrains::from_labels(
            &samples(&case["sorted_samples"]),
            &samples(&case["sorted_labels"]),
        )
        .unwrap();
        let rate = SampleRate::from_hz(case["sample_rate_hz"].as_f64().unwrap() as u64).unwrap();
        let aligned = align_lags(
            &gt,
            &sorted,
            rate,
            case["max_lag_ms"].as_f64().unwrap(),
            case["delta_ms"].as_f64().unwrap(),
        )
        .unwrap();
        let expected = case["lags"].as_array().unwrap();
        assert_eq!(aligned.lags.len(), expected.len());
        for (j, (lag, want)) in aligned.lags.iter().zip(expected).enumerate() {
            let what = format!("case {n}, cluster {}", want["cluster"]);
            assert_eq!(sorted.ids()[j], want["cluster"].to_string(), "{what}");
            assert_eq!(
                lag.lag_samples,
                want["lag_samples"].as_i64().unwrap(),
                "{what}"
            );
            let unit = want["gt_unit"].as_i64().unwrap();
            assert_eq!(
                lag.gt_unit.map(|u| gt.ids()[u].clone()),
                (unit >= 0).then(|| unit.to_string()),
                "{what}"
            );
            assert_eq!(
                lag.coincidences,
                want["coincidences"].as_u64().unwrap(),
                "{what}"
            );
            assert_eq!(lag.clamped, 0);
            let shifted: Vec<i64> = sorted
                .train(j)
                .iter()
                .map(|t| t - lag.lag_samples)
                .collect();
            assert_eq!(aligned.trains.train(j), shifted, "{what}");
        }
    }
}
