//! Spatial operators (common reference, channel mixing, covariance, local whitening fitted on
//! the device) on every runtime compiled in, against numpy reference files and f64 host
//! references on seeded random inputs.

mod common;

use std::sync::Arc;

use cubecl::client::Client;
use dspk_core::test_util::{Rng, assert_close, for_each_runtime};
use dspk_core::{SampleRate, SyntheticRecording};
use dspk_ops::linalg::local_zca;
use dspk_ops::{
    ChannelMixing, CommonReference, CovarianceAccumulator, DeviceArray, Error, Pipeline, Reference,
    Stage, StreamOptions, Whitening, WindowStream, common_reference, mix_channels,
};

/// A case of `tests/reference/cases_spatial.py` (named so as not to clash with
/// [`Reference`], the common reference).
use common::Reference as NumpyCase;

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
    let input = DeviceArray::from_host(client, x, channels, samples).unwrap();
    let output =
        DeviceArray::from_host(client, &vec![f32::NAN; x.len()], channels, samples).unwrap();
    common_reference(client, &input, &output, reference).unwrap();
    output.to_host(client).unwrap()
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

/// `torch.median`: the lower of the two middle values for an even count.
fn lower_median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[(values.len() - 1) / 2]
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
            Reference::LowerMedian => {
                let m = lower_median(col.clone());
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

/// Checks one output column of the median reference against numpy's `x - np.median(x)` in f64
/// where the column holds infinities (and no NaN): a finite expected value within `CMR_REL`, an
/// infinite one exactly, a NaN one (`inf - inf`) as NaN.
fn check_median_with_infinities(
    what: &str,
    t: usize,
    out: &[f32],
    col: &[f64],
    reference: Reference,
) {
    let level = if reference == Reference::LowerMedian {
        lower_median(col.to_vec())
    } else {
        median(col.to_vec())
    };
    for (c, (&a, &value)) in out.iter().zip(col).enumerate() {
        let (a, expected) = (f64::from(a), value - level);
        let ok = if expected.is_nan() {
            a.is_nan()
        } else if expected.is_infinite() {
            a == expected
        } else {
            (a - expected).abs() <= CMR_REL * (level.abs() + value.abs()) + 1e-30
        };
        assert!(
            ok,
            "{what}: sample {t} channel {c}: actual {a}, expected {expected} \
             (x {value} minus median {level})"
        );
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
        let mut rng = Rng::new(0x05EE_DCA4);
        for (channels, samples) in SHAPES {
            let x = random_window(channels, samples, &mut rng);
            for (reference, rel) in [
                (Reference::Mean, CAR_REL),
                (Reference::Median, CMR_REL),
                (Reference::LowerMedian, CMR_REL),
            ] {
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
                    // Exact, except that GPUs may flush subnormal results to zero (Vulkan on
                    // NVIDIA does): a difference below the smallest normal is that flush.
                    assert!(
                        a == expected || (a - expected).abs() < f32::MIN_POSITIVE,
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
            // Sample 9: -inf on the first channel, inf on the last (one channel: inf alone).
            x[9] = f32::NEG_INFINITY;
            x[(channels - 1) * samples + 9] = f32::INFINITY;
            for reference in [Reference::Mean, Reference::Median, Reference::LowerMedian] {
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
                        match reference {
                            // numpy: finite channels minus an infinite level, or inf - inf = NaN.
                            Reference::Mean => assert!(
                                out.iter().all(|v| !v.is_finite()),
                                "{what}: sample {t} holds an infinity but gives {out:?}"
                            ),
                            // numpy: `x - np.median(x, axis=0)`. The median of a column with
                            // infinities is finite unless an infinity is a middle value (or
                            // -inf and inf are the middle pair: NaN); finite channels then stay
                            // finite and an infinite channel stays that infinity.
                            Reference::Median | Reference::LowerMedian => {
                                check_median_with_infinities(&what, t, &out, &col, reference);
                            }
                        }
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
        let input = DeviceArray::from_host(client, &x, channels, samples).unwrap();
        for reference in [Reference::Mean, Reference::Median, Reference::LowerMedian] {
            let mut stage = CommonReference::new(reference);
            assert_eq!(stage.settling(), 0);
            let output = DeviceArray::empty(client, channels, samples).unwrap();
            stage.apply(client, &input, &output).unwrap();
            let staged = output.to_host(client).unwrap();
            let direct = run_reference(client, &x, channels, samples, reference);
            assert_eq!(staged, direct, "{target} stage {}", stage.name());
        }
        assert_eq!(CommonReference::new(Reference::Mean).name(), "car");
        assert_eq!(CommonReference::new(Reference::Median).name(), "cmr");

        let small = DeviceArray::empty(client, channels * samples - 1, 1).unwrap();
        let error = small.front(channels, samples).unwrap_err();
        assert!(
            matches!(error, Error::ArrayShape { .. }),
            "{target}: {error}"
        );
        let error = common_reference(client, &input, &small, Reference::Mean).unwrap_err();
        assert!(
            matches!(error, Error::ShapeMismatch { .. }),
            "{target}: {error}"
        );
        let error =
            DeviceArray::<f32>::from_handle(input.handle().clone(), 1 << 16, 1 << 16).unwrap_err();
        assert!(
            matches!(error, Error::OverLimit { .. }),
            "{target}: {error}"
        );
        // Empty windows do nothing.
        let empty = input.front(0, samples).unwrap();
        common_reference(
            client,
            &empty,
            &small.front(0, samples).unwrap(),
            Reference::Mean,
        )
        .unwrap();
        let empty = input.front(channels, 0).unwrap();
        common_reference(
            client,
            &empty,
            &small.front(channels, 0).unwrap(),
            Reference::Median,
        )
        .unwrap();
    });
}

/// A mixing matrix in sparse form (`taps` per output channel, row-major) with its dense f64
/// equivalent (row-major).
struct Mixing {
    indices: Vec<usize>,
    weights: Vec<f64>,
    dense: Vec<f64>,
}

impl Mixing {
    /// The sparse rows of a dense matrix: every input channel, in order.
    fn from_dense(dense: &[f64], channels: usize) -> Self {
        Self {
            indices: (0..channels * channels).map(|i| i % channels).collect(),
            weights: dense.to_vec(),
            dense: dense.to_vec(),
        }
    }

    /// `(sum_k w[c, k] x[idx[c, k], t], sum_k |w[c, k] x[idx[c, k], t]|)` in f64.
    fn product(&self, x: &[f32], channels: usize, c: usize, t: usize) -> (f64, f64) {
        let samples = x.len() / channels;
        let taps = self.indices.len() / channels;
        let row = c * taps..(c + 1) * taps;
        let (mut sum, mut magnitude) = (0.0f64, 0.0f64);
        for (&k, &w) in self.indices[row.clone()].iter().zip(&self.weights[row]) {
            let product = w * f64::from(x[k * samples + t]);
            sum += product;
            magnitude += product.abs();
        }
        (sum, magnitude)
    }
}

/// `taps` distinct random input channels per output channel with f32-representable weights.
fn random_mixing(channels: usize, taps: usize, rng: &mut Rng) -> Mixing {
    let mut indices = Vec::new();
    let mut weights = Vec::new();
    let mut dense = vec![0.0; channels * channels];
    for c in 0..channels {
        let mut order: Vec<usize> = (0..channels).collect();
        for i in 0..taps {
            let j = i + rng.below((channels - i) as u64) as usize;
            order.swap(i, j);
            let w = f64::from(rng.uniform(-1.0, 1.0) as f32);
            indices.push(order[i]);
            weights.push(w);
            dense[c * channels + order[i]] += w;
        }
    }
    Mixing {
        indices,
        weights,
        dense,
    }
}

/// Runs `mix_channels` on `x` and reads the result back.
fn run_mixing(
    client: &Client,
    x: &[f32],
    channels: usize,
    samples: usize,
    mixing: &ChannelMixing,
) -> Vec<f32> {
    let input = DeviceArray::from_host(client, x, channels, samples).unwrap();
    let output =
        DeviceArray::from_host(client, &vec![f32::NAN; x.len()], channels, samples).unwrap();
    mix_channels(client, &input, &output, mixing).unwrap();
    output.to_host(client).unwrap()
}

/// Checks `actual` against `expected` (or, without it, the f64 product of `m` with `x`), per
/// value within `MIX_REL * sum_k |w[c, k] x[idx[c, k], t]|`.
fn check_mixed(
    what: &str,
    actual: &[f32],
    expected: Option<&[f64]>,
    x: &[f32],
    m: &Mixing,
    channels: usize,
) {
    let samples = x.len() / channels;
    // Large dense products (debug-build host loops) are checked on every 13th sample and the last.
    let step = if m.indices.len() * samples > 20_000_000 {
        13
    } else {
        1
    };
    for c in 0..channels {
        for t in (0..samples).step_by(step).chain([samples - 1]) {
            let (sum, magnitude) = m.product(x, channels, c, t);
            let e = expected.map_or(sum, |e| e[c * samples + t]);
            let a = f64::from(actual[c * samples + t]);
            let tolerance = MIX_REL * magnitude + 1e-30;
            assert!(
                (a - e).abs() <= tolerance,
                "{what}: channel {c} sample {t}: actual {a}, expected {e}, difference {:e}, \
                 tolerance {tolerance:e}",
                (a - e).abs()
            );
        }
    }
}

/// Mixing: f32 products summed in input order, relative to the sum of their magnitudes.
const MIX_REL: f64 = 1e-5;

#[test]
fn channel_mixing_matches_numpy_file() {
    for_each_runtime(|target, client| {
        let case = NumpyCase::load("spatial_mixing");
        let (channels, samples) = (case.shape("x")[0], case.shape("x")[1]);
        let x = case.values_f32("x");
        let dense = Mixing::from_dense(case.values("dense"), channels);
        let sparse = Mixing {
            indices: case.values("indices").iter().map(|&i| i as usize).collect(),
            weights: case.values("weights").to_vec(),
            dense: Vec::new(),
        };
        let on_dense = ChannelMixing::from_dense(client, &dense.dense, channels).unwrap();
        let on_sparse =
            ChannelMixing::from_sparse(client, &sparse.indices, &sparse.weights, channels).unwrap();
        assert!(on_dense.is_dense() && !on_sparse.is_dense());
        assert_eq!((on_sparse.channels(), on_sparse.taps()), (channels, 3));
        for (m, mixing, key) in [
            (&dense, &on_dense, "dense_out"),
            (&sparse, &on_sparse, "sparse_out"),
        ] {
            let actual = run_mixing(client, &x, channels, samples, mixing);
            let what = format!("{target} numpy {key}");
            check_mixed(&what, &actual, Some(case.values(key)), &x, m, channels);
        }
    });
}

#[test]
fn channel_mixing_matches_f64_dense_and_sparse() {
    for_each_runtime(|target, client| {
        let mut rng = Rng::new(0x3117);
        for (channels, samples) in SHAPES {
            let x = random_window(channels, samples, &mut rng);
            // Dense, sparse with few taps, local whitening's 32 taps, and a full sparse form
            // (stored dense).
            for taps in [channels, 5.min(channels), 32.min(channels)] {
                let m = random_mixing(channels, taps, &mut rng);
                let dense = ChannelMixing::from_dense(client, &m.dense, channels).unwrap();
                let sparse =
                    ChannelMixing::from_sparse(client, &m.indices, &m.weights, channels).unwrap();
                assert_eq!(sparse.is_dense(), taps == channels);
                for (form, mixing) in [("dense", &dense), ("sparse", &sparse)] {
                    let actual = run_mixing(client, &x, channels, samples, mixing);
                    let what = format!("{target} {form} {channels}x{samples} taps {taps}");
                    check_mixed(&what, &actual, None, &x, &m, channels);
                }
            }
        }
    });
}

/// `set_dense` replaces a dense matrix's weights in place: the next mix uses the new matrix;
/// a sparse matrix, a wrong length or a non-finite weight is refused.
#[test]
fn channel_mixing_set_dense_replaces_the_weights() {
    for_each_runtime(|target, client| {
        let mut rng = Rng::new(0x5E7);
        let (channels, samples) = (33, 257);
        let x = random_window(channels, samples, &mut rng);
        let first = random_mixing(channels, channels, &mut rng);
        let second = random_mixing(channels, channels, &mut rng);
        let mut mixing = ChannelMixing::from_dense(client, &first.dense, channels).unwrap();
        let before = run_mixing(client, &x, channels, samples, &mixing);
        check_mixed(
            &format!("{target} first"),
            &before,
            None,
            &x,
            &first,
            channels,
        );
        mixing.set_dense(client, &second.dense).unwrap();
        let after = run_mixing(client, &x, channels, samples, &mixing);
        check_mixed(
            &format!("{target} replaced"),
            &after,
            None,
            &x,
            &second,
            channels,
        );
        assert!(mixing.set_dense(client, &second.dense[1..]).is_err());
        let mut bad = second.dense.clone();
        bad[5] = f64::NAN;
        assert!(mixing.set_dense(client, &bad).is_err());
        let sparse = random_mixing(channels, 4, &mut rng);
        let mut sparse =
            ChannelMixing::from_sparse(client, &sparse.indices, &sparse.weights, channels).unwrap();
        assert!(sparse.set_dense(client, &second.dense).is_err());
    });
}

#[test]
fn channel_mixing_nan_reaches_exactly_the_outputs_that_use_it() {
    for_each_runtime(|target, client| {
        let mut rng = Rng::new(12);
        let (channels, samples) = (40, 23);
        let mut x = random_window(channels, samples, &mut rng);
        let (bad_channel, bad_sample) = (17, 9);
        x[bad_channel * samples + bad_sample] = f32::NAN;
        let m = random_mixing(channels, 6, &mut rng);
        let sparse = ChannelMixing::from_sparse(client, &m.indices, &m.weights, channels).unwrap();
        let dense = ChannelMixing::from_dense(client, &m.dense, channels).unwrap();
        for (form, mixing) in [("sparse", &sparse), ("dense", &dense)] {
            let actual = run_mixing(client, &x, channels, samples, mixing);
            for c in 0..channels {
                let uses = form == "dense" || m.indices[c * 6..(c + 1) * 6].contains(&bad_channel);
                for t in 0..samples {
                    let a = actual[c * samples + t];
                    assert_eq!(
                        a.is_nan(),
                        uses && t == bad_sample,
                        "{target} {form}: channel {c} sample {t} gives {a}"
                    );
                }
            }
        }
    });
}

#[test]
fn whitening_stage_and_mixing_argument_checks() {
    for_each_runtime(|target, client| {
        let mut rng = Rng::new(5);
        let (channels, samples) = (9, 77);
        let x = random_window(channels, samples, &mut rng);
        let m = random_mixing(channels, 4, &mut rng);
        let mixing = ChannelMixing::from_sparse(client, &m.indices, &m.weights, channels).unwrap();
        let mut stage = Whitening::new(mixing.clone());
        assert_eq!((stage.name(), stage.settling()), ("whitening", 0));
        assert_eq!(stage.mixing().taps(), 4);
        let input = DeviceArray::from_host(client, &x, channels, samples).unwrap();
        let output = DeviceArray::empty(client, channels, samples).unwrap();
        stage.apply(client, &input, &output).unwrap();
        assert_eq!(
            output.to_host(client).unwrap(),
            run_mixing(client, &x, channels, samples, &mixing),
            "{target}: stage and mix_channels differ"
        );

        let fewer = input.front(channels - 1, samples).unwrap();
        let error = stage
            .apply(
                client,
                &fewer,
                &output.front(channels - 1, samples).unwrap(),
            )
            .unwrap_err();
        assert!(
            matches!(error, Error::ShapeMismatch { .. }),
            "{target}: {error}"
        );
        let small = output.front(channels, samples - 1).unwrap();
        let error = mix_channels(client, &input, &small, &mixing).unwrap_err();
        assert!(
            matches!(error, Error::ShapeMismatch { .. }),
            "{target}: {error}"
        );

        let invalid = |e: Error| matches!(e, Error::InvalidParameter { .. });
        let ragged = ChannelMixing::from_sparse(client, &[0, 1, 0], &[1.0; 3], 2);
        assert!(matches!(ragged, Err(Error::Shape { .. })), "{ragged:?}");
        let unpaired = ChannelMixing::from_sparse(client, &[0, 1], &[1.0], 2);
        assert!(matches!(unpaired, Err(Error::Shape { .. })), "{unpaired:?}");
        let bad_index = ChannelMixing::from_sparse(client, &[0, 2], &[1.0, 1.0], 2);
        assert!(invalid(bad_index.unwrap_err()));
        let bad_weight = ChannelMixing::from_dense(client, &[1.0, f64::NAN, 0.0, 1.0], 2);
        assert!(invalid(bad_weight.unwrap_err()));
        let huge = ChannelMixing::from_sparse(client, &[0, 1], &[1.0, 1e39], 2);
        assert!(invalid(huge.unwrap_err()));
        let none = ChannelMixing::from_dense(client, &[], 0);
        assert!(invalid(none.unwrap_err()));
        let no_taps = ChannelMixing::from_sparse(client, &[], &[], 3);
        assert!(invalid(no_taps.unwrap_err()));
        let wrong = ChannelMixing::from_dense(client, &[1.0; 5], 2);
        assert!(matches!(wrong, Err(Error::Shape { .. })), "{wrong:?}");
    });
}

/// `(sum_t x_i x_j, sum_t x_i)` over samples `owned` of a `[channels, samples]` window, in f64,
/// added to `products` (`channels x channels`) and `sums`.
fn accumulate_f64(
    x: &[f32],
    channels: usize,
    owned: std::ops::Range<usize>,
    products: &mut [f64],
    sums: &mut [f64],
) {
    let samples = x.len() / channels;
    for i in 0..channels {
        let row_i = &x[i * samples..(i + 1) * samples];
        sums[i] += row_i[owned.clone()]
            .iter()
            .map(|&v| f64::from(v))
            .sum::<f64>();
        for j in i..channels {
            let row_j = &x[j * samples..(j + 1) * samples];
            let p: f64 = owned
                .clone()
                .map(|t| f64::from(row_i[t]) * f64::from(row_j[t]))
                .sum();
            products[i * channels + j] += p;
            if i != j {
                products[j * channels + i] += p;
            }
        }
    }
}

/// Checks a covariance against the f64 one, per entry within `COV_REL * sqrt(S_ii S_jj)` of the
/// reference's diagonal (the scale of the products summed).
fn check_covariance(what: &str, actual: &[f64], expected: &[f64], channels: usize, rel: f64) {
    assert_eq!(actual.len(), channels * channels, "{what}: length");
    for i in 0..channels {
        for j in 0..channels {
            let (a, e) = (actual[i * channels + j], expected[i * channels + j]);
            let scale = (expected[i * channels + i] * expected[j * channels + j]).sqrt();
            let tolerance = rel * scale + 1e-30;
            assert!(
                (a - e).abs() <= tolerance,
                "{what}: [{i}, {j}]: actual {a}, expected {e}, difference {:e}, tolerance \
                 {tolerance:e}",
                (a - e).abs()
            );
        }
    }
}

/// Covariance: f32 products summed per window, windows combined pairwise, relative to
/// `sqrt(S_ii S_jj)`.
const COV_REL: f64 = 1e-5;

#[test]
fn covariance_matches_numpy_file() {
    for_each_runtime(|target, client| {
        let case = NumpyCase::load("spatial_covariance");
        let (channels, samples) = (case.shape("x")[0], case.shape("x")[1]);
        let mut accumulator = CovarianceAccumulator::new(client, channels).unwrap();
        let window =
            DeviceArray::from_host(client, &case.values_f32("x"), channels, samples).unwrap();
        accumulator.add(client, &window, 0..samples).unwrap();
        assert_eq!(accumulator.samples(), samples as u64);
        let what = format!("{target} numpy cov");
        let cov = accumulator.finish(client).unwrap();
        check_covariance(&what, &cov, case.values("cov"), channels, COV_REL);
        // Centred: the offsets here are up to ~5x the deviations, so ~25x less precise.
        let centered = accumulator.finish_centered(client).unwrap();
        let expected = case.values("cov_centered");
        check_covariance(&what, &centered, expected, channels, 25.0 * COV_REL);
    });
}

#[test]
fn covariance_matches_f64_on_random_windows() {
    for_each_runtime(|target, client| {
        let mut rng = Rng::new(0xC0);
        for (channels, samples) in SHAPES {
            let x = random_window(channels, samples, &mut rng);
            let mut products = vec![0.0; channels * channels];
            let mut sums = vec![0.0; channels];
            accumulate_f64(&x, channels, 0..samples, &mut products, &mut sums);
            let n = samples as f64;
            let expected: Vec<f64> = products.iter().map(|p| p / n).collect();
            let mut accumulator = CovarianceAccumulator::new(client, channels).unwrap();
            assert_eq!(accumulator.channels(), channels);
            let window = DeviceArray::from_host(client, &x, channels, samples).unwrap();
            accumulator.add(client, &window, 0..samples).unwrap();
            let what = format!("{target} cov {channels}x{samples}");
            check_covariance(
                &what,
                &accumulator.finish(client).unwrap(),
                &expected,
                channels,
                COV_REL,
            );
        }
    });
}

#[test]
fn covariance_over_many_windows_matches_f64_and_the_whole() {
    for_each_runtime(|target, client| {
        let mut rng = Rng::new(0xC1);
        let (channels, samples, halo, windows) = (9, 1001, 13, 130);
        let mut accumulator = CovarianceAccumulator::new(client, channels).unwrap();
        let mut products = vec![0.0; channels * channels];
        let mut sums = vec![0.0; channels];
        let mut concatenated = vec![Vec::new(); channels];
        let window = DeviceArray::empty(client, channels, samples).unwrap();
        let owned = halo..samples - halo;
        for _ in 0..windows {
            let x = random_window(channels, samples, &mut rng);
            client.write(window.handle(), cubecl::bytes::Bytes::from_elems(x.clone()));
            accumulator.add(client, &window, owned.clone()).unwrap();
            accumulate_f64(&x, channels, owned.clone(), &mut products, &mut sums);
            for (c, row) in concatenated.iter_mut().enumerate() {
                row.extend_from_slice(&x[c * samples + owned.start..c * samples + owned.end]);
            }
        }
        let n = (windows * owned.len()) as f64;
        assert_eq!(accumulator.samples(), n as u64);
        let expected: Vec<f64> = products.iter().map(|p| p / n).collect();
        let chunked = accumulator.finish(client).unwrap();
        let what = format!("{target} cov over {windows} windows");
        check_covariance(&what, &chunked, &expected, channels, COV_REL);
        let centered: Vec<f64> = (0..channels * channels)
            .map(|k| expected[k] - sums[k / channels] / n * (sums[k % channels] / n))
            .collect();
        let what = format!("{target} centred cov over {windows} windows");
        let actual = accumulator.finish_centered(client).unwrap();
        check_covariance(&what, &actual, &centered, channels, 25.0 * COV_REL);

        // The same samples as one window.
        let whole: Vec<f32> = concatenated.concat();
        let total = whole.len() / channels;
        let mut once = CovarianceAccumulator::new(client, channels).unwrap();
        let whole = DeviceArray::from_host(client, &whole, channels, total).unwrap();
        once.add(client, &whole, 0..total).unwrap();
        let what = format!("{target} cov chunked vs whole");
        check_covariance(
            &what,
            &chunked,
            &once.finish(client).unwrap(),
            channels,
            COV_REL,
        );

        // Reset forgets, and the accumulator is reusable.
        accumulator.reset();
        assert_eq!(accumulator.samples(), 0);
        let error = accumulator.finish(client).unwrap_err();
        assert!(matches!(error, Error::InvalidParameter { .. }), "{error}");
        accumulator.add(client, &window, 0..samples).unwrap();
        assert_eq!(accumulator.samples(), samples as u64);
    });
}

#[test]
fn covariance_nan_spoils_only_its_channel() {
    for_each_runtime(|target, client| {
        let mut rng = Rng::new(0xC2);
        let (channels, samples, bad) = (12, 300, 5);
        let mut x = random_window(channels, samples, &mut rng);
        let mut products = vec![0.0; channels * channels];
        let mut sums = vec![0.0; channels];
        accumulate_f64(&x, channels, 0..samples, &mut products, &mut sums);
        x[bad * samples + 77] = f32::NAN;
        let mut accumulator = CovarianceAccumulator::new(client, channels).unwrap();
        let window = DeviceArray::from_host(client, &x, channels, samples).unwrap();
        accumulator.add(client, &window, 0..samples).unwrap();
        let cov = accumulator.finish(client).unwrap();
        for i in 0..channels {
            for j in 0..channels {
                let (a, e) = (
                    cov[i * channels + j],
                    products[i * channels + j] / samples as f64,
                );
                if i == bad || j == bad {
                    assert!(
                        a.is_nan(),
                        "{target}: [{i}, {j}] = {a} despite a NaN in channel {bad}"
                    );
                } else {
                    assert!(
                        (a - e).abs() <= 1e-5 * e.abs().max(1.0),
                        "{target}: [{i}, {j}] = {a}, expected {e}"
                    );
                }
            }
        }
    });
}

#[test]
fn covariance_argument_checks() {
    for_each_runtime(|target, client| {
        let error = CovarianceAccumulator::new(client, 0).unwrap_err();
        assert!(
            matches!(error, Error::InvalidParameter { .. }),
            "{target}: {error}"
        );
        let mut accumulator = CovarianceAccumulator::new(client, 4).unwrap();
        let window = DeviceArray::empty(client, 4, 10).unwrap();
        #[allow(clippy::reversed_empty_ranges)]
        for owned in [0..11, 5..4] {
            let error = accumulator.add(client, &window, owned).unwrap_err();
            assert!(
                matches!(error, Error::InvalidParameter { .. }),
                "{target}: {error}"
            );
        }
        let error = window.front(4, 11).unwrap_err();
        assert!(
            matches!(error, Error::ArrayShape { .. }),
            "{target}: {error}"
        );
        let error = accumulator
            .add(client, &window.front(3, 10).unwrap(), 0..10)
            .unwrap_err();
        assert!(
            matches!(error, Error::ShapeMismatch { .. }),
            "{target}: {error}"
        );
        accumulator.add(client, &window, 3..3).unwrap();
        let error = accumulator.finish(client).unwrap_err();
        assert!(
            matches!(error, Error::InvalidParameter { .. }),
            "{target}: {error}"
        );
    });
}

/// `channels` contacts in two columns 32 um apart, 20 um between rows (`(x, y)` in um).
fn two_columns(channels: usize) -> Vec<(f64, f64)> {
    (0..channels)
        .map(|c| (32.0 * (c % 2) as f64, 20.0 * (c / 2) as f64))
        .collect()
}

/// Correlated zero-mean noise, `[channels, samples]`: a component common to every channel plus
/// each channel's own, of its own size.
fn correlated_noise(channels: usize, samples: usize, rng: &mut Rng) -> Vec<f32> {
    let common: Vec<f64> = (0..samples).map(|_| rng.normal()).collect();
    (0..channels * samples)
        .map(|i| {
            (0.7 * common[i % samples] + (1.0 + (i / samples % 3) as f64) * rng.normal()) as f32
        })
        .collect()
}

/// Local whitening fitted on the device (covariance accumulated over windows, `local_zca`,
/// uploaded) against the f64 host reference: the covariance summed in f64, `local_zca` of it,
/// applied in f64 to a fresh window.
#[test]
fn local_whitening_matches_the_f64_fit() {
    for_each_runtime(|target, client| {
        let mut rng = Rng::new(0xD1);
        for (channels, samples, nearest) in [(3, 17, 2), (7, 1001, 3), (33, 513, 32)] {
            let positions = two_columns(channels);
            let mut accumulator = CovarianceAccumulator::new(client, channels).unwrap();
            let mut products = vec![0.0; channels * channels];
            let mut sums = vec![0.0; channels];
            for _ in 0..3 {
                let x = correlated_noise(channels, samples, &mut rng);
                let window = DeviceArray::from_host(client, &x, channels, samples).unwrap();
                accumulator.add(client, &window, 0..samples).unwrap();
                accumulate_f64(&x, channels, 0..samples, &mut products, &mut sums);
            }
            let n = (3 * samples) as f64;
            let cov: Vec<f64> = products.iter().map(|p| p / n).collect();
            let white = local_zca(&cov, &positions, nearest, 1e-6).unwrap();
            let x = correlated_noise(channels, samples, &mut rng);
            let x64: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
            let expected = white.apply(&x64, samples).unwrap();

            let mut whitening = accumulator
                .local_whitening(client, &positions, nearest, 1e-6)
                .unwrap();
            assert_eq!(whitening.mixing().channels(), channels);
            let input = DeviceArray::from_host(client, &x, channels, samples).unwrap();
            let output = DeviceArray::empty(client, channels, samples).unwrap();
            whitening.apply(client, &input, &output).unwrap();
            let what = format!("{target} local whitening {channels}x{samples}, {nearest} nearest");
            // Whitened values are about 1; the covariance is within 1e-5 of f64.
            assert_close(
                &what,
                &output.to_host(client).unwrap(),
                &expected,
                1e-3,
                1e-3,
            );
        }
        let empty = CovarianceAccumulator::new(client, 2).unwrap();
        let error = empty
            .local_whitening(client, &two_columns(2), 2, 1e-6)
            .unwrap_err();
        assert!(
            matches!(error, Error::InvalidParameter { .. }),
            "{target}: {error}"
        );
    });
}

// Moved from the examples' `fit_local_whitening`: the covariance is summed over the samples
// windows own, so the whitening is the same whatever the window size (a halo counted twice, or
// a window missed, would change it).
#[test]
fn local_whitening_does_not_depend_on_the_window_size() {
    let (channels, samples) = (6, 9_000);
    let rate = SampleRate::from_hz(30_000).unwrap();
    let source = Arc::new(SyntheticRecording::new(channels, samples, rate, 5).unwrap());
    let positions = two_columns(channels);
    for_each_runtime(|target, client| {
        let mut rng = Rng::new(2);
        let input: Vec<f32> = (0..channels * 500)
            .map(|_| rng.uniform(-50.0, 50.0) as f32)
            .collect();
        let input = DeviceArray::from_host(client, &input, channels, 500).unwrap();
        let whitened = |window: u64| -> Vec<f32> {
            let options = StreamOptions {
                window,
                extra_halo: 7,
                ..StreamOptions::default()
            };
            let mut stream =
                WindowStream::new(client, source.clone(), Pipeline::new(), &options).unwrap();
            let mut covariance = CovarianceAccumulator::new(client, channels).unwrap();
            while let Some(window) = stream.next_window() {
                covariance.add_window(client, window.unwrap()).unwrap();
            }
            let mut whitening = covariance
                .local_whitening(client, &positions, 3, 1e-6)
                .unwrap();
            let output = DeviceArray::empty(client, channels, 500).unwrap();
            whitening.apply(client, &input, &output).unwrap();
            output.to_host(client).unwrap()
        };
        let (whole, windowed) = (whitened(9_000), whitened(1_000));
        let scale = whole.iter().fold(0f32, |m, v| m.max(v.abs()));
        assert!(scale > 0.0);
        for (i, (a, b)) in whole.iter().zip(&windowed).enumerate() {
            assert!(
                (a - b).abs() <= 1e-4 * scale,
                "{target}: value {i}: {a} vs {b}"
            );
        }
    });
}
