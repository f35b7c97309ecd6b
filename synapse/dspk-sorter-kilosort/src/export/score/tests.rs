//! The score against SpikeInterface 0.104.7 (the fixture of `tests/reference/score/`), a unit
//! worked by hand, the factor switches, edge cases and bad input.

use serde_json::Value;

use super::amplitude::{amplitude_cutoff, gaussian_smooth_truncated, histogram_f32, pairwise_sum};
use super::train::rp_violations;
use super::{ScoreFactors, ScoreSettings, UnitMetrics, run_score, unit_metrics, unit_score};
use crate::Error;

const FIXTURE: &str = include_str!("../../../tests/reference/score/si_metrics.json");

fn close(actual: Option<f64>, expected: Option<f64>, tolerance: f64, what: &str) {
    match (actual, expected) {
        (None, None) => {}
        (Some(a), Some(e)) => assert!(
            (a - e).abs() <= tolerance * e.abs().max(1.0),
            "{what}: got {a}, SpikeInterface {e} (difference {})",
            a - e
        ),
        _ => panic!("{what}: got {actual:?}, SpikeInterface {expected:?}"),
    }
}

fn number(v: &Value) -> Option<f64> {
    v.as_f64()
}

/// Every metric, each unit's score and each run's score against SpikeInterface's values for
/// the same trains and amplitudes (five recordings: 65.3 s at 30 kHz, 10 s at 24414.0625 Hz,
/// 0.3 s at 30 kHz, 2.6 s at 1 kHz, 30 s at 30 kHz; units clean and cut, contaminated with
/// negative amplitudes, bursty and early-only, sparse with duplicated times, single-spike,
/// empty, flat-amplitude, 260 Hz, units whose presence ratio or firing range changes if a spike
/// on the last bin's closed right edge is missed, and 40 amplitude distributions around the
/// 128-spike minimum: Gaussian, cut, whole-numbered, few-valued, negative, skewed).
#[test]
fn metrics_match_spikeinterface() {
    let doc: Value = serde_json::from_str(FIXTURE).expect("fixture parses");
    let settings = ScoreSettings::default();
    let s = &doc["settings"];
    assert_eq!(s["refractory_ms"].as_f64(), Some(settings.refractory_ms));
    assert_eq!(s["censored_ms"].as_f64(), Some(settings.censored_ms));
    assert_eq!(s["presence_bin_s"].as_f64(), Some(settings.presence_bin_s));
    assert_eq!(
        s["presence_mean_fr_ratio"].as_f64(),
        Some(settings.presence_mean_rate_ratio)
    );
    assert_eq!(
        s["amplitude_bins"].as_u64(),
        Some(settings.amplitude_bins as u64)
    );
    assert_eq!(
        s["amplitude_smoothing_bins"].as_f64(),
        Some(settings.amplitude_smoothing_bins)
    );
    assert_eq!(
        s["amplitude_bins_min_ratio"].as_f64(),
        Some(settings.amplitude_bins_min_ratio)
    );
    assert_eq!(
        s["firing_range_bin_s"].as_f64(),
        Some(settings.firing_range_bin_s)
    );
    assert_eq!(s["firing_range_percentiles"][0].as_f64(), Some(5.0));
    assert_eq!(s["firing_range_percentiles"][1].as_f64(), Some(95.0));

    let scenarios = doc["scenarios"].as_object().expect("scenarios");
    assert_eq!(scenarios.len(), 5);
    let mut units_checked = 0;
    for (name, scenario) in scenarios {
        let sample_rate = scenario["sample_rate"].as_f64().expect("sample_rate");
        let num_samples = scenario["num_samples"].as_u64().expect("num_samples");
        let mut all = Vec::new();
        for unit in scenario["units"].as_array().expect("units") {
            let id = format!("{name}/{}", unit["unit"].as_str().expect("unit"));
            let amplitudes: Vec<f32> = unit["amplitudes"]
                .as_array()
                .expect("amplitudes")
                .iter()
                .map(|a| a.as_f64().expect("amplitude") as f32)
                .collect();
            // A list, or the step of the train 0, s, 2s, ... (one spike per amplitude).
            let times: Vec<u64> = match unit["times_step"].as_u64() {
                Some(step) => (0..amplitudes.len() as u64).map(|i| i * step).collect(),
                None => unit["times"]
                    .as_array()
                    .expect("times")
                    .iter()
                    .map(|t| t.as_u64().expect("time"))
                    .collect(),
            };
            let snr = unit["snr"].as_f64().expect("snr");
            let m = unit_metrics(
                &times,
                &amplitudes,
                snr,
                sample_rate,
                num_samples,
                &settings,
            )
            .unwrap_or_else(|e| panic!("{id}: {e}"));
            let expected_violations = unit["rp_violations"].as_i64().expect("rp_violations");
            // SpikeInterface reports -1 violations for a unit without spikes.
            assert_eq!(
                m.rp_violations as i64,
                expected_violations.max(0),
                "{id} rp_violations"
            );
            for (key, value) in [
                ("rp_contamination", m.rp_contamination),
                ("presence_ratio", m.presence_ratio),
                ("amplitude_cutoff", m.amplitude_cutoff),
                ("firing_rate", m.firing_rate),
                ("firing_range", m.firing_range),
                ("score", m.score),
            ] {
                close(value, number(&unit[key]), 1e-15, &format!("{id} {key}"));
            }
            all.push(m);
            units_checked += 1;
        }
        close(
            run_score(&all),
            number(&scenario["run_score"]),
            1e-15,
            &format!("{name} run score"),
        );
    }
    assert_eq!(units_checked, 53);
}

