//! The one streaming path: a recording read window by window, uploaded and processed on the
//! device.

use std::sync::Arc;

use cubecl::client::Client;
use dspk_core::{
    ChunkSchedule, ComputeTarget, HaloWindow, LoadedWindow, LoaderOptions, LoaderStats,
    RecordingSource, SampleFormat, WindowLoader,
};

use crate::{DeviceWindow, Pipeline, PipelineWorkspace, Result, StoredArray};

/// How a [`WindowStream`] cuts and reads the recording.
///
/// > default: windows of 30 000 owned samples, no extra halo, every channel, no target.
#[derive(Debug, Clone)]
pub struct StreamOptions {
    /// Samples each window owns (the last may own fewer).
    pub window: u64,
    /// Halo on each side beyond the pipeline's [`settling`](Pipeline::settling): what the
    /// consumer of the windows needs (peak detection's `distance + 1`, a waveform's length).
    pub extra_halo: u64,
    /// The channels to read, in order (`None`: all of the recording's).
    pub channels: Option<Vec<usize>>,
    /// The device the windows go to, so the loader can page-lock its buffers where that speeds
    /// uploads (CUDA); `None` reads into ordinary memory.
    pub target: Option<ComputeTarget>,
}

impl Default for StreamOptions {
    fn default() -> Self {
        Self {
            window: 30_000,
            extra_halo: 0,
            channels: None,
            target: None,
        }
    }
}

/// The loader of a stream: stored bytes when the source has them, scaled `f32` otherwise.
enum Loader {
    Stored(WindowLoader<u8>, SampleFormat),
    Scaled(WindowLoader<f32>),
}

/// A recording processed on the device window by window, in order: a [`WindowLoader`] reads
/// window `i + 1` on a background thread while the device works on window `i`; each window is
/// uploaded into a [`PipelineWorkspace`] and run through the [`Pipeline`], and
/// [`next_window`](Self::next_window) lends the processed [`DeviceWindow`] (its read and owned
/// ranges in recording samples).
///
/// The source is asked once, here, whether it can return stored values
/// ([`RecordingSource::can_read_stored`]): if so windows cross the bus as stored integers and
/// are unpacked on the device with the gains and offsets of the source's
/// [`RecordingInfo`](dspk_core::RecordingInfo); otherwise they cross as scaled `f32`. Either
/// way the device output is the same. Windows carry a halo of the pipeline's settling plus
/// [`StreamOptions::extra_halo`] on each side, so results over the owned samples do not depend
/// on the window size. After the first window no device memory is allocated
/// ([`workspace`](Self::workspace)'s `device_allocations` stays constant).
///
/// ```no_run
/// # fn demo(client: &cubecl::client::Client) -> dspk_ops::Result<()> {
/// use std::sync::Arc;
/// use dspk_core::{SampleRate, SyntheticRecording};
/// use dspk_ops::{CommonReference, Pipeline, Reference, StreamOptions, WindowStream};
///
/// let source = Arc::new(SyntheticRecording::new(384, 300_000, SampleRate::from_hz(30_000)?, 1)?);
/// let pipeline = Pipeline::new().with(CommonReference::new(Reference::Mean));
/// let mut stream = WindowStream::new(client, source, pipeline, &StreamOptions::default())?;
/// while let Some(window) = stream.next_window() {
///     let window = window?;
///     // window.array(): 384 x read_len f32 on the device; window.window(): where it lies.
/// #   let _ = window;
/// }
/// # Ok(()) }
/// ```
pub struct WindowStream {
    loader: Loader,
    workspace: PipelineWorkspace,
    schedule: ChunkSchedule,
    halo: u64,
    current: Option<DeviceWindow>,
    uploaded_bytes: u64,
    /// The stored windows kept on the device, when asked ([`keep_resident`](Self::keep_resident)).
    resident: Option<Vec<(HaloWindow, StoredArray)>>,
    /// Device bytes the kept windows may take; the first window past it ends the keeping.
    resident_budget: u64,
    /// Whether the last window has been served.
    finished: bool,
}

impl WindowStream {
    /// A stream of `source` through `pipeline` on `client`, cut as `options` says. Starts the
    /// reader thread and allocates the workspace's buffers for the longest window.
    ///
    /// # Errors
    ///
    /// From `dspk-core` ([`Error::Core`](crate::Error::Core)): a zero window, a channel out of
    /// range; [`Error::OverLimit`](crate::Error::OverLimit) when the longest window exceeds
    /// the device's limits; [`Error::BadScaling`](crate::Error::BadScaling) for a gain or
    /// offset that is not finite in `f32`.
    pub fn new<S>(
        client: &Client,
        source: Arc<S>,
        pipeline: Pipeline,
        options: &StreamOptions,
    ) -> Result<Self>
    where
        S: RecordingSource + ?Sized + 'static,
    {
        Self::of_windows(client, source, pipeline, options, None)
    }

