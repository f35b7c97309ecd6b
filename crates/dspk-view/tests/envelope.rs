//! Envelopes are exact: every planted spike is its column's extreme, every column is a direct
//! fold of its samples (NaN skipped and counted), block splits change nothing, and the device
//! fold gives the host fold's bits on every runtime. Bad shapes and ranges are refused.

use std::ops::Range;

use dspk_core::test_util::{Rng, for_each_runtime};
use dspk_ops::DeviceArray;
use dspk_view::{Columns, DeviceFolder, Envelope, Error, Order};

/// The direct fold of one column's samples, written apart from the crate's: the first sample
/// that is not NaN starts the minimum and maximum, a later one replaces them only when
/// strictly below (above); NaN is counted. `(+inf, -inf)` when every sample is NaN.
fn direct(samples: impl Iterator<Item = f32>) -> (f32, f32, u32) {
    let mut extremes: Option<(f32, f32)> = None;
    let mut nan = 0;
    for v in samples {
        if v.is_nan() {
            nan += 1;
            continue;
        }
        extremes = Some(match extremes {
            None => (v, v),
            Some((lo, hi)) => (if v < lo { v } else { lo }, if v > hi { v } else { hi }),
        });
    }
    let (lo, hi) = extremes.unwrap_or((f32::INFINITY, f32::NEG_INFINITY));
    (lo, hi, nan)
}

/// Asserts that every column of `envelope` is the direct fold of its samples in `data`
/// (`[channels, len]` channel-major, sample `columns.samples().start` first), bit for bit.
fn check_direct(what: &str, envelope: &Envelope, data: &[f32], channels: usize) {
    let columns = envelope.columns();
    let start = columns.samples().start;
    let len = columns.num_samples() as usize;
    let width = columns.len();
    let nan = envelope.nan_counts().expect("a fold counts NaN");
    for c in 0..channels {
        for k in 0..width {
            let Range {
                start: from,
                end: to,
            } = columns.column(k);
            let (from, to) = ((from - start) as usize, (to - start) as usize);
            let (lo, hi, count) = direct(data[c * len + from..c * len + to].iter().copied());
            let at = c * width + k;
            assert_eq!(
                (
                    envelope.min()[at].to_bits(),
                    envelope.max()[at].to_bits(),
                    nan[at]
                ),
                (lo.to_bits(), hi.to_bits(), count),
                "{what}: channel {c} column {k} (samples {from}..{to}): got min {} max {} NaN {}, \
                 expected {lo} {hi} {count}",
                envelope.min()[at],
                envelope.max()[at],
                nan[at],
            );
            assert_eq!(envelope.get(c, k).is_none(), count as usize == to - from);
        }
    }
}

/// `[channels, len]` channel-major values as `[len, channels]`.
fn interleave(data: &[f32], channels: usize) -> Vec<f32> {
    let len = data.len() / channels;
    (0..len * channels)
        .map(|i| data[(i % channels) * len + i / channels])
        .collect()
}

/// Uniform noise in `[-1, 1)`, `[channels, len]`.
fn noise(rng: &mut Rng, channels: usize, len: usize) -> Vec<f32> {
    (0..channels * len)
        .map(|_| rng.uniform(-1.0, 1.0) as f32)
        .collect()
}

/// Column layouts of `start..start + len` to test: even widths 1, 2, 7, 640 and `len`, grid
/// steps 1, 3, 64, 1000 and longer than the range.
fn layouts(start: u64, len: u64) -> Vec<Columns> {
    let range = start..start + len;
    let mut layouts = Vec::new();
    for width in [1, 2, 7, 640, len as usize] {
        if width as u64 <= len {
            layouts.push(Columns::even(range.clone(), width).unwrap());
        }
    }
    for step in [1, 3, 64, 1000, len + 5] {
        layouts.push(Columns::grid(range.clone(), step).unwrap());
    }
    layouts
}