/// A unit worked by hand (1 kHz, 40 s, ten spikes, amplitude histogram of two bins unsmoothed).
///
/// - Violations: spikes are at least 500 samples apart, refractory 1 sample: 0, contamination
///   `1 − √(1 − 0) = 0`, factor 1.
/// - Presence: 20 s bins of 20 000 samples hold 9 and 1 spikes; the rate is 10 / 40 s =
///   0.25 Hz, the threshold `⌊0.25 · 20 · 0.5⌋ = 2`: one bin of two is above it, ratio 0.5.
/// - Amplitudes: six at 1.0 and four at 3.0; edges 1, 2, 3: histogram [6, 4]; σ = 0.1 bins
///   gives a radius of `⌊0.4 + 0.5⌋ = 0` (no smoothing); the last bin ≥ the first is bin 0,
///   so 4 spikes count as missed: cutoff 4 / (10 + 4) = 2/7, factor 5/7.
/// - Firing rate 0.25 Hz: factor `1/(1 + e^(0.25 − 200))`, 1 to 1e−86.
/// - Firing range: 80 bins of 500 samples, ten hold one spike (2 Hz), seventy none; the 95th
///   percentile is at virtual index 79 · 0.95 = 75.05 (both neighbours 2 Hz), the 5th at 3.95
///   (0 Hz): range 2 Hz, factor `1/(1 + e^(2 − 200))`, 1 to 1e−86.
/// - SNR 4: factor `1 − 1/(1 + e^0) = 0.5`.
///
/// Score: `1 · 0.5 · 5/7 · 1 · 1 · 0.5 = 5/28`.
#[test]
fn hand_worked_unit() {
    let times = [250, 750, 1250, 1750, 2250, 2750, 3250, 3750, 4250, 30250];
    let amplitudes = [1.0, 3.0, 1.0, 1.0, 3.0, 1.0, 3.0, 1.0, 3.0, 1.0];
    let settings = ScoreSettings {
        amplitude_bins: 2,
        amplitude_smoothing_bins: 0.1,
        ..ScoreSettings::default()
    };
    let m = unit_metrics(&times, &amplitudes, 4.0, 1000.0, 40_000, &settings).expect("valid");
    assert_eq!(m.num_spikes, 10);
    assert_eq!(m.rp_violations, 0);
    assert_eq!(m.rp_contamination, Some(0.0));
    assert_eq!(m.presence_ratio, Some(0.5));
    assert_eq!(m.amplitude_cutoff, Some(4.0 / 14.0));
    assert_eq!(m.firing_rate, Some(0.25));
    assert_eq!(m.firing_range, Some(2.0));
    let score = m.score.expect("defined");
    assert!((score - 5.0 / 28.0).abs() < 1e-15, "score {score}");
    assert_eq!(run_score(std::slice::from_ref(&m)), m.score);

    // The same amplitudes negated: the median is negative, so they are flipped back first.
    let negated: Vec<f32> = amplitudes.iter().map(|a| -a).collect();
    let flipped = unit_metrics(&times, &negated, 4.0, 1000.0, 40_000, &settings).expect("valid");
    assert_eq!(flipped.amplitude_cutoff, m.amplitude_cutoff);
}

