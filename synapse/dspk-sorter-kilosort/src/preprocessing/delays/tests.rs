//! Channel delays against their `f64` references, on every compiled runtime.

use dspk_core::ChunkSchedule;
use dspk_core::test_util::{Rng, assert_close_f64, for_each_runtime};

use super::estimate::lag_products;
use super::reference;
use super::{ChannelDelays, DelayAligner, DelayEstimator, emusort_max_lag};
use crate::Error;
use crate::runner::test_windows::cut_window;

/// `channels x samples` Gaussian noise, channel `c` scaled by `1 + c / 2` and offset by `c`.
fn noise(channels: usize, samples: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    (0..channels * samples)
        .map(|i| {
            let c = (i / samples) as f64;
            ((1.0 + c / 2.0) * rng.normal() + c) as f32
        })
        .collect()
}

/// The `Error::Input` reason of `result`, panicking on anything else.
fn input_error<T: std::fmt::Debug>(what: &str, result: crate::Result<T>) -> String {
    match result {
        Err(Error::Input { reason, .. }) => reason,
        other => panic!("{what}: expected an input error, got {other:?}"),
    }
}

#[test]
fn emusort_max_lag_is_two_milliseconds() {
    assert_eq!(emusort_max_lag(30_000.0), 60);
    assert_eq!(emusort_max_lag(44_100.0), 88);
    assert_eq!(emusort_max_lag(2_000.0), 4);
}

#[test]
fn lag_products_leave_out_samples_outside_the_array() {
    // 10 samples, range 0..6, lags -2..=2: t - l must lie in 0..10.
    assert_eq!(lag_products(&(0..6), 10, 2), vec![6, 6, 6, 5, 4]);
    // Range 5..10 at the array's end: t - l < 10 drops t = 8, 9 for l = -2.
    assert_eq!(lag_products(&(5..10), 10, 2), vec![3, 4, 5, 5, 5]);
}

#[test]
fn estimator_matches_reference() {
    // Windows of (5 channels, D = 7) own 0..500 (read 0..511), 500..1000 (491..1011),
    // 1000..1237 (991..1237): the first and last reach the recording's ends, where lags run
    // out of samples. With D = 40 the lags span two blocks of the product kernel.
    for (channels, total, d, window, left, right) in
        [(5, 1237, 7, 500, 9, 11), (3, 911, 40, 400, 45, 41)]
    {
        let data = noise(channels, total, d as u64);
        let schedule = ChunkSchedule::new(total as u64, window, left, right).unwrap();
        for_each_runtime(|_, client| {
            let mut estimator = DelayEstimator::new(client, channels, d).unwrap();
            let mut expected = vec![0.0; channels * channels * (2 * d + 1)];
            let mut ranges = 0;
            let mut add = |cc: Vec<f64>| {
                for (e, v) in expected.iter_mut().zip(cc) {
                    *e += v;
                }
                ranges += 1;
            };
            for index in 0..schedule.len() {
                let (window, host) = cut_window(client, &data, channels, &schedule, index);
                estimator.accumulate(client, &window).unwrap();
                add(reference::correlation(
                    &host,
                    channels,
                    window.owned_local(),
                    d,
                ));
                if index == 1 {
                    // Part of a window, as a batch inside a longer window.
                    let owned = window.owned_local();
                    let part = owned.start + 3..owned.end - 101;
                    estimator
                        .accumulate_range(client, &window, part.clone())
                        .unwrap();
                    add(reference::correlation(&host, channels, part, d));
                }
            }
            assert_eq!(estimator.ranges(), ranges);
            let expected: Vec<f64> = expected.iter().map(|v| v / ranges as f64).collect();
            let what = format!("CC of {channels} channels, D = {d}");
            assert_close_f64(&what, &estimator.correlation(), &expected, 1e-6, 2e-5);
            let found = estimator.finish().unwrap();
            assert_eq!(found.delays.len(), channels);
            assert_eq!(found.delays[found.reference], 0);
        });
    }
}