/// Both memory orders of the same envelope, checked equal to each other and returned.
fn fold_both_orders(data: &[f32], channels: usize, columns: &Columns) -> Envelope {
    let major = Envelope::from_samples(data, Order::ChannelMajor, channels, columns.clone())
        .expect("channel-major fold");
    let interleaved = Envelope::from_samples(
        &interleave(data, channels),
        Order::Interleaved,
        channels,
        columns.clone(),
    )
    .expect("interleaved fold");
    assert_same_bits("interleaved vs channel-major", &interleaved, &major);
    major
}

/// Asserts two envelopes hold the same bits (minima, maxima, NaN counts).
fn assert_same_bits(what: &str, actual: &Envelope, expected: &Envelope) {
    assert_eq!(actual.channels(), expected.channels(), "{what}: channels");
    assert_eq!(actual.columns(), expected.columns(), "{what}: columns");
    let width = expected.columns().len();
    for (name, a, e) in [
        ("min", actual.min(), expected.min()),
        ("max", actual.max(), expected.max()),
    ] {
        for (i, (a, e)) in a.iter().zip(e).enumerate() {
            assert_eq!(
                a.to_bits(),
                e.to_bits(),
                "{what}: {name} of channel {} column {}: {a} vs {e}",
                i / width,
                i % width
            );
        }
    }
    assert_eq!(
        actual.nan_counts(),
        expected.nan_counts(),
        "{what}: NaN counts"
    );
}

#[test]
fn planted_spikes_are_the_extremes_of_their_columns() {
    let mut rng = Rng::new(15);
    let channels = 3;
    for len in [1usize, 2, 7, 640, 1001, 4097] {
        for start in [0u64, 3, 123_457] {
            let mut data = noise(&mut rng, channels, len);
            // Spikes well outside the noise, each of its own size: (channel, sample, value).
            let mut spikes = Vec::new();
            for i in 0..(len / 50).max(2) {
                let (c, s) = (rng.below(channels as u64) as usize, rng.below(len as u64));
                let size = 5.0 + i as f32 + rng.uniform(0.0, 0.5) as f32;
                let value = if rng.below(2) == 0 { size } else { -size };
                data[c * len + s as usize] = value;
                spikes.retain(|&(c0, s0, _)| (c0, s0) != (c, s));
                spikes.push((c, s, value));
            }
            for columns in layouts(start, len as u64) {
                let what = format!("len {len} start {start} {columns:?}");
                let envelope = fold_both_orders(&data, channels, &columns);
                check_direct(&what, &envelope, &data, channels);
                for &(c, s, value) in &spikes {
                    let k = columns.column_of(start + s).expect("a sample of the range");
                    let (lo, hi) = envelope.get(c, k).expect("no NaN here");
                    // The largest spike of each sign in the column is its extreme.
                    let rivals = spikes
                        .iter()
                        .filter(|&&(c2, s2, v2)| {
                            c2 == c
                                && columns.column_of(start + s2) == Some(k)
                                && v2.signum() == value.signum()
                        })
                        .map(|&(_, _, v2)| v2.abs())
                        .fold(0.0f32, f32::max);
                    let extreme = if value > 0.0 { hi } else { -lo };
                    assert!(extreme >= value.abs(), "{what}: spike {value} at {s} lost");
                    assert_eq!(extreme, rivals, "{what}: channel {c} column {k}");
                }
            }
        }
    }
}

