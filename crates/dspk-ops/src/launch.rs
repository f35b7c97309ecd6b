//! Launch geometry and the argument checks shared by the kernel families.

use cubecl::prelude::CubeCount;
use cubecl::server::Handle;

use crate::{Error, Result};

/// Units per cube for 1-D element-wise kernels.
pub(crate) const CUBE_DIM: u32 = 256;

/// wgpu allows at most 65535 cubes along one dimension; larger launches spread over Y.
const MAX_CUBES_PER_DIM: u32 = 65_535;

/// A cube count covering `units` units of [`CUBE_DIM`] each, 2-D when one dimension is not
/// enough. Kernels use `ABSOLUTE_POS` and bounds-check it: the grid may overshoot.
pub(crate) fn cube_count(units: usize) -> CubeCount {
    cube_count_for(units, CUBE_DIM)
}

/// A cube count covering `units` units of `cube_dim` each, 2-D when one dimension is not
/// enough (see [`cube_count`]).
pub(crate) fn cube_count_for(units: usize, cube_dim: u32) -> CubeCount {
    let cubes = u32::try_from(units.div_ceil(cube_dim as usize))
        .unwrap_or(u32::MAX)
        .max(1);
    let x = cubes.min(MAX_CUBES_PER_DIM);
    CubeCount::Static(x, cubes.div_ceil(x), 1)
}

/// `channels * samples` as a value count a kernel can index with 32-bit integers.
///
/// # Errors
///
/// [`Error::OverLimit`] naming `what` when the product exceeds `u32::MAX`.
pub(crate) fn checked_values(what: &'static str, channels: usize, samples: usize) -> Result<usize> {
    channels
        .checked_mul(samples)
        .filter(|&v| v <= u32::MAX as usize)
        .ok_or(Error::OverLimit {
            what,
            requested: channels as u64 * samples as u64,
            limit: u64::from(u32::MAX),
            unit: "values",
            reason: "kernels index one buffer with 32-bit integers",
        })
}

/// Checks that `handle` holds at least `bytes` bytes (its requested size, not the padded one).
/// Every public launch checks each buffer this way before an unchecked launch, so the lengths
/// a kernel bounds its indices by are true of the buffers.
///
/// # Errors
///
/// [`Error::Shape`] naming `what`.
pub(crate) fn check_buffer(what: &'static str, handle: &Handle, bytes: usize) -> Result<()> {
    let actual = usize::try_from(handle.size_in_used()).unwrap_or(usize::MAX);
    if actual < bytes {
        return Err(Error::Shape {
            what,
            expected: bytes,
            actual,
            unit: "bytes",
        });
    }
    Ok(())
}
