//! The one streaming path: a recording read window by window, uploaded and processed on the
//! device.

use std::sync::Arc;

use cubecl::client::Client;
use dspk_core::{
    ChunkSchedule, ComputeTarget, LoadedWindow, LoaderStats, RecordingSource, SampleFormat,
    WindowLoader,
};

use crate::{DeviceWindow, Pipeline, PipelineWorkspace, Result};

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
        let loader = if source.can_read_stored() {
            let (gains, offsets): (Vec<f64>, Vec<f64>) = channels
                .iter()
                .filter_map(|&c| info.channels.get(c))
                .map(|c| (c.gain, c.offset))
                .unzip();
            let loader = WindowLoader::stored_for(source, channels, schedule, options.target)?;
            workspace.set_stored_scaling(&gains, &offsets)?;
            Loader::Stored(loader, info.stored_format)
        } else {
            Loader::Scaled(WindowLoader::scaled_for(
                source,
                channels,
                schedule,
                options.target,
            )?)
        };
        Ok(Self {
            loader,
            workspace,
            schedule,
            halo,
            current: None,
            uploaded_bytes: 0,
        })
    }

    /// Processes the next window and lends it (valid until the next call), or `None` after the
    /// last. A read or device error ends the stream after it is returned.
    pub fn next_window(&mut self) -> Option<Result<&DeviceWindow>> {
        let processed = match &mut self.loader {
            Loader::Stored(loader, format) => {
                let format = *format;
                loader.next().map(|loaded| {
                    upload(loaded?, &mut self.uploaded_bytes, |bytes, samples| {
                        self.workspace.process_stored(bytes, format, samples)
                    })
                })
            }
            Loader::Scaled(loader) => loader.next().map(|loaded| {
                upload(loaded?, &mut self.uploaded_bytes, |bytes, samples| {
                    self.workspace.process_scaled(bytes, samples)
                })
            }),
        }?;
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

/// Hands `loaded`'s buffer to `process` (with its samples per channel), counts its bytes in
/// `uploaded`, and pairs the result with the window.
fn upload<T: dspk_core::WindowElement>(
    loaded: LoadedWindow<T>,
    uploaded: &mut u64,
    process: impl FnOnce(cubecl::bytes::Bytes, usize) -> Result<crate::DeviceArray>,
) -> Result<DeviceWindow> {
    let window = loaded.window().clone();
    *uploaded += size_of_val(loaded.data()) as u64;
    let array = process(loaded.into_upload(), window.read_len())?;
    DeviceWindow::new(array, window)
}