#[test]
fn folding_in_blocks_gives_one_fold() {
    let mut rng = Rng::new(1515);
    let channels = 5;
    for len in [1usize, 9, 777, 5003] {
        let start = rng.below(1 << 20);
        // Zeros of both signs (ties), infinities and NaN, so block edges cross them.
        let data: Vec<f32> = (0..channels * len)
            .map(|i| mixed_sample(&mut rng, i / len % 4))
            .collect();
        let interleaved = interleave(&data, channels);
        for columns in layouts(start, len as u64) {
            let whole = fold_both_orders(&data, channels, &columns);
            check_direct(&format!("{columns:?}"), &whole, &data, channels);
            // Random cut points, in order: the same bits.
            let mut cuts = vec![0, len];
            for _ in 0..rng.below(8) {
                cuts.push(rng.below(len as u64 + 1) as usize);
            }
            cuts.sort_unstable();
            let blocks: Vec<Range<usize>> = cuts.windows(2).map(|w| w[0]..w[1]).collect();
            for order in [Order::ChannelMajor, Order::Interleaved] {
                let mut envelope = Envelope::empty(channels, columns.clone()).unwrap();
                for block in &blocks {
                    fold_block(&mut envelope, &data, &interleaved, order, start, block);
                }
                assert_same_bits(&format!("{order:?} blocks {blocks:?}"), &envelope, &whole);
            }
            // The same blocks in reverse order: the same values (a zero's sign may come from
            // another block, as the first of equal values is kept) and NaN counts.
            let mut reversed = Envelope::empty(channels, columns.clone()).unwrap();
            for block in blocks.iter().rev() {
                fold_block(
                    &mut reversed,
                    &data,
                    &interleaved,
                    Order::ChannelMajor,
                    start,
                    block,
                );
            }
            assert_eq!(reversed.min(), whole.min());
            assert_eq!(reversed.max(), whole.max());
            assert_eq!(reversed.nan_counts(), whole.nan_counts());
        }
    }
}

/// Folds samples `block` (relative to `start`) of `data` (channel-major) or `interleaved`.
fn fold_block(
    envelope: &mut Envelope,
    data: &[f32],
    interleaved: &[f32],
    order: Order,
    start: u64,
    block: &Range<usize>,
) {
    let channels = envelope.channels();
    let len = data.len() / channels;
    let values: Vec<f32> = match order {
        Order::ChannelMajor => (0..channels)
            .flat_map(|c| {
                data[c * len + block.start..c * len + block.end]
                    .iter()
                    .copied()
            })
            .collect(),
        Order::Interleaved => interleaved[block.start * channels..block.end * channels].to_vec(),
    };
    let samples = start + block.start as u64..start + block.end as u64;
    envelope.fold(&values, order, samples).unwrap();
}

#[test]
fn nan_is_counted_and_touches_only_its_columns() {
    let mut rng = Rng::new(151_515);
    let channels = 4;
    let len = 1000;
    let start = 40_000;
    let clean = noise(&mut rng, channels, len);
    for columns in [
        Columns::even(start..start + len as u64, 37).unwrap(),
        Columns::grid(start..start + len as u64, 64).unwrap(),
    ] {
        let mut data = clean.clone();
        let relative = |sample: u64| (sample - start) as usize;
        // Channel 0: a whole column of NaN. Channel 1: NaN on the first and the last sample of
        // columns. Channel 2: a run across a column edge. Channel 3: random NaN.
        let whole = columns.column(3);
        data[relative(whole.start)..relative(whole.end)].fill(f32::NAN);
        for k in [0, 5, columns.len() - 1] {
            let cells = columns.column(k);
            data[len + relative(cells.start)] = f32::NAN;
            data[len + relative(cells.end - 1)] = f32::NAN;
        }
        let edge = relative(columns.edge(7));
        data[2 * len + edge - 3..2 * len + edge + 4].fill(f32::NAN);
        for s in 0..len {
            if rng.below(10) == 0 {
                data[3 * len + s] = f32::NAN;
            }
        }

        let envelope = fold_both_orders(&data, channels, &columns);
        check_direct(&format!("{columns:?}"), &envelope, &data, channels);
        let reference = fold_both_orders(&clean, channels, &columns);
        let width = columns.len();
        let nan = envelope.nan_counts().unwrap();
        for c in 0..channels {
            for k in 0..width {
                let cells = columns.column(k);
                let planted = data[c * len + relative(cells.start)..c * len + relative(cells.end)]
                    .iter()
                    .filter(|v| v.is_nan())
                    .count();
                assert_eq!(
                    nan[c * width + k] as usize,
                    planted,
                    "channel {c} column {k}"
                );
                let all_nan = planted as u64 == cells.end - cells.start;
                assert_eq!(
                    envelope.get(c, k).is_none(),
                    all_nan,
                    "channel {c} column {k}"
                );
                if all_nan {
                    assert_eq!(
                        (envelope.min()[c * width + k], envelope.max()[c * width + k]),
                        (f32::INFINITY, f32::NEG_INFINITY)
                    );
                }
                if planted == 0 {
                    assert_eq!(
                        envelope.get(c, k),
                        reference.get(c, k),
                        "channel {c} column {k} changed by NaN elsewhere"
                    );
                }
            }
        }
        assert_eq!(envelope.get(0, 3), None);
        assert_eq!(nan[3], (whole.end - whole.start) as u32);
    }
}

