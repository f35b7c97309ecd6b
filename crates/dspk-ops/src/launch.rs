//! Launch geometry shared by the kernel families (and by crates that launch their own kernels
//! on [`DeviceArray`](crate::DeviceArray) handles, such as the sorter).

use cubecl::prelude::CubeCount;

/// Units per cube for 1-D element-wise kernels.
pub const CUBE_DIM: u32 = 256;

/// wgpu allows at most 65535 cubes along one dimension; larger launches spread over Y.
const MAX_CUBES_PER_DIM: u32 = 65_535;

/// A cube count covering `units` units of [`CUBE_DIM`] each, 2-D when one dimension is not
/// enough. Kernels use `ABSOLUTE_POS` and bounds-check it: the grid may overshoot.
pub fn cube_count(units: usize) -> CubeCount {
    cube_count_for(units, CUBE_DIM)
}

/// A cube count covering `units` units of `cube_dim` each, 2-D when one dimension is not
/// enough (see [`cube_count`]).
pub fn cube_count_for(units: usize, cube_dim: u32) -> CubeCount {
    let cubes = u32::try_from(units.div_ceil(cube_dim as usize))
        .unwrap_or(u32::MAX)
        .max(1);
    let x = cubes.min(MAX_CUBES_PER_DIM);
    CubeCount::Static(x, cubes.div_ceil(x), 1)
}
