//! Device filters (IIR, FIR, resampling, decimation) against scipy on every runtime compiled
//! in, chunked against whole, and NaN handling.
//!
//! Tolerances: the device filters in `f32` and scipy in `f64`; outputs are compared with an
//! absolute tolerance of a factor times the largest magnitude of the reference output (signals
//! here are tens to hundreds of microvolts with a DC offset). FIR filters and resampling sum a
//! few dozen products and stay within `3e-7` ([`TOL`] = `1e-5` leaves a wide margin). Recursive
//! filters run in the balanced, compensated increment form of decision 0007: measured worst
//! cases on wgpu are `2.4e-7` for the fourth-order 300-6000 Hz band-pass, `1.8e-7` for the
//! 60 Hz notch and `1.9e-6` for the IIR decimator at `q = 13` (the direct form gave `7.6e-6`
//! on wgpu and `1.06e-5` on the cpu runtime for the band-pass, `3.1e-5` for the decimator);
//! [`IIR_TOL`] stays `2e-5` for runtimes without fused multiply-adds, and the low-cut filters
//! have their own bound in `tests/low_cut.rs`.

mod common;

use common::Reference;
use cubecl::client::Client;
use dspk_core::test_util::{Rng, assert_close, for_each_runtime};
use dspk_ops::design::host::{self, DecimateFilter};
use dspk_ops::design::{Band, Sos, butter};
use dspk_ops::{Decimate, DeviceArray, Error, Fir, Initial, Pipeline, SosFilter, Stage};

const TOL: f64 = 1e-5;

/// For recursive filters (see the module comment).
const IIR_TOL: f64 = 2e-5;

fn sos_from(reference: &Reference, key: &str) -> Sos {
    let rows = reference
        .values(key)
        .chunks_exact(6)
        .map(|r| [r[0], r[1], r[2], r[3], r[4], r[5]])
        .collect();
    Sos::new(rows).unwrap()
}

/// Runs `run` on the reference input (`[channels, samples]`) and compares with `key`.
fn check(
    client: &Client,
    reference: &Reference,
    key: &str,
    tol: f64,
    out_len: impl Fn(usize) -> usize,
    run: impl FnOnce(&Client, &DeviceArray, &DeviceArray),
) {
    let shape = reference.shape("x");
    let (channels, samples) = (shape[0], shape[1]);
    let input =
        DeviceArray::from_host(client, &reference.values_f32("x"), channels, samples).unwrap();
    let n_out = out_len(samples);
    let output = DeviceArray::empty(client, channels, n_out).unwrap();
    run(client, &input, &output);
    let expected = reference.values(key);
    assert_eq!(expected.len(), channels * n_out, "{key}: output length");
    let actual = output.to_host(client).unwrap();
    let scale = expected.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let worst = actual
        .iter()
        .zip(expected)
        .map(|(&a, &e)| (f64::from(a) - e).abs())
        .fold(0.0, f64::max);
    eprintln!(
        "{key}: largest difference {:.2e} of the output's peak",
        worst / scale
    );
    assert_close(key, &actual, expected, tol * scale, 0.0);
}

#[test]
fn iir_filters_match_scipy() {
    for_each_runtime(|_, client| {
        for (case, sos_key, keys) in [
            (
                "filters_highpass",
                "sos",
                &["sosfiltfilt", "sosfilt", "sosfilt_steady"][..],
            ),
            ("filters_bandpass", "sos", &["sosfiltfilt"][..]),
            ("filters_bandpass", "notch", &["notch_sosfiltfilt"][..]),
        ] {
            let reference = Reference::load(case);
            let sos = sos_from(&reference, sos_key);
            // The 60 Hz notch (Q = 30) has poles 2e-4 from the unit circle: the direct form
            // needed a bound of 1e-3 there, the increment form (decision 0007) meets IIR_TOL.
            let tolerance = IIR_TOL;
            for &key in keys {
                // Small blocks too, so the scan joins many blocks on these short inputs.
                for block_len in [256, 37] {
                    let mut filter = SosFilter::with_block_len(
                        match key {
                            "sosfilt" => SosFilter::forward(&sos, Initial::Zero),
                            "sosfilt_steady" => SosFilter::forward(&sos, Initial::SteadyState),
                            _ => SosFilter::zero_phase(&sos),
                        }
                        .unwrap(),
                        block_len,
                    )
                    .unwrap();
                    check(
                        client,
                        &reference,
                        key,
                        tolerance,
                        |n| n,
                        |c, i, o| {
                            filter.run(c, i, o).unwrap();
                        },
                    );
                }
            }
        }
    });
}

