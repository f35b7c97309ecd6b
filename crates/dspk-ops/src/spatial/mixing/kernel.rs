//! Channel mixing kernels: `out[c, t] = sum_k w[c, k] * x[idx[c, k], t]` on a channel-major
//! `[channels, samples]` window.
//!
//! Each unit computes `span` samples of one or more output channels (a "row"), so each loaded
//! weight serves `span` samples: on a GPU `t = u + j * stride` (`j < span`), on the cpu runtime
//! (`blocked`) the consecutive `t = u * span + j`, which compile to vector loads. A cube is
//! `slots` groups of `lanes` units: the lanes of a group take consecutive `u` of one row
//! (coalesced loads), and the groups take `slots` consecutive rows at the same `u`, so the input
//! values neighbouring rows share are fetched from memory once per cube and then hit the cache.
//! Consecutive cubes take the next rows at the same samples. Samples past the end are loaded
//! clamped and not written.

use cubecl::prelude::*;

use crate::launch::unit_index;

/// Dense mixing, `weights` row-major `[channels, channels]`: each unit computes `rows` output
/// channels of `span` samples, so each loaded input value serves `rows` outputs and each
/// loaded weight `span` (`rows * span` multiply-adds per `rows + span` loads).
#[cube(launch_unchecked)]
pub(super) fn mix_dense(
    input: &[f32],
    weights: &[f32],
    output: &mut [f32],
    channels: u32,
    samples: u32,
    stride: u32,
    units: u32,
    #[comptime] rows: usize,
    #[comptime] span: usize,
    #[comptime] lanes: usize,
    #[comptime] slots: usize,
    #[comptime] blocked: bool,
) {
    let count = usize::cast_from(channels);
    let n = usize::cast_from(samples);
    let q = usize::cast_from(stride);
    let groups = count.div_ceil(rows);
    let (group, u) = row_and_offset(groups, units, lanes, slots, blocked);
    if group < groups && u < q {
        let first = group * rows;
        let mut acc = Array::<f32>::new(rows * span);
        #[unroll]
        for i in 0..rows * span {
            acc[i] = 0.0f32;
        }
        let mut xs = Array::<f32>::new(span);
        let interior = runs_inside(u, n, span, blocked);
        for k in 0..count {
            if interior {
                #[unroll]
                for j in 0..span {
                    xs[j] = input[k * n + u * span + j];
                }
            } else {
                #[unroll]
                for j in 0..span {
                    xs[j] = input[k * n + min(column(u, j, q, span, blocked), n - 1)];
                }
            }
            #[unroll]
            for r in 0..rows {
                let w = weights[min(first + r, count - 1) * count + k];
                #[unroll]
                for j in 0..span {
                    acc[r * span + j] += w * xs[j];
                }
            }
        }
        #[unroll]
        for r in 0..rows {
            #[unroll]
            for j in 0..span {
                let t = column(u, j, q, span, blocked);
                if first + r < count && t < n {
                    output[(first + r) * n + t] = acc[r * span + j];
                }
            }
        }
    }
}

/// Sparse mixing, `indices` and `weights` row-major `[channels, taps]`: each unit computes one
/// output channel for `span` samples.
#[cube(launch_unchecked)]
pub(super) fn mix_sparse(
    input: &[f32],
    indices: &[u32],
    weights: &[f32],
    output: &mut [f32],
    channels: u32,
    samples: u32,
    taps: u32,
    stride: u32,
    units: u32,
    #[comptime] span: usize,
    #[comptime] lanes: usize,
    #[comptime] slots: usize,
    #[comptime] blocked: bool,
) {
    let n = usize::cast_from(samples);
    let q = usize::cast_from(stride);
    let per_row = usize::cast_from(taps);
    let count = usize::cast_from(channels);
    let (c, u) = row_and_offset(count, units, lanes, slots, blocked);
    if c < count && u < q {
        let mut acc = Array::<f32>::new(span);
        #[unroll]
        for j in 0..span {
            acc[j] = 0.0f32;
        }
        let interior = runs_inside(u, n, span, blocked);
        for k in 0..per_row {
            let tap = c * per_row + k;
            let source = usize::cast_from(indices[tap]) * n;
            let w = weights[tap];
            if interior {
                #[unroll]
                for j in 0..span {
                    acc[j] += w * input[source + u * span + j];
                }
            } else {
                #[unroll]
                for j in 0..span {
                    acc[j] += w * input[source + min(column(u, j, q, span, blocked), n - 1)];
                }
            }
        }
        #[unroll]
        for j in 0..span {
            let t = column(u, j, q, span, blocked);
            if t < n {
                output[c * n + t] = acc[j];
            }
        }
    }
}

/// Sample `j` of the unit at offset `u`: `u + j * stride` on a GPU, `u * span + j` on the cpu
/// runtime.
#[cube]
fn column(
    u: usize,
    j: usize,
    stride: usize,
    #[comptime] span: usize,
    #[comptime] blocked: bool,
) -> usize {
    if comptime![blocked] {
        u * span + j
    } else {
        u + j * stride
    }
}

/// Whether the unit at offset `u` has consecutive samples (the cpu runtime) all inside the row:
/// then its loads need no clamping.
#[cube]
fn runs_inside(u: usize, n: usize, #[comptime] span: usize, #[comptime] blocked: bool) -> bool {
    let mut inside = false;
    if comptime![blocked] {
        inside = (u + 1) * span <= n;
    }
    inside
}

/// The row and the offset `u` of this unit, for `row_count` rows: unit
/// `(block * slots + slot) * lanes + lane` takes row `(block % blocks) * slots + slot` and
/// `u = (block / blocks) * lanes + lane`, with `blocks = ceil(row_count / slots)`. Units at or
/// past `units` get an out-of-range row.
#[cube]
fn row_and_offset(
    row_count: usize,
    units: u32,
    #[comptime] lanes: usize,
    #[comptime] slots: usize,
    #[comptime] blocked: bool,
) -> (usize, usize) {
    let unit = unit_index(blocked);
    let lane = unit % lanes;
    let slot = (unit / lanes) % slots;
    let block = unit / (lanes * slots);
    let blocks = row_count.div_ceil(slots);
    let row = select(
        unit < usize::cast_from(units),
        (block % blocks) * slots + slot,
        row_count,
    );
    (row, (block / blocks) * lanes + lane)
}
