//! IIR filters with poles near `z = 1` (cut-offs from fs / 30 000 to fs / 4) against scipy's
//! `float64` `sosfilt` / `sosfiltfilt`, at several block lengths (decision 0007).
//!
//! The references (`tests/reference/lowcut_*.ref`, written by `cases_lowcut.py`) hold scipy's
//! designs, each output's peak and its values at chosen indices; the input is computed here
//! from the same formula as the script (an offset of 500 times the noise, two sines, a hash
//! noise), rounded to `f32` on both sides. Errors are measured relative to the output's peak.
//!
//! `low_cut_filters_match_scipy` runs the representative subset (`lowcut_ci`) in CI;
//! `low_cut_full_sweep` (ignored: minutes on lavapipe) runs the full sweep and prints, per
//! cut-off and mode, the worst error next to a plain sample-by-sample `f32` direct-form filter's
//! (the floor the issue compares against).

mod common;

use common::Reference;
use cubecl::client::Client;
use dspk_core::rng::SplitMix64;
use dspk_core::test_util::for_each_runtime;
use dspk_ops::design::Sos;
use dspk_ops::{DeviceArray, Initial, MAX_BLOCK_LEN, MAX_BLOCKS, SosFilter};

/// The stated bound: largest difference from scipy `f64`, relative to the output's peak, for
/// Butterworth and Chebyshev I filters of orders 1-8 with cut-offs down to fs / 30 000 on
/// signals with an offset 500 times the noise (decision 0007 gives the measured figures).
const BOUND: f64 = 1e-3;

/// The sampling rate of the references.
const FS: f64 = 30000.0;

/// The test input of `cases_lowcut.signal`, in the same operation order (the script's
/// `splitmix(n)` is `SplitMix64::at(n, 0)`).
fn signal(samples: usize, f_in: f64, f_out: f64) -> Vec<f32> {
    use std::f64::consts::PI;
    (0..samples)
        .map(|i| {
            let n = i as f64;
            let u = (SplitMix64::at(i as u64, 0) >> 11) as f64 * 2f64.powi(-53);
            let x = 500.0
                + 20.0 * (2.0 * PI * f_in * n / FS).sin()
                + 20.0 * (2.0 * PI * f_out * n / FS + 1.0).sin()
                + 12f64.sqrt() * (u - 0.5);
            x as f32
        })
        .collect()
}

/// How a case is filtered: the reference's mode code.
fn mode_name(mode: usize) -> &'static str {
    [
        "forward from zero",
        "forward from steady state",
        "zero phase",
    ][mode]
}

/// The device filter for `mode`.
fn device_filter(sos: &Sos, mode: usize) -> SosFilter {
    match mode {
        0 => SosFilter::forward(sos, Initial::Zero),
        1 => SosFilter::forward(sos, Initial::SteadyState),
        _ => SosFilter::zero_phase(sos),
    }
    .unwrap()
}

/// The default block length of [`SosFilter`] (what `None` stands for in the sweeps).
const DEFAULT_BLOCK_LEN: usize = 1024;

/// One filter of a sweep: its description, and its input.
struct Case {
    tag: String,
    label: String,
    sos: Sos,
    cutoff_ratio: f64,
    input: Vec<f32>,
}

impl Case {
    fn load(reference: &Reference, index: usize) -> Self {
        let tag = format!("c{index}");
        let rows = reference
            .values(&format!("{tag}_sos"))
            .chunks_exact(6)
            .map(|r| [r[0], r[1], r[2], r[3], r[4], r[5]])
            .collect();
        let meta = reference.values(&format!("{tag}_filter"));
        let (kind, order, cutoff, f_in, f_out, samples) = (
            meta[0],
            meta[1],
            meta[2],
            meta[3],
            meta[4],
            meta[5] as usize,
        );
        let family = if kind < 2.0 { "butter" } else { "cheby1" };
        let band = if (kind as usize).is_multiple_of(2) {
            "highpass"
        } else {
            "bandpass"
        };
        Self {
            label: format!(
                "{family}({order}, {band} from fs/{:.0}) x {samples}",
                FS / cutoff
            ),
            tag,
            sos: Sos::new(rows).unwrap(),
            cutoff_ratio: FS / cutoff,
            input: signal(samples, f_in, f_out),
        }
    }

    /// The largest difference from scipy at the reference's indices, relative to the peak of
    /// scipy's output, of `output` (the whole filtered signal) for `mode`.
    fn error(&self, reference: &Reference, mode: usize, output: &[f64]) -> f64 {
        let key = |what: &str| format!("{}_m{mode}_{what}", self.tag);
        let peak = reference.scalar(&key("peak"));
        reference
            .values(&key("index"))
            .iter()
            .zip(reference.values(&key("value")))
            .map(|(&i, &v)| (output[i as usize] - v).abs() / peak)
            .fold(0.0, f64::max)
    }
}