    /// As [`new`](Self::new), serving only the windows of the schedule at the indices
    /// `windows`, in increasing order (the others are neither read nor processed; see
    /// [`WindowLoader::of_windows`]); `None` serves every window. With windows kept on the
    /// device ([`ResidentWindows`]), this streams the rest of the recording.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    pub fn of_windows<S>(
        client: &Client,
        source: Arc<S>,
        pipeline: Pipeline,
        options: &StreamOptions,
        windows: Option<Vec<usize>>,
    ) -> Result<Self>
    where
        S: RecordingSource + ?Sized + 'static,
    {
        let info = source.info().clone();
        let channels = options
            .channels
            .clone()
            .unwrap_or_else(|| info.all_channels());
        let halo = pipeline.settling() as u64 + options.extra_halo;
        let schedule = ChunkSchedule::symmetric(info.num_samples, options.window, halo)?;
        let max_samples = usize::try_from(schedule.max_read_len()).unwrap_or(usize::MAX);
        let mut workspace = PipelineWorkspace::new(client, channels.len(), max_samples)?;
        workspace.set_pipeline(pipeline)?;
        let loader_options = LoaderOptions::for_target(options.target);
        let picked = windows.unwrap_or_else(|| (0..schedule.len()).collect());
        let loader = if source.can_read_stored() {
            let (gains, offsets): (Vec<f64>, Vec<f64>) = channels
                .iter()
                .filter_map(|&c| info.channels.get(c))
                .map(|c| (c.gain, c.offset))
                .unzip();
            let loader =
                WindowLoader::of_windows(source, channels, schedule, picked, loader_options)?;
            workspace.set_stored_scaling(&gains, &offsets)?;
            Loader::Stored(loader, info.stored_format)
        } else {
            Loader::Scaled(WindowLoader::of_windows(
                source,
                channels,
                schedule,
                picked,
                loader_options,
            )?)
        };
        Ok(Self {
            loader,
            workspace,
            schedule,
            halo,
            current: None,
            uploaded_bytes: 0,
            resident: None,
            resident_budget: 0,
            finished: false,
        })
    }

    /// Keeps the stored windows uploaded from now on, in order, each in a device buffer of
    /// its own instead of the workspace's upload buffer, while together they take at most
    /// `budget` device bytes: the first window that would pass it and every window after it
    /// go through the upload buffer as usual. [`into_resident`](Self::into_resident) then
    /// serves the kept windows again without reading or uploading them, and the rest can be
    /// streamed ([`of_windows`](Self::of_windows)). Call it before the first window. Returns
    /// `false` (and keeps nothing) when windows cross as scaled `f32`: only stored integers are
    /// kept, the compact form.
    pub fn keep_resident(&mut self, budget: u64) -> bool {
        if self.uploads_stored() && self.resident.is_none() {
            self.resident = Some(Vec::new());
            self.resident_budget = budget;
        }
        self.resident.is_some()
    }

    /// Device bytes held by the windows kept so far (whole 32-bit words per window).
    #[must_use]
    pub fn resident_bytes(&self) -> u64 {
        self.resident.as_ref().map_or(0, |kept| {
            kept.iter()
                .map(|(_, stored)| stored.handle().size_in_used())
                .sum()
        })
    }

    /// The kept windows (the first windows of the schedule, all of them when they fitted the
    /// budget) and this stream's workspace (its pipeline included), to process them again from
    /// device memory; `None` unless [`keep_resident`](Self::keep_resident) was on and every
    /// window has been served.
    #[must_use]
    pub fn into_resident(self) -> Option<ResidentWindows> {
        let windows = self.resident.filter(|_| self.finished)?;
        Some(ResidentWindows {
            windows,
            workspace: self.workspace,
            next: 0,
            current: None,
        })
    }

    /// Processes the next window and lends it (valid until the next call), or `None` after the
    /// last. A read or device error ends the stream after it is returned.
    pub fn next_window(&mut self) -> Option<Result<&DeviceWindow>> {
        let client = self.workspace.client().clone();
        let processed = match &mut self.loader {
            Loader::Stored(loader, format) => {
                let format = *format;
                loader.next().map(|loaded| {
                    let (workspace, resident) = (&mut self.workspace, &mut self.resident);
                    let budget = &mut self.resident_budget;
                    upload(
                        loaded?,
                        &mut self.uploaded_bytes,
                        |bytes, window| match resident {
                            Some(kept) if fits(budget, bytes.len()) => {
                                let stored =
                                    keep(&client, bytes, format, workspace.channels(), window)?;
                                let array = workspace.process_resident(&stored)?;
                                kept.push((window.clone(), stored));
                                Ok(array)
                            }
                            _ => workspace.process_stored(bytes, format, window.read_len()),
                        },
                    )
                })
            }
            Loader::Scaled(loader) => loader.next().map(|loaded| {
                upload(loaded?, &mut self.uploaded_bytes, |bytes, window| {
                    self.workspace.process_scaled(bytes, window.read_len())
                })
            }),
        };
        let Some(processed) = processed else {
            self.finished = true;
            return None;
        };
        Some(processed.map(|window| &*self.current.insert(window)))
    }

    /// Whether windows cross the bus as stored integers (else as scaled `f32`).
    #[must_use]
    pub fn uploads_stored(&self) -> bool {
        matches!(self.loader, Loader::Stored(..))
    }

    /// How the recording is cut into windows.
    #[must_use]
    pub fn schedule(&self) -> &ChunkSchedule {
        &self.schedule
    }

    /// The halo read on each side of every window: the pipeline's settling plus the extra
    /// asked for.
    #[must_use]
    pub fn halo(&self) -> u64 {
        self.halo
    }

    /// The workspace windows are processed in (its pipeline, client and allocation count).
    #[must_use]
    pub fn workspace(&self) -> &PipelineWorkspace {
        &self.workspace
    }

    /// Bytes uploaded to the device so far: `channels x read samples x` the stored sample size
    /// (or 4 for `f32`) per window, without the padding to whole words.
    #[must_use]
    pub fn uploaded_bytes(&self) -> u64 {
        self.uploaded_bytes
    }

    /// What the loader has done so far (buffers allocated, page-locked).
    #[must_use]
    pub fn loader_stats(&self) -> LoaderStats {
        match &self.loader {
            Loader::Stored(loader, _) => loader.stats(),
            Loader::Scaled(loader) => loader.stats(),
        }
    }
}

