//! The projection both detection and matching start each window with: every channel's samples
//! correlated with a few short filters (the universal templates' shapes, or their principal
//! components), `out[c, k, t] = sum_j x[c, t + j - nt / 2] * weights[k, j]`, on the device.

use cubecl::prelude::*;
use dspk_ops::DeviceArray;
use dspk_ops::launch::{UnitLayout, unit_index};

use crate::runner::buffers::FIRST_BAD;

/// Lanes of one warp: consecutive units take consecutive columns, so loads and stores of a
/// warp are coalesced.
pub(crate) const LANES: usize = 32;

/// Columns one unit of the projection computes: each weight it loads serves this many.
const TILE: usize = 8;
/// [`TILE`] on the cpu runtime, where a unit's columns are consecutive: two 8-lane vectors.
const CPU_TILE: usize = 16;

/// `out[c, k, t] = sum_j x[c, t + j - nt / 2] * weights[k, j]` for the `components` filters of
/// `nt` taps in `weights` (samples outside the row read as zero), summed over `j` in increasing
/// order; with `copy_input`, also `copy = x` (matching's residual starts as the window); with
/// `with_energy`, also `energy[c, t] = sum_k out[c, k, t]^2` (over `k` in increasing order:
/// detection's bound on its scores). One unit per channel and `tile` columns `lanes` apart
/// (each weight it loads serves `tile` columns): unit `(c * chunks + chunk) * lanes + lane`
/// takes the columns `chunk * tile * lanes + q * lanes + lane`. On a GPU `lanes` is
/// [`LANES`], so a warp's loads are coalesced; on the cpu runtime (`blocked`) it is 1: a unit's
/// columns are consecutive, and it runs one filter at a time over them (vector multiply-adds).
/// The unit of a non-finite sample lowers `counters[FIRST_BAD]` to its index.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn project_rows(
    x: &[f32],
    weights: &[f32],
    out: &mut [f32],
    copy: &mut [f32],
    energy: &mut [f32],
    counters: &[Atomic<u32>],
    channels: u32,
    samples: u32,
    nt: u32,
    #[comptime] components: usize,
    #[comptime] tile: usize,
    #[comptime] copy_input: bool,
    #[comptime] with_energy: bool,
    #[comptime] blocked: bool,
) {
    let lanes = comptime![if blocked { 1 } else { LANES }];
    let n = usize::cast_from(samples);
    let span = tile * lanes;
    let lanes_per_channel = n.div_ceil(span) * lanes;
    let unit = unit_index(blocked);
    if unit < usize::cast_from(channels) * lanes_per_channel {
        let c = unit / lanes_per_channel;
        let within = unit % lanes_per_channel;
        let t0 = (within / lanes) * span + within % lanes;
        let row = c * n;
        #[unroll]
        for q in 0..tile {
            let t = t0 + q * lanes;
            if t < n {
                let value = x[row + t];
                if comptime![copy_input] {
                    copy[row + t] = value;
                }
                if value.is_nan() || value.is_inf() {
                    counters[FIRST_BAD].fetch_min(u32::cast_from(row + t));
                }
            }
        }
        let len = usize::cast_from(nt);
        let half = len / 2;
        let mut acc = Array::<f32>::new(tile * components);
        #[unroll]
        for e in 0..tile * components {
            acc[e] = 0.0f32;
        }
        // Whether every sample the unit reads lies in the row: then no clamping (the same
        // values, fewer instructions).
        let interior = t0 >= half && t0 + (tile - 1) * lanes + len <= n + half;
        if comptime![blocked] && interior {
            // The cpu runtime: one filter at a time over the taps, the unit's consecutive
            // samples innermost, which compiles to vector multiply-adds (each sum still runs
            // over `j` in increasing order).
            #[unroll]
            for k in 0..components {
                for j in 0..len {
                    let weight = weights[k * len + j];
                    let base = row + t0 + j - half;
                    #[unroll]
                    for q in 0..tile {
                        acc[q * components + k] += weight * x[base + q];
                    }
                }
            }
        } else {
            let mut w = Array::<f32>::new(components);
            for j in 0..len {
                #[unroll]
                for k in 0..components {
                    w[k] = weights[k * len + j];
                }
                if interior {
                    let base = row + t0 + j - half;
                    #[unroll]
                    for q in 0..tile {
                        let v = x[base + q * lanes];
                        #[unroll]
                        for k in 0..components {
                            acc[q * components + k] += v * w[k];
                        }
                    }
                } else {
                    #[unroll]
                    for q in 0..tile {
                        // Sample `t0 + q * lanes + j - half`, read as 0 outside `0..n`.
                        let shifted = t0 + q * lanes + j;
                        let inside = shifted >= half && shifted < n + half;
                        let v = select(
                            inside,
                            x[row + min(max(shifted, half), n + half - 1) - half],
                            0.0f32,
                        );
                        #[unroll]
                        for k in 0..components {
                            acc[q * components + k] += v * w[k];
                        }
                    }
                }
            }
        }
        #[unroll]
        for q in 0..tile {
            let t = t0 + q * lanes;
            if t < n {
                #[unroll]
                for k in 0..components {
                    out[(c * components + k) * n + t] = acc[q * components + k];
                }
                if comptime![with_energy] {
                    let mut sum = 0.0f32;
                    #[unroll]
                    for k in 0..components {
                        let a = acc[q * components + k];
                        sum += a * a;
                    }
                    energy[row + t] = sum;
                }
            }
        }
    }
}