/// The output of `filter` on `input`.
fn run_device(client: &Client, filter: &mut SosFilter, input: &DeviceArray) -> Vec<f64> {
    let output = DeviceArray::empty(client, 1, input.samples()).unwrap();
    filter.run(client, input, &output).unwrap();
    output
        .to_host(client)
        .unwrap()
        .into_iter()
        .map(f64::from)
        .collect()
}

/// Runs every case of reference `name` in every mode at each `(block length, longest signal)`
/// of `block_lens` (a block length is skipped on longer signals), calling `report` with the
/// case, mode, block length and error; returns the worst error.
fn sweep(
    client: &Client,
    name: &str,
    block_lens: &[(Option<usize>, usize)],
    mut report: impl FnMut(&Case, usize, Option<usize>, f64),
) -> f64 {
    let reference = Reference::load(name);
    let count = reference.scalar("count") as usize;
    let mut worst = 0.0f64;
    for index in 0..count {
        let case = Case::load(&reference, index);
        let samples = case.input.len();
        let input = DeviceArray::from_host(client, &case.input, 1, samples).unwrap();
        for mode in 0..3 {
            // built once per mode: its settling length takes long to compute for poles this
            // close to 1 in a debug build
            let mut filter = device_filter(&case.sos, mode);
            for &(block_len, max_samples) in block_lens {
                if samples > max_samples {
                    continue;
                }
                filter = filter
                    .with_block_len(block_len.unwrap_or(DEFAULT_BLOCK_LEN))
                    .unwrap();
                let output = run_device(client, &mut filter, &input);
                let error = case.error(&reference, mode, &output);
                report(&case, mode, block_len, error);
                worst = worst.max(error);
            }
        }
    }
    worst
}

#[test]
fn low_cut_filters_match_scipy() {
    for_each_runtime(|_, client| {
        let blocks = [
            (None, usize::MAX),
            (Some(37), usize::MAX),
            (Some(1), 100_000),
        ];
        let worst = sweep(
            client,
            "lowcut_ci",
            &blocks,
            |case, mode, block_len, error| {
                eprintln!(
                    "{} {}, blocks {block_len:?}: {error:.2e}",
                    case.label,
                    mode_name(mode)
                );
                assert!(
                    error <= BOUND,
                    "{} {} with blocks of {block_len:?}: error {error:.3e} of the peak, bound \
                 {BOUND:e}",
                    case.label,
                    mode_name(mode)
                );
            },
        );
        eprintln!("worst error {worst:.3e} of the output's peak");
    });
}

/// A scan over [`MAX_BLOCKS`] blocks is right (compared with the default blocks), one over it
/// refused: on lavapipe a kernel invocation stopped after about 65 535 loop iterations, and
/// blocks of 7 over 10^6 samples with five sections (the scan walking two blocks per
/// iteration) went wrong from block 131 070 on.
#[test]
fn long_scans_are_exact_or_refused() {
    use dspk_ops::design::{Band, butter};
    for_each_runtime(|_, client| {
        let sos = butter(5, Band::Bandpass(100.0, 13500.0), FS).unwrap();
        let samples = 7 * MAX_BLOCKS;
        let x: Vec<f32> = signal(samples, 2000.0, 20.0);
        let input = DeviceArray::from_host(client, &x, 1, samples).unwrap();
        let mut filter = SosFilter::forward(&sos, Initial::Zero).unwrap();
        let expected = run_device(client, &mut filter, &input);
        let mut filter = filter.with_block_len(7).unwrap();
        let actual = run_device(client, &mut filter, &input);
        let peak = expected.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let worst = actual
            .iter()
            .zip(&expected)
            .map(|(a, e)| (a - e).abs())
            .fold(0.0, f64::max);
        assert!(
            worst <= 1e-4 * peak,
            "blocks of 7: {worst:.3e} of {peak:.3e}"
        );
        let longer =
            DeviceArray::from_host(client, &signal(samples + 1, 2000.0, 20.0), 1, samples + 1)
                .unwrap();
        let output = DeviceArray::empty(client, 1, samples + 1).unwrap();
        let result = filter.run(client, &longer, &output);
        assert!(
            matches!(result, Err(dspk_ops::Error::InvalidParameter { .. })),
            "{result:?}"
        );
        assert!(
            SosFilter::forward(&sos, Initial::Zero)
                .unwrap()
                .with_block_len(MAX_BLOCK_LEN + 1)
                .is_err()
        );
    });
}

