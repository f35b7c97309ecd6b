//! Peak detection on every runtime compiled in: against `scipy.signal.find_peaks` on spike-like
//! data and plateaus, and against a host reference of the device's exact rule on seeded random
//! windows; owned ranges, chunking with halos, capacity and NaN.

mod common;

use std::ops::Range;

use common::Reference;
use dspk_core::test_util::{Rng, for_each_runtime};
use dspk_ops::{
    ChannelVector, DeviceArray, Error, Height, Peak, PeakDetector, PeakOptions, Polarity,
    find_peaks, mad_noise_into,
};

/// scipy's `_local_maxima_1d`: midpoints of flat runs higher than both neighbours.
fn local_maxima(v: &[f32]) -> Vec<usize> {
    let mut peaks = Vec::new();
    let mut i = 1;
    let last = v.len().saturating_sub(1);
    while i < last {
        if v[i - 1] < v[i] {
            let mut ahead = i + 1;
            while ahead < last && v[ahead] == v[i] {
                ahead += 1;
            }
            if v[ahead] < v[i] {
                peaks.push((i + ahead - 1) / 2);
                i = ahead;
            }
        }
        i += 1;
    }
    peaks
}

/// The device's rule on the host: local maxima of the signed values at or above `height[c]`,
/// kept in `owned` when no other such candidate closer than `distance` is higher, or as high
/// and earlier.
fn host_peaks(
    x: &[f32],
    samples: usize,
    owned: Range<usize>,
    polarity: Polarity,
    height: &dyn Fn(usize) -> Option<f32>,
    distance: usize,
) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for (c, row) in x.chunks(samples).enumerate() {
        let v: Vec<f32> = match polarity {
            Polarity::Positive => row.to_vec(),
            Polarity::Negative => row.iter().map(|x| -x).collect(),
        };
        let candidates: Vec<usize> = local_maxima(&v)
            .into_iter()
            .filter(|&p| height(c).is_none_or(|h| v[p] >= h))
            .collect();
        for &p in &candidates {
            let beaten = candidates.iter().any(|&q| {
                q != p && q.abs_diff(p) < distance && (v[q] > v[p] || (v[q] == v[p] && q < p))
            });
            if owned.contains(&p) && !beaten {
                out.push((c as u32, p as u32));
            }
        }
    }
    out
}

fn positions(peaks: &[Peak]) -> Vec<(u32, u32)> {
    peaks
        .iter()
        .map(|p| (p.channel, u32::try_from(p.sample).unwrap()))
        .collect()
}

/// Checks the reported values are the input's samples.
fn check_values(what: &str, peaks: &[Peak], x: &[f32], samples: usize) {
    for p in peaks {
        let expected = x[p.channel as usize * samples + p.sample as usize];
        assert_eq!(p.value, expected, "{what}: value of {p:?}");
    }
}

/// Quantised noise (flat runs and equal heights happen) with a few negative spikes.
fn random_window(values: usize, rng: &mut Rng) -> Vec<f32> {
    (0..values)
        .map(|_| {
            let mut v = rng.uniform(-8.0, 8.0).round();
            if rng.below(40) == 0 {
                v -= rng.uniform(10.0, 30.0).round();
            }
            v as f32
        })
        .collect()
}

#[test]
fn spike_like_data_matches_scipy() {
    for_each_runtime(|target, client| {
        let reference = Reference::load("peaks_spikes");
        let [channels, samples] = reference.shape("x") else {
            panic!("x is not 2-D")
        };
        let x = reference.values_f32("x");
        let options = PeakOptions {
            polarity: Polarity::Negative,
            height: Height::Value(reference.values("height")[0] as f32),
            distance: reference.values("distance")[0] as usize,
        };
        let input = DeviceArray::from_host(client, &x, *channels, *samples).unwrap();
        let peaks = find_peaks(client, &input, &options, 1000).unwrap();
        let expected: Vec<(u32, u32)> = reference
            .values("channel")
            .iter()
            .zip(reference.values("sample"))
            .map(|(&c, &s)| (c as u32, s as u32))
            .collect();
        assert!(expected.len() > 50, "the case has spikes");
        assert_eq!(positions(&peaks), expected, "{target}");
        check_values(&target.to_string(), &peaks, &x, *samples);
    });
}

