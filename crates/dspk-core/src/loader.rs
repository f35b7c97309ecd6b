//! Reading window i+1 on background threads while the caller works on window i.
//!
//! Exactly two window buffers circulate between the reader thread and the caller, so host
//! memory stays at two windows whatever the recording length. The reader thread allocates
//! (at most two) and recycles them; it reads straight into them, and the caller gets the buffer
//! itself, so the caller's thread copies nothing. When the source allows concurrent reads
//! ([`ConcurrentReads`]), the reader thread and a few helpers fill each window together, each
//! reading a disjoint part of it (see `crate::parts`).

use std::num::NonZeroUsize;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError, bounded, select, unbounded};
use cubecl::bytes::Bytes;

use crate::buffer::{UploadBuffer, WindowBuffer};
use crate::compute::ComputeTarget;
use crate::parts::{PartReaders, plan};
use crate::recording::{ConcurrentReads, ReadRequest, RecordingInfo, RecordingSource};
use crate::window::{ChunkSchedule, HaloWindow};
use crate::{Error, Result};

/// Buffers that circulate: one the caller holds, one the reader fills.
const CIRCULATING_BUFFERS: usize = 2;

/// The environment variable that sets the number of threads reading each window when
/// [`LoaderOptions::threads`] is not given: a whole number from 1 to [`MAX_LOADER_THREADS`].
pub const LOADER_THREADS_ENV: &str = "DSPK_LOADER_THREADS";

/// The most threads a loader reads one window with.
pub const MAX_LOADER_THREADS: usize = 64;

/// The default number of reader threads at most (see [`default_threads`]).
const DEFAULT_MAX_THREADS: usize = 16;

/// How a [`WindowLoader`] reads: for which device its buffers are prepared, with how many
/// threads, and whether it hints the next window to the source. The default: plain memory,
/// the default threads, no hints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoaderOptions {
    /// Prepare buffers for uploads to this device; `None` for plain memory. On CUDA the two
    /// buffers are page-locked once (after their first fill), so [`LoadedWindow::into_upload`]
    /// hands the device memory it can copy from directly at bus speed. Elsewhere (or if the
    /// driver refuses) the buffers are ordinary memory and everything works the same, more
    /// slowly. [`LoaderStats::buffers_pinned`] says what happened.
    pub target: Option<ComputeTarget>,
    /// Threads reading each window (the loader's reader thread included); `None` takes
    /// [`LOADER_THREADS_ENV`] if set, else [`LoaderOptions::machine_threads`]. Sources that do
    /// not support concurrent reads ([`RecordingSource::concurrent_reads`]) use one whatever
    /// this says.
    pub threads: Option<NonZeroUsize>,
    /// Whether to call [`RecordingSource::will_read`] on the next window while reading one
    /// (file readers then ask the system to start reading it into the page cache). Off by
    /// default until it is shown to help: on the development machine (2 busy cores, a virtual
    /// disk) runs from the disk with and without it differed by up to 20 % either way; the
    /// loader bench (`benches/loader.rs`) measures both.
    pub read_ahead: bool,
}

impl LoaderOptions {
    /// The default for a device target: `target`, the default threads, no read-ahead hints.
    #[must_use]
    pub fn for_target(target: Option<ComputeTarget>) -> Self {
        Self {
            target,
            ..Self::default()
        }
    }

    /// The machine's default number of reader threads: three quarters of its available
    /// parallelism (rounded up), at least 1 and at most 16, so a quarter of the cores stays
    /// free for the caller's work on each window and the system.
    #[must_use]
    pub fn machine_threads() -> usize {
        default_threads(std::thread::available_parallelism().map_or(1, NonZeroUsize::get))
    }

    /// The threads these options ask for: [`threads`](Self::threads), else
    /// [`LOADER_THREADS_ENV`], else [`machine_threads`](Self::machine_threads); at most
    /// [`MAX_LOADER_THREADS`].
    ///
    /// # Errors
    ///
    /// [`Error::Source`] naming [`LOADER_THREADS_ENV`] if it is set to anything but a whole
    /// number from 1 to [`MAX_LOADER_THREADS`].
    pub fn resolved_threads(&self) -> Result<usize> {
        if let Some(threads) = self.threads {
            return Ok(threads.get().min(MAX_LOADER_THREADS));
        }
        match std::env::var(LOADER_THREADS_ENV) {
            Ok(value) => parse_threads(&value),
            Err(std::env::VarError::NotPresent) => Ok(Self::machine_threads()),
            Err(std::env::VarError::NotUnicode(_)) => parse_threads("(not Unicode)"),
        }
    }
}

