//! `WindowLoader` with several reader threads per window: the same windows as one thread for
//! every way of cutting a window, errors and panics in one part, and no thread left behind.

use std::num::NonZeroUsize;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dspk_core::{
    ChunkSchedule, ConcurrentReads, Error, LoaderOptions, ReadRequest, RecordingInfo,
    RecordingSource, Result, SampleRate, SyntheticRecording, WindowLoader,
};

/// Serialises the tests of this file: they count the process's threads.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What a [`Declared`] source does on reads touching given samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    /// Reads touching either range fail, naming the first range they touch.
    Fail([(u64, u64); 2]),
    /// Reads touching the range panic.
    Panic((u64, u64)),
}

/// A synthetic recording that declares `mode` and reads parts through the trait's default
/// `fill_*_runs` (a scratch buffer and `fill_*`), with an optional fault.
struct Declared {
    inner: SyntheticRecording,
    mode: ConcurrentReads,
    fault: Fault,
}

impl Declared {
    fn new(channels: usize, samples: u64, mode: ConcurrentReads, fault: Fault) -> Arc<Self> {
        let rate = SampleRate::from_hz(30_000).unwrap();
        let inner = SyntheticRecording::new(channels, samples, rate, 3).unwrap();
        Arc::new(Self { inner, mode, fault })
    }

    fn check(&self, samples: Range<u64>) -> Result<()> {
        let touches = |(a, b): (u64, u64)| samples.start < b && a < samples.end;
        match self.fault {
            Fault::None => Ok(()),
            Fault::Fail(ranges) => match ranges.iter().position(|&r| touches(r)) {
                Some(which) => Err(Error::Source {
                    source_name: "declared test source".into(),
                    cause: Arc::new(std::io::Error::other(format!("bad range {which}"))),
                }),
                None => Ok(()),
            },
            Fault::Panic(range) => {
                assert!(!touches(range), "test panic in a part");
                Ok(())
            }
        }
    }
}

impl RecordingSource for Declared {
    fn info(&self) -> &RecordingInfo {
        self.inner.info()
    }
    fn fill_scaled(&self, request: &ReadRequest<'_>, out: &mut [f32]) -> Result<()> {
        self.check(request.samples())?;
        self.inner.fill_scaled(request, out)
    }
    fn fill_stored(&self, request: &ReadRequest<'_>, out: &mut [u8]) -> Result<()> {
        self.check(request.samples())?;
        self.inner.fill_stored(request, out)
    }
    fn can_read_stored(&self) -> bool {
        true
    }
    fn concurrent_reads(&self) -> ConcurrentReads {
        self.mode
    }
}

fn options(threads: usize) -> LoaderOptions {
    LoaderOptions {
        threads: NonZeroUsize::new(threads),
        ..LoaderOptions::default()
    }
}

/// Every window's index, read range, stored bytes and scaled values (as bits).
type Windows = Vec<(usize, Range<u64>, Vec<u8>, Vec<u32>)>;

/// Loads every window of `schedule` from `source`, stored and scaled, with `threads` threads.
fn load(source: &Arc<Declared>, schedule: ChunkSchedule, threads: usize) -> Windows {
    let channels = vec![2, 0, 3, 1];
    let stored =
        WindowLoader::<u8>::new(source.clone(), channels.clone(), schedule, options(threads));
    let scaled = WindowLoader::<f32>::new(source.clone(), channels, schedule, options(threads));
    stored
        .unwrap()
        .zip(scaled.unwrap())
        .map(|(stored, scaled)| {
            let (stored, scaled) = (stored.unwrap(), scaled.unwrap());
            let window = stored.window();
            let bits = scaled.data().iter().map(|v| v.to_bits()).collect();
            (window.index(), window.read(), stored.data().to_vec(), bits)
        })
        .collect()
}

