//! Channel-delay kernels. Layout: a window's array `x[c * n + t]`, `n` samples per channel
//! (halos included). Every sum runs over its index in a fixed order (a fixed stride per unit,
//! then a fixed tree over the cube's units), so results do not depend on scheduling; no
//! atomics.

use cubecl::prelude::*;

/// The sum of `value` over the units of the cube, returned to every unit. `scratch` holds one
/// value per unit and the cube has a power of two of units; every unit must call this. The
/// tree adds unit `u + stride` into unit `u`, halving `stride` from `CUBE_DIM / 2` to 1.
#[cube]
fn cube_sum(scratch: &mut Shared<[f32]>, value: f32) -> f32 {
    let unit = UNIT_POS as usize;
    scratch[unit] = value;
    sync_cube();
    // A runtime stride: a comptime value cannot be mutated in the loop.
    let mut stride = (CUBE_DIM / 2) as usize;
    while stride > 0 {
        if unit < stride {
            scratch[unit] += scratch[unit + stride];
        }
        sync_cube();
        stride /= 2;
    }
    let total = scratch[0];
    sync_cube();
    total
}

/// `deviation[c]` = the unbiased standard deviation of `x[c, first .. first + count]` (`count`
/// at least 2): the mean first, then the mean-centred sum of squares over `count - 1`. One cube
/// of `units` units (a power of two) per channel; unit `u` sums samples `u, u + units, ...`.
/// A NaN or infinite sample gives NaN or infinity.
#[cube(launch)]
pub(super) fn range_deviation(
    x: &[f32],
    deviation: &mut [f32],
    channels: u32,
    samples: u32,
    first: u32,
    count: u32,
    #[comptime] units: usize,
) {
    let c = CUBE_POS;
    // Uniform over the cube: whole cubes past the last channel leave together.
    if c < usize::cast_from(channels) {
        let unit = UNIT_POS as usize;
        let len = usize::cast_from(count);
        let row = c * usize::cast_from(samples) + usize::cast_from(first);
        let mut scratch = Shared::new_slice(units);
        let mut sum = 0.0f32;
        let mut s = unit;
        while s < len {
            sum += x[row + s];
            s += units;
        }
        let mean = cube_sum(&mut scratch, sum) / f32::cast_from(count);
        let mut squares = 0.0f32;
        let mut s = unit;
        while s < len {
            let d = x[row + s] - mean;
            squares += d * d;
            s += units;
        }
        let total = cube_sum(&mut scratch, squares);
        if unit == 0 {
            deviation[c] = f32::sqrt(total / f32::cast_from(count - 1));
        }
    }
}

/// `sums[(a * C + b) * (2D + 1) + k] = sum_t |x[a, t - l]| * |x[b, t]|` with `l = k - D`, over
/// `t` in `first .. first + count` whose `t - l` lies in `0 .. n` (products reaching outside the
/// array are left out). One cube of `units` units (a power of two) per `(a, b, k)`; unit `u`
/// sums `t = first + u, first + u + units, ...`, then the cube's tree. A NaN or infinite sample
/// among the products makes the sum NaN or infinite.
#[cube(launch)]
pub(super) fn lagged_products(
    x: &[f32],
    sums: &mut [f32],
    channels: u32,
    samples: u32,
    first: u32,
    count: u32,
    max_lag: u32,
    #[comptime] units: usize,
) {
    let c_count = usize::cast_from(channels);
    let lag_count = 2 * usize::cast_from(max_lag) + 1;
    let cube = CUBE_POS;
    // Uniform over the cube: whole cubes past the last triple leave together.
    if cube < c_count * c_count * lag_count {
        let k = cube % lag_count;
        let pair = cube / lag_count;
        let (a, b) = (pair / c_count, pair % c_count);
        let n = usize::cast_from(samples);
        let d = usize::cast_from(max_lag);
        let start = usize::cast_from(first);
        let len = usize::cast_from(count);
        let unit = UNIT_POS as usize;
        let mut scratch = Shared::new_slice(units);
        let mut acc = 0.0f32;
        let mut s = unit;
        while s < len {
            let t = start + s;
            // `t - l = t + D - k`, kept unsigned: inside the array when `k <= t + D < n + k`.
            let shifted = t + d;
            if shifted >= k && shifted < n + k {
                acc += f32::abs(x[a * n + shifted - k]) * f32::abs(x[b * n + t]);
            }
            s += units;
        }
        let total = cube_sum(&mut scratch, acc);
        if unit == 0 {
            sums[cube] = total;
        }
    }
}

/// `out[b, t] = x[b, t + shift[b] - halo]` where that index lies in `0 .. n`, else 0; `shift`
/// holds each row's delay plus `halo` (so `0 ..= 2 * halo`, unsigned). One unit per value.
#[cube(launch)]
pub(super) fn shift_rows(
    x: &[f32],
    shift: &[u32],
    out: &mut [f32],
    channels: u32,
    samples: u32,
    halo: u32,
) {
    let unit = ABSOLUTE_POS;
    let n = usize::cast_from(samples);
    if unit < usize::cast_from(channels) * n {
        let b = unit / n;
        let t = unit % n;
        let h = usize::cast_from(halo);
        let source = t + usize::cast_from(shift[b]);
        let inside = source >= h && source < n + h;
        let clamped = min(max(source, h), n + h - 1) - h;
        out[unit] = select(inside, x[b * n + clamped], 0.0f32);
    }
}