/// A plain sample-by-sample `f32` filter in scipy's direct form II transposed: the floor.
fn floor_filter(sos: &Sos, x: &[f32], mode: usize) -> Vec<f64> {
    let sections: Vec<[f32; 6]> = sos.sections().iter().map(|s| s.map(|c| c as f32)).collect();
    let zi = dspk_ops::design::sosfilt_zi(sos).unwrap();
    let pass = |x: &[f32], steady: bool| -> Vec<f32> {
        let mut z: Vec<[f32; 2]> = zi
            .iter()
            .map(|z| {
                if steady {
                    [z[0] as f32 * x[0], z[1] as f32 * x[0]]
                } else {
                    [0.0; 2]
                }
            })
            .collect();
        x.iter()
            .map(|&v| {
                let mut u = v;
                for (s, z) in sections.iter().zip(&mut z) {
                    let y = s[0] * u + z[0];
                    z[0] = s[1] * u - s[4] * y + z[1];
                    z[1] = s[2] * u - s[5] * y;
                    u = y;
                }
                u
            })
            .collect()
    };
    let out = match mode {
        0 | 1 => pass(x, mode == 1),
        _ => {
            let (n, pad) = (x.len(), dspk_ops::design::host::sosfiltfilt_padlen(sos));
            let mut ext: Vec<f32> = (0..pad).rev().map(|i| 2.0 * x[0] - x[i + 1]).collect();
            ext.extend_from_slice(x);
            ext.extend((0..pad).map(|i| 2.0 * x[n - 1] - x[n - 2 - i]));
            let mut y = pass(&ext, true);
            y.reverse();
            let mut y = pass(&y, true);
            y.reverse();
            y[pad..pad + n].to_vec()
        }
    };
    out.into_iter().map(f64::from).collect()
}

/// The full sweep of the issue (run once by hand, `--ignored --nocapture`; its summary is
/// quoted in decision 0007).
#[test]
#[ignore = "minutes on lavapipe: the full sweep behind decision 0007"]
fn low_cut_full_sweep() {
    for_each_runtime(|_, client| {
        let reference = Reference::load("lowcut_full");
        let blocks = [
            (Some(1), 100_000),
            (Some(7), 700_000),
            (Some(64), 7_000_000),
            (None, usize::MAX),
            (Some(8192), usize::MAX),
        ];
        // worst error and worst floor per (cut-off ratio, mode)
        let mut table: std::collections::BTreeMap<(u64, usize), (f64, f64)> =
            std::collections::BTreeMap::new();
        let mut floors: std::collections::HashMap<(String, usize), f64> =
            std::collections::HashMap::new();
        let worst = sweep(
            client,
            "lowcut_full",
            &blocks,
            |case, mode, block_len, error| {
                let floor = *floors.entry((case.tag.clone(), mode)).or_insert_with(|| {
                    case.error(
                        &reference,
                        mode,
                        &floor_filter(&case.sos, &case.input, mode),
                    )
                });
                if error > BOUND {
                    eprintln!(
                        "OVER {} {}, blocks {block_len:?}: {error:.2e} (floor {floor:.2e})",
                        case.label,
                        mode_name(mode)
                    );
                }
                let entry = table
                    .entry((case.cutoff_ratio.round() as u64, mode))
                    .or_insert((0.0, 0.0));
                entry.0 = entry.0.max(error);
                entry.1 = entry.1.max(floor);
            },
        );
        for ((ratio, mode), (error, floor)) in &table {
            eprintln!(
                "cut-off fs/{ratio:>5} {:<26} worst {error:.2e}  plain f32 {floor:.2e}",
                mode_name(*mode)
            );
        }
        eprintln!("worst error {worst:.3e} of the output's peak");
        assert!(worst <= BOUND, "worst {worst:.3e} over the bound {BOUND:e}");
    });
}

/// Time of the spike sorter's filters on a 384 x 60 000 window (the median of three runs
/// after a warm-up), for decision 0007's before/after figures:
/// `cargo test --release --test low_cut -- --ignored --nocapture sorter_filter_timing`.
#[test]
#[ignore = "timing, run by hand in release"]
fn sorter_filter_timing() {
    use dspk_ops::design::{Band, butter, iirnotch};
    for_each_runtime(|_, client| {
        let (channels, samples) = (384, 60_000);
        let x: Vec<f32> = (0..channels * samples)
            .map(|i| 500.0 + 30.0 * ((i % samples) as f32 * 0.01).sin())
            .collect();
        let input = DeviceArray::from_host(client, &x, channels, samples).unwrap();
        let output = DeviceArray::empty(client, channels, samples).unwrap();
        let filters = [
            (
                "3rd-order 300 Hz high-pass",
                butter(3, Band::Highpass(300.0), FS),
            ),
            (
                "5th-order 250-5000 Hz band-pass",
                butter(5, Band::Bandpass(250.0, 5000.0), FS),
            ),
            ("60 Hz notch (Q 30)", iirnotch(60.0, 30.0, FS)),
        ];
        for (name, sos) in filters {
            let mut filter = SosFilter::zero_phase(&sos.unwrap()).unwrap();
            let mut times = Vec::new();
            for _ in 0..4 {
                let started = std::time::Instant::now();
                filter.run(client, &input, &output).unwrap();
                output.to_host(client).unwrap();
                times.push(started.elapsed().as_secs_f64() * 1e3);
            }
            let mut runs = times[1..].to_vec();
            runs.sort_by(f64::total_cmp);
            eprintln!(
                "{name}, zero phase, {channels} x {samples}: {:.0} ms",
                runs[1]
            );
        }
    });
}