/// Each switch removes its factor from the product (values of [`hand_worked_unit`]); with
/// every factor off the score is 1.
#[test]
fn factors_switch_off() {
    let times = [250, 750, 1250, 1750, 2250, 2750, 3250, 3750, 4250, 30250];
    let amplitudes = [1.0, 3.0, 1.0, 1.0, 3.0, 1.0, 3.0, 1.0, 3.0, 1.0];
    let base = ScoreSettings {
        amplitude_bins: 2,
        amplitude_smoothing_bins: 0.1,
        ..ScoreSettings::default()
    };
    let m = unit_metrics(&times, &amplitudes, 4.0, 1000.0, 40_000, &base).expect("valid");
    let with = |factors: ScoreFactors| {
        unit_score(
            &m,
            &ScoreSettings {
                factors,
                ..base.clone()
            },
        )
        .expect("defined")
    };
    let all = ScoreFactors::default();
    let none = ScoreFactors {
        rp_contamination: false,
        presence_ratio: false,
        amplitude_cutoff: false,
        firing_rate: false,
        firing_range: false,
        snr: false,
    };
    assert_eq!(with(none), 1.0);
    let near = |a: f64, b: f64| (a - b).abs() < 1e-15;
    assert!(near(
        with(ScoreFactors {
            amplitude_cutoff: false,
            ..all
        }),
        0.25
    ));
    assert!(near(with(ScoreFactors { snr: false, ..all }), 5.0 / 14.0));
    assert!(near(
        with(ScoreFactors {
            presence_ratio: false,
            ..all
        }),
        5.0 / 14.0
    ));
    assert!(near(
        with(ScoreFactors {
            presence_ratio: true,
            ..none
        }),
        0.5
    ));
    assert!(near(with(ScoreFactors { snr: true, ..none }), 0.5));
    assert!(near(
        with(ScoreFactors {
            amplitude_cutoff: true,
            ..none
        }),
        5.0 / 7.0
    ));
    // The sigmoids on their own: a 0.25 Hz unit is far below the 200 Hz midpoint.
    assert!(near(
        with(ScoreFactors {
            firing_rate: true,
            ..none
        }),
        1.0
    ));
    let fast = UnitMetrics {
        firing_rate: Some(200.0),
        firing_range: Some(201.0),
        ..m.clone()
    };
    let fast_score = |factors| {
        unit_score(
            &fast,
            &ScoreSettings {
                factors,
                ..base.clone()
            },
        )
    };
    // At the midpoint the sigmoid is one half, but for EMUsort's 1e-8 (rounded on 200 + 1e-8,
    // hence the looser bound; without it the factor would be 0.5, 2.5e-9 away).
    let rate_only = ScoreFactors {
        firing_rate: true,
        ..none
    };
    let rate_factor = fast_score(rate_only).expect("defined");
    assert!(
        (rate_factor - (0.5 - 0.25e-8)).abs() < 1e-14,
        "{rate_factor}"
    );
    let range_only = ScoreFactors {
        firing_range: true,
        ..none
    };
    let range_factor = fast_score(range_only).expect("defined");
    assert!((range_factor - 1.0 / (1.0 + (1.0f64 + 1e-8).exp())).abs() < 1e-14);

    // An undefined metric makes the score undefined only while its factor is on; an undefined
    // amplitude cutoff makes the factor 0 instead.
    let single = unit_metrics(&[500], &[1.0], 8.0, 1000.0, 40_000, &base).expect("valid");
    assert_eq!(single.rp_contamination, None);
    assert_eq!(single.amplitude_cutoff, None);
    assert_eq!(single.score, None);
    let no_rp = ScoreSettings {
        factors: ScoreFactors {
            rp_contamination: false,
            ..all
        },
        ..base.clone()
    };
    assert_eq!(unit_score(&single, &no_rp), Some(0.0));
    let neither = ScoreFactors {
        rp_contamination: false,
        amplitude_cutoff: false,
        ..all
    };
    let score = unit_score(
        &single,
        &ScoreSettings {
            factors: neither,
            ..base.clone()
        },
    )
    .expect("defined");
    // Presence 0.5 (one spike in one bin of two, threshold 0), SNR 8: 0.5 · (1 − 1/(1 + e^4)).
    assert!(
        near(score, 0.5 * (1.0 - 1.0 / (1.0 + 4.0f64.exp()))),
        "score {score}"
    );
}

