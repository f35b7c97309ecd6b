//! `WindowLoader`: order, contents, two buffers in circulation, errors and early stops.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dspk_core::{
    ChunkSchedule, Error, LoaderOptions, ReadRequest, RecordingInfo, RecordingSource, Result,
    SampleRate, ScaledOnly, SyntheticRecording, WindowLoader,
};

/// Counts live heap blocks of exactly `WINDOW_BYTES` (the size of one window buffer in the
/// counting tests, chosen to match nothing else), and the most alive at once.
struct CountingAllocator;

const WINDOW_CHANNELS: usize = 3;
const WINDOW_SAMPLES: u64 = 1201;
/// One window of int16, rounded up to whole 32-bit words (room to pad before an upload).
const WINDOW_BYTES: usize = (WINDOW_CHANNELS * WINDOW_SAMPLES as usize * 2).next_multiple_of(4);
static LIVE_WINDOWS: AtomicUsize = AtomicUsize::new(0);
static PEAK_WINDOWS: AtomicUsize = AtomicUsize::new(0);
static TRACK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if TRACK.load(Ordering::SeqCst) == 1 && layout.size() == WINDOW_BYTES {
            let now = LIVE_WINDOWS.fetch_add(1, Ordering::SeqCst) + 1;
            PEAK_WINDOWS.fetch_max(now, Ordering::SeqCst);
        }
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if TRACK.load(Ordering::SeqCst) == 1 && layout.size() == WINDOW_BYTES {
            LIVE_WINDOWS.fetch_sub(1, Ordering::SeqCst);
        }
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Serialises the tests of this file: they count heap blocks and threads process-wide.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Starts counting window-sized heap blocks from zero.
fn start_counting() {
    LIVE_WINDOWS.store(0, Ordering::SeqCst);
    PEAK_WINDOWS.store(0, Ordering::SeqCst);
    TRACK.store(1, Ordering::SeqCst);
}

/// Stops counting and checks that exactly two window buffers were alive at the peak and none
/// is left.
fn assert_peak_of_two_window_blocks() {
    TRACK.store(0, Ordering::SeqCst);
    assert_eq!(
        PEAK_WINDOWS.load(Ordering::SeqCst),
        2,
        "window-sized heap blocks alive at once"
    );
    assert_eq!(
        LIVE_WINDOWS.load(Ordering::SeqCst),
        0,
        "window buffers leaked"
    );
}

fn synthetic(channels: usize, samples: u64) -> Arc<SyntheticRecording> {
    Arc::new(
        SyntheticRecording::new(channels, samples, SampleRate::from_hz(30_000).unwrap(), 42)
            .unwrap(),
    )
}

/// Checks a delivered window against values recomputed from the source.
fn check_stored_window(
    source: &SyntheticRecording,
    channels: &[usize],
    window: &dspk_core::HaloWindow,
    data: &[u8],
) {
    let n = window.read_len();
    assert_eq!(data.len(), channels.len() * n * 2);
    for (k, &c) in channels.iter().enumerate() {
        for s in [0, n / 2, n - 1] {
            let at = 2 * (k * n + s);
            let got = i16::from_le_bytes([data[at], data[at + 1]]);
            assert_eq!(got, source.stored_value(c, window.read().start + s as u64));
        }
    }
}

#[test]
fn windows_arrive_in_order_with_the_right_samples() {
    let _guard = serial();
    let source = synthetic(5, 100_003);
    let channels = vec![4, 0, 2];
    let schedule = ChunkSchedule::new(100_003, 7_000, 300, 500).unwrap();
    let loader = WindowLoader::<u8>::new(
        source.clone(),
        channels.clone(),
        schedule,
        LoaderOptions::default(),
    )
    .unwrap();
    assert_eq!(loader.num_windows(), schedule.len());
    let mut expected = schedule.iter();
    for window in loader {
        let window = window.unwrap();
        assert_eq!(Some(window.window().clone()), expected.next());
        check_stored_window(&source, &channels, window.window(), window.data());
    }
    assert!(expected.next().is_none(), "windows missing");

    // The scaled mode delivers the same windows as f32.
    let loader = WindowLoader::<f32>::new(
        source.clone(),
        channels.clone(),
        schedule,
        LoaderOptions::default(),
    )
    .unwrap();
    let mut count = 0;
    for window in loader {
        let window = window.unwrap();
        let mut reference = vec![0f32; window.data().len()];
        source
            .read(&channels, window.window().read(), &mut reference)
            .unwrap();
        assert_eq!(window.data(), &reference[..]);
        count += 1;
    }
    assert_eq!(count, schedule.len());
}

