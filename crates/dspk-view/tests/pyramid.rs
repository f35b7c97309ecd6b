//! Pyramids are exact: every level's grid columns equal the host fold of the raw samples bit
//! for bit (odd lengths, NaN, signed zeros, infinities), whatever order and threads filled the
//! pages, in memory or in a cache file, on the host or on every device runtime. Builds go
//! nearest the focus first, cancel into a resumable state and stop on a source's error; cache
//! files are reused only for the same recording and never trusted when damaged. Bad requests
//! are refused with clear errors.

use std::fs::OpenOptions;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime};

use dspk_core::test_util::{Rng, for_each_runtime};
use dspk_core::{
    ChannelInfo, ReadRequest, RecordingInfo, RecordingSource, SampleFormat, SampleRate,
};
use dspk_view::{
    BuildOptions, BuildProgress, CacheState, Columns, Envelope, Error, Order, PageFold, Pyramid,
    PyramidBuild, PyramidLayout, RecordingSignature,
};

/// A recording of given `f32` values (channel-major) that logs the first sample of each read,
/// can hold one read until the test lets it go, and can fail on a chosen read.
struct Values {
    info: RecordingInfo,
    values: Vec<f32>,
    reads: Mutex<Vec<u64>>,
    /// The read (counted from 1) that waits for `open` before it returns.
    gate: Option<usize>,
    open: (Mutex<bool>, Condvar),
    /// Reads starting at this sample fail.
    fail_at: Option<u64>,
    /// Reads starting at this sample panic.
    panic_at: Option<u64>,
}

impl Values {
    /// `channels` channels of `samples` random values: integers in [-40, 40] (so equal values
    /// are common), with 0.0 and -0.0, NaN and infinities sprinkled in, and channel 1 all NaN
    /// over a stretch longer than a page of the small layouts.
    fn random(channels: usize, samples: u64, seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let n = samples as usize;
        let mut values = Vec::with_capacity(channels * n);
        for c in 0..channels {
            for s in 0..n {
                let v = match rng.below(100) {
                    0..=5 => 0.0,
                    6..=11 => -0.0,
                    12..=15 => f32::NAN,
                    16 => f32::INFINITY,
                    17 => f32::NEG_INFINITY,
                    _ => rng.below(81) as f32 - 40.0,
                };
                let gap = c == 1 && (n / 3..n / 3 + 150).contains(&s);
                values.push(if gap { f32::NAN } else { v });
            }
        }
        Self::new(channels, values)
    }

    fn new(channels: usize, values: Vec<f32>) -> Self {
        let samples = (values.len() / channels) as u64;
        let info = RecordingInfo::new(
            (0..channels)
                .map(|c| ChannelInfo::new(format!("CH{c}"), 1.0, 0.0, "uV"))
                .collect(),
            samples,
            SampleRate::from_hz(30_000).unwrap(),
            SampleFormat::F32,
        )
        .unwrap();
        Self {
            info,
            values,
            reads: Mutex::new(Vec::new()),
            gate: None,
            open: (Mutex::new(false), Condvar::new()),
            fail_at: None,
            panic_at: None,
        }
    }

    /// The values with those of `samples` of every channel replaced by NaN.
    fn without(&self, ranges: &[Range<u64>]) -> Vec<f32> {
        let n = self.info.num_samples as usize;
        let mut values = self.values.clone();
        for range in ranges {
            for c in 0..self.info.num_channels() {
                values[c * n + range.start as usize..c * n + range.end as usize].fill(f32::NAN);
            }
        }
        values
    }

    fn reads(&self) -> Vec<u64> {
        self.reads.lock().unwrap().clone()
    }

    /// Lets the held read go.
    fn release(&self) {
        *self.open.0.lock().unwrap() = true;
        self.open.1.notify_all();
    }

