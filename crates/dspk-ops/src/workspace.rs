//! The device workspace a window is uploaded into and processed in.

use cubecl::bytes::Bytes;
use cubecl::client::Client;
use cubecl::future::block_on;
use cubecl::server::Handle;
use dspk_core::SampleFormat;

use crate::array::alloc;
use crate::limits::DeviceLimits;
use crate::pipeline::Pipeline;
use crate::unpack::unpack_scaled;
use crate::{ChannelVector, DeviceArray, Error, Result, Shape, StoredArray};

/// Persistent device buffers for windows of `channels x samples` (up to `max_samples`), reused
/// for every window: after the first window of a stored format, uploading and unpacking a
/// window allocates nothing on the device and, with [`process_stored`](Self::process_stored)
/// fed by [`LoadedWindow::into_upload`](dspk_core::LoadedWindow::into_upload), copies nothing
/// on the host. [`WindowStream`](crate::WindowStream) drives one over a whole recording.
///
/// A window arrives in one of two ways and ends as scaled `f32` values, channel-major, in
/// [`output`](Self::output):
/// - **stored** ([`process_stored`](Self::process_stored),
///   [`process_stored_chunk_in_vram`](Self::process_stored_chunk_in_vram)): the stored
///   little-endian integers cross the bus as they are (int16: half the bytes of `f32`) and a
///   kernel unpacks and scales them with the gains and offsets set by
///   [`set_stored_scaling`](Self::set_stored_scaling);
/// - **scaled** ([`process_scaled`](Self::process_scaled)): `f32` values computed on the host,
///   for sources without stored access.
///
/// Each window then runs through the workspace's [`Pipeline`] (none by default; see
/// [`set_pipeline`](Self::set_pipeline)), still on the device, and [`output`](Self::output)
/// holds the result. Uploads and stages are queued, not waited for: the host can read the next
/// window while the device works on this one.
pub struct PipelineWorkspace {
    client: Client,
    channels: usize,
    max_samples: usize,
    limits: DeviceLimits,
    /// The scaled window buffer, `channels x max_samples` `f32`.
    scaled_full: DeviceArray,
    /// The current window's scaled values, at the front of `scaled_full`.
    scaled: DeviceArray,
    /// The stages each window runs through.
    pipeline: Pipeline,
    /// The current window's result: `scaled`, or one of the pipeline's buffers.
    output: DeviceArray,
    /// Stored bytes of the current window, sized for `stored_format` (allocated on first use).
    stored: Option<(SampleFormat, Handle)>,
    /// Per-channel `f32` gains and offsets for the stored path.
    scaling: Option<(ChannelVector, ChannelVector)>,
    /// Device buffers this workspace has allocated (for tests and reports).
    allocations: usize,
}

impl PipelineWorkspace {
    /// A workspace on `client` for windows of `channels` channels and up to `max_samples`
    /// samples per channel.
    ///
    /// # Errors
    ///
    /// [`Error::OverLimit`] if `channels * max_samples` values (as `f32`, or as the widest
    /// stored format) exceed `u32::MAX` values or the device's largest buffer.
    pub fn new(client: &Client, channels: usize, max_samples: usize) -> Result<Self> {
        Self::with_limits(client, channels, max_samples, DeviceLimits::of(client))
    }

    /// As [`new`](Self::new), checked against `limits` instead of the device's own (which must
    /// not be larger than the device's).
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    pub fn with_limits(
        client: &Client,
        channels: usize,
        max_samples: usize,
        limits: DeviceLimits,
    ) -> Result<Self> {
        let values = (channels as u64).saturating_mul(max_samples as u64);
        limits.check("workspace window", values, 4)?;
        let shape = Shape::new(channels, max_samples);
        let scaled_full = DeviceArray::trusted(alloc::<f32>(client, values as usize), shape);
        let scaled = scaled_full.front(channels, 0)?;
        Ok(Self {
            client: client.clone(),
            channels,
            max_samples,
            limits,
            output: scaled.clone(),
            scaled,
            scaled_full,
            pipeline: Pipeline::new(),
            stored: None,
            scaling: None,
            allocations: 1,
        })
    }

