//! Views answer exactly: from the coarsest pyramid level whose buckets fit a column (grid
//! columns, never more than the width, every planted spike in the right column), from raw
//! samples folded block by block when no level fits or the pyramid is not built where a short
//! view needs it, or as the samples when there are fewer samples than columns. Bad requests
//! give clear errors.

use std::sync::Arc;

use dspk_core::test_util::Rng;
use dspk_core::{ChannelInfo, MemoryRecording, RecordingSource, SampleRate};
use dspk_view::{
    BuildOptions, Columns, Envelope, Error, LocalBackend, MAX_COLUMNS, Order, Pyramid,
    PyramidBuild, PyramidLayout, SignalBackend, ViewRequest, ViewSource,
};

const CHANNELS: usize = 5;
/// Not a multiple of any bucket or page.
const SAMPLES: u64 = 70_001;

/// A recording, the values it reads (channel-major) and its planted spikes (channel, sample).
type Planted = (Arc<dyn RecordingSource>, Vec<f32>, Vec<(usize, u64)>);

/// Noise in [-100, 100) with planted spikes of +-1000 at known places, and one run of NaN.
fn recording(seed: u64) -> Planted {
    let mut rng = Rng::new(seed);
    let n = SAMPLES as usize;
    let mut values: Vec<f32> = (0..CHANNELS * n)
        .map(|_| rng.uniform(-100.0, 100.0).round() as f32)
        .collect();
    let mut spikes = Vec::new();
    for k in 0..60 {
        let channel = rng.below(CHANNELS as u64) as usize;
        let sample = rng.below(SAMPLES);
        values[channel * n + sample as usize] = if k % 2 == 0 { 1000.0 } else { -1000.0 };
        spikes.push((channel, sample));
    }
    for value in &mut values[2 * n + 40_000..2 * n + 40_100] {
        *value = f32::NAN;
    }
    let channels = (0..CHANNELS)
        .map(|c| ChannelInfo::new(format!("c{c}"), 1.0, 0.0, "uV"))
        .collect();
    let source =
        MemoryRecording::from_samples(channels, SampleRate::from_hz(30_000).unwrap(), &values)
            .unwrap();
    // The reference folds what the source reads (scaling turns -0.0 into 0.0).
    let all: Vec<usize> = (0..CHANNELS).collect();
    let mut read = vec![0.0; values.len()];
    source.read(&all, 0..SAMPLES, &mut read).unwrap();
    (Arc::new(source), read, spikes)
}

/// The direct fold of `channels` of channel-major `values` over `columns`.
fn direct(values: &[f32], channels: &[usize], columns: &Columns) -> Envelope {
    let n = SAMPLES as usize;
    let range = columns.samples();
    let mut picked = Vec::new();
    for &c in channels {
        picked.extend_from_slice(&values[c * n + range.start as usize..c * n + range.end as usize]);
    }
    Envelope::from_samples(
        &picked,
        Order::ChannelMajor,
        channels.len(),
        columns.clone(),
    )
    .unwrap()
}

fn same_bits(what: &str, a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (k, (x, y)) in a.iter().zip(b).enumerate() {
        assert_eq!(x.to_bits(), y.to_bits(), "{what}[{k}]: {x} vs {y}");
    }
}

fn built_pyramid(source: &Arc<dyn RecordingSource>) -> Arc<Pyramid> {
    let layout = PyramidLayout::with_buckets(CHANNELS, SAMPLES, 16, 4, 4096).unwrap();
    let pyramid = Arc::new(Pyramid::in_memory(layout));
    PyramidBuild::start(
        Arc::clone(&pyramid),
        Arc::clone(source),
        BuildOptions::new().threads(2),
    )
    .unwrap()
    .wait()
    .unwrap();
    assert!(pyramid.is_complete());
    pyramid
}

