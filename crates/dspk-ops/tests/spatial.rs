//! Spatial operators (common reference, channel mixing, covariance) on every runtime compiled
//! in, against numpy reference files and f64 host references on seeded random inputs.

use std::collections::HashMap;

use cubecl::client::Client;
use dspk_core::test_util::{Rng, for_each_runtime};
use dspk_ops::buffers::{download_f32, empty_f32, upload_f32};
use dspk_ops::{CommonReference, Error, Reference, Stage, common_reference};

/// One case of `tests/reference/cases_spatial.py`: named f64 arrays with their shapes.
///
/// (A local reader of the `.ref` format: `tests/common/mod.rs` does not compile yet.)
struct NumpyCase(HashMap<String, (Vec<usize>, Vec<f64>)>);

impl NumpyCase {
    fn load(name: &str) -> Self {
        let path = format!("{}/tests/reference/{name}.ref", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let arrays = text
            .lines()
            .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
            .map(|line| {
                let (key, rest) = line.split_once(": shape").expect("key: shape ... | ...");
                let (shape, values) = rest.split_once('|').expect("shape | values");
                let shape = shape
                    .split_whitespace()
                    .map(|d| d.parse().unwrap())
                    .collect();
                let values = values
                    .split_whitespace()
                    .map(|v| v.parse().unwrap())
                    .collect();
                (key.trim().to_string(), (shape, values))
            })
            .collect();
        Self(arrays)
    }

    fn shape(&self, key: &str) -> &[usize] {
        &self.0[key].0
    }

    fn values(&self, key: &str) -> &[f64] {
        &self.0[key].1
    }

    fn values_f32(&self, key: &str) -> Vec<f32> {
        self.values(key).iter().map(|&v| v as f32).collect()
    }
}

/// Window shapes `(channels, samples)` every operator is checked on: odd sizes, one channel,
/// and a probe-sized one that stays quick on lavapipe.
const SHAPES: [(usize, usize); 7] = [
    (1, 1),
    (2, 9),
    (3, 17),
    (7, 1001),
    (33, 513),
    (64, 129),
    (384, 2001),
];

/// A random `[channels, samples]` window: a common component, per-channel offsets and scales;
/// every third channel quantised to integers so columns hold ties (as int16 data does).
fn random_window(channels: usize, samples: usize, rng: &mut Rng) -> Vec<f32> {
    let common: Vec<f64> = (0..samples).map(|_| rng.uniform(-40.0, 40.0)).collect();
    let mut x = Vec::with_capacity(channels * samples);
    for c in 0..channels {
        let offset = rng.uniform(-100.0, 100.0);
        let scale = rng.uniform(1.0, 50.0);
        for &shared in &common {
            let value = offset + shared + scale * rng.uniform(-1.0, 1.0);
            x.push(if c % 3 == 2 { value.round() } else { value } as f32);
        }
    }
    x
}

/// Runs `common_reference` on `x` and reads the result back.
fn run_reference(
    client: &Client,
    x: &[f32],
    channels: usize,
    samples: usize,
    reference: Reference,
) -> Vec<f32> {
    let input = upload_f32(client, x);
    let output = upload_f32(client, &vec![f32::NAN; x.len()]);
    common_reference(client, &input, &output, channels, samples, reference).unwrap();
    download_f32(client, &output, x.len()).unwrap()
}

/// The column `x[:, t]` as f64.
fn column(x: &[f32], channels: usize, samples: usize, t: usize) -> Vec<f64> {
    (0..channels)
        .map(|c| f64::from(x[c * samples + t]))
        .collect()
}

/// `numpy.median` of a column without NaN (mean of the two middle values for an even count).
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// Checks `actual` against `x - reference(x[:, t])` in f64, per value within
/// `rel * (scale(t) + |x[c, t]|)`, naming channel, sample, values and tolerance on failure.
#[allow(clippy::too_many_arguments)]
fn check_referenced(
    what: &str,
    actual: &[f32],
    x: &[f32],
    channels: usize,
    samples: usize,
    reference: Reference,
    rel: f64,
) {
    assert_eq!(actual.len(), channels * samples, "{what}: length");
    for t in 0..samples {
        let col = column(x, channels, samples, t);
        let (level, scale) = match reference {
            Reference::Mean => (
                col.iter().sum::<f64>() / channels as f64,
                col.iter().map(|v| v.abs()).sum::<f64>() / channels as f64,
            ),
            Reference::Median => {
                let m = median(col.clone());
                (m, m.abs())
            }
        };
        for (c, &value) in col.iter().enumerate() {
            let a = f64::from(actual[c * samples + t]);
            let expected = value - level;
            let tolerance = rel * (scale + value.abs()) + 1e-30;
            let difference = (a - expected).abs();
            assert!(
                difference <= tolerance,
                "{what}: channel {c} sample {t}: actual {a}, expected {expected}, \
                 difference {difference:e}, tolerance {tolerance:e}"
            );
        }
    }
}

/// Mean: summed in f32 in blocks of 16 channels; relative to the column's mean magnitude.
const CAR_REL: f64 = 1e-5;
/// Median: exact selection; halving and adding the middle pair, then one subtraction.
const CMR_REL: f64 = 2.0 / (1u64 << 24) as f64;

#[test]
fn common_reference_matches_numpy_files() {
    for_each_runtime(|target, client| {
        for (name, reference, rel) in [
            ("spatial_car", Reference::Mean, CAR_REL),
            ("spatial_cmr_even", Reference::Median, CMR_REL),
            ("spatial_cmr_odd", Reference::Median, CMR_REL),
        ] {
            let case = NumpyCase::load(name);
            let (channels, samples) = (case.shape("x")[0], case.shape("x")[1]);
            let x = case.values_f32("x");
            let actual = run_reference(client, &x, channels, samples, reference);
            let what = format!("{target} {name}");
            for (i, (&a, &e)) in actual.iter().zip(case.values("out")).enumerate() {
                let t = i % samples;
                let scale = column(&x, channels, samples, t)
                    .iter()
                    .map(|v| v.abs())
                    .fold(0.0, f64::max);
                let tolerance = rel * 2.0 * scale;
                assert!(
                    (f64::from(a) - e).abs() <= tolerance,
                    "{what}: channel {} sample {t}: actual {a}, numpy {e}, tolerance {tolerance:e}",
                    i / samples
                );
            }
        }
    });
}

#[test]
fn common_reference_matches_f64_on_random_windows() {
    for_each_runtime(|target, client| {
        let mut rng = Rng::new(0x5EED_CA4);
        for (channels, samples) in SHAPES {
            let x = random_window(channels, samples, &mut rng);
            for (reference, rel) in [(Reference::Mean, CAR_REL), (Reference::Median, CMR_REL)] {
                let actual = run_reference(client, &x, channels, samples, reference);
                let what = format!("{target} {reference:?} {channels}x{samples}");
                check_referenced(&what, &actual, &x, channels, samples, reference, rel);
            }
        }
    });
}

#[test]
fn common_median_is_exact_on_ties_zeros_and_extremes() {
    for_each_runtime(|target, client| {
        // Columns: all equal; signed zeros; tiny and huge magnitudes; ties at the middle.
        let columns: [[f32; 6]; 5] = [
            [2.5; 6],
            [-0.0, 0.0, -0.0, 0.0, 1.0, -1.0],
            [1e-38, -1e-38, 3e38, -3e38, 1e-45, -1e-45],
            [7.0, 7.0, 7.0, 1.0, 9.0, 9.0],
            [-5.0, 4.0, 4.0, 4.0, 4.0, -100.0],
        ];
        for channels in [5, 6] {
            let samples = columns.len();
            let mut x = vec![0.0f32; channels * samples];
            for (t, col) in columns.iter().enumerate() {
                for c in 0..channels {
                    x[c * samples + t] = col[c];
                }
            }
            let actual = run_reference(client, &x, channels, samples, Reference::Median);
            for t in 0..samples {
                let m = median(column(&x, channels, samples, t)) as f32;
                for c in 0..channels {
                    let expected = x[c * samples + t] - m;
                    let a = actual[c * samples + t];
                    assert!(
                        a == expected,
                        "{target} {channels} channels, column {t}, channel {c}: actual {a}, \
                         expected {expected} (median {m})"
                    );
                }
            }
        }
    });
}

#[test]
fn common_reference_propagates_nan_and_infinity_per_sample() {
    for_each_runtime(|target, client| {
        let mut rng = Rng::new(7);
        for channels in [1, 6, 7, 384] {
            let samples = 11;
            let mut x = random_window(channels, samples, &mut rng);
            x[(channels - 1) * samples + 2] = f32::NAN; // last channel, sample 2
            x[5] = f32::NAN; // first channel, sample 5
            x[(channels / 2) * samples + 7] = f32::INFINITY;
            for reference in [Reference::Mean, Reference::Median] {
                let actual = run_reference(client, &x, channels, samples, reference);
                let what = format!("{target} {reference:?} {channels} channels");
                for t in 0..samples {
                    let col = column(&x, channels, samples, t);
                    let out: Vec<f32> = (0..channels).map(|c| actual[c * samples + t]).collect();
                    if col.iter().any(|v| v.is_nan()) {
                        assert!(
                            out.iter().all(|v| v.is_nan()),
                            "{what}: sample {t} holds a NaN but gives {out:?}"
                        );
                    } else if col.iter().any(|v| v.is_infinite()) {
                        // numpy: finite channels minus an infinite level, or inf - inf = NaN.
                        assert!(
                            out.iter().all(|v| !v.is_finite()) || reference == Reference::Median,
                            "{what}: sample {t} holds an infinity but gives {out:?}"
                        );
                    } else {
                        assert!(
                            out.iter().all(|v| v.is_finite()),
                            "{what}: NaN leaked into sample {t}: {out:?}"
                        );
                    }
                }
            }
        }
    });
}

#[test]
fn common_reference_stage_and_argument_checks() {
    for_each_runtime(|target, client| {
        let mut rng = Rng::new(3);
        let (channels, samples) = (5, 31);
        let x = random_window(channels, samples, &mut rng);
        let input = upload_f32(client, &x);
        for reference in [Reference::Mean, Reference::Median] {
            let mut stage = CommonReference::new(reference);
            assert_eq!(stage.settling(), 0);
            let output = empty_f32(client, x.len());
            stage
                .apply(client, &input, &output, channels, samples)
                .unwrap();
            let staged = download_f32(client, &output, x.len()).unwrap();
            let direct = run_reference(client, &x, channels, samples, reference);
            assert_eq!(staged, direct, "{target} stage {}", stage.name());
        }
        assert_eq!(CommonReference::new(Reference::Mean).name(), "car");
        assert_eq!(CommonReference::new(Reference::Median).name(), "cmr");

        let small = empty_f32(client, channels * samples - 1);
        let error = common_reference(client, &input, &small, channels, samples, Reference::Mean)
            .unwrap_err();
        assert!(matches!(error, Error::Shape { .. }), "{target}: {error}");
        let error = common_reference(client, &input, &input, 1 << 16, 1 << 16, Reference::Median)
            .unwrap_err();
        assert!(
            matches!(error, Error::OverLimit { .. }),
            "{target}: {error}"
        );
        // Empty windows do nothing.
        common_reference(client, &input, &small, 0, samples, Reference::Mean).unwrap();
        common_reference(client, &input, &small, channels, 0, Reference::Median).unwrap();
    });
}
