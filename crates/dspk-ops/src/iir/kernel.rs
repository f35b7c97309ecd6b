//! The blocked second-order-section kernels. Layout: `[channels, samples]`, channel-major.
//!
//! A recursive filter run sample by sample with one unit per channel would leave a GPU almost
//! idle (384 units). Instead time is cut into blocks of `block_len` samples and the filter's
//! linearity joins them, in three launches per direction:
//!
//! 1. [`sos_blocks`] with `finish = false`: every (channel, block) unit runs the cascade over
//!    its block from a zero state and records the final state (`2 * sections` values);
//! 2. [`sos_scan`]: one unit per channel walks the blocks in order: the true state at the start
//!    of block `b + 1` is `P s_b + z_b`, where `s_b` is the true state at the start of block
//!    `b`, `z_b` the zero-start final state from step 1 and `P` the cascade's state transition
//!    over one block with zero input (computed in `f64` on the host);
//! 3. [`sos_blocks`] with `finish = true`: every unit runs its block again from its true
//!    starting state and writes the output.
//!
//! The input is read through a *virtual* sequence: `pad` samples of odd extension on each side
//! (`2 x[0] - x[pad - i]` before, `2 x[n-1] - x[2(n-1) - j]` after, as scipy's
//! `padtype="odd"`), optionally in reverse order; outputs are written where
//! `position - out_offset` falls in the output, every `out_stride`-th one (decimation).
//! State per section in increment form (see `plan.rs`, coefficients `[d, c0, c1, e00, e01,
//! e10, e11, g0, g1]`): `y = d u + c0 x0 + c1 x1; x0 += e00 x0 + e01 x1 + g0 u;
//! x1 += e10 x0 + e11 x1 + g1 u`, the additions to the states compensated (Kahan), and the
//! scan adds `(P - I) s` rather than multiplying by `P`, so poles near `z = 1` keep their
//! distance to 1 in `f32` and slowly changing states do not drift.

use cubecl::prelude::*;

use crate::launch::unit_index;

/// The value at `position` of the virtual sequence: channel `base..base + len` of `src` with
/// `pad` samples of odd extension on each side (`len > pad`, checked by the host).
#[cube]
fn read_virtual(src: &[f32], base: usize, len: u32, pad: u32, position: u32) -> f32 {
    if position < pad {
        let mirror = usize::cast_from(pad - position);
        f32::new(2.0) * src[base] - src[base + mirror]
    } else if position - pad < len {
        src[base + usize::cast_from(position - pad)]
    } else {
        let last = base + usize::cast_from(len - 1);
        let mirror = base + usize::cast_from(2 * (len - 1) - (position - pad));
        f32::new(2.0) * src[last] - src[mirror]
    }
}

/// Samples a unit loads together before filtering them.
const CHUNK: u32 = 8;

/// The source position of virtual index `v` (counted from the far end when `reverse`).
#[cube]
fn virtual_position(v: u32, virtual_len: u32, #[comptime] reverse: bool) -> u32 {
    if reverse { virtual_len - 1 - v } else { v }
}

/// Coefficients per section (`[d, c0, c1, e00, e01, e10, e11, g0, g1]`).
const COEFS: usize = 9;

/// `x += dx` with Kahan's compensation: `comp` carries what the rounding of earlier additions
/// lost, so a state near `z = 1` (large, changing by small increments) does not drift by one
/// rounding per sample.
#[cube]
fn add_compensated(x: &mut Array<f32>, comp: &mut Array<f32>, i: usize, dx: f32) {
    let y = dx - comp[i];
    let t = x[i] + y;
    comp[i] = (t - x[i]) - y;
    x[i] = t;
}