/// The default number of reader threads on a machine of `cores` cores: `cores - cores / 4`,
/// at least 1 and at most [`DEFAULT_MAX_THREADS`]. A quarter of the cores stays free for the
/// caller's own work on each window (on a device: submitting its upload and kernels) and the
/// system. On the 16-core H200 machine (docs/PERFORMANCE.md, two calls) 12 threads read
/// windows from the page cache 1.3-1.7x as fast as 8, and 16 no faster than 12 (-6 % and 0 %);
/// beside an upload, 16 were 21 % slower than 12 in one call and 20 % faster in the other.
fn default_threads(cores: usize) -> usize {
    (cores - cores / 4).clamp(1, DEFAULT_MAX_THREADS)
}

/// Reads a thread count from the value of [`LOADER_THREADS_ENV`].
fn parse_threads(value: &str) -> Result<usize> {
    value
        .trim()
        .parse::<usize>()
        .ok()
        .filter(|n| (1..=MAX_LOADER_THREADS).contains(n))
        .ok_or_else(|| Error::Source {
            source_name: LOADER_THREADS_ENV.into(),
            cause: Arc::new(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("`{value}` is not a number of threads from 1 to {MAX_LOADER_THREADS}"),
            )),
        })
}

/// What a [`WindowLoader`] hands out: `f32` for scaled values, `u8` for stored bytes.
pub trait WindowElement: Copy + Default + Send + Sync + 'static + sealed::Sealed {
    /// Buffer elements per sample of one channel (1 for `f32`, the stored sample size for `u8`).
    #[doc(hidden)]
    fn per_sample(info: &RecordingInfo) -> usize;
    /// Whether `source` can deliver this kind of window (checked once, when a loader starts).
    #[doc(hidden)]
    fn check_source<S: RecordingSource + ?Sized>(source: &S) -> Result<()>;
    /// Reads `channels` over `samples` into `out` (channel-major).
    #[doc(hidden)]
    fn fill<S: RecordingSource + ?Sized>(
        source: &S,
        channels: &[usize],
        samples: Range<u64>,
        out: &mut [Self],
    ) -> Result<()>;
    /// Reads `channels` over `samples` into one run per channel.
    #[doc(hidden)]
    fn fill_runs<S: RecordingSource + ?Sized>(
        source: &S,
        channels: &[usize],
        samples: Range<u64>,
        runs: &mut [&mut [Self]],
    ) -> Result<()>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for u8 {}
}

impl WindowElement for f32 {
    fn per_sample(_: &RecordingInfo) -> usize {
        1
    }
    fn check_source<S: RecordingSource + ?Sized>(_: &S) -> Result<()> {
        Ok(())
    }
    fn fill<S: RecordingSource + ?Sized>(
        source: &S,
        channels: &[usize],
        samples: Range<u64>,
        out: &mut [Self],
    ) -> Result<()> {
        source.read(channels, samples, out)
    }
    fn fill_runs<S: RecordingSource + ?Sized>(
        source: &S,
        channels: &[usize],
        samples: Range<u64>,
        runs: &mut [&mut [Self]],
    ) -> Result<()> {
        let request = ReadRequest::new(source.info(), channels, samples)?;
        source.fill_scaled_runs(&request, runs)
    }
}

impl WindowElement for u8 {
    fn per_sample(info: &RecordingInfo) -> usize {
        info.stored_format.size()
    }
    fn check_source<S: RecordingSource + ?Sized>(source: &S) -> Result<()> {
        if source.can_read_stored() {
            Ok(())
        } else {
            Err(Error::Unsupported {
                source_name: std::any::type_name::<S>(),
            })
        }
    }
    fn fill<S: RecordingSource + ?Sized>(
        source: &S,
        channels: &[usize],
        samples: Range<u64>,
        out: &mut [Self],
    ) -> Result<()> {
        source.read_stored(channels, samples, out)
    }
    fn fill_runs<S: RecordingSource + ?Sized>(
        source: &S,
        channels: &[usize],
        samples: Range<u64>,
        runs: &mut [&mut [Self]],
    ) -> Result<()> {
        let request = ReadRequest::new(source.info(), channels, samples)?;
        source.fill_stored_runs(&request, runs)
    }
}