/// Llobet et al.'s contamination by hand: 1000 spikes 100 samples apart in 100 000 samples,
/// the second moved to sample 1 (one pair 1 sample apart).
#[test]
fn contamination_by_hand() {
    let mut times: Vec<u64> = (0..1000).map(|i| i * 100).collect();
    times[1] = 1;
    // Refractory 2 samples, censored 0: 1 − √(1 − 1 · 100 000 / (1000² · 2)) = 1 − √0.95.
    let (v, c) = rp_violations(&times, 100_000, 2, 0);
    assert_eq!(v, 1);
    assert!((c.expect("defined") - (1.0 - 0.95f64.sqrt())).abs() < 1e-15);
    // Censored 1 sample: 1 − √(1 − (100 000 − 2 · 1000) / (1000² · 1)) = 1 − √0.902.
    let (_, c) = rp_violations(&times, 100_000, 2, 1);
    assert!((c.expect("defined") - (1.0 - 0.902f64.sqrt())).abs() < 1e-15);
    // Three spikes within 2 samples: three pairs; equal times count.
    let (v, _) = rp_violations(&[10, 10, 12, 15, 40], 1000, 2, 0);
    assert_eq!(v, 3);
    // Too many violations for the formula: clipped to 1.
    let (_, c) = rp_violations(&[0, 1, 2, 3], 1000, 2, 0);
    assert_eq!(c, Some(1.0));
    assert_eq!(rp_violations(&[7], 1000, 2, 0), (0, None));
    assert_eq!(rp_violations(&[], 1000, 2, 0), (0, None));
}

/// scipy's `gaussian_filter1d` truncates its integer output: a constant histogram of 27 smooths
/// to 26 (the normalised kernel sums to just under 1 in scipy's order), 28 stays 28
/// (SpikeInterface measured: constants 1..200 drop by one at 27, 45, 54, 90, 108 and 180).
#[test]
fn smoothing_truncates_like_scipy() {
    for c in 1..200u64 {
        let smoothed = gaussian_smooth_truncated(&[c; 40], 3.0);
        let expected = if [27, 45, 54, 90, 108, 180].contains(&c) {
            c - 1
        } else {
            c
        };
        assert!(
            smoothed.iter().all(|&v| v as u64 == expected),
            "constant {c}: {smoothed:?}"
        );
    }
}

/// numpy's float32 bin estimate is one bin off for some values near an edge, and its correction
/// against the float32 edges decides: cases found by search, bins as numpy's `histogram` gives
/// them (the range's ends are in the data, so the edges are those of the searched range).
#[test]
fn histogram_corrects_the_estimate_like_numpy() {
    let bin_of = |lo: f32, hi: f32, bins: usize, v: f32| {
        let counts = histogram_f32(&[lo, v, hi], bins).expect("valid");
        let without = histogram_f32(&[lo, hi], bins).expect("valid");
        (0..bins)
            .find(|&i| counts[i] != without[i])
            .expect("one bin grew")
    };
    // Estimated one bin low.
    assert_eq!(bin_of(89.72989, 105.32215, 8, 93.62795), 2);
    assert_eq!(bin_of(89.72989, 105.32215, 8, 103.373116), 7);
    // Estimated one bin high.
    assert_eq!(bin_of(-15.33471, 26.050594, 12, -1.5396091), 3);
    assert_eq!(bin_of(-15.33471, 26.050594, 12, 5.357941), 5);
    // The last bin is closed; equal values widen the range by 0.5 each side.
    assert_eq!(
        histogram_f32(&[1.0, 2.0, 3.0], 2).expect("valid"),
        vec![1, 2]
    );
    assert_eq!(
        histogram_f32(&[7.0; 3], 4).expect("valid"),
        vec![0, 0, 3, 0]
    );
}