/// One sample `u` through the cascade (`coef`: [`COEFS`] per section; `z`: the two states per
/// section and `comp` their compensations, updated); returns the last section's output.
#[cube]
fn cascade(
    u: f32,
    coef: &Array<f32>,
    z: &mut Array<f32>,
    comp: &mut Array<f32>,
    #[comptime] sections: usize,
) -> f32 {
    let mut u = u;
    #[unroll]
    for s in 0..sections {
        let c = COEFS * s;
        let x0 = z[2 * s];
        let x1 = z[2 * s + 1];
        let y = coef[c] * u + coef[c + 1] * x0 + coef[c + 2] * x1;
        let d0 = coef[c + 3] * x0 + coef[c + 4] * x1 + coef[c + 7] * u;
        let d1 = coef[c + 5] * x0 + coef[c + 6] * x1 + coef[c + 8] * u;
        add_compensated(z, comp, 2 * s, d0);
        add_compensated(z, comp, 2 * s + 1, d1);
        u = y;
    }
    u
}

/// Writes output `y` of source `position` where it lands: index `(position - out_offset) /
/// out_stride` of the channel's `out_len` outputs, when that is whole and in range.
// Cube code: scalars have no `is_multiple_of` in CubeCL 0.11.
#[allow(clippy::manual_is_multiple_of)]
#[cube]
fn write_output(
    dst: &mut [f32],
    dst_base: usize,
    position: u32,
    out_offset: u32,
    out_stride: u32,
    out_len: u32,
    y: f32,
) {
    if position >= out_offset {
        let o = position - out_offset;
        if o % out_stride == 0 && o / out_stride < out_len {
            dst[dst_base + usize::cast_from(o / out_stride)] = y;
        }
    }
}

/// Runs the cascade over one block per unit; `finish = false` records the zero-start final
/// state in `states`, `finish = true` starts from `states` and writes outputs to `dst`.
/// `coefs` holds [`COEFS`] values per section.
#[allow(clippy::too_many_arguments)]
#[cube(launch_unchecked)]
pub(super) fn sos_blocks(
    src: &[f32],
    dst: &mut [f32],
    states: &mut [f32],
    coefs: &[f32],
    channels: u32,
    src_len: u32,
    pad: u32,
    block_len: u32,
    blocks: u32,
    out_len: u32,
    out_offset: u32,
    out_stride: u32,
    #[comptime] sections: usize,
    #[comptime] reverse: bool,
    #[comptime] finish: bool,
    #[comptime] blocked: bool,
) {
    let unit = unit_index(blocked);
    let blocks = usize::cast_from(blocks);
    if unit < usize::cast_from(channels) * blocks {
        let channel = unit / blocks;
        let block = u32::cast_from(unit % blocks);
        let virtual_len = src_len + 2 * pad;
        let start = block * block_len;
        let mut end = start + block_len;
        if end > virtual_len {
            end = virtual_len;
        }
        let src_base = channel * usize::cast_from(src_len);
        let dst_base = channel * usize::cast_from(out_len);
        let state_base = unit * (2 * sections);

        let mut coef = Array::<f32>::new(COEFS * sections);
        #[unroll]
        for i in 0..COEFS * sections {
            coef[i] = coefs[i];
        }
        let mut z = Array::<f32>::new(2 * sections);
        let mut comp = Array::<f32>::new(2 * sections);
        #[unroll]
        for i in 0..2 * sections {
            comp[i] = f32::new(0.0);
            if finish {
                z[i] = states[state_base + i];
            } else {
                z[i] = f32::new(0.0);
            }
        }

        // Eight samples at a time: their loads are issued together, so each unit waits for
        // memory once per eight samples rather than once per sample.
        let chunked_end = start + (end - start) / CHUNK * CHUNK;
        let mut x = Array::<f32>::new(CHUNK as usize);
        let mut v = start;
        while v < chunked_end {
            #[unroll]
            for k in 0..CHUNK {
                let position = virtual_position(v + k, virtual_len, reverse);
                x[k as usize] = read_virtual(src, src_base, src_len, pad, position);
            }
            #[unroll]
            for k in 0..CHUNK {
                let y = cascade(x[k as usize], &coef, &mut z, &mut comp, sections);
                if finish {
                    let position = virtual_position(v + k, virtual_len, reverse);
                    write_output(dst, dst_base, position, out_offset, out_stride, out_len, y);
                }
            }
            v += CHUNK;
        }
        for v in chunked_end..end {
            let position = virtual_position(v, virtual_len, reverse);
            let u = read_virtual(src, src_base, src_len, pad, position);
            let y = cascade(u, &coef, &mut z, &mut comp, sections);
            if finish {
                write_output(dst, dst_base, position, out_offset, out_stride, out_len, y);
            }
        }

        if !finish {
            #[unroll]
            for i in 0..2 * sections {
                states[state_base + i] = z[i];
            }
        }
    }
}