/// What the caller gives back to the reader thread when it is done with a window.
pub(crate) enum Returned<T> {
    /// The buffer, to be refilled.
    Buffer(WindowBuffer<T>),
    /// The caller kept the buffer (moved it into an upload); the reader may allocate another.
    Credit,
}

/// Counts kept by a loader, for tests and reports.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    allocated: AtomicUsize,
    pinned: AtomicUsize,
    /// Windows handed to the caller and not yet dropped.
    held: AtomicUsize,
    in_flight: AtomicUsize,
    peak_in_flight: AtomicUsize,
    /// Nanoseconds the reader spent filling windows.
    reading: AtomicU64,
    /// Nanoseconds the reader spent waiting for the caller to give a buffer back.
    waiting: AtomicU64,
    /// Nanoseconds the reader spent allocating (and page-locking) buffers.
    preparing: AtomicU64,
}

impl Counters {
    fn acquire(&self) {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak_in_flight.fetch_max(now, Ordering::SeqCst);
    }
    pub(crate) fn release(&self) {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
    /// Adds the time since `since` to `total`.
    fn add_since(total: &AtomicU64, since: Instant) {
        let nanos = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
        total.fetch_add(nanos, Ordering::Relaxed);
    }
}

/// What a loader has done so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoaderStats {
    /// Window buffers the reader thread allocated (2 when the caller always gives buffers back;
    /// one more for each buffer the caller kept with [`LoadedWindow::take_data`]).
    pub buffers_allocated: usize,
    /// The most window buffers alive at once between the reader and the caller (at most 2).
    pub peak_in_flight: usize,
    /// Window buffers that were page-locked for direct uploads (see
    /// [`LoaderOptions::target`]).
    pub buffers_pinned: usize,
    /// Time the reader threads spent filling windows (wall time, from the first part of a
    /// window handed out to the last one done).
    pub reading: Duration,
    /// Time the reader thread spent waiting for the caller to give a buffer back: when it is a
    /// large share of the loop's time, the caller's work on each window (an upload, a kernel),
    /// not the read, bounds the pipeline.
    pub waiting_for_buffers: Duration,
    /// Time the reader thread spent allocating its buffers, page-locking included when it pins
    /// them (a cost paid once per buffer, so once per loader when the caller gives every
    /// buffer back).
    pub preparing_buffers: Duration,
}

/// Reads the windows of a [`ChunkSchedule`] from a [`RecordingSource`] on a background thread,
/// one window ahead of the caller.
///
/// Each window is read by a small pool of threads owned by the loader
/// ([`LoaderOptions::threads`]; the reader thread and its helpers), each reading a disjoint
/// part of the window into the same buffer: a range of samples for sources that allow it
/// ([`ConcurrentReads::ByTime`]: interleaved files, chunked stores), a group of channels for
/// others ([`ConcurrentReads::ByChannel`]: channel-major files), the whole window on one thread
/// for sources that allow neither. Sources that allow concurrent reads are read through
/// their part methods ([`RecordingSource::fill_stored_runs`],
/// [`RecordingSource::fill_scaled_runs`]) even when a window is one part, so a loader asked
/// for one thread reads on one thread. The windows, their bytes and their order are the same
/// whatever the number of threads.
///
/// It is an iterator of [`LoadedWindow`]s, in schedule order. Dropping a window gives its
/// buffer back for the reader to refill; the reader waits for that once two windows are out,
/// so memory is two windows whatever the recording length. The ways to use it:
///
/// - **scaled**: a `WindowLoader<f32>` ([`WindowLoader::new`]) gives `f32` values
///   (`stored * gain + offset`);
/// - **stored**: a `WindowLoader<u8>` gives the stored little-endian bytes, for an upload in
///   the most compact form;
/// - **upload**: either kind, with [`LoadedWindow::into_upload`] handing the buffer itself to a
///   CubeCL upload, which gives it back once copied (page-locked on CUDA when
///   [`LoaderOptions::target`] says so);
/// - **owned**: either kind, with [`LoadedWindow::take_data`] moving the buffer out as a `Vec`
///   to keep; the reader then allocates a fresh one.
///
/// Windows are channel-major (`channels.len()` runs of `window.read_len()` samples). A read
/// error on the reader thread arrives as the next item, after which the iterator ends. The
/// caller may hold at most two windows at once: asking for a third while holding two (e.g.
/// collecting them into a `Vec`) ends the iteration with [`Error::WindowsHeld`] rather than
/// waiting forever for a buffer.
/// A failed part ends the iteration with its error (the first failed part's, in window order)
/// once every thread has finished its part of that window.
/// Dropping the loader stops the reader early and joins it and its helpers: no thread is left
/// behind.
///
/// ```
/// use std::sync::Arc;
/// use dspk_core::{
///     ChunkSchedule, LoaderOptions, RecordingSource, SampleRate, SyntheticRecording, WindowLoader,
/// };
///
/// let source = Arc::new(SyntheticRecording::new(4, 10_000, SampleRate::from_hz(30_000)?, 7)?);
/// let schedule = ChunkSchedule::symmetric(10_000, 3_000, 100)?;
/// let channels = source.info().all_channels();
/// let mut total = 0;
/// for window in WindowLoader::<u8>::new(source, channels, schedule, LoaderOptions::default())? {
///     let window = window?;
///     total += window.window().valid().end - window.window().valid().start;
///     assert_eq!(window.data().len(), 4 * window.window().read_len() * 2);
/// }
/// assert_eq!(total, 10_000);
/// # Ok::<(), dspk_core::Error>(())
/// ```
pub struct WindowLoader<T: WindowElement> {
    /// Indices in the schedule of the windows read, increasing.
    windows: Arc<[usize]>,
    /// Windows read (`windows.len()`).
    len: usize,
    next: usize,
    done: bool,
    filled: Receiver<Result<(HaloWindow, WindowBuffer<T>)>>,
    returned: Sender<Returned<T>>,
    counters: Arc<Counters>,
    // Dropping this tells the reader thread to stop.
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
    /// Threads reading each window.
    threads: usize,
}