#[test]
fn two_window_buffers_circulate_over_a_thousand_windows() {
    let _guard = serial();
    let samples = 1000 * WINDOW_SAMPLES;
    let source = synthetic(WINDOW_CHANNELS, samples);
    let schedule = ChunkSchedule::new(samples, WINDOW_SAMPLES, 0, 0).unwrap();
    assert_eq!(schedule.len(), 1000);
    start_counting();
    let mut loader = WindowLoader::<u8>::new(
        source.clone(),
        vec![0, 1, 2],
        schedule,
        LoaderOptions::default(),
    )
    .unwrap();
    let mut delivered = 0;
    for window in &mut loader {
        let window = window.unwrap();
        check_stored_window(&source, &[0, 1, 2], window.window(), window.data());
        delivered += 1;
        // Give the reader time to run ahead: it must still not get a third buffer.
        if delivered % 100 == 0 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
    let stats = loader.stats();
    drop(loader);
    assert_peak_of_two_window_blocks();
    assert_eq!(delivered, 1000);
    assert_eq!(stats.buffers_allocated, 2, "{stats:?}");
    assert_eq!(stats.peak_in_flight, 2, "{stats:?}");
}

#[test]
fn a_slow_caller_shows_as_the_reader_waiting_for_buffers() {
    let _guard = serial();
    let samples = 8 * WINDOW_SAMPLES;
    let source = synthetic(WINDOW_CHANNELS, samples);
    let schedule = ChunkSchedule::new(samples, WINDOW_SAMPLES, 0, 0).unwrap();
    let mut loader =
        WindowLoader::<u8>::new(source, vec![0, 1, 2], schedule, LoaderOptions::default()).unwrap();
    let hold = std::time::Duration::from_millis(25);
    for window in &mut loader {
        let window = window.unwrap();
        // The caller's work on each window: the reader, with both buffers out, must wait.
        std::thread::sleep(hold);
        drop(window);
    }
    let stats = loader.stats();
    // Windows 3..8 each need a buffer back from a caller that keeps it `hold` after it
    // arrives: the reader waits for most of that, six times over.
    assert!(
        stats.waiting_for_buffers >= 4 * hold,
        "waited {:?} for buffers behind a caller that held each window {hold:?}",
        stats.waiting_for_buffers
    );
    assert!(stats.reading > std::time::Duration::ZERO, "{stats:?}");
    assert!(stats.reading < stats.waiting_for_buffers, "{stats:?}");
    // Two buffers, allocated once each: a cost well below the waiting.
    assert!(
        stats.preparing_buffers > std::time::Duration::ZERO,
        "{stats:?}"
    );
    assert!(stats.preparing_buffers < hold, "{stats:?}");
}

#[test]
fn the_owned_mode_hands_over_buffers_and_stays_at_two_in_flight() {
    let _guard = serial();
    let samples = 100 * WINDOW_SAMPLES;
    let source = synthetic(WINDOW_CHANNELS, samples);
    let schedule = ChunkSchedule::new(samples, WINDOW_SAMPLES, 0, 0).unwrap();
    start_counting();
    let mut loader = WindowLoader::<u8>::new(
        source.clone(),
        vec![1, 0, 2],
        schedule,
        LoaderOptions::default(),
    )
    .unwrap();
    let mut kept = 0usize;
    for window in &mut loader {
        let mut window = window.unwrap();
        let range = window.window().clone();
        let buffer = window.take_data(); // as an upload would take it
        check_stored_window(&source, &[1, 0, 2], &range, &buffer);
        assert!(window.data().is_empty());
        kept += buffer.len();
        drop(buffer);
        drop(window);
    }
    let stats = loader.stats();
    drop(loader);
    assert_peak_of_two_window_blocks();
    assert_eq!(kept, samples as usize * WINDOW_CHANNELS * 2);
    assert_eq!(
        stats.buffers_allocated,
        schedule.len(),
        "one fresh buffer per kept window"
    );
    assert_eq!(stats.peak_in_flight, 2, "{stats:?}");
}

/// A source whose reads fail from a given sample on, like a file truncated under us.
struct FailingSource {
    inner: SyntheticRecording,
    fail_from: u64,
}

impl RecordingSource for FailingSource {
    fn info(&self) -> &RecordingInfo {
        self.inner.info()
    }
    fn fill_scaled(&self, request: &ReadRequest<'_>, out: &mut [f32]) -> Result<()> {
        if request.samples().end > self.fail_from {
            return Err(Error::Source {
                source_name: "failing test source".into(),
                cause: Arc::new(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "file shrank",
                )),
            });
        }
        self.inner.fill_scaled(request, out)
    }
}