/// One block of the scan: `next` receives the state at the block's start (`s` on entry) and
/// `s` becomes `s + (p s + z[offset..offset + dim])`, the state at the block's end (`p` is
/// `P - I`; the additions compensated through `comp`).
#[cube]
fn scan_step(
    p: &Array<f32>,
    s: &mut Array<f32>,
    comp: &mut Array<f32>,
    next: &mut Array<f32>,
    z: &Array<f32>,
    offset: usize,
    #[comptime] dim: usize,
) {
    #[unroll]
    for i in 0..dim {
        next[i] = s[i] - comp[i];
    }
    #[unroll]
    for i in 0..dim {
        let mut acc = z[offset + i];
        #[unroll]
        for k in 0..dim {
            acc += p[i * dim + k] * next[k];
        }
        add_compensated(s, comp, i, acc);
    }
}

/// Joins the blocks of each channel (one unit per channel): replaces each block's zero-start
/// final state in `states` by the true state at the block's start. The first block starts
/// from `initial * x0`, `x0` being the first value of the virtual sequence (zero `initial`
/// for a zero start, the steady state under a unit input for a steady-state start).
/// `transition` is the row-major `2 sections x 2 sections` state map over one full block minus
/// the identity.
#[allow(clippy::too_many_arguments)]
#[cube(launch_unchecked)]
pub(super) fn sos_scan(
    src: &[f32],
    states: &mut [f32],
    transition: &[f32],
    initial: &[f32],
    channels: u32,
    src_len: u32,
    pad: u32,
    blocks: u32,
    #[comptime] sections: usize,
    #[comptime] reverse: bool,
    #[comptime] blocked: bool,
) {
    let channel = unit_index(blocked);
    if channel < usize::cast_from(channels) {
        let dim = 2 * sections;
        let virtual_len = src_len + 2 * pad;
        let mut first_position = 0;
        if reverse {
            first_position = virtual_len - 1;
        }
        let src_base = channel * usize::cast_from(src_len);
        let x0 = read_virtual(src, src_base, src_len, pad, first_position);
        let mut s = Array::<f32>::new(dim);
        let mut comp = Array::<f32>::new(dim);
        let mut next = Array::<f32>::new(dim);
        #[unroll]
        for i in 0..dim {
            s[i] = initial[i] * x0;
            comp[i] = f32::new(0.0);
        }
        let mut p = Array::<f32>::new(dim * dim);
        #[unroll]
        for i in 0..dim * dim {
            p[i] = transition[i];
        }
        // The blocks' zero-start states are loaded a group at a time (contiguous for one
        // channel), so the sequential walk waits for memory once per group, not per block.
        let group = comptime!(if sections <= 4 { 8usize } else { 2usize });
        let mut z = Array::<f32>::new(group * dim);
        let blocks = usize::cast_from(blocks);
        let channel_base = channel * blocks * dim;
        let groups = blocks / group;
        for g in 0..groups {
            let base = channel_base + g * group * dim;
            #[unroll]
            for i in 0..group * dim {
                z[i] = states[base + i];
            }
            #[unroll]
            for j in 0..group {
                scan_step(&p, &mut s, &mut comp, &mut next, &z, j * dim, dim);
                #[unroll]
                for i in 0..dim {
                    states[base + j * dim + i] = next[i];
                }
            }
        }
        for b in groups * group..blocks {
            let base = channel_base + b * dim;
            #[unroll]
            for i in 0..dim {
                z[i] = states[base + i];
            }
            scan_step(&p, &mut s, &mut comp, &mut next, &z, 0, dim);
            #[unroll]
            for i in 0..dim {
                states[base + i] = next[i];
            }
        }
    }
}
