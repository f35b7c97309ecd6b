//! Launch geometry shared by the kernel families (and by crates that launch their own kernels
//! on [`DeviceArray`](crate::DeviceArray) handles, such as the sorter).

use cubecl::client::Client;
use cubecl::prelude::*;

/// Units per cube for 1-D element-wise kernels.
pub const CUBE_DIM: u32 = 256;

/// wgpu allows at most 65535 cubes along one dimension; larger launches spread over Y.
const MAX_CUBES_PER_DIM: u32 = 65_535;

/// A cube count covering `units` units of [`CUBE_DIM`](const@CUBE_DIM) each, 2-D when one
/// dimension is not enough. Kernels use `ABSOLUTE_POS` and bounds-check it: the grid may overshoot.
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

/// How a 1-D kernel's units are laid out over cubes on one client, and the index each unit
/// computes ([`unit_index()`]).
///
/// On a GPU (and on lavapipe, whose threads each run a whole cube with SIMD lanes across its
/// units) consecutive units sit in one cube: `CUBE_DIM` units per cube, unit
/// `CUBE_POS * CUBE_DIM + UNIT_POS`, so a warp's loads are coalesced. CubeCL's cpu runtime
/// instead runs each unit position as one task that loops over every cube; with that
/// numbering a task would visit units `CUBE_DIM` apart and touch a new cache line at every
/// step. There a launch has one unit per core (`num_cpu_cores`) and unit
/// `UNIT_POS * CUBE_COUNT + CUBE_POS`: each core takes one contiguous run of units, the order
/// in which kernels lay their units out over memory. What a unit computes does not change,
/// only which thread computes it, so results are the same bit for bit. Why, and what was
/// measured: `docs/decisions/0011-cpu-runtime-layout.md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnitLayout {
    /// `Some(cores)` on the cpu runtime.
    cores: Option<u32>,
}

impl UnitLayout {
    /// The layout for `client`'s runtime: blocked runs per core where the runtime states a
    /// core count (the cpu runtime), cubes of [`CUBE_DIM`](const@CUBE_DIM) units elsewhere.
    pub fn of(client: &Client) -> Self {
        let cores = client.properties().hardware.num_cpu_cores.map(|c| c.max(1));
        Self { cores }
    }

    /// Whether units run in one contiguous run per core (the comptime argument of
    /// [`unit_index()`]).
    pub fn blocked(&self) -> bool {
        self.cores.is_some()
    }

    /// Units per cube: [`CUBE_DIM`](const@CUBE_DIM) on a GPU.
    pub fn cube_dim(&self) -> CubeDim {
        self.cube_dim_of(CUBE_DIM)
    }

    /// A cube count covering `units` units (the grid may overshoot; kernels bounds-check
    /// [`unit_index()`]), cubes of [`CUBE_DIM`](const@CUBE_DIM) on a GPU.
    pub fn cube_count(&self, units: usize) -> CubeCount {
        self.cube_count_of(units, CUBE_DIM)
    }

    /// Units per cube for a kernel whose GPU cubes have `per_cube` units (the core count on
    /// the cpu runtime).
    pub fn cube_dim_of(&self, per_cube: u32) -> CubeDim {
        CubeDim::new_1d(self.cores.unwrap_or(per_cube))
    }

    /// A cube count covering `units` units for a kernel whose GPU cubes have `per_cube`
    /// units ([`cube_count_for`] on a GPU).
    pub fn cube_count_of(&self, units: usize, per_cube: u32) -> CubeCount {
        match self.cores {
            // The cpu runtime has no limit per dimension: one run of cubes, one per unit of
            // each core's share.
            Some(cores) => CubeCount::Static(
                u32::try_from(units.div_ceil(cores as usize))
                    .unwrap_or(u32::MAX)
                    .max(1),
                1,
                1,
            ),
            None => cube_count_for(units, per_cube),
        }
    }
}

pub use index::unit_index;

// `#[cube]` generates an undocumented module beside the function.
#[allow(missing_docs)]
mod index {
    use cubecl::prelude::*;

    /// The index of the calling unit among a launch laid out by
    /// [`UnitLayout`](crate::launch::UnitLayout) (`blocked` is
    /// [`UnitLayout::blocked`](crate::launch::UnitLayout::blocked)): `ABSOLUTE_POS` on GPUs,
    /// `UNIT_POS * CUBE_COUNT + CUBE_POS` on the cpu runtime.
    #[cube]
    pub fn unit_index(#[comptime] blocked: bool) -> usize {
        if comptime![blocked] {
            usize::cast_from(UNIT_POS) * CUBE_COUNT + CUBE_POS
        } else {
            ABSOLUTE_POS
        }
    }
}
