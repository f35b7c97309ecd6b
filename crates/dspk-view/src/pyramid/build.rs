//! Building a pyramid's pages on several threads, nearest the focus first.

use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use cubecl::client::Client;
use dspk_core::RecordingSource;

use crate::pyramid::store::{PageWork, Pyramid};
use crate::{Columns, DeviceFolder, Envelope, Error, Order, Result};

/// Where each page's samples are folded into the finest level (the coarser in-page levels are
/// always folded on the host from it, which is exact and small). Both give the same bits.
#[derive(Clone, Default)]
pub enum PageFold {
    /// On the host ([`Envelope::from_samples`]).
    #[default]
    Host,
    /// On `client`'s device: each page uploaded once and folded by a [`DeviceFolder`] (one per
    /// building thread), only the finest level's columns downloaded.
    Device(Client),
}

impl std::fmt::Debug for PageFold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Host => f.write_str("Host"),
            Self::Device(client) => f
                .debug_tuple("Device")
                .field(&client.properties().identity.name)
                .finish(),
        }
    }
}

/// What a thread folds pages with.
pub(crate) enum PageFolder {
    Host,
    Device(Box<DeviceFolder>),
}

impl PageFolder {
    /// The folder for `fold`, for one thread.
    fn new(fold: &PageFold) -> Self {
        match fold {
            PageFold::Host => Self::Host,
            PageFold::Device(client) => Self::Device(Box::new(DeviceFolder::new(client.clone()))),
        }
    }

    /// The level-0 envelope of a page's samples (`[channels, samples]`) over `columns`.
    pub(crate) fn fold(
        &mut self,
        values: &[f32],
        channels: usize,
        columns: &Columns,
    ) -> Result<Envelope> {
        match self {
            Self::Host => {
                Envelope::from_samples(values, Order::ChannelMajor, channels, columns.clone())
            }
            Self::Device(folder) => folder.fold_host(values, channels, columns),
        }
    }
}

/// How far a build has come: pages built (by any build, and those a cache file had) of all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuildProgress {
    /// Pages built.
    pub done: u64,
    /// Pages in the pyramid.
    pub total: u64,
}

/// A function told the progress after each page a build fills (called on the building thread
/// that filled it; keep it short).
pub type ProgressFn = Arc<dyn Fn(BuildProgress) + Send + Sync>;

/// How to build a pyramid: threads, where to fold, where to start, whom to tell.
#[derive(Clone)]
pub struct BuildOptions {
    threads: usize,
    fold: PageFold,
    focus: u64,
    progress: Option<ProgressFn>,
}

impl std::fmt::Debug for BuildOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuildOptions")
            .field("threads", &self.threads)
            .field("fold", &self.fold)
            .field("focus", &self.focus)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

impl Default for BuildOptions {
    /// As many threads as the machine has cores, the host fold, the focus at sample 0, no
    /// progress function.
    fn default() -> Self {
        Self {
            threads: std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
            fold: PageFold::Host,
            focus: 0,
            progress: None,
        }
    }
}

impl BuildOptions {
    /// The defaults (see [`Default`]).
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Building threads (at least 1). Each holds one page of samples
    /// (`channels x page_samples` values of `f32`).
    #[must_use]
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = threads;
        self
    }

    /// Where pages are folded.
    #[must_use]
    pub fn fold(mut self, fold: PageFold) -> Self {
        self.fold = fold;
        self
    }

    /// The sample to build around first (see [`PyramidBuild::set_focus`]).
    #[must_use]
    pub fn focus(mut self, sample: u64) -> Self {
        self.focus = sample;
        self
    }

    /// A function told the progress after each page filled.
    #[must_use]
    pub fn on_progress(mut self, progress: impl Fn(BuildProgress) + Send + Sync + 'static) -> Self {
        self.progress = Some(Arc::new(progress));
        self
    }
}

/// Cancels a [`PyramidBuild`] from anywhere (clones cancel the same build).
#[derive(Clone, Debug)]
pub struct BuildCancel(Arc<AtomicBool>);