    /// Waits until `count` reads have started.
    fn wait_for_reads(&self, count: usize) {
        for _ in 0..2000 {
            if self.reads.lock().unwrap().len() >= count {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!("{count} reads never came: {:?}", self.reads());
    }
}

impl RecordingSource for Values {
    fn info(&self) -> &RecordingInfo {
        &self.info
    }

    fn fill_scaled(&self, request: &ReadRequest<'_>, out: &mut [f32]) -> dspk_core::Result<()> {
        let range = request.samples();
        let count = {
            let mut reads = self.reads.lock().unwrap();
            reads.push(range.start);
            reads.len()
        };
        if self.gate == Some(count) {
            let mut open = self.open.0.lock().unwrap();
            while !*open {
                open = self.open.1.wait(open).unwrap();
            }
        }
        if self.fail_at == Some(range.start) {
            return Err(dspk_core::Error::Source {
                source_name: "test source".into(),
                cause: Arc::new(std::io::Error::other(format!(
                    "bad sector at {}",
                    range.start
                ))),
            });
        }
        assert_ne!(self.panic_at, Some(range.start), "the test source panics");
        let n = self.info.num_samples as usize;
        let len = request.samples_per_channel();
        for (out, &c) in out.chunks_exact_mut(len).zip(request.channels()) {
            out.copy_from_slice(&self.values[c * n + range.start as usize..][..len]);
        }
        Ok(())
    }
}

/// The host fold of `values` (`[channels, samples]` of the whole recording) for `channels`
/// over `columns`.
fn reference(values: &[f32], samples: u64, channels: &[usize], columns: &Columns) -> Envelope {
    let range = columns.samples();
    let n = samples as usize;
    let mut block = Vec::new();
    for &c in channels {
        block.extend_from_slice(&values[c * n + range.start as usize..c * n + range.end as usize]);
    }
    Envelope::from_samples(&block, Order::ChannelMajor, channels.len(), columns.clone()).unwrap()
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

/// A range on level `bucket`'s grid: from a random bucket edge to a later one or the end.
fn random_range(rng: &mut Rng, samples: u64, bucket: u64) -> Range<u64> {
    let buckets = samples.div_ceil(bucket);
    let first = rng.below(buckets);
    let last = first + 1 + rng.below(buckets - first);
    first * bucket..(last * bucket).min(samples)
}

/// Checks every level of `pyramid` against the host fold of `source`'s values with the pages
/// `missing` (not built) read as NaN, on the whole recording and on random ranges, for steps
/// of 1 to 3 buckets and two channel lists; an answer is complete when no page under it is
/// missing.
fn check_levels(what: &str, pyramid: &Pyramid, source: &Values, missing: &[u64], seed: u64) {
    let layout = pyramid.layout();
    let samples = layout.samples();
    let gaps: Vec<Range<u64>> = missing.iter().map(|&p| layout.page_range(p)).collect();
    let values = &source.without(&gaps);
    let mut rng = Rng::new(seed);
    let all: Vec<usize> = (0..layout.channels()).collect();
    let some = vec![layout.channels() - 1, 0, layout.channels() - 1];
    for level in 0..pyramid.levels() {
        let bucket = pyramid.bucket(level);
        for (k, multiple) in [1, 2, 3].into_iter().enumerate() {
            let step = bucket * multiple;
            let range = if k == 0 {
                0..samples
            } else {
                random_range(&mut rng, samples, bucket)
            };
            let columns = Columns::grid(range.clone(), step).unwrap();
            for channels in [&all, &some] {
                let (envelope, done) = pyramid.envelope(level, channels, &columns).unwrap();
                let expected = reference(values, samples, channels, &columns);
                let pages =
                    range.start / layout.page_samples()..=(range.end - 1) / layout.page_samples();
                let complete = !missing.iter().any(|p| pages.contains(p));
                let at = format!(
                    "{what}: level {level} (bucket {bucket}) step {step} samples {range:?} channels {channels:?}"
                );
                assert_eq!(done, complete, "{at}: complete");
                assert_eq!(envelope.nan_counts(), None, "{at}");
                assert_eq!(envelope.columns(), &columns, "{at}");
                assert_eq!(bits(envelope.min()), bits(expected.min()), "{at}: minima");
                assert_eq!(bits(envelope.max()), bits(expected.max()), "{at}: maxima");
            }
        }
    }
}

/// NaN samples per channel of `values`.
fn nan_counts(values: &[f32], channels: usize) -> Vec<u64> {
    values
        .chunks_exact(values.len() / channels)
        .map(|row| row.iter().filter(|v| v.is_nan()).count() as u64)
        .collect()
}

fn check_nan(what: &str, pyramid: &Pyramid, values: &[f32]) {
    let channels = pyramid.layout().channels();
    let counted: Vec<u64> = (0..channels)
        .map(|c| pyramid.nan_samples(c).unwrap())
        .collect();
    assert_eq!(counted, nan_counts(values, channels), "{what}: NaN samples");
}

/// Layouts with pages that hold a whole number of each in-page level's buckets but not of the
/// first coarse level's (48 = 3 x 16, coarse 64), pages aligned with every coarse bucket (base
/// 2, factor 3, page 54), a recording shorter than a page, and the default layout.
fn layouts() -> Vec<(PyramidLayout, u64)> {
    vec![
        (
            PyramidLayout::with_buckets(3, 5 * 48 + 37, 4, 4, 48).unwrap(),
            1,
        ),
        (PyramidLayout::with_buckets(4, 1000, 2, 3, 54).unwrap(), 2),
        (PyramidLayout::with_buckets(2, 131, 8, 2, 64).unwrap(), 3),
        (PyramidLayout::new(2, 70_001).unwrap(), 4),
    ]
}

/// A fresh scratch folder for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("dspk-view-pyramid")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `source`'s values as a raw file (what the cache's signature is taken from).
fn write_recording(path: &Path, source: &Values) {
    let bytes: Vec<u8> = source.values.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(path, bytes).unwrap();
}

fn build(
    pyramid: &Arc<Pyramid>,
    source: &Arc<Values>,
    options: BuildOptions,
) -> dspk_view::Result<()> {
    PyramidBuild::start(Arc::clone(pyramid), Arc::clone(source) as _, options)?.wait()
}

#[test]
fn layout_levels_and_pages() {
    let layout = PyramidLayout::with_buckets(3, 5 * 48 + 37, 4, 4, 48).unwrap();
    assert_eq!(layout.levels(), 5);
    assert_eq!(
        (0..5).map(|l| layout.bucket(l)).collect::<Vec<_>>(),
        [4, 16, 64, 256, 1024]
    );
    // Level 1 (16 samples) divides the page but has only 3 buckets in it: kept in memory.
    assert_eq!(layout.page_levels(), 1);
    assert_eq!(layout.pages(), 6);
    assert_eq!(layout.page_range(5), 240..277);
    // Per page: 3 channels x 12 buckets x min and max, and 3 NaN counts.
    assert_eq!(layout.page_bytes(), 4 * (3 * 12 * 2 + 3));
    // Memory levels: 18 + 5 + 2 + 1 buckets.
    assert_eq!(layout.coarse_bytes(), 8 * 3 * 26);

    let default = PyramidLayout::new(384, 30_000 * 600).unwrap();
    assert_eq!(
        (
            default.base_bucket(),
            default.factor(),
            default.page_samples()
        ),
        (64, 4, 1 << 15)
    );
    // Buckets 64 to 4 096 in the pages (8 or more per page); 16 384 in memory.
    assert_eq!(default.page_levels(), 4);
    // 24 hours of 1024 channels: the 16 384-sample level would take 1.3 GB of memory, so it
    // stays in the pages (every level that divides the page).
    let long = PyramidLayout::new(1024, 30_000 * 86_400).unwrap();
    assert_eq!(long.page_levels(), 5);
    assert!(long.coarse_bytes() < 1 << 30);
    // Level 9's bucket (16.8 M samples) is under the recording's 18 M, level 10's covers it.
    assert_eq!(default.levels(), 11);
    assert_eq!(default.bucket(9), 64 << 18);
    assert_eq!(default.bucket(10), 64 << 20);
    let recording_bytes = 384 * 30_000 * 600 * 2u64;
    let ratio = default.bytes() as f64 / recording_bytes as f64;
    assert!((0.083..0.084).contains(&ratio), "{ratio}");
}

#[test]
fn every_level_equals_the_host_fold_in_memory_and_in_a_file() {
    let dir = scratch("host_fold");
    for (layout, seed) in layouts() {
        let source = Arc::new(Values::random(layout.channels(), layout.samples(), seed));
        let memory = Arc::new(Pyramid::in_memory(layout.clone()));
        assert!(!memory.is_complete());
        build(&memory, &source, BuildOptions::new().threads(1)).unwrap();
        assert!(memory.is_complete());
        assert_eq!(memory.pages_filled(), layout.pages());
        check_levels("memory", &memory, &source, &[], seed);
        check_nan("memory", &memory, &source.values);

        let recording = dir.join(format!("rec{seed}.f32"));
        write_recording(&recording, &source);
        let signature = RecordingSignature::of_file(&recording, &source.info).unwrap();
        let cache = Pyramid::cache_path_beside(&recording);
        let (file, state) = Pyramid::open_cache(&cache, &signature, layout.clone()).unwrap();
        assert_eq!(state, CacheState::Fresh);
        assert_eq!(file.cache_path(), Some(cache.as_path()));
        let file = Arc::new(file);
        build(
            &file,
            &source,
            BuildOptions::new().threads(3).focus(layout.samples() / 2),
        )
        .unwrap();
        check_levels("file", &file, &source, &[], seed);
        check_nan("file", &file, &source.values);
    }
}

#[test]
fn pages_filled_in_random_order_by_several_threads_equal_pages_filled_in_order() {
    let dir = scratch("random_order");
    for (layout, seed) in layouts() {
        let source = Values::random(layout.channels(), layout.samples(), seed + 10);
        let in_order = Pyramid::in_memory(layout.clone());
        for page in 0..layout.pages() {
            assert!(in_order.fill_page(page, &source).unwrap());
        }
        let mut pages: Vec<u64> = (0..layout.pages()).collect();
        let mut rng = Rng::new(seed);
        for i in (1..pages.len()).rev() {
            pages.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let recording = dir.join(format!("rec{seed}.f32"));
        write_recording(&recording, &source);
        let signature = RecordingSignature::of_file(&recording, &source.info).unwrap();
        let (shuffled_file, _) = Pyramid::open_cache(
            &Pyramid::cache_path_beside(&recording),
            &signature,
            layout.clone(),
        )
        .unwrap();
        for shuffled in [Pyramid::in_memory(layout.clone()), shuffled_file] {
            let next = AtomicUsize::new(0);
            std::thread::scope(|scope| {
                for _ in 0..4 {
                    scope.spawn(|| {
                        while let Some(&page) = pages.get(next.fetch_add(1, Ordering::Relaxed)) {
                            assert!(shuffled.fill_page(page, &source).unwrap());
                        }
                    });
                }
            });
            assert!(shuffled.is_complete());
            // A page built is not built again.
            assert!(!shuffled.fill_page(0, &source).unwrap());
            for level in 0..layout.levels() {
                let columns = Columns::grid(0..layout.samples(), layout.bucket(level)).unwrap();
                let channels: Vec<usize> = (0..layout.channels()).collect();
                let (a, _) = in_order.envelope(level, &channels, &columns).unwrap();
                let (b, done) = shuffled.envelope(level, &channels, &columns).unwrap();
                assert!(done);
                assert_eq!(bits(a.min()), bits(b.min()), "level {level} minima");
                assert_eq!(bits(a.max()), bits(b.max()), "level {level} maxima");
            }
            check_levels("shuffled", &shuffled, &source, &[], seed);
            check_nan("shuffled", &shuffled, &source.values);
        }
    }
}

#[test]
fn a_partial_pyramid_answers_from_the_pages_built() {
    let (layout, seed) = layouts().swap_remove(0);
    let source = Values::random(layout.channels(), layout.samples(), seed);
    let pyramid = Pyramid::in_memory(layout.clone());
    for page in [0, 2, 5] {
        pyramid.fill_page(page, &source).unwrap();
    }
    assert_eq!(pyramid.pages_filled(), 3);
    assert!(!pyramid.is_complete());
    assert!(pyramid.page_filled(2) && !pyramid.page_filled(1) && !pyramid.page_filled(99));
    // Unbuilt pages read as all NaN: the columns over them are empty, those that straddle
    // hold what the built pages gave, and the answers over them say incomplete.
    check_levels("partial", &pyramid, &source, &[1, 3, 4], seed);
    let built = Columns::grid(layout.page_range(2), layout.bucket(0)).unwrap();
    let (envelope, complete) = pyramid.envelope(0, &[0, 1, 2], &built).unwrap();
    assert!(complete);
    let expected = reference(&source.values, layout.samples(), &[0, 1, 2], &built);
    assert_eq!(bits(envelope.min()), bits(expected.min()));
}

#[test]
fn pages_nearest_the_focus_are_built_first_and_the_focus_can_move() {
    // 20 pages of 16 samples.
    let layout = PyramidLayout::with_buckets(2, 20 * 16, 4, 2, 16).unwrap();
    let source = Arc::new(Values::random(2, layout.samples(), 5));
    let pyramid = Arc::new(Pyramid::in_memory(layout.clone()));
    build(
        &pyramid,
        &source,
        BuildOptions::new().threads(1).focus(5 * 16 + 3),
    )
    .unwrap();
    let pages: Vec<u64> = source.reads().iter().map(|s| s / 16).collect();
    let mut expected = vec![5];
    for d in 1..20u64 {
        expected.extend(
            [5 + d, 5u64.wrapping_sub(d)]
                .into_iter()
                .filter(|&p| p < 20),
        );
    }
    assert_eq!(pages, expected);

    // The focus moves to page 15 while page 2 is read.
    let mut held = Values::random(2, layout.samples(), 5);
    held.gate = Some(3);
    let held = Arc::new(held);
    let pyramid = Arc::new(Pyramid::in_memory(layout.clone()));
    let run = PyramidBuild::start(
        Arc::clone(&pyramid),
        Arc::clone(&held) as _,
        BuildOptions::new().threads(1),
    )
    .unwrap();
    held.wait_for_reads(3);
    run.set_focus(15 * 16);
    held.release();
    run.wait().unwrap();
    let pages: Vec<u64> = held.reads().iter().map(|s| s / 16).collect();
    let mut expected = vec![0, 1, 2, 15];
    for d in 1..20u64 {
        expected.extend(
            [15 + d, 15u64.wrapping_sub(d)]
                .into_iter()
                .filter(|&p| p < 20 && p > 2),
        );
    }
    assert_eq!(pages, expected);
    check_levels("refocused", &pyramid, &held, &[], 5);
}

#[test]
fn a_cancelled_build_resumes_from_its_cache_file() {
    let dir = scratch("cancel");
    let layout = PyramidLayout::with_buckets(3, 12 * 48 + 5, 4, 4, 48).unwrap();
    let mut source = Values::random(3, layout.samples(), 7);
    source.gate = Some(4);
    let source = Arc::new(source);
    let recording = dir.join("rec.f32");
    write_recording(&recording, &source);
    let signature = RecordingSignature::of_file(&recording, &source.info).unwrap();
    let cache = Pyramid::cache_path_beside(&recording);
    let (pyramid, _) = Pyramid::open_cache(&cache, &signature, layout.clone()).unwrap();
    let pyramid = Arc::new(pyramid);
    let told = Arc::new(AtomicU64::new(0));
    let count = Arc::clone(&told);
    let run = PyramidBuild::start(
        Arc::clone(&pyramid),
        Arc::clone(&source) as _,
        BuildOptions::new()
            .threads(1)
            .on_progress(move |p: BuildProgress| {
                count.store(p.done, Ordering::Relaxed);
            }),
    )
    .unwrap();
    source.wait_for_reads(4);
    let cancel = run.canceller();
    cancel.cancel();
    assert!(cancel.is_cancelled());
    source.release();
    match run.wait() {
        Err(Error::Cancelled { done: 4, total: 13 }) => {}
        other => panic!("expected a cancel after 4 of 13 pages, got {other:?}"),
    }
    assert_eq!(told.load(Ordering::Relaxed), 4);
    assert_eq!(source.reads().len(), 4);
    drop(pyramid);

    let (pyramid, state) = Pyramid::open_cache(&cache, &signature, layout.clone()).unwrap();
    assert_eq!(
        state,
        CacheState::Resumed {
            pages: 4,
            damaged: 0
        }
    );
    let pyramid = Arc::new(pyramid);
    let missing: Vec<u64> = (4..13).collect();
    check_levels("resumed", &pyramid, &source, &missing, 7);
    let rest = Arc::new(Values::random(3, layout.samples(), 7));
    let run = PyramidBuild::start(
        Arc::clone(&pyramid),
        Arc::clone(&rest) as _,
        BuildOptions::new().threads(2),
    )
    .unwrap();
    run.wait().unwrap();
    assert_eq!(rest.reads().len(), 9, "only the pages not built are read");
    check_levels("finished", &pyramid, &source, &[], 7);
    check_nan("finished", &pyramid, &source.values);

    // Dropping a running build cancels it and waits for its threads.
    let dropped = Arc::new(Pyramid::in_memory(layout.clone()));
    let run = PyramidBuild::start(
        Arc::clone(&dropped),
        Arc::clone(&rest) as _,
        BuildOptions::new().threads(2),
    )
    .unwrap();
    drop(run);
    build(&dropped, &rest, BuildOptions::new()).unwrap();
    check_levels("after a drop", &dropped, &source, &[], 7);
}

#[test]
fn cache_files_are_reused_only_for_the_same_recording_and_never_trusted_damaged() {
    let dir = scratch("cache");
    let layout = PyramidLayout::with_buckets(3, 9 * 48 + 11, 4, 4, 48).unwrap();
    let source = Arc::new(Values::random(3, layout.samples(), 11));
    let recording = dir.join("rec.f32");
    write_recording(&recording, &source);
    let cache = Pyramid::cache_path_beside(&recording);
    let open = || {
        let signature = RecordingSignature::of_file(&recording, &source.info).unwrap();
        let (pyramid, state) = Pyramid::open_cache(&cache, &signature, layout.clone()).unwrap();
        (Arc::new(pyramid), state)
    };
    let rebuilt = |state: CacheState, why: &str| match state {
        CacheState::Rebuilt { reason } => assert!(reason.contains(why), "{reason}"),
        other => panic!("expected a rebuild ({why}), got {other:?}"),
    };

    let (pyramid, state) = open();
    assert_eq!(state, CacheState::Fresh);
    build(&pyramid, &source, BuildOptions::new().threads(2)).unwrap();
    drop(pyramid);

    let (pyramid, state) = open();
    assert_eq!(
        state,
        CacheState::Resumed {
            pages: 10,
            damaged: 0
        }
    );
    assert!(pyramid.is_complete());
    check_levels("reopened", &pyramid, &source, &[], 11);
    check_nan("reopened", &pyramid, &source.values);
    drop(pyramid);

    // Another layout.
    let other = PyramidLayout::with_buckets(3, layout.samples(), 4, 2, 48).unwrap();
    let signature = RecordingSignature::of_file(&recording, &source.info).unwrap();
    let (_, state) = Pyramid::open_cache(&cache, &signature, other).unwrap();
    rebuilt(state, "layout");
    let (pyramid, state) = open();
    rebuilt(state, "layout");
    build(&pyramid, &source, BuildOptions::new()).unwrap();
    drop(pyramid);

    // The recording touched: a new modification time.
    let file = OpenOptions::new().write(true).open(&recording).unwrap();
    file.set_modified(SystemTime::now() + Duration::from_secs(60))
        .unwrap();
    drop(file);
    let (pyramid, state) = open();
    rebuilt(state, "modification time");
    assert_eq!(pyramid.pages_filled(), 0);
    build(&pyramid, &source, BuildOptions::new()).unwrap();
    drop(pyramid);
    assert_eq!(
        open().1,
        CacheState::Resumed {
            pages: 10,
            damaged: 0
        }
    );

    // The recording grown by a byte.
    let mut bytes = std::fs::read(&recording).unwrap();
    bytes.push(0);
    std::fs::write(&recording, &bytes).unwrap();
    let (pyramid, state) = open();
    rebuilt(state, "size");
    build(&pyramid, &source, BuildOptions::new()).unwrap();
    drop(pyramid);

    // The cache truncated, by a little and to less than its header.
    let keeps: [fn(u64) -> u64; 2] = [|len| len - 100, |_| 20];
    for keep in keeps {
        let file = OpenOptions::new().write(true).open(&cache).unwrap();
        let len = file.metadata().unwrap().len();
        file.set_len(keep(len)).unwrap();
        drop(file);
        let (pyramid, state) = open();
        rebuilt(state, "bytes");
        assert_eq!(pyramid.pages_filled(), 0);
        build(&pyramid, &source, BuildOptions::new()).unwrap();
        check_levels("rebuilt", &pyramid, &source, &[], 11);
    }

    // A byte flipped in the values of page 8 (slots of page_bytes + 8 end the file, in page
    // order), and one in its checksum: that page alone is built again.
    let slot = layout.page_bytes() + 8;
    for from_end in [2 * slot - 40, slot + 3] {
        let mut bytes = std::fs::read(&cache).unwrap();
        let at = bytes.len() - from_end as usize;
        bytes[at] ^= 0x04;
        std::fs::write(&cache, &bytes).unwrap();
        let (pyramid, state) = open();
        assert_eq!(
            state,
            CacheState::Resumed {
                pages: 9,
                damaged: 1
            }
        );
        assert!(!pyramid.page_filled(8) && pyramid.page_filled(9) && pyramid.page_filled(7));
        check_levels("damaged page", &pyramid, &source, &[8], 11);
        let again = Arc::new(Values::random(3, layout.samples(), 11));
        build(&pyramid, &again, BuildOptions::new()).unwrap();
        assert_eq!(again.reads(), [8 * 48]);
        check_levels("repaired", &pyramid, &source, &[], 11);
    }

    // A file that is not a cache is refused and left as it was.
    let stranger = dir.join("notes.txt");
    std::fs::write(&stranger, b"not a pyramid").unwrap();
    let signature = RecordingSignature::of_file(&recording, &source.info).unwrap();
    match Pyramid::open_cache(&stranger, &signature, layout.clone()) {
        Err(Error::Cache { path, reason }) => {
            assert_eq!(path, stranger);
            assert!(reason.contains("not a dspk pyramid cache"), "{reason}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(std::fs::read(&stranger).unwrap(), b"not a pyramid");
}

#[test]
fn cache_paths_and_open() {
    let dir = scratch("paths");
    assert_eq!(
        Pyramid::cache_path_beside(Path::new("data/rec.bin")),
        Path::new("data/rec.bin.dspk-pyramid")
    );
    assert_eq!(
        Pyramid::cache_path_beside(Path::new("data/rec.zarr/")),
        Path::new("data/rec.zarr.dspk-pyramid")
    );
    let source = Values::random(2, 100, 1);
    for sub in ["a", "b"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        write_recording(&dir.join(sub).join("rec.f32"), &source);
    }
    let folder = dir.join("caches");
    let a = Pyramid::cache_path_in(&folder, &dir.join("a/rec.f32")).unwrap();
    let b = Pyramid::cache_path_in(&folder, &dir.join("b/rec.f32")).unwrap();
    let a_again = Pyramid::cache_path_in(&folder, &dir.join("b/../a/rec.f32")).unwrap();
    assert_ne!(a, b);
    assert_eq!(a, a_again);
    assert!(a.starts_with(&folder));
    let name = a.file_name().unwrap().to_str().unwrap();
    assert!(
        name.starts_with("rec.f32-") && name.ends_with(".dspk-pyramid"),
        "{name}"
    );
    assert!(matches!(
        Pyramid::cache_path_in(&folder, &dir.join("missing.f32")),
        Err(Error::Io { .. })
    ));

    // A small pyramid stays in memory; a large one goes to a file in the folder given.
    let recording = dir.join("a/rec.f32");
    let small = PyramidLayout::for_recording(&source.info).unwrap();
    let (pyramid, state) = Pyramid::open(&recording, &source.info, small, Some(&folder)).unwrap();
    assert_eq!(state, CacheState::InMemory);
    assert_eq!(pyramid.cache_path(), None);
    // 8 channels x 2^26 samples with base buckets of 2: about 4 GiB of values, none written.
    let big_info = RecordingInfo::new(
        (0..8)
            .map(|c| ChannelInfo::new(format!("CH{c}"), 1.0, 0.0, "uV"))
            .collect(),
        1 << 26,
        SampleRate::from_hz(30_000).unwrap(),
        SampleFormat::I16,
    )
    .unwrap();
    let big = PyramidLayout::with_buckets(8, 1 << 26, 2, 4, 1 << 15).unwrap();
    assert!(big.bytes() > Pyramid::IN_MEMORY_LIMIT);
    let (pyramid, state) = Pyramid::open(&recording, &big_info, big, Some(&folder)).unwrap();
    assert_eq!(state, CacheState::Fresh);
    assert_eq!(pyramid.cache_path(), Some(a.as_path()));
    drop(pyramid);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_source_error_ends_the_build_with_it() {
    let layout = PyramidLayout::with_buckets(2, 10 * 16, 4, 2, 16).unwrap();
    let mut source = Values::random(2, layout.samples(), 3);
    source.fail_at = Some(2 * 16);
    let source = Arc::new(source);
    let pyramid = Arc::new(Pyramid::in_memory(layout.clone()));
    match build(&pyramid, &source, BuildOptions::new().threads(1)) {
        Err(Error::Recording(dspk_core::Error::Source { cause, .. })) => {
            assert!(cause.to_string().contains("bad sector at 32"), "{cause}");
        }
        other => panic!("expected the source's error, got {other:?}"),
    }
    assert_eq!(source.reads(), [0, 16, 32]);
    assert_eq!(pyramid.pages_filled(), 2);
    assert!(!pyramid.page_filled(2));
    assert!(matches!(
        pyramid.fill_page(2, &*source),
        Err(Error::Recording(_))
    ));
    assert!(!pyramid.page_filled(2), "a failed page stays unbuilt");

    // Several threads: the build still ends with the error, every thread joined.
    let pyramid = Arc::new(Pyramid::in_memory(layout.clone()));
    assert!(matches!(
        build(&pyramid, &source, BuildOptions::new().threads(3)),
        Err(Error::Recording(_))
    ));
    assert!(!pyramid.page_filled(2));

    // A source that panics: the panic becomes the build's error, the page stays unbuilt.
    let mut source = Values::random(2, layout.samples(), 3);
    source.panic_at = Some(3 * 16);
    let source = Arc::new(source);
    let pyramid = Arc::new(Pyramid::in_memory(layout));
    match build(&pyramid, &source, BuildOptions::new().threads(2)) {
        Err(Error::Recording(dspk_core::Error::Source { source_name, cause })) => {
            assert_eq!(source_name, "pyramid page 3");
            assert!(
                cause.to_string().contains("the test source panics"),
                "{cause}"
            );
        }
        other => panic!("expected the panic as an error, got {other:?}"),
    }
    assert!(!pyramid.page_filled(3));
}

#[test]
fn bad_requests_are_refused() {
    let layout = PyramidLayout::with_buckets(3, 5 * 48 + 37, 4, 4, 48).unwrap();
    let source = Arc::new(Values::random(3, layout.samples(), 1));
    let pyramid = Arc::new(Pyramid::in_memory(layout.clone()));
    build(&pyramid, &source, BuildOptions::new()).unwrap();
    let n = layout.samples();
    let invalid = |result: dspk_view::Result<(Envelope, bool)>, what: &str| match result {
        Err(Error::InvalidRequest { reason, .. }) => assert!(reason.contains(what), "{reason}"),
        other => panic!("expected a refusal ({what}), got {other:?}"),
    };
    let grid = |range: Range<u64>, step| Columns::grid(range, step).unwrap();
    invalid(pyramid.envelope(5, &[0], &grid(0..n, 1024)), "level 5 of 5");
    invalid(pyramid.envelope(0, &[3], &grid(0..n, 4)), "channel 3 of 3");
    invalid(pyramid.envelope(0, &[], &grid(0..n, 4)), "no channel");
    invalid(pyramid.envelope(1, &[0], &grid(0..n, 8)), "not a multiple");
    invalid(pyramid.envelope(1, &[0], &grid(0..n, 24)), "not a multiple");
    invalid(
        pyramid.envelope(0, &[0], &Columns::even(0..n, 10).unwrap()),
        "even columns",
    );
    invalid(pyramid.envelope(1, &[0], &grid(4..64, 16)), "bucket edges");
    invalid(pyramid.envelope(1, &[0], &grid(16..60, 16)), "bucket edges");
    invalid(
        pyramid.envelope(0, &[0], &grid(0..n + 4, 4)),
        "recording's end",
    );
    // Ending at the recording's end is fine on every level.
    for level in 0..pyramid.levels() {
        let b = pyramid.bucket(level);
        let start = (n - 1) / b * b;
        assert!(pyramid.envelope(level, &[2], &grid(start..n, b)).unwrap().1);
    }
    assert!(matches!(
        pyramid.nan_samples(3),
        Err(Error::InvalidRequest { .. })
    ));
    assert!(matches!(
        pyramid.fill_page(6, &*source),
        Err(Error::InvalidRequest { .. })
    ));

    let other = Arc::new(Values::random(3, n - 1, 1));
    assert!(matches!(
        PyramidBuild::start(Arc::clone(&pyramid), other as _, BuildOptions::new()),
        Err(Error::InvalidRequest { .. })
    ));
    assert!(matches!(
        PyramidBuild::start(
            Arc::clone(&pyramid),
            Arc::clone(&source) as _,
            BuildOptions::new().threads(0)
        ),
        Err(Error::InvalidRequest { .. })
    ));
    let signature = RecordingSignature {
        file_size: 1,
        modified_ns: 0,
        channels: 3,
        samples: n - 1,
        rate: SampleRate::from_hz(30_000).unwrap(),
    };
    let dir = scratch("bad");
    assert!(matches!(
        Pyramid::open_cache(&dir.join("c"), &signature, layout),
        Err(Error::InvalidRequest { .. })
    ));

    for (channels, samples, base, factor, page) in [
        (0, 100, 4, 4, 16),
        (1, 0, 4, 4, 16),
        (1, 100, 0, 4, 16),
        (1, 100, 4, 1, 16),
        (1, 100, 4, 4, 18),
        (1, 100, 4, 4, 0),
    ] {
        assert!(
            matches!(
                PyramidLayout::with_buckets(channels, samples, base, factor, page),
                Err(Error::InvalidRequest { .. })
            ),
            "{channels} {samples} {base} {factor} {page}"
        );
    }
    assert!(matches!(
        PyramidLayout::with_buckets(1, 100, 1, 4, 1 << 17),
        Err(Error::OverLimit { .. })
    ));
    assert!(matches!(
        PyramidLayout::with_buckets(1 << 14, 100, 64, 4, 1 << 15),
        Err(Error::OverLimit { .. })
    ));
    // A recording that claims 2^50 samples: its pages' bookkeeping alone would not fit.
    assert!(matches!(
        PyramidLayout::new(384, 1 << 50),
        Err(Error::OverLimit { .. })
    ));
    // Tiny buckets over a long recording: coarse levels of 2^40 x 8 bytes.
    assert!(matches!(
        PyramidLayout::with_buckets(1, 1 << 40, 1, 2, 1),
        Err(Error::OverLimit { .. })
    ));
}

#[test]
fn the_device_fold_builds_the_same_pyramid_on_every_runtime() {
    let (layout, seed) = layouts().swap_remove(0);
    let source = Arc::new(Values::random(layout.channels(), layout.samples(), seed));
    for_each_runtime(|target, client| {
        let pyramid = Arc::new(Pyramid::in_memory(layout.clone()));
        let options = BuildOptions::new()
            .threads(2)
            .fold(PageFold::Device(client.clone()));
        build(&pyramid, &source, options).unwrap();
        check_levels(
            &format!("device fold on {target}"),
            &pyramid,
            &source,
            &[],
            seed,
        );
        check_nan(
            &format!("device fold on {target}"),
            &pyramid,
            &source.values,
        );
    });
}