    /// Channels per window.
    #[must_use]
    pub fn channels(&self) -> usize {
        self.channels
    }

    /// The most samples per channel a window may have.
    #[must_use]
    pub fn max_samples(&self) -> usize {
        self.max_samples
    }

    /// Samples per channel of the window now in [`output`](Self::output).
    #[must_use]
    pub fn samples(&self) -> usize {
        self.output.samples()
    }

    /// Device buffers this workspace has allocated so far: one for the scaled window, one per
    /// stored format used, two for the scaling (re-set scalings reuse them), and those of the
    /// pipeline and its stages. Constant over windows.
    #[must_use]
    pub fn device_allocations(&self) -> usize {
        self.allocations + self.pipeline.device_allocations()
    }

    /// Sets the stages every window runs through after it is scaled, and allocates the
    /// pipeline's two buffers for the workspace's largest window now.
    ///
    /// # Errors
    ///
    /// [`Error::OverLimit`] when the pipeline's buffers exceed the device's limits.
    pub fn set_pipeline(&mut self, mut pipeline: Pipeline) -> Result<()> {
        let values = self.channels as u64 * self.max_samples as u64;
        self.limits.check("pipeline buffer", values, 4)?;
        pipeline.reserve(&self.client, self.channels, self.max_samples)?;
        self.pipeline = pipeline;
        self.scaled = self.scaled_full.front(self.channels, 0)?;
        self.output = self.scaled.clone();
        Ok(())
    }

    /// The stages each window runs through.
    #[must_use]
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// The client the workspace lives on.
    #[must_use]
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The current window's result (scaled, then through the pipeline): `channels x
    /// samples()` `f32`, at the front of a buffer sized for `max_samples()`. Valid until the
    /// next window is processed (a clone shares the buffer, it does not keep the values).
    #[must_use]
    pub fn output(&self) -> &DeviceArray {
        &self.output
    }

    /// The current window's scaled values, before the pipeline (the same as
    /// [`output`](Self::output) when the pipeline is empty).
    #[must_use]
    pub fn scaled(&self) -> &DeviceArray {
        &self.scaled
    }

    /// Sets the per-channel gains and offsets applied to stored values
    /// (`value = stored * gain + offset`); they are uploaded once, as `f32`.
    ///
    /// # Errors
    ///
    /// [`Error::Shape`] unless both have one value per channel, [`Error::BadScaling`] for a
    /// value that is not finite in `f32`.
    pub fn set_stored_scaling(&mut self, gains: &[f64], offsets: &[f64]) -> Result<()> {
        for (what, values) in [("gains", gains), ("offsets", offsets)] {
            if values.len() != self.channels {
                return Err(Error::Shape {
                    what,
                    expected: self.channels,
                    actual: values.len(),
                    unit: "channels",
                });
            }
        }
        let to_f32 = |values: &[f64]| -> Vec<f32> { values.iter().map(|&v| v as f32).collect() };
        let (gains32, offsets32) = (to_f32(gains), to_f32(offsets));
        if let Some(channel) =
            (0..self.channels).find(|&c| !gains32[c].is_finite() || !offsets32[c].is_finite())
        {
            return Err(Error::BadScaling {
                channel,
                gain: gains[channel],
                offset: offsets[channel],
            });
        }
        let (gains_vector, offsets_vector) = match self.scaling.take() {
            Some(vectors) => vectors,
            None => {
                self.allocations += 2;
                (
                    ChannelVector::empty(&self.client, self.channels)?,
                    ChannelVector::empty(&self.client, self.channels)?,
                )
            }
        };
        self.write(gains_vector.handle(), Bytes::from_elems(gains32));
        self.write(offsets_vector.handle(), Bytes::from_elems(offsets32));
        self.scaling = Some((gains_vector, offsets_vector));
        Ok(())
    }

