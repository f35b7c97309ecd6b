//! The interface every pipeline stage implements.

use crate::{DeviceArray, Result};
use cubecl::client::Client;

/// One step of a device pipeline: reads a `[channels, samples]` `f32` window (channel-major)
/// from `input` and writes the result, same shape, to `output`. Nothing is read back to the
/// host; work is queued, not waited for.
///
/// A stage whose output at sample `t` depends on input samples other than `t` (a filter, a
/// smoother) says how far that dependence reaches with [`settling`](Stage::settling): a window
/// processed with halos at least that long on each side gives, outside the halos, the same
/// values as processing the whole recording at once (within the stated tolerance of the stage).
pub trait Stage: Send {
    /// A short name for reports and errors (`"sosfiltfilt"`, `"car"`).
    fn name(&self) -> &str;

    /// Samples of halo this stage needs on each side of the samples it must get right.
    /// Zero for stages that work sample by sample (common reference, whitening).
    fn settling(&self) -> usize;

    /// Device buffers the stage has allocated so far (coefficients, scratch); constant once
    /// windows stop growing. Stages without buffers of their own keep the default, zero.
    fn device_allocations(&self) -> usize {
        0
    }

    /// Allocates the scratch buffers the stage needs for windows of up to `channels x
    /// max_samples` now, so later windows of any length up to that allocate nothing. Stages
    /// without scratch keep the default, which does nothing.
    ///
    /// # Errors
    ///
    /// [`Error::OverLimit`](crate::Error::OverLimit) over 32-bit indexing.
    fn reserve(&mut self, client: &Client, channels: usize, max_samples: usize) -> Result<()> {
        let _ = (client, channels, max_samples);
        Ok(())
    }

    /// Applies the stage: `output` has `input`'s shape and a distinct buffer (the
    /// [`Pipeline`](crate::Pipeline) makes them so). Scratch buffers a stage needs are
    /// allocated on first use and kept, so steady-state windows allocate nothing on the device.
    ///
    /// # Errors
    ///
    /// [`Error::ShapeMismatch`](crate::Error::ShapeMismatch) when the shapes disagree with
    /// each other or with the stage (a whitening matrix for other channels),
    /// [`Error::OverLimit`](crate::Error::OverLimit) over device limits,
    /// [`Error::Device`](crate::Error::Device) when the device fails.
    fn apply(&mut self, client: &Client, input: &DeviceArray, output: &DeviceArray) -> Result<()>;
}
