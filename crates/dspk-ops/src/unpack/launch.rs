//! Host side of the unpack kernels: checks, sizes and launches.

use cubecl::prelude::*;
use cubecl::server::Handle;
use dspk_core::SampleFormat;

use super::kernel;
use crate::launch::{CUBE_DIM, check_buffer, checked_values, cube_count};
use crate::{Error, Result};

/// Unpacks and scales a window of stored values on the device:
/// `out[c * samples + s] = stored[c * samples + s] * gains[c] + offsets[c]`, in `f32`.
///
/// `stored` holds `channels * samples` little-endian values of `format` (for 16-bit formats
/// padded with zeros to a multiple of 4 bytes); `gains` and `offsets` hold `channels` `f32`
/// values; `out` holds at least `channels * samples` `f32` values, of which exactly the first
/// `channels * samples` are written. [`SampleFormat::U16`] values are unsigned (offset-binary
/// data is described by its offset).
///
/// Results equal the `f64` product `stored * gain + offset` rounded to `f32`, within one
/// rounding of each `f32` operation (the runtime may fuse the multiply-add); `i32` values of
/// magnitude above 2^24 are first rounded to `f32`. NaN gains or offsets are refused before
/// (see [`PipelineWorkspace::set_stored_scaling`](crate::PipelineWorkspace::set_stored_scaling));
/// a NaN in `f32` stored values propagates.
///
/// # Errors
///
/// [`Error::OverLimit`] when `channels * samples` exceeds `u32::MAX` values,
/// [`Error::Shape`] when a buffer is smaller than the window needs,
/// [`Error::UnsupportedFormat`] for a format without a kernel.
#[allow(clippy::too_many_arguments)]
pub fn unpack_scaled(
    client: &Client,
    stored: &Handle,
    format: SampleFormat,
    gains: &Handle,
    offsets: &Handle,
    out: &Handle,
    channels: usize,
    samples: usize,
) -> Result<()> {
    let values = checked_values("unpack", channels, samples)?;
    if values == 0 {
        return Ok(());
    }
    let stored_bytes = match format {
        SampleFormat::I16 | SampleFormat::U16 => values.div_ceil(2) * 4,
        SampleFormat::I32 | SampleFormat::F32 => values * 4,
        other => return Err(Error::UnsupportedFormat(other)),
    };
    // The kernels bound their indices by the lengths given below; these checks make those
    // lengths true of the buffers, so no launch reads or writes past a buffer.
    check_buffer("stored buffer", stored, stored_bytes)?;
    check_buffer("gains buffer", gains, channels * 4)?;
    check_buffer("offsets buffer", offsets, channels * 4)?;
    check_buffer("output buffer", out, values * 4)?;
    let samples = samples as u32; // <= values <= u32::MAX
    let buffers = [stored, gains, offsets, out];
    match format {
        SampleFormat::I16 | SampleFormat::U16 => {
            let words = values.div_ceil(2);
            // SAFETY: the buffers hold the lengths passed (checked above); the kernel bounds
            // its unit index by them.
            unsafe {
                kernel::unpack_16::launch_unchecked(
                    client,
                    cube_count(words),
                    CubeDim::new_1d(CUBE_DIM),
                    BufferArg::from_raw_parts(stored.clone(), words),
                    BufferArg::from_raw_parts(gains.clone(), channels),
                    BufferArg::from_raw_parts(offsets.clone(), channels),
                    BufferArg::from_raw_parts(out.clone(), values),
                    values as u32,
                    samples,
                    format == SampleFormat::I16,
                );
            }
        }
        SampleFormat::I32 => launch_scale_32::<i32>(client, buffers, channels, values, samples),
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
    // SAFETY: the buffers hold the lengths passed (checked by `unpack_scaled`); the kernel
    // bounds its unit index by them.
    unsafe {
        kernel::scale_32::launch_unchecked::<T>(
            client,
            cube_count(values),
            CubeDim::new_1d(CUBE_DIM),
            BufferArg::from_raw_parts(stored.clone(), values),
            BufferArg::from_raw_parts(gains.clone(), channels),
            BufferArg::from_raw_parts(offsets.clone(), channels),
            BufferArg::from_raw_parts(out.clone(), values),
            values as u32,
            samples,
        );
    }
}