impl BuildCancel {
    /// Asks the build to stop: each thread finishes the page it is on and takes no other.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Whether the build was asked to stop.
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Threads filling a pyramid's pages from a source, nearest the focus first.
///
/// Each page is read once ([`RecordingSource::read`] of every channel over the page), folded
/// into every in-page level and stored; the coarser levels follow as pages complete. Pages
/// already built (resumed from a cache file, or by another build) are skipped. The first error
/// stops the build (the page it happened on stays unbuilt); [`cancel`](Self::cancel) stops it
/// after the pages in hand, leaving what was built. Dropping a running build cancels it and
/// waits for its threads.
pub struct PyramidBuild {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for PyramidBuild {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PyramidBuild")
            .field("progress", &self.progress())
            .field("threads", &self.workers.len())
            .finish_non_exhaustive()
    }
}

struct Shared {
    pyramid: Arc<Pyramid>,
    source: Arc<dyn RecordingSource>,
    queue: Mutex<Queue>,
    cancel: Arc<AtomicBool>,
    failed: AtomicBool,
    error: Mutex<Option<Error>>,
    progress: Option<ProgressFn>,
}

/// The pages this build has not taken, and the page to take them around.
struct Queue {
    pending: BTreeSet<u64>,
    focus: u64,
}

impl Queue {
    /// The pending page nearest the focus (after it on a tie), taken off the queue.
    fn pop(&mut self) -> Option<u64> {
        let after = self.pending.range(self.focus..).next().copied();
        let before = self.pending.range(..self.focus).next_back().copied();
        let page = match (before, after) {
            (Some(b), Some(a)) => {
                if a - self.focus <= self.focus - b {
                    a
                } else {
                    b
                }
            }
            (b, a) => a.or(b)?,
        };
        self.pending.remove(&page);
        Some(page)
    }
}

impl PyramidBuild {
    /// Starts building the pages of `pyramid` not built yet from `source` (the recording the
    /// pyramid is for) on `options.threads` threads.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] for a source of another shape than the pyramid's or zero
    /// threads; [`Error::Recording`] when a thread cannot be started.
    pub fn start(
        pyramid: Arc<Pyramid>,
        source: Arc<dyn RecordingSource>,
        options: BuildOptions,
    ) -> Result<Self> {
        pyramid.check_source(&*source)?;
        if options.threads == 0 {
            return Err(Error::invalid("pyramid build: threads", "zero threads"));
        }
        let layout = pyramid.layout();
        let pending = (0..layout.pages())
            .filter(|&p| !pyramid.page_filled(p))
            .collect();
        let queue = Queue {
            pending,
            focus: focus_page(&pyramid, options.focus),
        };
        let shared = Arc::new(Shared {
            pyramid,
            source,
            queue: Mutex::new(queue),
            cancel: Arc::new(AtomicBool::new(false)),
            failed: AtomicBool::new(false),
            error: Mutex::new(None),
            progress: options.progress,
        });
        let mut build = Self {
            shared,
            workers: Vec::with_capacity(options.threads),
        };
        for k in 0..options.threads {
            let shared = Arc::clone(&build.shared);
            let fold = options.fold.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("dspk-pyramid-{k}"))
                .spawn(move || work(&shared, &fold));
            match spawned {
                Ok(worker) => build.workers.push(worker),
                Err(e) => {
                    // Dropping the build cancels and joins the threads started.
                    return Err(Error::Recording(dspk_core::Error::Source {
                        source_name: "pyramid build thread".into(),
                        cause: Arc::new(e),
                    }));
                }
            }
        }
        Ok(build)
    }

    /// The pyramid being built.
    #[must_use]
    pub fn pyramid(&self) -> &Arc<Pyramid> {
        &self.shared.pyramid
    }

    /// Moves the focus to `sample` (clamped to the recording): the pages not taken yet are
    /// taken nearest it first from now on.
    pub fn set_focus(&self, sample: u64) {
        let page = focus_page(&self.shared.pyramid, sample);
        lock(&self.shared.queue).focus = page;
    }

