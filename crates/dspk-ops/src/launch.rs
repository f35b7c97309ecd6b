//! Launch geometry shared by the kernel families (and by crates that launch their own kernels
//! on [`DeviceArray`](crate::DeviceArray) handles, such as the sorter).

use cubecl::client::Client;
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

/// The units per cube for a kernel that synchronises its cube (`sync_cube`), tuned for
/// `at_most` units: the largest power of two that is at most `at_most` and at most the
/// device's units per cube (at least 1). A cube barrier needs every unit of the cube running at
/// once: the cpu runtime runs one thread per unit and allows one unit per core, and a larger
/// cube there oversubscribes the cores with spinning barriers (seconds per barrier for 256
/// units on 2 cores).
pub fn cube_units(client: &Client, at_most: u32) -> u32 {
    let hardware = &client.properties().hardware;
    let allowed = hardware
        .max_units_per_cube
        .min(hardware.max_cube_dim.0)
        .clamp(1, at_most.max(1));
    1 << allowed.ilog2()
}