/// Where a projection reads and writes: the window `x` (`channels x samples`), the
/// `components` filters of `nt` taps (`weights`, `[components, nt]`), the output
/// (`[channels, components, samples]`), the counters whose `FIRST_BAD` slot learns of a
/// non-finite sample, and where the window is copied, if anywhere.
pub(crate) struct Projection<'a> {
    pub(crate) x: &'a DeviceArray<f32>,
    pub(crate) weights: &'a DeviceArray<f32>,
    pub(crate) components: usize,
    pub(crate) nt: usize,
    pub(crate) out: &'a DeviceArray<f32>,
    pub(crate) counters: &'a DeviceArray<u32>,
    /// `(copy, true)` copies the window there; `(scratch, false)` leaves `scratch` (any array of
    /// at least one value) untouched.
    pub(crate) copy: (&'a DeviceArray<f32>, bool),
    /// `(energy, true)` writes each `(channel, sample)`'s sum of squared projections there
    /// (`[channels, samples]`); `(scratch, false)` as for `copy` (another array).
    pub(crate) energy: (&'a DeviceArray<f32>, bool),
}

impl Projection<'_> {
    /// Queues the projection on `client`. The caller has checked that `out` holds
    /// `channels * components * samples` values below `u32::MAX`.
    pub(crate) fn launch(&self, client: &cubecl::client::Client) {
        let (channels, n) = (self.x.channels(), self.x.samples());
        let (copy, copy_input) = self.copy;
        let copy_len = if copy_input { channels * n } else { 1 };
        let (energy, with_energy) = self.energy;
        let energy_len = if with_energy { channels * n } else { 1 };
        let layout = UnitLayout::of(client);
        // `project_rows`' columns per chunk lane (1 on the cpu runtime).
        let lanes = if layout.blocked() { 1 } else { LANES };
        let tile = if layout.blocked() { CPU_TILE } else { TILE };
        project_rows::launch(
            client,
            layout.cube_count(channels * n.div_ceil(tile * lanes) * lanes),
            layout.cube_dim(),
            self.x.arg(self.x.len()),
            self.weights.arg(self.components * self.nt),
            self.out.arg(channels * self.components * n),
            copy.arg(copy_len),
            energy.arg(energy_len),
            self.counters.arg(2),
            channels as u32,
            n as u32,
            self.nt as u32,
            self.components,
            tile,
            copy_input,
            with_energy,
            layout.blocked(),
        );
    }
}
