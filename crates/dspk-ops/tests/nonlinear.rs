//! Median filter and Gaussian smoothing on every runtime compiled in, against scipy reference
//! files and f64 host references on seeded random inputs; their stages chunked with halos
//! against the whole window.

mod common;

use common::Reference;
use cubecl::client::Client;
use dspk_core::test_util::{Rng, assert_close_f64, for_each_runtime};
use dspk_ops::{
    DeviceArray, Error, GaussianFilter, MedianFilter, Stage, gaussian_filter1d, gaussian_kernel1d,
    medfilt,
};

fn random_window(values: usize, rng: &mut Rng) -> Vec<f32> {
    // Quantised to 1/4 so median windows hold repeated values.
    (0..values)
        .map(|_| ((rng.uniform(-50.0, 50.0) * 4.0).round() / 4.0) as f32)
        .collect()
}

/// `x` (`channels` rows) on the device and an output array of its shape.
fn input_output(client: &Client, x: &[f32], channels: usize) -> (DeviceArray, DeviceArray) {
    let samples = x.len() / channels;
    let input = DeviceArray::from_host(client, x, channels, samples).unwrap();
    let output = DeviceArray::empty(client, channels, samples).unwrap();
    (input, output)
}

fn run_medfilt(client: &Client, x: &[f32], channels: usize, kernel_size: usize) -> Vec<f32> {
    let (input, output) = input_output(client, x, channels);
    medfilt(client, &input, &output, kernel_size).unwrap();
    output.to_host(client).unwrap()
}

fn run_gaussian(client: &Client, x: &[f32], channels: usize, sigma: f64) -> Vec<f32> {
    let (input, output) = input_output(client, x, channels);
    gaussian_filter1d(client, &input, &output, sigma, 4.0).unwrap();
    output.to_host(client).unwrap()
}

/// `scipy.signal.medfilt` of each row, by sorting each zero-padded window.
fn host_medfilt(x: &[f32], samples: usize, kernel_size: usize) -> Vec<f32> {
    let half = kernel_size / 2;
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(samples) {
        for s in 0..samples {
            let mut window: Vec<f32> = (0..kernel_size)
                .map(|i| {
                    let j = (s + i).wrapping_sub(half);
                    if j < samples { row[j] } else { 0.0 }
                })
                .collect();
            window.sort_by(f32::total_cmp);
            out.push(window[half]);
        }
    }
    out
}

/// `scipy.ndimage.gaussian_filter1d` of each row in f64 (mode reflect, by folding), and the
/// scale `sum(|w| |x|)` of each output for the tolerance.
fn host_gaussian(x: &[f32], samples: usize, sigma: f64) -> (Vec<f64>, Vec<f64>) {
    let weights = gaussian_kernel1d(sigma, 4.0).unwrap();
    let radius = (weights.len() / 2) as i64;
    let n = samples as i64;
    let reflect = |mut i: i64| loop {
        if i < 0 {
            i = -i - 1;
        } else if i >= n {
            i = 2 * n - 1 - i;
        } else {
            return i as usize;
        }
    };
    let (mut out, mut scale) = (Vec::new(), Vec::new());
    for row in x.chunks(samples) {
        for s in 0..n {
            let (mut sum, mut abs) = (0.0, 0.0);
            for (t, w) in weights.iter().enumerate() {
                let v = f64::from(row[reflect(s + t as i64 - radius)]);
                sum += w * v;
                abs += (w * v).abs();
            }
            out.push(sum);
            scale.push(abs);
        }
    }
    (out, scale)
}

/// Gaussian outputs within `1e-5 * sum(|w| |x|)` (plus a tiny floor) of the f64 reference.
fn check_gaussian(what: &str, actual: &[f32], expected: &[f64], scale: &[f64]) {
    assert_eq!(actual.len(), expected.len(), "{what}: lengths");
    for (i, ((&a, &e), &s)) in actual.iter().zip(expected).zip(scale).enumerate() {
        let tolerance = 1e-5 * s + 1e-30;
        assert!(
            (f64::from(a) - e).abs() <= tolerance,
            "{what}: value {i}: actual {a}, expected {e}, tolerance {tolerance:e}"
        );
    }
}

#[test]
fn medfilt_matches_scipy_reference_files() {
    for_each_runtime(|target, client| {
        for name in ["medfilt", "medfilt_short"] {
            let reference = Reference::load(name);
            let channels = reference.shape("x")[0];
            let x = reference.values_f32("x");
            for &k in reference.values("sizes") {
                let k = k as usize;
                let actual = run_medfilt(client, &x, channels, k);
                let expected = reference.values_f32(&format!("k{k}"));
                assert_eq!(actual, expected, "{target} {name} kernel {k}");
            }
        }
    });
}