#[test]
fn fir_resample_and_decimate_match_scipy() {
    for_each_runtime(|_, client| {
        let reference = Reference::load("filters_fir");
        let mut lfilter = Fir::lfilter(reference.values("taps")).unwrap();
        check(
            client,
            &reference,
            "lfilter",
            TOL,
            |n| n,
            |c, i, o| {
                lfilter.run(c, i, o).unwrap();
            },
        );
        for (up, down) in [(3, 2), (1, 3), (2, 1)] {
            let mut resampler = Fir::resample_poly(up, down).unwrap();
            let key = format!("resample_{up}_{down}");
            let out_len = |n: usize| (n * up).div_ceil(down);
            check(client, &reference, &key, TOL, out_len, |c, i, o| {
                resampler.run(c, i, o).unwrap();
            });
        }
        for q in [2, 3] {
            for (filter, name, tol) in [
                (DecimateFilter::Iir, "iir", IIR_TOL),
                (DecimateFilter::Fir, "fir", TOL),
            ] {
                let mut decimate = Decimate::new(q, filter).unwrap();
                let key = format!("decimate_{name}_{q}");
                check(
                    client,
                    &reference,
                    &key,
                    tol,
                    |n| n.div_ceil(q),
                    |c, i, o| {
                        decimate.run(c, i, o).unwrap();
                    },
                );
            }
        }
    });
}

/// Random inputs of odd sizes against the `f64` host references (themselves tested against
/// scipy in `tests/design.rs`).
#[test]
fn filters_match_host_reference_on_random_inputs() {
    for_each_runtime(|_, client| {
        let mut rng = Rng::new(7);
        let sos = butter(2, Band::Bandpass(300.0, 5000.0), 30_000.0).unwrap();
        for (channels, samples) in [(1, 31), (3, 17 + 30), (7, 1001), (5, 4099)] {
            let x: Vec<f64> = (0..channels * samples)
                .map(|_| rng.uniform(-200.0, 200.0))
                .collect();
            let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            let input = DeviceArray::from_host(client, &x32, channels, samples).unwrap();
            let output = DeviceArray::empty(client, channels, samples).unwrap();
            let mut filter = SosFilter::zero_phase(&sos).unwrap();
            filter.run(client, &input, &output).unwrap();
            let expected: Vec<f64> = x
                .chunks(samples)
                .flat_map(|row| host::sosfiltfilt(&sos, row, None).unwrap())
                .collect();
            let actual = output.to_host(client).unwrap();
            let scale = expected.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            assert_close(
                &format!("sosfiltfilt {channels}x{samples}"),
                &actual,
                &expected,
                IIR_TOL * scale,
                0.0,
            );

            let taps: Vec<f64> = (0..13).map(|_| rng.uniform(-1.0, 1.0)).collect();
            let mut fir = Fir::lfilter(&taps).unwrap();
            fir.run(client, &input, &output).unwrap();
            let expected: Vec<f64> = x
                .chunks(samples)
                .flat_map(|row| host::lfilter(&taps, &[1.0], row, None).unwrap())
                .collect();
            let actual = output.to_host(client).unwrap();
            let scale = expected.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            assert_close(
                &format!("lfilter {channels}x{samples}"),
                &actual,
                &expected,
                TOL * scale,
                0.0,
            );
        }
    });
}