#[test]
fn estimator_does_not_depend_on_units_per_cube() {
    // Cubes of 1, 2, 4, ... units, up to what each kernel was tuned for and the device allows:
    // each lag's sums run in the same order whoever computes them, so the correlations are the
    // same numbers, and they match the reference. D = 40: the lags span two blocks of the
    // product kernel.
    let (channels, total, d, window) = (3, 1301, 40, 600);
    let data = noise(channels, total, 17);
    let schedule = ChunkSchedule::new(total as u64, window, 43, 45).unwrap();
    let expected = {
        let mut sum = vec![0.0; channels * channels * (2 * d + 1)];
        for index in 0..schedule.len() {
            let window = schedule.window(index).unwrap();
            let read = window.read();
            let host: Vec<f32> = (0..channels)
                .flat_map(|c| &data[c * total + read.start as usize..c * total + read.end as usize])
                .copied()
                .collect();
            let owned = window.valid_local();
            for (e, v) in sum
                .iter_mut()
                .zip(reference::correlation(&host, channels, owned, d))
            {
                *e += v;
            }
        }
        sum.iter()
            .map(|v| v / schedule.len() as f64)
            .collect::<Vec<f64>>()
    };
    for_each_runtime(|target, client| {
        let most = [
            dspk_ops::launch::cube_units(client, dspk_ops::launch::CUBE_DIM),
            dspk_ops::launch::cube_units(client, 64),
        ];
        let mut first: Option<Vec<f64>> = None;
        for shift in 0..=most[0].ilog2() {
            let units = (1 << shift, (1 << shift).min(most[1]));
            let mut estimator = DelayEstimator::new(client, channels, d)
                .unwrap()
                .with_units(units.0, units.1);
            for index in 0..schedule.len() {
                let (window, _) = cut_window(client, &data, channels, &schedule, index);
                estimator.accumulate(client, &window).unwrap();
            }
            let cc = estimator.correlation();
            let what = format!("{target}: CC with cubes of {units:?} units");
            assert_close_f64(&what, &cc, &expected, 1e-6, 2e-5);
            match &first {
                None => first = Some(cc),
                Some(first) => assert!(first == &cc, "{what} differ from cubes of 1 unit"),
            }
        }
    });
}

/// A spike train of random-shaped pulses common to all `channels`, channel `b` carrying it
/// `planted[b]` samples late with its own gain, plus noise.
fn planted_recording(channels: usize, total: usize, planted: &[i32], seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    let width = 9;
    let mut train = vec![0.0f64; total];
    let mut t = 20 + rng.below(40) as usize;
    while t + width < total {
        for v in &mut train[t..t + width] {
            *v = 3.0 * rng.normal();
        }
        t += 60 + rng.below(80) as usize;
    }
    let mut data = vec![0.0f32; channels * total];
    for (b, &delay) in planted.iter().enumerate() {
        let gain = rng.uniform(0.5, 2.0);
        for t in 0..total {
            let source = t as i64 - i64::from(delay);
            let signal = if (0..total as i64).contains(&source) {
                train[source as usize]
            } else {
                0.0
            };
            data[b * total + t] = (gain * signal + 0.05 * rng.normal()) as f32;
        }
    }
    data
}

#[test]
fn planted_delays_are_recovered_and_removed() {
    let (channels, total, d) = (7, 6001, 12);
    let mut rng = Rng::new(5);
    let planted: Vec<i32> = (0..channels).map(|_| rng.below(13) as i32 - 6).collect();
    let spread = planted.iter().max().unwrap() - planted.iter().min().unwrap();
    assert!(spread >= 8, "planted delays {planted:?}");
    let data = planted_recording(channels, total, &planted, 6);
    let schedule = ChunkSchedule::symmetric(total as u64, 2000, d as u64).unwrap();
    for_each_runtime(|_, client| {
        let mut estimator = DelayEstimator::new(client, channels, d).unwrap();
        // Not the last window, as EMUsort: it owns one sample, too few for the lags.
        for index in 0..schedule.len() - 1 {
            let (window, _) = cut_window(client, &data, channels, &schedule, index);
            estimator.accumulate(client, &window).unwrap();
        }
        let found = estimator.finish().unwrap();
        let r = found.reference;
        let expected: Vec<i32> = planted.iter().map(|p| p - planted[r]).collect();
        assert_eq!(found.delays, expected, "planted {planted:?}, reference {r}");
        assert_eq!(
            found.max_abs(),
            expected
                .iter()
                .map(|e| e.unsigned_abs() as usize)
                .max()
                .unwrap()
        );

        // Aligned windows (halos of `D` more than the aligner consumes) show no delay left.
        let mut aligner = DelayAligner::new(client, &found.delays, total).unwrap();
        let halo = (d + aligner.halo()) as u64;
        let schedule = ChunkSchedule::symmetric(total as u64, 1500, halo).unwrap();
        let mut again = DelayEstimator::new(client, channels, d).unwrap();
        for index in 0..schedule.len() - 1 {
            let (window, _) = cut_window(client, &data, channels, &schedule, index);
            again
                .accumulate(client, aligner.align(client, &window).unwrap())
                .unwrap();
        }
        assert_eq!(again.finish().unwrap().delays, vec![0; channels]);
    });
}