#[test]
fn gaussian_matches_scipy_reference_files() {
    for_each_runtime(|target, client| {
        for name in [
            "gaussian",
            "gaussian_short",
            "gaussian_odd_short",
            "gaussian_odd_long",
        ] {
            let reference = Reference::load(name);
            let [channels, samples] = reference.shape("x") else {
                panic!("{name}: x is not 2-D")
            };
            let x = reference.values_f32("x");
            for (i, &sigma) in reference.values("sigmas").iter().enumerate() {
                let actual = run_gaussian(client, &x, *channels, sigma);
                // The tolerance scale from the host reference (which must agree with scipy).
                let (host, scale) = host_gaussian(&x, *samples, sigma);
                let expected = reference.values(&format!("s{i}"));
                let what = format!("{target} {name} sigma {sigma}");
                check_gaussian(
                    &format!("{what} (host vs scipy)"),
                    &to_f32(&host),
                    expected,
                    &scale,
                );
                check_gaussian(&what, &actual, expected, &scale);
            }
        }
    });
}

/// The weights themselves (which the host reference above also uses) against scipy's, read
/// off as its response to an impulse (`tests/reference/cases_gaussian.py`).
#[test]
fn gaussian_weights_match_scipy() {
    let reference = Reference::load("gaussian_weights");
    for (i, &sigma) in reference.values("sigmas").iter().enumerate() {
        let actual = gaussian_kernel1d(sigma, 4.0).unwrap();
        let expected = reference.values(&format!("w{i}"));
        assert_eq!(actual.len(), expected.len(), "sigma {sigma}: radius");
        assert_close_f64(&format!("sigma {sigma}"), &actual, expected, 1e-16, 1e-13);
    }
}

fn to_f32(values: &[f64]) -> Vec<f32> {
    values.iter().map(|&v| v as f32).collect()
}

#[test]
fn medfilt_and_gaussian_match_f64_references_on_odd_sizes() {
    for_each_runtime(|target, client| {
        let mut rng = Rng::new(31);
        for (channels, samples) in [(1, 1), (2, 2), (3, 17), (7, 1001), (5, 4099)] {
            let x = random_window(channels * samples, &mut rng);
            let what = format!("{target} {channels}x{samples}");
            for k in [1, 3, 7, 31, 101] {
                if k == 101 && samples > 1001 {
                    continue; // lavapipe and the cpu runtime are slow at 10^4 comparisons a sample
                }
                let actual = run_medfilt(client, &x, channels, k);
                assert_eq!(actual, host_medfilt(&x, samples, k), "{what} medfilt {k}");
            }
            for sigma in [0.3, 1.0, 2.7, 30.0] {
                let actual = run_gaussian(client, &x, channels, sigma);
                let (expected, scale) = host_gaussian(&x, samples, sigma);
                check_gaussian(
                    &format!("{what} gaussian {sigma}"),
                    &actual,
                    &expected,
                    &scale,
                );
            }
        }
    });
}

#[test]
fn nan_propagates_to_the_windows_that_hold_it() {
    for_each_runtime(|target, client| {
        let samples = 41;
        let mut x: Vec<f32> = (0..2 * samples).map(|i| ((i * 7) % 13) as f32).collect();
        let at = samples + 20; // channel 1, sample 20
        x[at] = f32::NAN;
        let filtered = run_medfilt(client, &x, 2, 5);
        for (i, v) in filtered.iter().enumerate() {
            let near = i >= samples && (i as i64 - at as i64).abs() <= 2;
            assert_eq!(v.is_nan(), near, "{target} medfilt value {i}: {v}");
        }
        let smoothed = run_gaussian(client, &x, 2, 1.0); // radius 4
        for (i, v) in smoothed.iter().enumerate() {
            let near = i >= samples && (i as i64 - at as i64).abs() <= 4;
            assert_eq!(v.is_nan(), near, "{target} gaussian value {i}: {v}");
        }
    });
}