    /// Uploads a window of stored values borrowed from the caller (`channels * samples`
    /// little-endian values of `format`, channel-major), unpacks and scales it and runs the
    /// pipeline; returns [`output`](Self::output). Copies the bytes once on the host, into an
    /// owned upload buffer padded to whole 32-bit words, which the runtime then copies to the
    /// device; [`process_stored`](Self::process_stored) with a loader's
    /// [`into_upload`](dspk_core::LoadedWindow::into_upload) copies nothing on the host.
    ///
    /// # Errors
    ///
    /// As [`process_stored`](Self::process_stored).
    pub fn process_stored_chunk_in_vram(
        &mut self,
        stored: &[u8],
        format: SampleFormat,
        samples: usize,
    ) -> Result<DeviceArray> {
        // Check before padding, so padding never makes a wrong length look right.
        self.check_window(samples, stored.len(), format.size(), "stored window")?;
        let mut owned = Vec::with_capacity(stored.len().next_multiple_of(4));
        owned.extend_from_slice(stored);
        owned.resize(stored.len().next_multiple_of(4), 0);
        self.process_stored(Bytes::from_bytes_vec(owned), format, samples)
    }

    /// Uploads a window of stored values given as CubeCL [`Bytes`] (for example from
    /// [`LoadedWindow::into_upload`](dspk_core::LoadedWindow::into_upload), which recycles
    /// the loader's page-locked buffers), unpacks and scales it on the device and runs the
    /// pipeline; returns [`output`](Self::output). The length is `channels * samples *
    /// format.size()` bytes, or that rounded up to a multiple of 4 with zero padding.
    ///
    /// # Errors
    ///
    /// [`Error::ScalingNotSet`] before [`set_stored_scaling`](Self::set_stored_scaling),
    /// [`Error::WindowTooLong`], [`Error::Shape`] for a length that disagrees with the window,
    /// [`Error::UnsupportedFormat`] for a format without an unpack kernel,
    /// [`Error::OverLimit`] for a stored buffer over the device's limits.
    pub fn process_stored(
        &mut self,
        stored: Bytes,
        format: SampleFormat,
        samples: usize,
    ) -> Result<DeviceArray> {
        let unpadded = self.channels * samples.min(self.max_samples) * format.size();
        let len = if stored.len() == unpadded.next_multiple_of(4) {
            unpadded
        } else {
            stored.len()
        };
        self.check_window(samples, len, format.size(), "stored window")?;
        let Some((gains, offsets)) = self.scaling.clone() else {
            return Err(Error::ScalingNotSet);
        };
        let handle = self.stored_buffer(format)?;
        if !stored.is_empty() {
            self.write(&handle, stored);
        }
        let stored = StoredArray::from_handle(handle, format, self.channels, samples)?;
        self.scaled = self.scaled_full.front(self.channels, samples)?;
        unpack_scaled(&self.client, &stored, &gains, &offsets, &self.scaled)?;
        self.run_pipeline()
    }

    /// Unpacks and scales a window of stored values that is already on the device (for
    /// example kept resident from an earlier pass, see
    /// [`ResidentWindows`](crate::ResidentWindows)) and runs the pipeline; returns
    /// [`output`](Self::output). Nothing crosses the bus.
    ///
    /// # Errors
    ///
    /// [`Error::ScalingNotSet`] before [`set_stored_scaling`](Self::set_stored_scaling),
    /// [`Error::WindowTooLong`] for more samples than the workspace holds,
    /// [`Error::ShapeMismatch`] for another channel count.
    pub fn process_resident(&mut self, stored: &StoredArray) -> Result<DeviceArray> {
        let samples = stored.shape().samples;
        if samples > self.max_samples {
            return Err(Error::WindowTooLong {
                samples,
                max_samples: self.max_samples,
            });
        }
        let Some((gains, offsets)) = self.scaling.clone() else {
            return Err(Error::ScalingNotSet);
        };
        self.scaled = self.scaled_full.front(self.channels, samples)?;
        unpack_scaled(&self.client, stored, &gains, &offsets, &self.scaled)?;
        self.run_pipeline()
    }