/// A sample of one of four kinds of channel: everything (noise, zeros of both signs,
/// infinities, subnormals, NaN); zeros of both signs under positive values (the minimum is a
/// tie); the same over negative values; mostly NaN with zeros.
fn mixed_sample(rng: &mut Rng, kind: usize) -> f32 {
    let zero = if rng.below(2) == 0 { 0.0 } else { -0.0 };
    let r = rng.below(100);
    match kind {
        0 => match r {
            0..=1 => f32::NAN,
            2 => f32::INFINITY,
            3 => f32::NEG_INFINITY,
            4..=7 => zero,
            8..=9 => f32::from_bits(1 + rng.below(1000) as u32) * if r == 8 { 1.0 } else { -1.0 },
            _ => rng.normal() as f32,
        },
        1 => match r {
            0..=4 => f32::NAN,
            5..=40 => zero,
            _ => rng.uniform(0.5, 2.0) as f32,
        },
        2 => match r {
            0..=4 => f32::NAN,
            5..=40 => zero,
            _ => -rng.uniform(0.5, 2.0) as f32,
        },
        _ => {
            if r < 70 {
                f32::NAN
            } else {
                zero
            }
        }
    }
}

/// How a test range is cut: `Columns::even` of a width or `Columns::grid` of a step.
#[derive(Clone, Copy)]
enum Cut {
    Even(usize),
    Grid(u64),
}

#[test]
fn device_fold_is_the_host_fold_bit_for_bit() {
    for_each_runtime(|target, client| {
        let mut rng = Rng::new(0xD15C);
        let mut folder = DeviceFolder::new(client.clone());
        // (channels, start, samples, columns): short and long columns, one column of 70 001
        // samples (two merge levels), then small again (buffers reused).
        let cases = [
            (1, 0, 1, Cut::Even(1)),
            (5, 11, 997, Cut::Even(31)),
            (4, 3, 1000, Cut::Even(1000)),
            (7, 100_003, 4099, Cut::Grid(64)),
            (3, 5, 3001, Cut::Even(2)),
            (2, 77, 70_001, Cut::Even(1)),
            (9, 1, 12_345, Cut::Grid(300)),
            (4, 0, 513, Cut::Grid(257)),
            (3, 9, 33, Cut::Even(5)),
        ];
        let (mut neg_zero_min, mut pos_zero_min) = (false, false);
        for &(channels, start, len, cut) in &cases {
            let range = start..start + len as u64;
            let columns = match cut {
                Cut::Even(width) => Columns::even(range, width).unwrap(),
                Cut::Grid(step) => Columns::grid(range, step).unwrap(),
            };
            let data: Vec<f32> = (0..channels * len)
                .map(|i| mixed_sample(&mut rng, i / len % 4))
                .collect();
            let host =
                Envelope::from_samples(&data, Order::ChannelMajor, channels, columns.clone())
                    .unwrap();
            check_direct(&format!("host {columns:?}"), &host, &data, channels);
            let what = format!("{target}: {channels} x {len}, {columns:?}");
            let device = folder.fold_host(&data, channels, &columns).unwrap();
            assert_same_bits(&what, &device, &host);
            let array = DeviceArray::from_host(client, &data, channels, len).unwrap();
            let device = folder.fold(&array, &columns).unwrap();
            assert_same_bits(&what, &device, &host);
            neg_zero_min |= host
                .min()
                .iter()
                .any(|m| m.to_bits() == (-0.0f32).to_bits());
            pos_zero_min |= host.min().iter().any(|m| m.to_bits() == 0);
        }
        assert!(neg_zero_min && pos_zero_min, "the cases hold zero ties");
    });
}