/// Applies `stage` to the whole window, then window by window (owned length `step`, halos of
/// `stage.settling()` on each side, cut at the recording's ends) and requires the same bits.
fn check_chunked(
    client: &Client,
    what: &str,
    stage: &mut dyn Stage,
    x: &[f32],
    channels: usize,
    step: usize,
) {
    let samples = x.len() / channels;
    let (input, output) = input_output(client, x, channels);
    stage.apply(client, &input, &output).unwrap();
    let whole = output.to_host(client).unwrap();
    let halo = stage.settling();
    let mut start = 0;
    while start < samples {
        let end = (start + step).min(samples);
        let (from, to) = (start.saturating_sub(halo), (end + halo).min(samples));
        let len = to - from;
        let window: Vec<f32> = x
            .chunks(samples)
            .flat_map(|row| row[from..to].iter().copied())
            .collect();
        let (input, output) = input_output(client, &window, channels);
        stage.apply(client, &input, &output).unwrap();
        let part = output.to_host(client).unwrap();
        for c in 0..channels {
            let owned = &part[c * len + start - from..c * len + end - from];
            let expected = &whole[c * samples + start..c * samples + end];
            assert_eq!(
                owned,
                expected,
                "{what} {} channel {c} window {start}..{end}",
                stage.name()
            );
        }
        start = end;
    }
}

#[test]
fn chunked_with_halos_equals_whole() {
    for_each_runtime(|target, client| {
        let mut rng = Rng::new(5);
        let (channels, samples) = (3, 1001);
        let x = random_window(channels * samples, &mut rng);
        for k in [1, 5, 31] {
            let mut stage = MedianFilter::new(k).unwrap();
            assert_eq!(stage.settling(), k / 2);
            for step in [1, 97, 250, 1001] {
                check_chunked(client, &target.to_string(), &mut stage, &x, channels, step);
            }
        }
        for sigma in [0.8, 3.0, 12.5] {
            let mut stage = GaussianFilter::new(sigma, 4.0).unwrap();
            assert_eq!(stage.settling(), (4.0 * sigma + 0.5) as usize);
            for step in [1, 97, 250, 1001] {
                check_chunked(client, &target.to_string(), &mut stage, &x, channels, step);
            }
        }
    });
}

#[test]
fn bad_arguments_are_refused() {
    for_each_runtime(|target, client| {
        let buffer = DeviceArray::from_host(client, &[0.0; 10], 1, 10).unwrap();
        for k in [0, 2, 103] {
            let error = medfilt(client, &buffer, &buffer, k).unwrap_err();
            assert!(
                matches!(error, Error::InvalidParameter { .. }),
                "{target}: {error}"
            );
            assert!(MedianFilter::new(k).is_err());
        }
        for (sigma, truncate) in [
            (0.0, 4.0),
            (-1.0, 4.0),
            (f64::NAN, 4.0),
            (1.0, 0.0),
            (1e6, 4.0),
        ] {
            let error = gaussian_filter1d(client, &buffer, &buffer, sigma, truncate).unwrap_err();
            assert!(
                matches!(error, Error::InvalidParameter { .. }),
                "{target}: {error}"
            );
            assert!(GaussianFilter::new(sigma, truncate).is_err());
        }
        // A buffer of 9 values wrapped as 2 x 5 is refused where the array is made.
        let small = DeviceArray::<f32>::empty(client, 9, 1).unwrap();
        let error = DeviceArray::<f32>::from_handle(small.handle().clone(), 2, 5).unwrap_err();
        assert!(
            matches!(
                error,
                Error::ArrayShape {
                    expected: 40,
                    given: 36,
                    ..
                }
            ),
            "{target}: {error}"
        );
        let window = buffer.front(2, 5).unwrap();
        let small = small.front(3, 3).unwrap();
        let error = medfilt(client, &window, &small, 3).unwrap_err();
        assert!(
            matches!(
                error,
                Error::ShapeMismatch {
                    what: "medfilt: output",
                    ..
                }
            ),
            "{target}: {error}"
        );
        let error = gaussian_filter1d(client, &small, &window, 1.0, 4.0).unwrap_err();
        assert!(
            matches!(
                error,
                Error::ShapeMismatch {
                    what: "gaussian_filter1d: output",
                    ..
                }
            ),
            "{target}: {error}"
        );
    });
}

#[test]
fn gaussian_weights_are_scipys() {
    // scipy.ndimage._filters._gaussian_kernel1d(1.0, 0, 4): radius int(4 * 1 + 0.5) = 4.
    let weights = gaussian_kernel1d(1.0, 4.0).unwrap();
    assert_eq!(weights.len(), 9);
    let expected_center = 1.0
        / (-4i32..=4)
            .map(|x| (-0.5 * f64::from(x * x)).exp())
            .sum::<f64>();
    assert!((weights[4] - expected_center).abs() < 1e-15);
    assert!((weights.iter().sum::<f64>() - 1.0).abs() < 1e-15);
    assert_eq!(gaussian_kernel1d(0.1, 4.0).unwrap().len(), 1); // radius int(0.9) = 0
}