#[test]
fn views_are_exact_from_every_source() {
    let (source, values, spikes) = recording(7);
    let pyramid = built_pyramid(&source);
    let backend = LocalBackend::with_pyramid(Arc::clone(&source), Arc::clone(&pyramid)).unwrap();
    let raw_only = LocalBackend::new(Arc::clone(&source));
    let mut rng = Rng::new(99);
    let mut seen = [0usize; 3];
    for case in 0..200 {
        let start = rng.below(SAMPLES - 1);
        let len = 1 + rng
            .below(match case % 3 {
                0 => 200,
                1 => 5_000,
                _ => SAMPLES - start - 1,
            })
            .min(SAMPLES - start - 1);
        let width = 1 + rng.below(700) as usize;
        let channels: Vec<usize> = (0..1 + rng.below(CHANNELS as u64) as usize)
            .map(|_| rng.below(CHANNELS as u64) as usize)
            .collect();
        let request = ViewRequest {
            channels: channels.clone(),
            samples: start..start + len,
            width,
        };
        let view = backend.view(&request).unwrap();
        let columns = view.envelope.columns();
        assert!(view.complete);
        assert!(
            columns.len() <= width.max(len as usize),
            "case {case}: too many columns"
        );
        let covered = columns.samples();
        assert!(
            covered.start <= start && covered.end >= start + len,
            "case {case}: {covered:?}"
        );
        match view.source {
            ViewSource::Samples => {
                seen[0] += 1;
                assert!(len <= width as u64);
                assert_eq!(columns.len() as u64, len);
            }
            ViewSource::Raw => {
                seen[1] += 1;
                assert_eq!(columns, &Columns::even(start..start + len, width).unwrap());
                // No level fits: the finest bucket is wider than a column.
                assert!(len / (width as u64) < pyramid.bucket(0), "case {case}");
            }
            ViewSource::Pyramid { level, bucket } => {
                seen[2] += 1;
                assert_eq!(bucket, pyramid.bucket(level));
                let per_column = len / width as u64;
                assert!(
                    bucket <= per_column,
                    "case {case}: bucket {bucket} > {per_column}"
                );
                assert!(
                    level + 1 == pyramid.levels() || pyramid.bucket(level + 1) > per_column,
                    "case {case}: a coarser level fits"
                );
                // Whole buckets: every inner edge on the bucket grid.
                for k in 1..columns.len() {
                    assert!(
                        columns.edge(k).is_multiple_of(bucket),
                        "case {case}: edge {k}"
                    );
                }
                assert!(covered.end == SAMPLES || covered.end.is_multiple_of(bucket));
                assert!(view.envelope.nan_counts().is_none());
            }
        }
        let expected = direct(&values, &channels, columns);
        same_bits("min", view.envelope.min(), expected.min());
        same_bits("max", view.envelope.max(), expected.max());
        // Every planted spike inside the view shows in its column.
        for &(channel, sample) in &spikes {
            let Some(k) = columns.column_of(sample) else {
                continue;
            };
            let n = SAMPLES as usize;
            let value = values[channel * n + sample as usize];
            for (row, _) in channels.iter().enumerate().filter(|&(_, &c)| c == channel) {
                let (min, max) = view.envelope.get(row, k).unwrap();
                assert!(min <= value && value <= max, "case {case}: spike lost");
                assert!(
                    min == value || max == value,
                    "case {case}: spike not the extreme"
                );
            }
        }
        // Without a pyramid the same request folds the raw samples (or gives them).
        let raw = raw_only.view(&request).unwrap();
        assert_ne!(
            std::mem::discriminant(&raw.source),
            std::mem::discriminant(&ViewSource::Pyramid {
                level: 0,
                bucket: 0
            })
        );
        let expected = direct(&values, &channels, raw.envelope.columns());
        same_bits("raw min", raw.envelope.min(), expected.min());
        same_bits("raw max", raw.envelope.max(), expected.max());
    }
    assert!(
        seen.iter().all(|&n| n > 0),
        "every source exercised: {seen:?}"
    );
}