    /// Uploads a window of scaled `f32` values given as CubeCL [`Bytes`] (`channels * samples`
    /// little-endian `f32`, channel-major: `Bytes::from_elems(values)` for a host vector, or
    /// [`LoadedWindow::into_upload`](dspk_core::LoadedWindow::into_upload) on a scaled loader)
    /// and runs the pipeline; returns [`output`](Self::output).
    ///
    /// # Errors
    ///
    /// [`Error::WindowTooLong`], or [`Error::Shape`] when the length is not
    /// `channels * samples * 4` bytes.
    pub fn process_scaled(&mut self, values: Bytes, samples: usize) -> Result<DeviceArray> {
        self.check_window(samples, values.len(), 4, "scaled window")?;
        if !values.is_empty() {
            self.write(self.scaled_full.handle(), values);
        }
        self.scaled = self.scaled_full.front(self.channels, samples)?;
        self.run_pipeline()
    }

    /// Runs the pipeline on the scaled window and flushes.
    fn run_pipeline(&mut self) -> Result<DeviceArray> {
        self.output = self.scaled.clone();
        if !self.scaled.is_empty() {
            self.output = self.pipeline.run(&self.client, &self.scaled)?;
        }
        self.flush()?;
        Ok(self.output.clone())
    }

    /// Waits until every queued upload and kernel has finished.
    ///
    /// # Errors
    ///
    /// [`Error::Device`] if the device reports an error.
    pub fn sync(&self) -> Result<()> {
        Ok(block_on(self.client.sync())?)
    }

    /// Hands the queued work to the device now. Runtimes batch work and keep upload buffers
    /// until they flush; the window loader's buffers return to it only when released, so
    /// without this the loader could wait for a buffer the runtime holds until a sync that
    /// never comes. (CubeCL 0.11.3 on CUDA: the upload of a window over 10 MB already flushed
    /// once, so this flush waits for that window's copy and releases its buffer before it
    /// returns; measured in docs/PERFORMANCE.md, "buffers page-locked after their first
    /// fill".)
    fn flush(&self) -> Result<()> {
        Ok(self.client.flush()?)
    }

    /// Checks a window of `samples` per channel given as `len` elements of `per_sample` each.
    fn check_window(
        &self,
        samples: usize,
        len: usize,
        per_sample: usize,
        what: &'static str,
    ) -> Result<()> {
        if samples > self.max_samples {
            return Err(Error::WindowTooLong {
                samples,
                max_samples: self.max_samples,
            });
        }
        let expected = self.channels * samples * per_sample;
        if len != expected {
            return Err(Error::Shape {
                what,
                expected,
                actual: len,
                unit: "bytes",
            });
        }
        Ok(())
    }

    /// The stored-bytes buffer for `format`, allocated on first use (and again only when a
    /// wider format than before arrives).
    fn stored_buffer(&mut self, format: SampleFormat) -> Result<Handle> {
        if let Some((current, handle)) = &self.stored
            && current.size() >= format.size()
        {
            return Ok(handle.clone());
        }
        let values = self.channels as u64 * self.max_samples as u64;
        self.limits
            .check("stored window", values, format.size() as u64)?;
        let bytes = StoredArray::bytes(format, Shape::new(self.channels, self.max_samples))?;
        self.allocations += 1;
        let handle = self.client.empty((bytes as usize).max(4));
        self.stored = Some((format, handle.clone()));
        Ok(handle)
    }

    /// Writes `bytes` at the start of `handle` (a prefix when shorter), queued.
    fn write(&self, handle: &Handle, bytes: Bytes) {
        // `size_in_used` is the size asked for (the allocation may be padded past it).
        let unused = handle.size_in_used() - bytes.len() as u64;
        self.client.write(&handle.clone().offset_end(unused), bytes);
    }
}