#[test]
fn a_read_error_reaches_the_caller_and_ends_the_iteration() {
    let _guard = serial();
    let source = Arc::new(FailingSource {
        inner: SyntheticRecording::new(3, 10_000, SampleRate::from_hz(30_000).unwrap(), 1).unwrap(),
        fail_from: 5_500,
    });
    let schedule = ChunkSchedule::new(10_000, 1_000, 0, 0).unwrap();
    let results: Vec<_> =
        WindowLoader::<f32>::new(source, vec![0, 1, 2], schedule, LoaderOptions::default())
            .unwrap()
            .map(|window| window.map(|w| w.window().index()))
            .collect();
    assert_eq!(
        results.len(),
        6,
        "five good windows, then the error, then nothing"
    );
    assert_eq!(
        results[..5]
            .iter()
            .map(|r| *r.as_ref().unwrap())
            .collect::<Vec<_>>(),
        [0, 1, 2, 3, 4]
    );
    let error = results[5].as_ref().err().unwrap();
    assert_eq!(error.to_string(), "failing test source: file shrank");
}

#[test]
fn holding_both_buffers_and_asking_for_more_is_an_error_not_a_hang() {
    let _guard = serial();
    let source = synthetic(2, 10_000);
    let schedule = ChunkSchedule::new(10_000, 1_000, 0, 0).unwrap();
    let loader =
        WindowLoader::<f32>::new(source, vec![0, 1], schedule, LoaderOptions::default()).unwrap();
    let results: Vec<_> = loader.collect();
    assert_eq!(results.len(), 3);
    assert!(results[0].is_ok() && results[1].is_ok());
    let error = results[2].as_ref().err().unwrap();
    assert!(
        matches!(error, Error::WindowsHeld { held: 2, window: 2 }),
        "{error}"
    );
}

#[test]
fn stopping_early_leaves_no_thread_behind() {
    let _guard = serial();
    let source = synthetic(4, 1_000_000);
    let schedule = ChunkSchedule::new(1_000_000, 1_000, 10, 10).unwrap();
    if !cfg!(target_os = "linux") {
        eprintln!("skipped: threads are counted through /proc/self/task, which only Linux has");
        return;
    }
    assert_eq!(loader_threads(), 0);
    for _ in 0..20 {
        let mut loader = WindowLoader::<f32>::new(
            source.clone(),
            vec![0, 1, 2, 3],
            schedule,
            LoaderOptions::default(),
        )
        .unwrap();
        // Hold a window past the loader's end, so the reader is parked waiting for a buffer.
        let held = loader.next().unwrap().unwrap();
        let _second = loader.next().unwrap().unwrap();
        // The count sees the live reader (else the zero below would prove nothing); joined
        // readers of earlier loaders may still be listed for a moment, hence at least 1.
        assert!(
            loader_threads() >= 1,
            "the live reader thread is not counted"
        );
        drop(loader);
        assert_eq!(held.window().index(), 0);
    }
    // Each drop joined its reader thread. A joined thread's entry in /proc can outlive the
    // join by a moment (the kernel removes it after the thread's exit wakes the joiner), so
    // the count is polled briefly; a thread that was never joined stays and fails the test.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while loader_threads() > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(loader_threads(), 0);
}

/// Live reader threads of this process, by name (Linux only: the caller skips elsewhere).
fn loader_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("list this process's threads in /proc/self/task")
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim_end() == "dspk-window-loa") // the kernel keeps 15 bytes
        .count()
}

#[test]
fn the_stored_mode_needs_a_source_with_stored_values() {
    let _guard = serial();
    let source = Arc::new(ScaledOnly(
        SyntheticRecording::new(2, 100, SampleRate::from_hz(1000).unwrap(), 0).unwrap(),
    ));
    let schedule = ChunkSchedule::new(100, 10, 0, 0).unwrap();
    let error =
        WindowLoader::<u8>::new(source.clone(), vec![0], schedule, LoaderOptions::default())
            .err()
            .unwrap();
    assert!(matches!(error, Error::Unsupported { .. }), "{error}");
    // Channels and extent are checked up front, not on the first window.
    let error =
        WindowLoader::<f32>::new(source.clone(), vec![2], schedule, LoaderOptions::default())
            .err()
            .unwrap();
    assert!(
        matches!(error, Error::ChannelOutOfRange { channel: 2, .. }),
        "{error}"
    );
    let long = ChunkSchedule::new(101, 10, 0, 0).unwrap();
    let error = WindowLoader::<f32>::new(source, vec![0], long, LoaderOptions::default())
        .err()
        .unwrap();
    assert!(matches!(error, Error::SamplesPastEnd { .. }), "{error}");
}
