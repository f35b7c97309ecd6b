//! Per-channel mean, standard deviation, median and MAD noise on every runtime compiled in,
//! against numpy reference files and f64 host references on seeded random inputs.

mod common;

use common::Reference;
use cubecl::client::Client;
use dspk_core::test_util::{Rng, assert_close, for_each_runtime};
use dspk_ops::{
    ChannelVector, DeviceArray, Error, channel_mean, channel_mean_into, channel_median,
    channel_median_into, channel_std, channel_std_into, mad_noise, mad_noise_into,
};

/// Random channels: noise around a per-channel offset; every third channel quantised to
/// multiples of 4 (repeated values, as int16 data), and some exact zeros and negative zeros.
fn random_window(channels: usize, samples: usize, rng: &mut Rng) -> Vec<f32> {
    let mut x = Vec::with_capacity(channels * samples);
    for c in 0..channels {
        let offset = rng.uniform(-300.0, 300.0);
        for _ in 0..samples {
            let noise: f64 = (0..4).map(|_| rng.uniform(-10.0, 10.0)).sum();
            let mut value = offset + noise;
            if c % 3 == 2 {
                value = (value / 4.0).round() * 4.0;
            }
            if rng.below(50) == 0 {
                value = if rng.below(2) == 0 { 0.0 } else { -0.0 };
            }
            x.push(value as f32);
        }
    }
    x
}

/// The f64 mean, standard deviation (ddof 0) and mean absolute value of `row`.
fn moments(row: &[f32]) -> (f64, f64, f64) {
    let n = row.len() as f64;
    let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
    let var = row
        .iter()
        .map(|&v| (f64::from(v) - mean).powi(2))
        .sum::<f64>()
        / n;
    let abs = row.iter().map(|&v| f64::from(v).abs()).sum::<f64>() / n;
    (mean, var.sqrt(), abs)
}