/// Processing a recording in windows with halos of the pipeline's settling length, keeping
/// each window's owned samples, equals processing it whole: within `2 IIR_TOL`, since both runs
/// carry their own `f32` rounding (each within `IIR_TOL` of the `f64` result).
#[test]
fn chunked_filtering_equals_whole() {
    for_each_runtime(|_, client| {
        let (channels, samples) = (3, 5003);
        let mut rng = Rng::new(3);
        let x: Vec<f32> = (0..channels * samples)
            .map(|_| rng.uniform(-100.0, 100.0) as f32)
            .collect();
        let highpass = butter(3, Band::Highpass(300.0), 30_000.0).unwrap();
        let make = || {
            Pipeline::new()
                .with(SosFilter::zero_phase(&highpass).unwrap())
                .with(Fir::lfilter(&[0.25, 0.5, 0.25]).unwrap())
        };
        let mut whole = make();
        let halo = whole.settling();
        assert!(
            halo > 100,
            "a 300 Hz high-pass settles over hundreds of samples"
        );
        let input = DeviceArray::from_host(client, &x, channels, samples).unwrap();
        let result = whole.run(client, &input).unwrap();
        assert_eq!(result.shape(), input.shape());
        let expected: Vec<f64> = result
            .to_host(client)
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect();
        let scale = expected.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        for window in [997, 1500, 2048] {
            let mut pipeline = make();
            let mut chunked = vec![0f32; x.len()];
            let mut start = 0;
            while start < samples {
                let end = (start + window).min(samples);
                let (lo, hi) = (start.saturating_sub(halo), (end + halo).min(samples));
                let n = hi - lo;
                let part: Vec<f32> = (0..channels)
                    .flat_map(|c| x[c * samples + lo..c * samples + hi].iter().copied())
                    .collect();
                let input = DeviceArray::from_host(client, &part, channels, n).unwrap();
                let out = pipeline
                    .run(client, &input)
                    .unwrap()
                    .to_host(client)
                    .unwrap();
                for c in 0..channels {
                    chunked[c * samples + start..c * samples + end]
                        .copy_from_slice(&out[c * n + start - lo..c * n + end - lo]);
                }
                start = end;
            }
            assert_close(
                &format!("windows of {window} with halo {halo}"),
                &chunked,
                &expected,
                2.0 * IIR_TOL * scale,
                0.0,
            );
        }
    });
}

/// A NaN sample makes its channel's filtered outputs NaN (from it onwards for a causal filter,
/// all of them for a zero-phase one) and leaves the other channels finite and correct.
#[test]
fn nan_propagates_within_its_channel() {
    for_each_runtime(|_, client| {
        let (channels, samples) = (2, 300);
        let mut x: Vec<f32> = (0..channels * samples).map(|i| (i % 17) as f32).collect();
        x[samples + 100] = f32::NAN;
        let input = DeviceArray::from_host(client, &x, channels, samples).unwrap();
        let output = DeviceArray::empty(client, channels, samples).unwrap();
        let sos = butter(2, Band::Lowpass(1000.0), 30_000.0).unwrap();
        let mut forward = SosFilter::forward(&sos, Initial::Zero).unwrap();
        forward.run(client, &input, &output).unwrap();
        let y = output.to_host(client).unwrap();
        assert!(y[..samples].iter().all(|v| v.is_finite()));
        assert!(y[samples..samples + 100].iter().all(|v| v.is_finite()));
        assert!(y[samples + 100..].iter().all(|v| v.is_nan()));
        let mut zero_phase = SosFilter::zero_phase(&sos).unwrap();
        zero_phase.run(client, &input, &output).unwrap();
        let y = output.to_host(client).unwrap();
        assert!(y[..samples].iter().all(|v| v.is_finite()));
        assert!(y[samples..].iter().all(|v| v.is_nan()));
        let mut fir = Fir::lfilter(&[1.0, 1.0, 1.0]).unwrap();
        fir.run(client, &input, &output).unwrap();
        let y = output.to_host(client).unwrap();
        let nan: Vec<usize> = (0..samples).filter(|&s| y[samples + s].is_nan()).collect();
        assert_eq!(nan, vec![100, 101, 102]);
    });
}