#[test]
fn aligner_matches_reference_bit_for_bit() {
    let (channels, total) = (3, 613);
    let data = noise(channels, total, 2);
    // Halos shorter and longer than the delays, and windows at the recording's ends.
    let schedule = ChunkSchedule::new(total as u64, 200, 6, 3).unwrap();
    for_each_runtime(|_, client| {
        for delays in [vec![-5, 0, 4], vec![7, 7, -2], vec![0, 0, 0]] {
            let mut aligner = DelayAligner::new(client, &delays, 300).unwrap();
            assert_eq!(
                aligner.halo(),
                delays
                    .iter()
                    .map(|d| d.unsigned_abs() as usize)
                    .max()
                    .unwrap()
            );
            for index in 0..schedule.len() {
                let (window, host) = cut_window(client, &data, channels, &schedule, index);
                let out = aligner.align(client, &window).unwrap();
                assert_eq!(out.window(), window.window());
                let got = out.array().to_host(client).unwrap();
                let want = reference::align(&host, &delays);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "delays {delays:?}, window {index}");
            }
        }
    });
}

#[test]
fn alignment_does_not_depend_on_window_cuts() {
    let (channels, total) = (5, 1501);
    let data = noise(channels, total, 3);
    let mut rng = Rng::new(4);
    let delays: Vec<i32> = (0..channels).map(|_| rng.below(19) as i32 - 9).collect();
    let whole = reference::align(&data, &delays);
    for_each_runtime(|_, client| {
        let mut aligner = DelayAligner::new(client, &delays, total).unwrap();
        let h = aligner.halo() as u64;
        assert!(h > 2, "delays {delays:?}");
        let mut owned_by_cut = Vec::new();
        for (window_len, left, right) in [(400, h, h), (613, h + 3, h), (257, 2, 1)] {
            let schedule = ChunkSchedule::new(total as u64, window_len, left, right).unwrap();
            let mut owned = vec![0.0f32; channels * total];
            for index in 0..schedule.len() {
                let (window, _) = cut_window(client, &data, channels, &schedule, index);
                let trusted = aligner.trusted_local(window.window(), total as u64);
                let out = aligner.align(client, &window).unwrap();
                let got = out.array().to_host(client).unwrap();
                let n = out.array().samples();
                let read = out.window().read().start as usize;
                for b in 0..channels {
                    for t in out.owned_local() {
                        owned[b * total + read + t] = got[b * n + t];
                    }
                    for t in trusted.clone() {
                        assert_eq!(
                            got[b * n + t].to_bits(),
                            whole[b * total + read + t].to_bits(),
                            "window {window_len}, channel {b}, sample {}",
                            read + t
                        );
                    }
                }
                if left >= h && right >= h {
                    let owned = out.owned_local();
                    assert!(trusted.start <= owned.start && owned.end <= trusted.end);
                }
            }
            if left >= h && right >= h {
                owned_by_cut.push(owned);
            }
        }
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(owned_by_cut.len(), 2);
        assert_eq!(bits(&owned_by_cut[0]), bits(&owned_by_cut[1]));
        assert_eq!(bits(&owned_by_cut[0]), bits(&whole));
    });
}

#[test]
fn estimator_reports_non_finite_samples() {
    let (channels, total, d) = (3, 400, 5);
    let data = noise(channels, total, 7);
    // Window 1 owns 200..400 and reads 190..400.
    let schedule = ChunkSchedule::symmetric(total as u64, 200, 10).unwrap();
    for_each_runtime(|_, client| {
        let mut estimator = DelayEstimator::new(client, channels, d).unwrap();
        for (channel, sample, value, caught) in [
            (1, 250, f32::NAN, true),
            (2, 399, f32::INFINITY, true),
            (0, 197, f32::NAN, true), // halo, within `D` of the owned samples
            (0, 192, f32::NAN, false), // halo, farther than `D`: never read
        ] {
            let mut bad = data.clone();
            bad[channel * total + sample] = value;
            let (window, _) = cut_window(client, &bad, channels, &schedule, 1);
            let before = estimator.ranges();
            let result = estimator.accumulate(client, &window);
            if caught {
                let reason = input_error("non-finite sample", result);
                assert!(reason.contains("NaN or infinite"), "{reason}");
                assert_eq!(estimator.ranges(), before);
            } else {
                result.unwrap();
                assert_eq!(estimator.ranges(), before + 1);
            }
        }
    });
}