#[test]
fn any_cut_and_any_thread_count_give_the_windows_of_one_thread() {
    let _guard = serial();
    let samples = 40_009;
    // Windows of 5 003 samples with uneven halos: no window or part divides evenly.
    let schedule = ChunkSchedule::new(samples, 5_003, 77, 130).unwrap();
    for mode in [
        ConcurrentReads::ByTime { align: 1 },
        ConcurrentReads::ByTime { align: 777 },
        ConcurrentReads::ByChannel,
        ConcurrentReads::No,
    ] {
        let source = Declared::new(4, samples, mode, Fault::None);
        let one = load(&source, schedule, 1);
        assert_eq!(one.len(), schedule.len());
        for ((index, read, stored, _), window) in one.iter().zip(schedule.iter()) {
            assert_eq!((*index, read), (window.index(), &window.read()));
            let mut expected = vec![0u8; stored.len()];
            source
                .read_stored(&[2, 0, 3, 1], read.clone(), &mut expected)
                .unwrap();
            assert!(stored == &expected, "{mode:?}: window {index}");
        }
        for threads in 2..=8 {
            let loader =
                WindowLoader::<u8>::new(source.clone(), vec![0], schedule, options(threads))
                    .unwrap();
            let expected = if mode == ConcurrentReads::No {
                1
            } else {
                threads
            };
            assert_eq!(loader.reader_threads(), expected);
            drop(loader);
            assert!(
                load(&source, schedule, threads) == one,
                "{mode:?}, {threads} threads"
            );
        }
    }
    let machine = LoaderOptions::machine_threads();
    assert!((1..=16).contains(&machine), "{machine}");
}

/// A synthetic recording that allows concurrent reads `mode` and refuses whole reads
/// (`fill_stored`, `fill_scaled`, which a source may share among threads of its own): it can
/// only be read through the part methods, which start no threads.
struct PartsOnly {
    inner: SyntheticRecording,
    mode: ConcurrentReads,
}

impl RecordingSource for PartsOnly {
    fn info(&self) -> &RecordingInfo {
        self.inner.info()
    }
    fn fill_scaled(&self, _: &ReadRequest<'_>, _: &mut [f32]) -> Result<()> {
        Err(Error::Unsupported {
            source_name: "whole scaled read",
        })
    }
    fn fill_stored(&self, _: &ReadRequest<'_>, _: &mut [u8]) -> Result<()> {
        Err(Error::Unsupported {
            source_name: "whole stored read",
        })
    }
    fn can_read_stored(&self) -> bool {
        true
    }
    fn concurrent_reads(&self) -> ConcurrentReads {
        self.mode
    }
    fn fill_scaled_runs(&self, request: &ReadRequest<'_>, runs: &mut [&mut [f32]]) -> Result<()> {
        self.inner.fill_scaled_runs(request, runs)
    }
    fn fill_stored_runs(&self, request: &ReadRequest<'_>, runs: &mut [&mut [u8]]) -> Result<()> {
        self.inner.fill_stored_runs(request, runs)
    }
}

#[test]
fn sources_with_concurrent_reads_are_read_by_parts_even_on_one_thread() {
    let _guard = serial();
    let samples = 20_011;
    let schedule = ChunkSchedule::new(samples, 4_001, 33, 50).unwrap();
    let rate = SampleRate::from_hz(30_000).unwrap();
    for mode in [
        ConcurrentReads::ByTime { align: 1 },
        ConcurrentReads::ByChannel,
    ] {
        let inner = SyntheticRecording::new(4, samples, rate, 5).unwrap();
        let source = Arc::new(PartsOnly { inner, mode });
        for threads in [1, 3] {
            let channels = vec![3, 1, 2];
            let stored = WindowLoader::<u8>::new(
                source.clone(),
                channels.clone(),
                schedule,
                options(threads),
            )
            .unwrap();
            let scaled = WindowLoader::<f32>::new(
                source.clone(),
                channels.clone(),
                schedule,
                options(threads),
            )
            .unwrap();
            assert_eq!(stored.reader_threads(), threads);
            for (stored, scaled) in stored.zip(scaled) {
                let (stored, scaled) = (stored.unwrap(), scaled.unwrap());
                let read = stored.window().read();
                let mut bytes = vec![0u8; stored.data().len()];
                source
                    .inner
                    .read_stored(&channels, read.clone(), &mut bytes)
                    .unwrap();
                let mut values = vec![0f32; scaled.data().len()];
                source.inner.read(&channels, read, &mut values).unwrap();
                assert!(stored.data() == bytes, "{mode:?}, {threads} threads");
                assert!(scaled.data() == values, "{mode:?}, {threads} threads");
            }
        }
    }
}