#[test]
fn whole_recording_in_one_column_and_nan_columns() {
    let (source, values, _) = recording(8);
    let pyramid = built_pyramid(&source);
    let backend = LocalBackend::with_pyramid(Arc::clone(&source), pyramid).unwrap();
    let all: Vec<usize> = (0..CHANNELS).collect();
    let one = backend
        .view(&ViewRequest {
            channels: all.clone(),
            samples: 0..SAMPLES,
            width: 1,
        })
        .unwrap();
    assert_eq!(one.envelope.columns().len(), 1);
    let expected = direct(&values, &all, &Columns::even(0..SAMPLES, 1).unwrap());
    same_bits("min", one.envelope.min(), expected.min());
    same_bits("max", one.envelope.max(), expected.max());
    // The NaN run of channel 2 (samples 40 000..40 100): a raw view one sample per column
    // leaves exactly those columns empty and counts them.
    let view = backend
        .view(&ViewRequest {
            channels: vec![2],
            samples: 39_990..40_110,
            width: 200,
        })
        .unwrap();
    assert_eq!(view.source, ViewSource::Samples);
    for k in 0..120 {
        let nan = (10..110).contains(&k);
        assert_eq!(view.envelope.get(0, k).is_none(), nan, "column {k}");
        assert_eq!(view.envelope.nan_counts().unwrap()[k], u32::from(nan));
    }
}

#[test]
fn unbuilt_pages_fall_back_to_raw_or_say_incomplete() {
    let (source, values, _) = recording(9);
    let layout = PyramidLayout::with_buckets(CHANNELS, SAMPLES, 16, 4, 4096).unwrap();
    let pyramid = Arc::new(Pyramid::in_memory(layout));
    let backend = LocalBackend::with_pyramid(Arc::clone(&source), Arc::clone(&pyramid)).unwrap();
    // Short: read raw (complete). Long, over the fallback: the pyramid's empty columns.
    let short = backend
        .view(&ViewRequest {
            channels: vec![0, 1],
            samples: 100..20_100,
            width: 100,
        })
        .unwrap();
    assert_eq!(short.source, ViewSource::Raw);
    assert!(short.complete);
    let expected = direct(&values, &[0, 1], short.envelope.columns());
    same_bits("min", short.envelope.min(), expected.min());
    let answer = dspk_view::fold_raw(
        source.as_ref(),
        &[0, 1],
        Columns::even(100..20_100, 100).unwrap(),
    )
    .unwrap();
    assert_eq!(answer, short.envelope);
    // With no raw fallback the same view comes from the pyramid: incomplete, every column
    // empty; once the pages under it are filled, complete and exact.
    let strict = backend.clone().raw_fallback(0);
    let request = ViewRequest {
        channels: vec![0, 1],
        samples: 100..20_100,
        width: 100,
    };
    let view = strict.view(&request).unwrap();
    assert!(matches!(view.source, ViewSource::Pyramid { .. }));
    assert!(!view.complete);
    assert!((0..view.envelope.columns().len()).all(|k| view.envelope.get(0, k).is_none()));
    let layout = pyramid.layout().clone();
    for page in 0..layout.pages() {
        let range = layout.page_range(page);
        if range.start < 20_100 + 4096 && range.end > 0 {
            pyramid.fill_page(page, source.as_ref()).unwrap();
        }
    }
    let view = strict.view(&request).unwrap();
    assert!(view.complete);
    let expected = direct(&values, &[0, 1], view.envelope.columns());
    same_bits("filled min", view.envelope.min(), expected.min());
    same_bits("filled max", view.envelope.max(), expected.max());
}

#[test]
fn bad_requests_are_refused() {
    let (source, _, _) = recording(10);
    let backend = LocalBackend::new(Arc::clone(&source));
    let request = |channels: Vec<usize>, samples: std::ops::Range<u64>, width: usize| {
        backend.view(&ViewRequest {
            channels,
            samples,
            width,
        })
    };
    for (what, result) in [
        ("past the end", request(vec![0], 0..SAMPLES + 1, 10)),
        ("empty range", request(vec![0], 50..50, 10)),
        ("zero width", request(vec![0], 0..100, 0)),
        ("unknown channel", request(vec![CHANNELS], 0..100, 10)),
        ("no channels", request(vec![], 0..100, 10)),
    ] {
        assert!(
            matches!(result, Err(Error::InvalidRequest { .. })),
            "{what}: {result:?}"
        );
    }
    assert!(matches!(
        request(vec![0], 0..100, MAX_COLUMNS + 1),
        Err(Error::OverLimit { .. })
    ));
    let other = PyramidLayout::with_buckets(CHANNELS, SAMPLES - 1, 16, 4, 4096).unwrap();
    assert!(matches!(
        LocalBackend::with_pyramid(source, Arc::new(Pyramid::in_memory(other))),
        Err(Error::InvalidRequest { .. })
    ));
}