#[test]
fn plateaus_match_scipy_and_nan_is_an_error() {
    for_each_runtime(|target, client| {
        let reference = Reference::load("peaks_plateau");
        let x = reference.values_f32("x");
        let n = x.len();
        let nan_at = x.iter().position(|v| v.is_nan()).unwrap();
        let input = DeviceArray::from_host(client, &x, 1, n).unwrap();
        let mut detector = PeakDetector::new(client, 16).unwrap();
        // Owning the samples before the NaN: scipy's peaks, including what the NaN hides.
        let options = PeakOptions::default();
        detector
            .detect(client, &input, 0..nan_at, &options)
            .unwrap();
        let peaks = detector.peaks(client).unwrap();
        let samples: Vec<f64> = peaks.iter().map(|p| p.sample as f64).collect();
        assert_eq!(samples, reference.values("sample"), "{target}");
        // Owning the NaN: an error, never peaks silently missing.
        detector.detect(client, &input, 0..n, &options).unwrap();
        let error = detector.peaks(client).unwrap_err();
        assert!(
            matches!(
                error,
                Error::InvalidParameter {
                    what: "find_peaks: input",
                    ..
                }
            ),
            "{target}: {error}"
        );
    });
}

#[test]
fn exact_rule_on_random_windows() {
    for_each_runtime(|target, client| {
        let mut rng = Rng::new(77);
        for (channels, samples) in [(1, 1), (1, 3), (3, 17), (7, 1001), (5, 4099)] {
            let x = random_window(channels * samples, &mut rng);
            let input = DeviceArray::from_host(client, &x, channels, samples).unwrap();
            let mut detector = PeakDetector::new(client, channels * samples / 2 + 1).unwrap();
            for (polarity, height, distance) in [
                (Polarity::Positive, None, 1),
                (Polarity::Negative, None, 2),
                (Polarity::Negative, Some(6.0f32), 3),
                (Polarity::Positive, Some(4.0), 25),
                (Polarity::Negative, Some(12.0), 40),
            ] {
                let start = rng.below(samples as u64 / 3 + 1) as usize;
                let end = samples - rng.below(samples as u64 / 3 + 1) as usize;
                for owned in [0..samples, start..end] {
                    let options = PeakOptions {
                        polarity,
                        height: height.map_or(Height::Any, Height::Value),
                        distance,
                    };
                    detector
                        .detect(client, &input, owned.clone(), &options)
                        .unwrap();
                    let peaks = detector.peaks(client).unwrap();
                    let what = format!("{target} {channels}x{samples} {options:?} {owned:?}");
                    let expected = host_peaks(&x, samples, owned, polarity, &|_| height, distance);
                    assert_eq!(positions(&peaks), expected, "{what}");
                    check_values(&what, &peaks, &x, samples);
                }
            }
        }
    });
}

#[test]
fn per_channel_thresholds_from_mad_noise_on_the_device() {
    for_each_runtime(|target, client| {
        let mut rng = Rng::new(3);
        let (channels, samples) = (6, 3001);
        let mut x = random_window(channels * samples, &mut rng);
        for (i, v) in x.iter_mut().enumerate() {
            *v *= 1.0 + (i / samples) as f32; // a different noise level per channel
        }
        let input = DeviceArray::from_host(client, &x, channels, samples).unwrap();
        let noise = ChannelVector::empty(client, channels).unwrap();
        mad_noise_into(client, &input, &noise).unwrap();
        let options = PeakOptions {
            polarity: Polarity::Negative,
            height: Height::PerChannel {
                thresholds: noise.clone(),
                scale: 2.5,
            },
            distance: 10,
        };
        let peaks = find_peaks(client, &input, &options, 5000).unwrap();
        let noise = noise.to_host(client).unwrap();
        let expected = host_peaks(
            &x,
            samples,
            0..samples,
            Polarity::Negative,
            &|c| Some(2.5 * noise[c]),
            10,
        );
        assert!(!expected.is_empty());
        assert_eq!(positions(&peaks), expected, "{target}");
    });
}

/// The longest run of equal neighbours in any channel.
fn longest_flat_run(x: &[f32], samples: usize) -> usize {
    let mut longest = 1;
    for row in x.chunks(samples) {
        let mut run = 1;
        for pair in row.windows(2) {
            run = if pair[0] == pair[1] { run + 1 } else { 1 };
            longest = longest.max(run);
        }
    }
    longest
}

#[test]
fn chunked_with_halos_reports_each_peak_once() {
    for_each_runtime(|target, client| {
        let mut rng = Rng::new(11);
        let (channels, samples) = (3, 2001);
        let x = random_window(channels * samples, &mut rng);
        let input = DeviceArray::from_host(client, &x, channels, samples).unwrap();
        for distance in [1, 7, 30] {
            let options = PeakOptions {
                polarity: Polarity::Negative,
                height: Height::Value(3.0),
                distance,
            };
            let whole = find_peaks(client, &input, &options, 4000).unwrap();
            let halo = distance + longest_flat_run(&x, samples);
            let mut detector = PeakDetector::new(client, 4000).unwrap();
            for step in [50, 333, 2001] {
                let mut chunked = Vec::new();
                let mut start = 0;
                while start < samples {
                    let end = (start + step).min(samples);
                    let (from, to) = (start.saturating_sub(halo), (end + halo).min(samples));
                    let window: Vec<f32> = x
                        .chunks(samples)
                        .flat_map(|row| row[from..to].iter().copied())
                        .collect();
                    let part =
                        DeviceArray::from_host(client, &window, channels, to - from).unwrap();
                    let owned = start - from..end - from;
                    detector.detect(client, &part, owned, &options).unwrap();
                    for mut peak in detector.peaks(client).unwrap() {
                        peak.sample += from as u64;
                        chunked.push(peak);
                    }
                    start = end;
                }
                chunked.sort_by_key(|p| (p.channel, p.sample));
                assert_eq!(chunked, whole, "{target} distance {distance} step {step}");
            }
        }
    });
}