#[test]
fn bad_shapes_and_ranges_are_refused() {
    let columns = Columns::even(10..20, 3).unwrap();
    // Host values of the wrong count.
    let error =
        Envelope::from_samples(&[0.0; 19], Order::ChannelMajor, 2, columns.clone()).unwrap_err();
    assert!(
        matches!(
            error,
            Error::Shape {
                expected: 20,
                actual: 19,
                ..
            }
        ),
        "{error}"
    );
    let mut envelope = Envelope::empty(2, columns.clone()).unwrap();
    let error = envelope
        .fold(&[0.0; 5], Order::Interleaved, 12..15)
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::Shape {
                expected: 6,
                actual: 5,
                ..
            }
        ),
        "{error}"
    );
    // Samples outside the columns' range, or reversed.
    for samples in [9..12, 18..21, 25..30] {
        let values = vec![0.0; 2 * (samples.end - samples.start) as usize];
        let error = envelope
            .fold(&values, Order::ChannelMajor, samples.clone())
            .unwrap_err();
        assert!(
            matches!(error, Error::InvalidRequest { .. }),
            "{samples:?}: {error}"
        );
    }
    #[allow(clippy::reversed_empty_ranges)]
    let error = envelope.fold(&[], Order::ChannelMajor, 15..14).unwrap_err();
    assert!(matches!(error, Error::InvalidRequest { .. }), "{error}");
    // Nothing changed on error.
    assert_eq!(envelope, Envelope::empty(2, columns.clone()).unwrap());
    // Parts of the wrong length; zero channels.
    let error =
        Envelope::from_parts(2, columns.clone(), vec![0.0; 6], vec![0.0; 5], None).unwrap_err();
    assert!(
        matches!(
            error,
            Error::Shape {
                expected: 6,
                actual: 5,
                ..
            }
        ),
        "{error}"
    );
    let error = Envelope::from_parts(
        2,
        columns.clone(),
        vec![0.0; 6],
        vec![0.0; 6],
        Some(vec![0; 7]),
    )
    .unwrap_err();
    assert!(
        matches!(
            error,
            Error::Shape {
                expected: 6,
                actual: 7,
                ..
            }
        ),
        "{error}"
    );
    assert!(matches!(
        Envelope::empty(0, columns.clone()),
        Err(Error::InvalidRequest { .. })
    ));

    for_each_runtime(|target, client| {
        let mut folder = DeviceFolder::new(client.clone());
        // An array whose samples are not the columns' range.
        let array = DeviceArray::from_host(client, &[1.0f32; 22], 2, 11).unwrap();
        let error = folder.fold(&array, &columns).unwrap_err();
        assert!(
            matches!(
                error,
                Error::Shape {
                    expected: 10,
                    actual: 11,
                    ..
                }
            ),
            "{target}: {error}"
        );
        assert!(error.to_string().contains("samples"), "{error}");
        // Host values of the wrong count; zero channels.
        let error = folder.fold_host(&[1.0; 21], 2, &columns).unwrap_err();
        assert!(
            matches!(
                error,
                Error::Shape {
                    expected: 20,
                    actual: 21,
                    ..
                }
            ),
            "{target}: {error}"
        );
        let error = folder.fold_host(&[], 0, &columns).unwrap_err();
        assert!(
            matches!(error, Error::InvalidRequest { .. }),
            "{target}: {error}"
        );
        // A range past 32-bit indices.
        let huge = Columns::even(0..1 << 33, 100).unwrap();
        let error = folder.fold_host(&[], 1, &huge).unwrap_err();
        assert!(
            matches!(error, Error::OverLimit { .. }),
            "{target}: {error}"
        );
        let error = folder.fold(&array, &huge).unwrap_err();
        assert!(
            matches!(error, Error::OverLimit { .. }),
            "{target}: {error}"
        );
        // The folder still works after refusing.
        let envelope = folder
            .fold_host(&(0..20).map(|i| i as f32).collect::<Vec<_>>(), 2, &columns)
            .unwrap();
        assert_eq!(envelope.get(1, 2), Some((16.0, 19.0)));
    });
}