#[test]
fn pairwise_sum_orders_like_numpy() {
    // Below 8 values: left to right. 1e16 + 1 + 1 loses both ones that way.
    assert_eq!(pairwise_sum(&[1e16, 1.0, 1.0]), 1e16);
    // Eight partial sums: the ones meet each other before meeting 1e16.
    let mut v = vec![0.0; 16];
    v[0] = 1e16;
    v[1] = 1.0;
    v[9] = 1.0;
    assert_eq!(pairwise_sum(&v), 1e16 + 2.0);
    assert_eq!(pairwise_sum(&[]), 0.0);
    let long: Vec<f64> = (0..1000).map(f64::from).collect();
    assert_eq!(pairwise_sum(&long), 499_500.0);
}

/// Edge cases SpikeInterface defines, and no panic on empty input.
#[test]
fn edge_cases() {
    let settings = ScoreSettings::default();
    // No spikes: every metric undefined, no score, no run score.
    let empty = unit_metrics(&[], &[], 5.0, 30_000.0, 3_000_000, &settings).expect("valid");
    assert_eq!(empty.num_spikes, 0);
    assert_eq!(empty.rp_violations, 0);
    for metric in [
        empty.rp_contamination,
        empty.presence_ratio,
        empty.amplitude_cutoff,
        empty.firing_rate,
        empty.firing_range,
        empty.score,
    ] {
        assert_eq!(metric, None);
    }
    assert_eq!(run_score(&[]), None);
    assert_eq!(run_score(&[empty.clone(), empty.clone()]), None);

    // Recording shorter than a presence bin (10 s < 20 s): presence undefined, so is the score.
    let times: Vec<u64> = (0..200).map(|i| i * 1500 + 7).collect();
    let amplitudes: Vec<f32> = (0..200).map(|i| 50.0 + (i % 13) as f32).collect();
    let short =
        unit_metrics(&times, &amplitudes, 6.0, 30_000.0, 300_000, &settings).expect("valid");
    assert_eq!(short.presence_ratio, None);
    assert!(short.firing_range.is_some() && short.amplitude_cutoff.is_some());
    assert_eq!(short.score, None);
    // Shorter than a firing-range bin (0.4 s < 0.5 s).
    let tiny = unit_metrics(
        &[10, 100, 5000],
        &[1.0, 2.0, 3.0],
        6.0,
        30_000.0,
        12_000,
        &settings,
    )
    .expect("valid");
    assert_eq!(tiny.firing_range, None);
    assert_eq!(tiny.firing_rate, Some(3.0 / 0.4));
    // Exactly one bin long: one bin, closed on the right (a spike at the last sample counts).
    let one_bin =
        unit_metrics(&[0, 14_999], &[1.0, 1.0], 6.0, 30_000.0, 15_000, &settings).expect("valid");
    assert_eq!(one_bin.firing_range, Some(0.0));

    // Too few amplitudes for 32 bins at 4 per bin (127 < 128): undefined, factor 0.
    let times: Vec<u64> = (0..127).map(|i| i * 20_000).collect();
    let amplitudes = vec![40.0f32; 127];
    let few =
        unit_metrics(&times, &amplitudes, 10.0, 30_000.0, 2_600_000, &settings).expect("valid");
    assert_eq!(few.amplitude_cutoff, None);
    assert_eq!(few.score, Some(0.0));
    // 128 equal amplitudes: the histogram spans [39.5, 40.5], everything in the middle bins;
    // nothing after the last bin at least as high as the first, so nothing missed.
    let times: Vec<u64> = (0..128).map(|i| i * 20_000).collect();
    let flat =
        unit_metrics(&times, &[40.0; 128], 10.0, 30_000.0, 2_600_000, &settings).expect("valid");
    assert_eq!(flat.amplitude_cutoff, Some(0.0));

    // A cut distribution: the first bin (at the threshold) is the highest, so the rest counts
    // as missed, up to the 0.5 cap.
    let cut: Vec<f32> = (0..256).map(|i| 10.0 + (i as f32 / 16.0).powi(2)).collect();
    let c = amplitude_cutoff(&cut, 32, 3.0, 4.0)
        .expect("valid")
        .expect("defined");
    assert!(c > 0.0 && c <= 0.5, "cutoff {c}");
}