#[test]
fn capacity_and_bad_arguments() {
    for_each_runtime(|target, client| {
        // Peaks at samples 1, 3, 5 and 7 of one channel.
        let x = [0.0f32, 1.0, 0.0, 2.0, 0.0, 3.0, 0.0, 4.0, 0.0];
        let input = DeviceArray::from_host(client, &x, 1, 9).unwrap();
        let options = PeakOptions::default();
        assert_eq!(find_peaks(client, &input, &options, 4).unwrap().len(), 4);
        let error = find_peaks(client, &input, &options, 3).unwrap_err();
        assert!(
            matches!(
                error,
                Error::OverLimit {
                    requested: 4,
                    limit: 3,
                    unit: "peaks",
                    ..
                }
            ),
            "{target}: {error}"
        );
        let mut detector = PeakDetector::new(client, 4).unwrap();
        let bad = [
            (0..10, PeakOptions::default()),
            (
                0..9,
                PeakOptions {
                    distance: 0,
                    ..PeakOptions::default()
                },
            ),
            (
                0..9,
                PeakOptions {
                    height: Height::Value(f32::NAN),
                    ..PeakOptions::default()
                },
            ),
        ];
        for (owned, options) in bad {
            let error = detector
                .detect(client, &input, owned, &options)
                .unwrap_err();
            assert!(
                matches!(error, Error::InvalidParameter { .. }),
                "{target}: {error}"
            );
        }
        // A buffer of 9 values is refused as 1 x 10 where the array is made.
        let error = input.front(1, 10).unwrap_err();
        assert!(
            matches!(
                error,
                Error::ArrayShape {
                    expected: 10,
                    given: 9,
                    ..
                }
            ),
            "{target}: {error}"
        );
        // Thresholds for another number of channels.
        let two = ChannelVector::from_host(client, &[1.0, 1.0]).unwrap();
        let options = PeakOptions {
            height: Height::PerChannel {
                thresholds: two,
                scale: 1.0,
            },
            ..PeakOptions::default()
        };
        let error = detector.detect(client, &input, 0..9, &options).unwrap_err();
        assert!(
            matches!(error, Error::ShapeMismatch { .. }),
            "{target}: {error}"
        );
        // A NaN per-channel threshold is reported, not taken as "no peaks".
        let thresholds = ChannelVector::from_host(client, &[f32::NAN]).unwrap();
        let options = PeakOptions {
            height: Height::PerChannel {
                thresholds,
                scale: 1.0,
            },
            ..PeakOptions::default()
        };
        detector.detect(client, &input, 0..9, &options).unwrap();
        assert!(detector.peaks(client).is_err(), "{target}");
        assert!(PeakDetector::new(client, 0).is_err());
        // An empty owned range finds nothing.
        detector
            .detect(client, &input, 4..4, &PeakOptions::default())
            .unwrap();
        assert!(detector.peaks(client).unwrap().is_empty());
    });
}

/// `-0.0` and `+0.0` are one height: of two zero peaks closer than `distance`, the earlier
/// wins whichever sign each zero has (scipy compares values, and `-0.0 == 0.0`).
#[test]
fn signed_zeros_are_one_height() {
    for_each_runtime(|target, client| {
        for (polarity, sign) in [(Polarity::Positive, 1.0f32), (Polarity::Negative, -1.0)] {
            for (first, second) in [(-0.0f32, 0.0f32), (0.0, -0.0)] {
                let x: Vec<f32> = [-1.0, first, -1.0, -1.0, second, -1.0, -1.0]
                    .iter()
                    .map(|v| sign * v)
                    .collect();
                let input = DeviceArray::from_host(client, &x, 1, x.len()).unwrap();
                let options = PeakOptions {
                    polarity,
                    distance: 4,
                    ..PeakOptions::default()
                };
                let peaks = find_peaks(client, &input, &options, 8).unwrap();
                let samples: Vec<u64> = peaks.iter().map(|p| p.sample).collect();
                assert_eq!(samples, [1], "{target} {polarity:?} {x:?}");
            }
        }
    });
}