/// Hands `loaded`'s buffer to `process` (with its window), counts its bytes in `uploaded`, and
/// pairs the result with the window.
fn upload<T: dspk_core::WindowElement>(
    loaded: LoadedWindow<T>,
    uploaded: &mut u64,
    process: impl FnOnce(cubecl::bytes::Bytes, &HaloWindow) -> Result<crate::DeviceArray>,
) -> Result<DeviceWindow> {
    let window = loaded.window().clone();
    *uploaded += size_of_val(loaded.data()) as u64;
    let array = process(loaded.into_upload(), &window)?;
    DeviceWindow::new(array, window)
}

/// Whether a window of `bytes` stored bytes (padded to whole 32-bit words on the device) fits
/// the `left` bytes of a residency budget; if so they are taken from it, else the budget is
/// closed (set to 0) so that no later window is kept: the kept windows stay the first ones.
fn fits(left: &mut u64, bytes: usize) -> bool {
    let need = (bytes as u64).next_multiple_of(4);
    if need <= *left {
        *left -= need;
        true
    } else {
        *left = 0;
        false
    }
}

/// Uploads a window's stored bytes into a device buffer of its own (padded to whole 32-bit
/// words), to keep.
fn keep(
    client: &Client,
    bytes: cubecl::bytes::Bytes,
    format: SampleFormat,
    channels: usize,
    window: &HaloWindow,
) -> Result<StoredArray> {
    let handle = if bytes.len().is_multiple_of(4) {
        client.create(bytes)
    } else {
        let mut padded = bytes.to_vec();
        padded.resize(bytes.len().next_multiple_of(4), 0);
        client.create_from_slice(&padded)
    };
    StoredArray::from_handle(handle, format, channels, window.read_len())
}

/// A recording's stored windows kept in device memory by a [`WindowStream`]
/// ([`WindowStream::keep_resident`]), served again, in order, through the same pipeline:
/// each pass unpacks and processes them on the device and reads nothing from the host.
pub struct ResidentWindows {
    windows: Vec<(HaloWindow, StoredArray)>,
    workspace: PipelineWorkspace,
    next: usize,
    current: Option<DeviceWindow>,
}

impl ResidentWindows {
    /// Processes the next kept window and lends it (valid until the next call), or `None`
    /// after the last; the pass after that starts again from the first window.
    pub fn next_window(&mut self) -> Option<Result<&DeviceWindow>> {
        if self.next == self.windows.len() {
            self.next = 0;
            return None;
        }
        self.next += 1;
        self.window(self.next - 1)
    }

    /// Processes kept window `index` (any order; a pass that needs only some windows skips the
    /// rest) and lends it, or `None` past the last.
    pub fn window(&mut self, index: usize) -> Option<Result<&DeviceWindow>> {
        let (window, stored) = self.windows.get(index)?;
        let processed = self
            .workspace
            .process_resident(stored)
            .and_then(|array| DeviceWindow::new(array, window.clone()));
        Some(processed.map(|window| &*self.current.insert(window)))
    }

    /// The ranges of the kept windows, in order.
    pub fn ranges(&self) -> impl ExactSizeIterator<Item = &HaloWindow> {
        self.windows.iter().map(|(window, _)| window)
    }

    /// Number of kept windows.
    #[must_use]
    pub fn len(&self) -> usize {
        self.windows.len()
    }

    /// Whether no window is kept (an empty recording).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }

    /// Device bytes the kept windows hold.
    #[must_use]
    pub fn bytes(&self) -> u64 {
        self.windows
            .iter()
            .map(|(_, stored)| stored.handle().size_in_used())
            .sum()
    }

    /// The workspace windows are processed in (its pipeline and client).
    #[must_use]
    pub fn workspace(&self) -> &PipelineWorkspace {
        &self.workspace
    }
}