/// Live loader threads of this process (the reader and its helpers), by name; `None` where
/// `/proc/self/task` does not exist (not Linux).
fn loader_threads() -> Option<usize> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    Some(
        tasks
            .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
            .filter(|name| name.trim_end() == "dspk-window-loa") // the kernel keeps 15 bytes
            .count(),
    )
}

/// Waits (up to 5 s) for every loader thread to be gone: a joined thread's `/proc` entry can
/// outlive the join by a moment, a thread never joined stays.
fn assert_no_loader_thread_left() {
    let deadline = Instant::now() + Duration::from_secs(5);
    while loader_threads().is_some_and(|n| n > 0) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        loader_threads().unwrap_or(0),
        0,
        "loader threads left behind"
    );
}

#[test]
fn an_error_in_one_part_ends_the_iteration_with_it_and_joins_every_thread() {
    let _guard = serial();
    let samples = 30_000;
    let schedule = ChunkSchedule::new(samples, 3_000, 0, 0).unwrap();
    // Two bad ranges inside window 4 (12 000..15 000), in different parts with 4 threads: the
    // first part's error is the one reported, whichever thread finishes first.
    let fault = Fault::Fail([(13_000, 13_010), (14_500, 14_510)]);
    for mode in [
        ConcurrentReads::ByTime { align: 1 },
        ConcurrentReads::ByChannel,
    ] {
        for threads in [1, 2, 4, 7] {
            let source = Declared::new(4, samples, mode, fault);
            let mut loader =
                WindowLoader::<f32>::new(source, vec![0, 1, 2, 3], schedule, options(threads))
                    .unwrap();
            let mut good = Vec::new();
            let error = loop {
                match loader.next() {
                    Some(Ok(window)) => good.push(window.window().index()),
                    Some(Err(error)) => break error,
                    None => panic!("the iteration ended without the error"),
                }
            };
            assert_eq!(good, [0, 1, 2, 3], "{mode:?}, {threads} threads");
            assert_eq!(error.to_string(), "declared test source: bad range 0");
            assert!(loader.next().is_none(), "windows after the error");
            // The reader thread ended after the error and joined its helpers, before the drop.
            assert_no_loader_thread_left();
            drop(loader);
        }
    }
}

#[test]
fn a_panic_in_one_part_stops_the_loader_and_joins_every_thread() {
    let _guard = serial();
    let samples = 30_000;
    let schedule = ChunkSchedule::new(samples, 3_000, 0, 0).unwrap();
    let source = Declared::new(
        4,
        samples,
        ConcurrentReads::ByTime { align: 1 },
        Fault::Panic((7_500, 7_600)),
    );
    let results: Vec<_> = WindowLoader::<u8>::new(source, vec![0, 1, 2, 3], schedule, options(4))
        .unwrap()
        .map(|window| window.map(|w| w.window().index()))
        .collect();
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(results[..2].iter().all(Result::is_ok));
    assert!(
        matches!(results[2], Err(Error::LoaderStopped { window: 2 })),
        "{:?}",
        results[2]
    );
    assert_no_loader_thread_left();
}

#[test]
fn dropping_the_loader_mid_recording_leaves_no_thread_behind() {
    let _guard = serial();
    if loader_threads().is_none() {
        eprintln!("skipped: threads are counted through /proc/self/task, which only Linux has");
        return;
    }
    let samples = 2_000_000;
    let source = Declared::new(
        4,
        samples,
        ConcurrentReads::ByTime { align: 1 },
        Fault::None,
    );
    let schedule = ChunkSchedule::new(samples, 4_000, 10, 10).unwrap();
    assert_no_loader_thread_left();
    for round in 0..10 {
        let threads = 2 + round % 4;
        let mut loader =
            WindowLoader::<u8>::new(source.clone(), vec![0, 1, 2, 3], schedule, options(threads))
                .unwrap();
        let first = loader.next().unwrap().unwrap();
        if round % 2 == 0 {
            // Both buffers out: the reader is parked waiting for one.
            let _second = loader.next().unwrap().unwrap();
            assert!(
                loader_threads().unwrap_or(0) >= threads,
                "the live threads are not counted"
            );
            drop(loader);
        } else {
            // The reader is mid-window or waiting: drop while it reads.
            drop(first);
            drop(loader);
            continue;
        }
        assert_eq!(first.window().index(), 0);
    }
    assert_no_loader_thread_left();
}