#[test]
fn bad_input_is_an_error() {
    let s = ScoreSettings::default();
    let input = |r: crate::Result<UnitMetrics>| matches!(r, Err(Error::Input { .. }));
    let setting = |r: crate::Result<UnitMetrics>| matches!(r, Err(Error::Setting { .. }));
    assert!(input(unit_metrics(
        &[5, 3],
        &[1.0, 1.0],
        5.0,
        30_000.0,
        100,
        &s
    )));
    assert!(input(unit_metrics(
        &[5, 100],
        &[1.0, 1.0],
        5.0,
        30_000.0,
        100,
        &s
    )));
    assert!(input(unit_metrics(
        &[5],
        &[1.0, 1.0],
        5.0,
        30_000.0,
        100,
        &s
    )));
    assert!(input(unit_metrics(
        &[5],
        &[f32::NAN],
        5.0,
        30_000.0,
        100,
        &s
    )));
    assert!(input(unit_metrics(&[5], &[1.0], 5.0, 0.0, 100, &s)));
    assert!(input(unit_metrics(&[5], &[1.0], 5.0, f64::NAN, 100, &s)));
    assert!(input(unit_metrics(&[], &[], 5.0, 30_000.0, 0, &s)));
    // A NaN SNR is no error: the score is undefined, as NaN is in EMUsort.
    let times = [250, 750, 1250, 1750, 2250, 2750, 3250, 3750, 4250, 30250];
    let amplitudes = [1.0, 3.0, 1.0, 1.0, 3.0, 1.0, 3.0, 1.0, 3.0, 1.0];
    let nan_snr = unit_metrics(&times, &amplitudes, f64::NAN, 1000.0, 40_000, &s).expect("valid");
    assert!(nan_snr.rp_contamination.is_some() && nan_snr.presence_ratio.is_some());
    assert_eq!(nan_snr.score, None);

    let with = |f: fn(&mut ScoreSettings)| {
        let mut bad = ScoreSettings::default();
        f(&mut bad);
        bad
    };
    for bad in [
        with(|b| b.refractory_ms = 0.0),
        with(|b| b.censored_ms = 2.0),
        with(|b| b.censored_ms = -1.0),
        with(|b| b.presence_bin_s = 0.0),
        with(|b| b.firing_range_bin_s = f64::NAN),
        with(|b| b.presence_mean_rate_ratio = -0.1),
        with(|b| b.firing_range_percentiles = [95.0, 5.0]),
        with(|b| b.firing_range_percentiles = [5.0, 101.0]),
        with(|b| b.amplitude_bins = 0),
        with(|b| b.amplitude_smoothing_bins = 0.0),
        with(|b| b.amplitude_bins_min_ratio = f64::INFINITY),
        with(|b| b.snr_midpoint = f64::NAN),
    ] {
        assert!(bad.validate().is_err(), "{bad:?}");
        assert!(
            setting(unit_metrics(&[5], &[1.0], 5.0, 30_000.0, 100, &bad)),
            "{bad:?}"
        );
    }
    // Valid settings whose periods or bins round to nothing at a low rate.
    assert!(setting(unit_metrics(&[5], &[1.0], 5.0, 100.0, 1000, &s)));
    let coarse = ScoreSettings {
        refractory_ms: 2000.0,
        ..ScoreSettings::default()
    };
    assert!(setting(unit_metrics(&[5], &[1.0], 5.0, 1.0, 1000, &coarse)));
    // A range too narrow for 32 float32 bins (numpy refuses it too).
    let narrow: Vec<f32> = (0..200)
        .map(|i| 1.0 + f32::EPSILON * (i % 3) as f32)
        .collect();
    assert!(matches!(
        amplitude_cutoff(&narrow, 32, 3.0, 4.0),
        Err(Error::Input { .. })
    ));
}

#[test]
fn settings_round_trip_as_json() {
    let s = ScoreSettings::default();
    let json = serde_json::to_string(&s).expect("serialises");
    let back: ScoreSettings = serde_json::from_str(&json).expect("parses");
    assert_eq!(back, s);
    let partial: ScoreSettings =
        serde_json::from_str(r#"{"factors": {"snr": false}}"#).expect("parses");
    assert!(!partial.factors.snr && partial.factors.presence_ratio);
    assert!(serde_json::from_str::<ScoreSettings>(r#"{"refractory": 1}"#).is_err());
}