#[test]
fn estimator_rejects_bad_input() {
    let (channels, total, d) = (4, 300, 6);
    let mut data = noise(channels, total, 8);
    for v in &mut data[2 * total..3 * total] {
        *v = 0.0;
    }
    for_each_runtime(|_, client| {
        let one = input_error("one channel", DelayEstimator::new(client, 1, d));
        assert!(one.contains("at least 2"), "{one}");
        let zero = input_error("max_lag 0", DelayEstimator::new(client, channels, 0));
        assert!(zero.contains("0 samples"), "{zero}");

        let mut estimator = DelayEstimator::new(client, channels, d).unwrap();
        let reason = input_error("nothing accumulated", estimator.finish());
        assert!(reason.contains("no window"), "{reason}");

        let schedule = ChunkSchedule::symmetric(total as u64, 150, d as u64).unwrap();
        let (window, _) = cut_window(client, &data, channels, &schedule, 0);
        let reason = input_error("all-zero channel", estimator.accumulate(client, &window));
        assert!(reason.contains("channel 2 is constant"), "{reason}");

        let mut other = DelayEstimator::new(client, 5, d).unwrap();
        let (window, _) = cut_window(client, &noise(channels, total, 9), channels, &schedule, 0);
        let reason = input_error("channels", other.accumulate(client, &window));
        assert!(reason.contains("4 channels"), "{reason}");

        let owned = window.owned_local();
        let short = owned.start..owned.start + d;
        let reason = input_error(
            "short range",
            estimator.accumulate_range(client, &window, short),
        );
        assert!(reason.contains("more than 6 samples"), "{reason}");
        let outside = owned.start..owned.end + 1;
        let reason = input_error(
            "outside",
            estimator.accumulate_range(client, &window, outside),
        );
        assert!(reason.contains("owned"), "{reason}");

        // A halo shorter than the lags is caught at the second window.
        let thin = ChunkSchedule::symmetric(total as u64, 150, d as u64 - 1).unwrap();
        let (first, _) = cut_window(client, &noise(channels, total, 9), channels, &thin, 0);
        estimator.accumulate(client, &first).unwrap();
        let (second, _) = cut_window(client, &noise(channels, total, 9), channels, &thin, 1);
        let reason = input_error("thin halo", estimator.accumulate(client, &second));
        assert!(reason.contains("halo"), "{reason}");
        assert_eq!(estimator.ranges(), 1);

        // A lag longer than the recording.
        let tiny = ChunkSchedule::symmetric(5, 5, 0).unwrap();
        let (window, _) = cut_window(client, &noise(channels, 5, 10), channels, &tiny, 0);
        let reason = input_error("tiny", estimator.accumulate(client, &window));
        assert!(reason.contains("hold 5"), "{reason}");
    });
}

#[test]
fn delays_take_the_first_maxima() {
    // 3 channels, D = 1: lags -1, 0, 1 per pair.
    #[rustfmt::skip]
    let cc = [
        // a = 0: b = 0, 1, 2
        5.0, 5.0, 1.0,   2.0, 1.0, 2.0,   0.0, 3.0, 3.0,
        // a = 1
        1.0, 2.0, 2.0,   1.0, 4.0, 1.0,   3.0, 0.0, 0.0,
        // a = 2
        1.0, 0.0, 0.0,   0.0, 0.0, 0.0,   0.0, 4.0, 0.0,
    ];
    let found = ChannelDelays::from_correlation(&cc, 3, 1).unwrap();
    assert_eq!(
        found.peak,
        vec![5.0, 2.0, 3.0, 2.0, 4.0, 3.0, 1.0, 0.0, 4.0]
    );
    assert_eq!(found.lag, vec![-1, -1, 0, 0, 0, -1, -1, -1, 0]);
    // Column sums of the peaks: 8, 6, 10.
    assert_eq!(found.reference, 2);
    assert_eq!(found.delays, vec![-1, -1, 0]);
    assert_eq!(found.max_abs(), 1);

    // Equal column sums: the first channel.
    let tied = [1.0; 2 * 2 * 3];
    let found = ChannelDelays::from_correlation(&tied, 2, 1).unwrap();
    assert_eq!((found.reference, found.delays), (0, vec![-1, -1]));

    let reason = input_error("short", ChannelDelays::from_correlation(&cc[1..], 3, 1));
    assert!(reason.contains("26 correlations"), "{reason}");
    let mut nan = cc;
    nan[4] = f64::NAN;
    let reason = input_error("NaN", ChannelDelays::from_correlation(&nan, 3, 1));
    assert!(reason.contains("correlation 4"), "{reason}");
}

#[test]
fn aligner_rejects_bad_input() {
    for_each_runtime(|_, client| {
        let reason = input_error("empty", DelayAligner::new(client, &[], 10));
        assert!(reason.contains("no channel"), "{reason}");
        let data = noise(3, 50, 11);
        let schedule = ChunkSchedule::symmetric(50, 50, 0).unwrap();
        let (window, _) = cut_window(client, &data, 3, &schedule, 0);
        let mut two = DelayAligner::new(client, &[1, -1], 50).unwrap();
        let reason = input_error("channels", two.align(client, &window));
        assert!(reason.contains("3 channels"), "{reason}");
        let mut small = DelayAligner::new(client, &[1, -1, 0], 49).unwrap();
        assert!(matches!(small.align(client, &window), Err(Error::Ops(_))));
    });
}
