//! Host side of the unpack kernels: checks, sizes and launches.

use cubecl::prelude::*;
use cubecl::server::Handle;
use dspk_core::SampleFormat;

use super::kernel;
use crate::launch::{CUBE_DIM, cube_count};
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
/// [`Error::OverLimit`] when `channels * samples` exceeds `u32::MAX` values, [`Error::Shape`]
/// when `samples` is zero while `channels` is not.
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
    let values = channels
        .checked_mul(samples)
        .filter(|&v| v <= u32::MAX as usize);
    let Some(values) = values else {
        return Err(Error::OverLimit {
            what: "unpack",
            requested: channels as u64 * samples as u64,
            limit: u64::from(u32::MAX),
            unit: "values",
            reason: "kernels index one buffer with 32-bit integers",
        });
    };
    if values == 0 {
        return Ok(());
    }
    let samples_u32 = samples as u32; // <= values <= u32::MAX
    // SAFETY (for each launch below): every buffer length passed is at most what the caller's
    // handles hold (the workspace sizes them for `channels * max_samples`), and each kernel
    // bounds-checks its unit index against those lengths.
    match format {
        SampleFormat::I16 | SampleFormat::U16 => {
            let words = values.div_ceil(2);
            unsafe {
                kernel::unpack_16::launch_unchecked(
                    client,
                    cube_count(words),
                    CubeDim::new_1d(CUBE_DIM),
                    BufferArg::from_raw_parts(stored.clone(), words),
                    BufferArg::from_raw_parts(gains.clone(), channels),
                    BufferArg::from_raw_parts(offsets.clone(), channels),
                    BufferArg::from_raw_parts(out.clone(), values),
                    samples_u32,
                    format == SampleFormat::I16,
                );
            }
        }
        SampleFormat::I32 => unsafe {
            kernel::scale_32::launch_unchecked::<i32>(
                client,
                cube_count(values),
                CubeDim::new_1d(CUBE_DIM),
                BufferArg::from_raw_parts(stored.clone(), values),
                BufferArg::from_raw_parts(gains.clone(), channels),
                BufferArg::from_raw_parts(offsets.clone(), channels),
                BufferArg::from_raw_parts(out.clone(), values),
                samples_u32,
            );
        },
        SampleFormat::F32 => unsafe {
            kernel::scale_32::launch_unchecked::<f32>(
                client,
                cube_count(values),
                CubeDim::new_1d(CUBE_DIM),
                BufferArg::from_raw_parts(stored.clone(), values),
                BufferArg::from_raw_parts(gains.clone(), channels),
                BufferArg::from_raw_parts(offsets.clone(), channels),
                BufferArg::from_raw_parts(out.clone(), values),
                samples_u32,
            );
        },
        other => return Err(Error::UnsupportedFormat(other)),
    }
    Ok(())
}
