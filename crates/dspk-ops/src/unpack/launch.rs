//! Host side of the unpack kernels: checks, sizes and launches.

use cubecl::prelude::*;
use cubecl::server::Handle;
use dspk_core::SampleFormat;

use super::kernel;
use crate::launch::UnitLayout;
use crate::{ChannelVector, DeviceArray, Result, StoredArray};

/// Unpacks and scales a window of stored values on the device:
/// `out[c * samples + s] = stored[c * samples + s] * gains[c] + offsets[c]`, in `f32`.
///
/// `stored` and `out` have the same shape; `gains` and `offsets` one value per channel.
/// [`SampleFormat::U16`] values are unsigned (offset-binary data is described by its offset).
///
/// Results equal the `f64` product `stored * gain + offset` rounded to `f32`, within one
/// rounding of each `f32` operation (the runtime may fuse the multiply-add); `i32` values of
/// magnitude above 2^24 are first rounded to `f32`. NaN gains or offsets are refused before
/// (see [`PipelineWorkspace::set_stored_scaling`](crate::PipelineWorkspace::set_stored_scaling));
/// a NaN in `f32` stored values propagates.
///
/// # Errors
///
/// [`Error::ShapeMismatch`](crate::Error::ShapeMismatch) when `out`'s shape differs from
/// `stored`'s, or `gains` or `offsets` do not hold one value per channel.
pub fn unpack_scaled(
    client: &Client,
    stored: &StoredArray,
    gains: &ChannelVector,
    offsets: &ChannelVector,
    out: &DeviceArray,
) -> Result<()> {
    out.expect_shape("unpack: output", stored.shape())?;
    let (channels, samples) = (out.channels(), out.samples());
    gains.expect_channels("unpack: gains", channels)?;
    offsets.expect_channels("unpack: offsets", channels)?;
    let values = out.len();
    if values == 0 {
        return Ok(());
    }
    let format = stored.format();
    // The kernels bound their indices by the lengths given below, which the typed arrays make
    // true of the buffers (a stored array holds whole words for its format).
    let (stored, gains, offsets, out) = (
        stored.handle(),
        gains.handle(),
        offsets.handle(),
        out.handle(),
    );
    let samples = samples as u32; // <= values <= u32::MAX
    let buffers = [stored, gains, offsets, out];
    match format {
        SampleFormat::I16 | SampleFormat::U16 => {
            let words = values.div_ceil(2);
            let layout = UnitLayout::of(client);
            // SAFETY: the buffers hold the lengths passed (typed arrays); the kernel bounds
            // its unit index by them.
            unsafe {
                kernel::unpack_16::launch_unchecked(
                    client,
                    layout.cube_count(words),
                    layout.cube_dim(),
                    BufferArg::from_raw_parts(stored.clone(), words),
                    BufferArg::from_raw_parts(gains.clone(), channels),
                    BufferArg::from_raw_parts(offsets.clone(), channels),
                    BufferArg::from_raw_parts(out.clone(), values),
                    values as u32,
                    samples,
                    format == SampleFormat::I16,
                    layout.blocked(),
                );
            }
        }
        SampleFormat::I32 => launch_scale_32::<i32>(client, buffers, channels, values, samples),
        // A stored array holds only formats with a kernel: the rest is f32.
        _ => launch_scale_32::<f32>(client, buffers, channels, values, samples),
    }
    Ok(())
}

/// Launches [`kernel::scale_32`] for 32-bit stored values of type `T` over
/// `[stored, gains, offsets, out]`, whose sizes the caller has checked.
fn launch_scale_32<T: Numeric>(
    client: &Client,
    [stored, gains, offsets, out]: [&Handle; 4],
    channels: usize,
    values: usize,
    samples: u32,
) {
    let layout = UnitLayout::of(client);
    // SAFETY: the buffers hold the lengths passed (typed arrays, see `unpack_scaled`); the kernel
    // bounds its unit index by them.
    unsafe {
        kernel::scale_32::launch_unchecked::<T>(
            client,
            layout.cube_count(values),
            layout.cube_dim(),
            BufferArg::from_raw_parts(stored.clone(), values),
            BufferArg::from_raw_parts(gains.clone(), channels),
            BufferArg::from_raw_parts(offsets.clone(), channels),
            BufferArg::from_raw_parts(out.clone(), values),
            values as u32,
            samples,
            layout.blocked(),
        );
    }
}

/// `out[c, t] = x[c, t] * gains[c] + offsets[c]` for an `f32` window, as a pipeline
/// [`Stage`](crate::Stage) (`"affine"`): the [`unpack_scaled`] kernel on `f32` values, so a
/// per-channel offset removed here gives the same values whether the window was uploaded as
/// stored integers or as `f32`. Sample by sample: no settling.
#[derive(Debug, Clone)]
pub struct ChannelAffine {
    gains: ChannelVector,
    offsets: ChannelVector,
}

impl ChannelAffine {
    /// A stage multiplying channel `c` by `gains[c]` and adding `offsets[c]`.
    ///
    /// # Errors
    ///
    /// [`Error::Shape`](crate::Error::Shape) when the two do not hold the same number of
    /// values, [`Error::InvalidParameter`](crate::Error::InvalidParameter) for a value that is
    /// not finite or no channels.
    pub fn new(client: &Client, gains: &[f32], offsets: &[f32]) -> Result<Self> {
        if gains.len() != offsets.len() {
            return Err(crate::Error::Shape {
                what: "channel affine: offsets",
                expected: gains.len(),
                actual: offsets.len(),
                unit: "values (one per channel)",
            });
        }
        if let Some(c) =
            (0..gains.len()).find(|&c| !(gains[c].is_finite() && offsets[c].is_finite()))
        {
            return Err(crate::Error::InvalidParameter {
                what: "channel affine",
                reason: format!(
                    "channel {c}: gain {} and offset {} must be finite",
                    gains[c], offsets[c]
                ),
            });
        }
        if gains.is_empty() {
            return Err(crate::Error::InvalidParameter {
                what: "channel affine",
                reason: "at least one channel is needed".to_string(),
            });
        }
        Ok(Self {
            gains: ChannelVector::from_host(client, gains)?,
            offsets: ChannelVector::from_host(client, offsets)?,
        })
    }

    /// A stage subtracting `offsets[c]` from channel `c` (gains of 1).
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    pub fn subtract(client: &Client, offsets: &[f32]) -> Result<Self> {
        let negated: Vec<f32> = offsets.iter().map(|v| -v).collect();
        Self::new(client, &vec![1.0; offsets.len()], &negated)
    }
}

impl crate::Stage for ChannelAffine {
    fn name(&self) -> &str {
        "affine"
    }

    fn settling(&self) -> usize {
        0
    }

    fn device_allocations(&self) -> usize {
        2
    }

    fn apply(&mut self, client: &Client, input: &DeviceArray, output: &DeviceArray) -> Result<()> {
        let stored = StoredArray::from_handle(
            input.handle().clone(),
            SampleFormat::F32,
            input.channels(),
            input.samples(),
        )?;
        unpack_scaled(client, &stored, &self.gains, &self.offsets, output)
    }
}