#[test]
fn bad_arguments_are_errors() {
    for_each_runtime(|_, client| {
        let sos = butter(3, Band::Highpass(300.0), 30_000.0).unwrap();
        let mut filter = SosFilter::zero_phase(&sos).unwrap();
        let input = DeviceArray::from_host(client, &[0.0; 40], 2, 20).unwrap();
        let output = DeviceArray::empty(client, 2, 20).unwrap();
        // Not longer than padlen (12 for an order-3 design: a first- and a second-order section).
        let short = input.front(2, 12).unwrap();
        let err = filter
            .run(client, &short, &output.front(2, 12).unwrap())
            .unwrap_err();
        assert!(matches!(err, Error::InvalidParameter { .. }), "{err}");
        // A buffer smaller than the window is refused where the array is made.
        let err = input.front(2, 30).unwrap_err();
        assert!(matches!(err, Error::ArrayShape { .. }), "{err}");
        // An output shaped differently from what the filter writes.
        let err = filter.run(client, &input, &short).unwrap_err();
        assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
        assert!(Fir::lfilter(&[]).is_err());
        assert!(Fir::lfilter(&[1.0, f64::NAN]).is_err());
        assert!(Fir::resample_poly(0, 2).is_err());
        assert!(Decimate::new(0, DecimateFilter::Iir).is_err());
        // A resampler is not a stage: it changes the window length.
        let mut resampler = Fir::resample_poly(2, 1).unwrap();
        let err = resampler.apply(client, &input, &output).unwrap_err();
        assert!(matches!(err, Error::InvalidParameter { .. }), "{err}");
    });
}

/// The IIR decimator at large factors (its order-8 Chebyshev I cut-off at `0.8 / q` of
/// Nyquist puts poles near `z = 1`): within [`IIR_TOL`] of the `f64` host `decimate` (itself
/// tested against scipy). The direct-form kernels gave `3.1e-5` at `q = 10..13`; the
/// increment form of decision 0007 brings these within the common bound.
#[test]
fn iir_decimate_large_factors_within_bound() {
    for_each_runtime(|_, client| {
        let mut rng = Rng::new(13);
        let (channels, samples) = (2, 6007);
        let x: Vec<f64> = (0..channels * samples)
            .map(|i| 300.0 + 40.0 * (i as f64 * 0.003).sin() + rng.uniform(-20.0, 20.0))
            .collect();
        let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        let input = DeviceArray::from_host(client, &x32, channels, samples).unwrap();
        for q in [10, 13] {
            let mut decimate = Decimate::new(q, DecimateFilter::Iir).unwrap();
            let output =
                DeviceArray::empty(client, channels, decimate.output_len(samples)).unwrap();
            decimate.run(client, &input, &output).unwrap();
            let expected: Vec<f64> = x
                .chunks(samples)
                .flat_map(|row| host::decimate(row, q, DecimateFilter::Iir).unwrap())
                .collect();
            let actual = output.to_host(client).unwrap();
            let scale = expected.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let worst = actual
                .iter()
                .zip(&expected)
                .map(|(&a, &e)| (f64::from(a) - e).abs())
                .fold(0.0, f64::max);
            eprintln!(
                "decimate q = {q}: largest difference {:.2e} of the peak",
                worst / scale
            );
            assert_close(
                &format!("decimate q = {q}"),
                &actual,
                &expected,
                IIR_TOL * scale,
                0.0,
            );
        }
    });
}