/// `np.median` of `row` on a float32 array: the middle element, or the f32 mean of the two
/// middle elements.
fn median(row: &[f32]) -> f32 {
    let mut sorted = row.to_vec();
    sorted.sort_by(f32::total_cmp);
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// Checks all four statistics of `x` against the host references.
fn check_window(client: &Client, what: &str, x: &[f32], channels: usize) {
    let samples = x.len() / channels;
    let input = DeviceArray::from_host(client, x, channels, samples).unwrap();
    let means = channel_mean(client, &input).unwrap();
    let stds = channel_std(client, &input).unwrap();
    let medians = channel_median(client, &input).unwrap();
    let noise = mad_noise(client, &input).unwrap();
    for c in 0..channels {
        let row = &x[c * samples..(c + 1) * samples];
        let (mean, std, abs) = moments(row);
        let what = format!("{what} channel {c}");
        // Mean: within 1e-6 of mean(|x|) (a few f32 roundings of the compensated tree sum).
        assert_close(
            &format!("{what} mean"),
            &means[c..=c],
            &[mean],
            1e-6 * abs,
            0.0,
        );
        // Std: 1e-5 relative, plus the mean's error as an absolute floor.
        assert_close(
            &format!("{what} std"),
            &stds[c..=c],
            &[std],
            1e-6 * abs,
            1e-5,
        );
        // Median: exact.
        let expected = median(row);
        assert_eq!(medians[c], expected, "{what} median");
        // MAD noise: the exact median of |x|, one f32 division (1 ulp).
        let abs_row: Vec<f32> = row.iter().map(|v| v.abs()).collect();
        let expected = f64::from(median(&abs_row)) / 0.6745;
        assert_close(
            &format!("{what} mad"),
            &noise[c..=c],
            &[expected],
            1e-30,
            1.2e-7,
        );
    }
}

#[test]
fn statistics_match_numpy_reference_files() {
    for_each_runtime(|target, client| {
        for name in ["stats_odd", "stats_even"] {
            let reference = Reference::load(name);
            let [channels, samples] = reference.shape("x") else {
                panic!("{name}: x is not 2-D")
            };
            let (channels, samples) = (*channels, *samples);
            let x = reference.values_f32("x");
            let input = DeviceArray::from_host(client, &x, channels, samples).unwrap();
            let what = format!("{target} {name}");
            let abs = x.iter().map(|v| f64::from(v.abs())).sum::<f64>() / x.len() as f64;
            let means = channel_mean(client, &input).unwrap();
            assert_close(&what, &means, reference.values("mean"), 1e-6 * abs, 0.0);
            let stds = channel_std(client, &input).unwrap();
            assert_close(&what, &stds, reference.values("std"), 0.0, 1e-5);
            let medians = channel_median(client, &input).unwrap();
            assert_close(&what, &medians, reference.values("median"), 0.0, 0.0);
            let noise = mad_noise(client, &input).unwrap();
            assert_close(&what, &noise, reference.values("madnoise"), 0.0, 1.2e-7);
        }
    });
}

#[test]
fn statistics_match_f64_references_on_odd_sizes() {
    for_each_runtime(|target, client| {
        let mut rng = Rng::new(4242);
        for (channels, samples) in [(1, 1), (1, 2), (3, 17), (2, 64), (7, 1001), (5, 4099)] {
            let x = random_window(channels, samples, &mut rng);
            check_window(
                client,
                &format!("{target} {channels}x{samples}"),
                &x,
                channels,
            );
        }
        // A long channel: four levels of the tree sum, a large offset beside the spread.
        let mut x = random_window(1, 40_001, &mut rng);
        for v in &mut x {
            *v += 10_000.0;
        }
        check_window(client, &format!("{target} 1x40001"), &x, 1);
    });
}

#[test]
fn device_outputs_equal_downloaded_ones() {
    for_each_runtime(|target, client| {
        let mut rng = Rng::new(7);
        let (channels, samples) = (3, 333);
        let x = random_window(channels, samples, &mut rng);
        let input = DeviceArray::from_host(client, &x, channels, samples).unwrap();
        // A longer output buffer: only the first `channels` values are written.
        let buffer = DeviceArray::from_host(client, &[-7.0; 12], 12, 1).unwrap();
        let output = ChannelVector::from_handle(buffer.handle().clone(), channels).unwrap();
        type Into = fn(&Client, &DeviceArray, &ChannelVector) -> dspk_ops::Result<()>;
        type Download = fn(&Client, &DeviceArray) -> dspk_ops::Result<Vec<f32>>;
        let ops: [(&str, Into, Download); 4] = [
            ("mean", channel_mean_into, channel_mean),
            ("std", channel_std_into, channel_std),
            ("median", channel_median_into, channel_median),
            ("mad", mad_noise_into, mad_noise),
        ];
        for (name, into, download) in ops {
            into(client, &input, &output).unwrap();
            let on_device = buffer.to_host(client).unwrap();
            let downloaded = download(client, &input).unwrap();
            assert_eq!(on_device[..channels], downloaded, "{target} {name}");
            assert_eq!(on_device[channels..], [-7.0; 9], "{target} {name}");
        }
    });
}

#[test]
fn nan_gives_nan_and_infinities_follow_numpy() {
    for_each_runtime(|target, client| {
        let samples = 9;
        let mut x: Vec<f32> = (0..3 * samples).map(|i| (i % 7) as f32 - 3.0).collect();
        x[samples + 4] = f32::NAN; // channel 1
        x[2 * samples + 8] = f32::INFINITY; // channel 2
        let input = DeviceArray::from_host(client, &x, 3, samples).unwrap();
        let means = channel_mean(client, &input).unwrap();
        let stds = channel_std(client, &input).unwrap();
        let medians = channel_median(client, &input).unwrap();
        let noise = mad_noise(client, &input).unwrap();
        for (name, values) in [("mean", &means), ("std", &stds), ("median", &medians)] {
            assert!(values[0].is_finite(), "{target} {name}: {values:?}");
            assert!(
                values[1].is_nan(),
                "{target} {name}: NaN gave {}",
                values[1]
            );
        }
        assert!(noise[1].is_nan(), "{target} mad: NaN gave {}", noise[1]);
        // numpy: mean inf, std nan, median finite (inf is just the largest value).
        assert_eq!(means[2], f32::INFINITY, "{target}");
        assert!(stds[2].is_nan(), "{target}: std with inf gave {}", stds[2]);
        assert_eq!(medians[2], median(&x[2 * samples..]), "{target}");
    });
}

#[test]
fn bad_arguments_are_refused() {
    for_each_runtime(|target, client| {
        let input = DeviceArray::from_host(client, &[1.0; 10], 2, 5).unwrap();
        let error = channel_mean(client, &input.front(2, 0).unwrap()).unwrap_err();
        assert!(
            matches!(error, Error::InvalidParameter { .. }),
            "{target}: {error}"
        );
        // A buffer smaller than 2 x 6 is refused where the array is made.
        let error = input.front(2, 6).unwrap_err();
        assert!(
            matches!(
                error,
                Error::ArrayShape {
                    expected: 12,
                    given: 10,
                    ..
                }
            ),
            "{target}: {error}"
        );
        let error = DeviceArray::<f32>::from_handle(input.handle().clone(), 2, 6).unwrap_err();
        assert!(
            matches!(
                error,
                Error::ArrayShape {
                    expected: 48,
                    given: 40,
                    ..
                }
            ),
            "{target}: {error}"
        );
        let one = ChannelVector::empty(client, 1).unwrap();
        let error = channel_std_into(client, &input, &one).unwrap_err();
        assert!(
            matches!(
                error,
                Error::ShapeMismatch {
                    what: "channel_std",
                    ..
                }
            ),
            "{target}: {error}"
        );
        let error = DeviceArray::<f32>::empty(client, 1 << 20, 1 << 13).unwrap_err();
        assert!(
            matches!(error, Error::OverLimit { .. }),
            "{target}: {error}"
        );
        assert!(
            channel_mean(client, &input.front(0, 5).unwrap())
                .unwrap()
                .is_empty()
        );
    });
}

/// `channel_std` with offsets of `1e3` to `1e6` times the spread: within `1e-5` relative up to
/// `1e4`, and beyond within the documented `1e-5 + (offset / std * 2^-24)^2` (the mean rounded
/// to `f32` before the second pass), against an `f64` two-pass std of the same `f32` values.
#[test]
fn channel_std_with_large_offsets_within_documented_bound() {
    for_each_runtime(|target, client| {
        let samples = 4099;
        let mut rng = Rng::new(17);
        let noise: Vec<f64> = (0..samples).map(|_| rng.uniform(-1.0, 1.0)).collect();
        for ratio in [1e3f64, 1e4, 1e5, 1e6] {
            // spread 1, offset `ratio`, plus a fraction so the mean is not an f32 value
            let x: Vec<f32> = noise.iter().map(|v| (ratio + 0.3 + v) as f32).collect();
            let xs: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
            let mean = xs.iter().sum::<f64>() / samples as f64;
            let var = xs.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / samples as f64;
            let input = DeviceArray::from_host(client, &x, 1, samples).unwrap();
            let std = f64::from(channel_std(client, &input).unwrap()[0]);
            let relative = (std - var.sqrt()).abs() / var.sqrt();
            let bound = 1e-5 + (ratio / var.sqrt() * 2f64.powi(-24)).powi(2);
            eprintln!("{target} offset/std {ratio:e}: relative error {relative:.2e}");
            assert!(
                relative <= bound,
                "{target} offset/std {ratio:e}: relative error {relative:.2e} over {bound:.2e}"
            );
            if ratio <= 1e4 {
                assert!(
                    relative <= 1e-5,
                    "{target} offset/std {ratio:e}: {relative:.2e}"
                );
            }
        }
    });
}