    /// Asks the build to stop (see [`BuildCancel::cancel`]).
    pub fn cancel(&self) {
        self.shared.cancel.store(true, Ordering::Release);
    }

    /// A handle that cancels this build from elsewhere.
    #[must_use]
    pub fn canceller(&self) -> BuildCancel {
        BuildCancel(Arc::clone(&self.shared.cancel))
    }

    /// Pages built so far, of all.
    #[must_use]
    pub fn progress(&self) -> BuildProgress {
        progress(&self.shared.pyramid)
    }

    /// Whether every thread has stopped (the pages were all taken, or the build was cancelled
    /// or failed).
    #[must_use]
    pub fn is_finished(&self) -> bool {
        self.workers.iter().all(JoinHandle::is_finished)
    }

    /// Waits for the threads to stop.
    ///
    /// # Errors
    ///
    /// The first error a page met (what the source reported, [`Error::Io`] for a cache file,
    /// a device's error); [`Error::Cancelled`] when the build was cancelled before the pyramid
    /// was complete.
    pub fn wait(mut self) -> Result<()> {
        self.join();
        if let Some(error) = lock(&self.shared.error).take() {
            return Err(error);
        }
        let BuildProgress { done, total } = self.progress();
        if done < total && self.shared.cancel.load(Ordering::Acquire) {
            return Err(Error::Cancelled { done, total });
        }
        Ok(())
    }

    fn join(&mut self) {
        for worker in self.workers.drain(..) {
            // A worker catches the panics of the pages it builds; nothing else in it panics.
            let _ = worker.join();
        }
    }
}

impl Drop for PyramidBuild {
    fn drop(&mut self) {
        if !self.workers.is_empty() {
            self.cancel();
            self.join();
        }
    }
}

/// One building thread: takes the page nearest the focus until none is left or the build
/// stops.
fn work(shared: &Shared, fold: &PageFold) {
    let mut folder = PageFolder::new(fold);
    let mut buffers = PageWork::default();
    let pyramid = &shared.pyramid;
    loop {
        if shared.cancel.load(Ordering::Acquire) || shared.failed.load(Ordering::Acquire) {
            return;
        }
        let Some(page) = lock(&shared.queue).pop() else {
            return;
        };
        if !pyramid.claim(page) {
            continue;
        }
        // A panic in the source (or in the progress function) ends the build as an error.
        let built = catch_unwind(AssertUnwindSafe(|| {
            pyramid.build_page(page, &*shared.source, &mut folder, &mut buffers)?;
            if let Some(tell) = &shared.progress {
                tell(progress(pyramid));
            }
            Ok(())
        }))
        .unwrap_or_else(|panic| Err(panicked(page, panic.as_ref())));
        if let Err(error) = built {
            // Gives the page back unless it was stored before the error.
            pyramid.unclaim(page);
            lock(&shared.error).get_or_insert(error);
            shared.failed.store(true, Ordering::Release);
            return;
        }
    }
}

/// The error for a page whose build panicked.
fn panicked(page: u64, panic: &(dyn std::any::Any + Send)) -> Error {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into());
    Error::Recording(dspk_core::Error::Source {
        source_name: format!("pyramid page {page}"),
        cause: Arc::new(std::io::Error::other(format!("panicked: {message}"))),
    })
}

fn progress(pyramid: &Pyramid) -> BuildProgress {
    BuildProgress {
        done: pyramid.pages_filled(),
        total: pyramid.layout().pages(),
    }
}

/// The page holding `sample`, clamped to the recording.
fn focus_page(pyramid: &Pyramid, sample: u64) -> u64 {
    let layout = pyramid.layout();
    sample.min(layout.samples() - 1) / layout.page_samples()
}

/// The guard of `mutex`, whether or not a thread panicked holding it (what it guards stays
/// consistent: a queue or an error slot changed in one step).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