impl<T: WindowElement> WindowLoader<T> {
    /// A loader of `channels` over the windows of `schedule`, read from `source` as `options`
    /// say. The element type picks what it hands out: `WindowLoader::<f32>` the scaled values
    /// (`stored * gain + offset`, [`RecordingSource::read`]), `WindowLoader::<u8>` the stored
    /// little-endian bytes ([`RecordingSource::read_stored`]).
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`] for `u8` if the source cannot return stored values (checked
    /// once, here); a channel out of range, or a schedule longer than the recording;
    /// [`Error::TooLarge`] for a window buffer over the address space;
    /// [`LoaderOptions::resolved_threads`]'s errors; [`Error::Source`] if the reader thread
    /// cannot be started.
    pub fn new<S>(
        source: Arc<S>,
        channels: Vec<usize>,
        schedule: ChunkSchedule,
        options: LoaderOptions,
    ) -> Result<Self>
    where
        S: RecordingSource + ?Sized + 'static,
    {
        let windows = (0..schedule.len()).collect();
        Self::of_windows(source, channels, schedule, windows, options)
    }

    /// As [`new`](Self::new), reading only the windows of `schedule` at the indices `windows`,
    /// in increasing order (duplicates and indices past the last window are left out). The
    /// windows keep their indices in `schedule`.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    pub fn of_windows<S>(
        source: Arc<S>,
        channels: Vec<usize>,
        schedule: ChunkSchedule,
        mut windows: Vec<usize>,
        options: LoaderOptions,
    ) -> Result<Self>
    where
        S: RecordingSource + ?Sized + 'static,
    {
        windows.retain(|&w| w < schedule.len());
        windows.sort_unstable();
        windows.dedup();
        let windows: Arc<[usize]> = windows.into();
        T::check_source(&*source)?;
        let mode = source.concurrent_reads();
        let threads = match mode {
            ConcurrentReads::No => 1,
            _ => options.resolved_threads()?,
        };
        // Only CUDA uploads gain from page-locked buffers here (see `crate::pinned`).
        let pin = options.target == Some(ComputeTarget::Cuda);
        let info = source.info();
        // Check the channels and the whole extent once, here, rather than on the first window.
        ReadRequest::new(info, &channels, 0..schedule.num_samples())?;
        let per_sample = T::per_sample(info);
        let capacity = usize::try_from(schedule.max_read_len())
            .ok()
            .and_then(|n| n.checked_mul(channels.len()))
            .and_then(|n| n.checked_mul(per_sample))
            // Room to pad a stored window to whole 32-bit words in place before an upload.
            .and_then(|n| n.checked_next_multiple_of(4))
            .ok_or_else(|| Error::TooLarge {
                what: "window buffer",
                detail: format!(
                    "{} x {}",
                    crate::format_count(channels.len() as u64, "channels"),
                    crate::format_count(schedule.max_read_len(), "samples")
                ),
            })?;

        let (filled_tx, filled) = bounded(CIRCULATING_BUFFERS);
        let (returned, returned_rx) = unbounded();
        let (stop, stop_rx) = bounded::<()>(0);
        let counters = Arc::new(Counters::default());
        let reader = Reader {
            source,
            channels,
            schedule,
            windows: Arc::clone(&windows),
            per_sample,
            capacity,
            pin,
            permits: CIRCULATING_BUFFERS,
            mode,
            threads,
            read_ahead: options.read_ahead,
            filled: filled_tx,
            returned: returned_rx,
            stop: stop_rx,
            counters: Arc::clone(&counters),
        };
        let thread = std::thread::Builder::new()
            .name("dspk-window-loader".into())
            .spawn(move || reader.run())
            .map_err(|e| Error::Source {
                source_name: "window loader thread".into(),
                cause: Arc::new(e),
            })?;
        Ok(Self {
            len: windows.len(),
            windows,
            next: 0,
            done: false,
            filled,
            returned,
            counters,
            stop: Some(stop),
            thread: Some(thread),
            threads,
        })
    }

    /// Threads reading each window: the reader thread and its helpers (1 for sources without
    /// concurrent reads; fewer than asked for if the system refused a helper thread, which is
    /// not reported here).
    #[must_use]
    pub fn reader_threads(&self) -> usize {
        self.threads
    }

    /// Windows this loader reads (delivered or not).
    #[must_use]
    pub fn num_windows(&self) -> usize {
        self.len
    }

    /// What the loader has done so far.
    #[must_use]
    pub fn stats(&self) -> LoaderStats {
        LoaderStats {
            buffers_allocated: self.counters.allocated.load(Ordering::SeqCst),
            peak_in_flight: self.counters.peak_in_flight.load(Ordering::SeqCst),
            buffers_pinned: self.counters.pinned.load(Ordering::SeqCst),
            reading: Duration::from_nanos(self.counters.reading.load(Ordering::Relaxed)),
            waiting_for_buffers: Duration::from_nanos(
                self.counters.waiting.load(Ordering::Relaxed),
            ),
            preparing_buffers: Duration::from_nanos(
                self.counters.preparing.load(Ordering::Relaxed),
            ),
        }
    }
}

impl<T: WindowElement> Iterator for WindowLoader<T> {
    type Item = Result<LoadedWindow<T>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.next >= self.len {
            return None;
        }
        let held = self.counters.held.load(Ordering::SeqCst);
        if held >= CIRCULATING_BUFFERS {
            // Both buffers are in the caller's hands: waiting for the reader would never end.
            self.done = true;
            return Some(Err(Error::WindowsHeld {
                held,
                window: self.windows[self.next],
            }));
        }
        let item = match self.filled.recv() {
            Ok(Ok((window, data))) => Ok(LoadedWindow::new(window, data, self)),
            Ok(Err(error)) => {
                self.done = true;
                Err(error)
            }
            Err(_) => {
                self.done = true;
                Err(Error::LoaderStopped {
                    window: self.windows[self.next],
                })
            }
        };
        self.next += 1;
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = if self.done { 0 } else { self.len - self.next };
        (0, Some(left))
    }
}

impl<T: WindowElement> Drop for WindowLoader<T> {
    fn drop(&mut self) {
        // Wake the reader wherever it waits, then wait for it to finish the read in progress
        // (its helpers are scoped threads: it joins them before it ends).
        self.stop.take();
        if let Some(thread) = self.thread.take() {
            // A reader that panicked has already been reported as `LoaderStopped`.
            let _ = thread.join();
        }
    }
}

/// One window from a [`WindowLoader`]: where it lies and its samples (channel-major).
///
/// Dropping it gives the buffer back to the reader thread.
pub struct LoadedWindow<T: WindowElement> {
    window: HaloWindow,
    /// `None` once taken ([`LoadedWindow::take_data`]) or handed to an upload.
    data: Option<WindowBuffer<T>>,
    /// Whether dropping the window releases its place in flight (not when an upload buffer
    /// took that over).
    releases: bool,
    returned: Sender<Returned<T>>,
    counters: Arc<Counters>,
}

impl<T: WindowElement> LoadedWindow<T> {
    /// A window handed to the caller of `loader`, counted as held until dropped.
    fn new(window: HaloWindow, data: WindowBuffer<T>, loader: &WindowLoader<T>) -> Self {
        loader.counters.held.fetch_add(1, Ordering::SeqCst);
        Self {
            window,
            data: Some(data),
            releases: true,
            returned: loader.returned.clone(),
            counters: Arc::clone(&loader.counters),
        }
    }

    /// Where the window lies in the recording (valid and read ranges).
    #[must_use]
    pub fn window(&self) -> &HaloWindow {
        &self.window
    }

    /// The window's samples: `channels.len()` runs of `read_len()` values (or stored bytes).
    /// Empty after [`take_data`](Self::take_data).
    #[must_use]
    pub fn data(&self) -> &[T] {
        self.data.as_ref().map_or(&[], WindowBuffer::data)
    }

    /// The window's samples, writable (e.g. to pad before an upload).
    #[must_use]
    pub fn data_mut(&mut self) -> &mut [T] {
        self.data.as_mut().map_or(&mut [], WindowBuffer::data_mut)
    }

    /// Moves the buffer out as a plain vector (the owned mode), to keep or to hand to an API
    /// that takes a `Vec`.
    ///
    /// The window keeps its place among the two in flight until it is dropped, so drop it once
    /// the buffer has been handed on; the reader then allocates a fresh buffer for the next
    /// window instead of recycling this one. A page-locked buffer is unlocked first. A second
    /// call returns an empty vector. For device uploads prefer
    /// [`into_upload`](LoadedWindow::into_upload), which recycles the buffer.
    pub fn take_data(&mut self) -> Vec<T> {
        self.data
            .take()
            .map(WindowBuffer::into_vec)
            .unwrap_or_default()
    }

    /// The window's data as a CubeCL upload buffer, without a copy, its byte length
    /// zero-padded to whole 32-bit words (in place: loader buffers have the room). When the
    /// runtime is done copying it to the device it drops the bytes and the buffer goes back to
    /// the reader thread, which refills it: no allocation per window, and with a loader made
    /// for CUDA ([`LoaderOptions::target`]) a direct copy from page-locked memory.
    ///
    /// The buffer stays one of the two in flight until the runtime drops it, so the reader
    /// waits for the device rather than allocating more memory. The runtime must therefore get
    /// to it: `dspk_ops::PipelineWorkspace` flushes the client after each upload; code that
    /// calls `client.write` itself should call `client.flush()` after it, or the next window
    /// may wait for a buffer the runtime is still holding in its queue.
    #[must_use]
    pub fn into_upload(mut self) -> Bytes {
        let mut buffer = self
            .data
            .take()
            .unwrap_or_else(|| WindowBuffer::new(0, false));
        let per_word = (4 / size_of::<T>()).max(1);
        let padded = buffer.data().len().next_multiple_of(per_word);
        buffer.resize(padded);
        self.releases = false;
        UploadBuffer::into_bytes(buffer, self.returned.clone(), Arc::clone(&self.counters))
    }
}

impl<T: WindowElement> Drop for LoadedWindow<T> {
    fn drop(&mut self) {
        self.counters.held.fetch_sub(1, Ordering::SeqCst);
        if !self.releases {
            return;
        }
        self.counters.release();
        let message = self.data.take().map_or(Returned::Credit, Returned::Buffer);
        // The reader may have finished or stopped; then the buffer is simply freed.
        let _ = self.returned.send(message);
    }
}

/// The reader thread's state.
struct Reader<S: RecordingSource + ?Sized, T> {
    source: Arc<S>,
    channels: Vec<usize>,
    schedule: ChunkSchedule,
    /// Indices in the schedule of the windows to read, increasing.
    windows: Arc<[usize]>,
    per_sample: usize,
    capacity: usize,
    /// Whether to page-lock the buffers.
    pin: bool,
    /// Fresh buffers the reader may still allocate.
    permits: usize,
    /// How windows may be cut among threads.
    mode: ConcurrentReads,
    /// Threads reading each window (this one and its helpers).
    threads: usize,
    /// Whether to hint the next window to the source.
    read_ahead: bool,
    filled: Sender<Result<(HaloWindow, WindowBuffer<T>)>>,
    returned: Receiver<Returned<T>>,
    stop: Receiver<()>,
    counters: Arc<Counters>,
}

impl<S: RecordingSource + ?Sized, T: WindowElement> Reader<S, T> {
    /// Reads every window with `threads - 1` helper threads, which are joined before this
    /// returns.
    fn run(self) {
        let source = Arc::clone(&self.source);
        let channels = self.channels.clone();
        let helpers = self.threads.saturating_sub(1);
        std::thread::scope(|scope| {
            let parts =
                PartReaders::<T>::start(scope, &*source, &channels, self.per_sample, helpers);
            self.read_windows(&parts);
            // Dropping `parts` lets the helpers exit; the scope joins them.
        });
    }

    fn read_windows(mut self, readers: &PartReaders<T>) {
        let schedule = self.schedule;
        let sample_bytes = self.per_sample * size_of::<T>();
        let indices = Arc::clone(&self.windows);
        let mut windows = indices
            .iter()
            .filter_map(|&w| schedule.window(w))
            .peekable();
        while let Some(window) = windows.next() {
            if matches!(self.stop.try_recv(), Err(TryRecvError::Disconnected)) {
                return;
            }
            let Some(mut buffer) = self.acquire() else {
                return;
            };
            self.counters.acquire();
            if self.read_ahead
                && let Some(next) = windows.peek()
            {
                self.source.will_read(&self.channels, next.read());
            }
            buffer.set_len_to_overwrite(self.channels.len() * window.read_len() * self.per_sample);
            let parts = plan(
                self.mode,
                readers.threads(),
                self.channels.len(),
                &window.read(),
                sample_bytes,
            );
            let started = Instant::now();
            let result = readers.fill(
                &*self.source,
                &self.channels,
                &window,
                self.per_sample,
                &parts,
                buffer.data_mut(),
            );
            Counters::add_since(&self.counters.reading, started);
            if result.is_ok() && buffer.pin_pending() {
                // A fresh buffer is page-locked once its first window is in (see
                // `WindowBuffer::pin_if_pending`).
                let started = Instant::now();
                if buffer.pin_if_pending() {
                    self.counters.pinned.fetch_add(1, Ordering::SeqCst);
                }
                Counters::add_since(&self.counters.preparing, started);
            }
            let failed = result.is_err();
            let message = result.map(|()| (window, buffer));
            if failed {
                self.counters.release();
            }
            if self.filled.send(message).is_err() || failed {
                return;
            }
        }
    }

    /// A buffer to fill: a returned one, or a fresh one while permits last; `None` on stop.
    fn acquire(&mut self) -> Option<WindowBuffer<T>> {
        loop {
            let message = if self.permits > 0 {
                match self.returned.try_recv() {
                    Ok(message) => Some(message),
                    Err(TryRecvError::Empty) => None,
                    Err(TryRecvError::Disconnected) => return None,
                }
            } else {
                let started = Instant::now();
                let message = select! {
                    recv(self.returned) -> message => message.ok(),
                    recv(self.stop) -> _ => None,
                };
                Counters::add_since(&self.counters.waiting, started);
                Some(message?)
            };
            match message {
                Some(Returned::Buffer(buffer)) => return Some(buffer),
                Some(Returned::Credit) => self.permits += 1,
                None => {
                    self.permits -= 1;
                    self.counters.allocated.fetch_add(1, Ordering::SeqCst);
                    let started = Instant::now();
                    let buffer = WindowBuffer::new(self.capacity, self.pin);
                    Counters::add_since(&self.counters.preparing, started);
                    return Some(buffer);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_leaves_a_quarter_of_the_cores_free() {
        let defaults: Vec<usize> = [0, 1, 2, 3, 4, 8, 12, 16, 20, 64]
            .into_iter()
            .map(default_threads)
            .collect();
        assert_eq!(defaults, [1, 1, 2, 3, 3, 6, 9, 12, 15, 16]);
    }

    #[test]
    fn thread_counts_from_the_environment_are_checked() {
        assert_eq!(parse_threads("4").unwrap(), 4);
        assert_eq!(parse_threads(" 64\n").unwrap(), MAX_LOADER_THREADS);
        for bad in ["0", "65", "-1", "four", ""] {
            let error = parse_threads(bad).unwrap_err().to_string();
            assert!(error.starts_with("DSPK_LOADER_THREADS: `"), "{error}");
        }
        let asked = LoaderOptions {
            threads: NonZeroUsize::new(1000),
            ..LoaderOptions::default()
        };
        assert_eq!(asked.resolved_threads().unwrap(), MAX_LOADER_THREADS);
    }
}
