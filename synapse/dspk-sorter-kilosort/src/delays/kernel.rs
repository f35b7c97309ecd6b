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

/// Partial sums of `sum_t |x[a, t - l]| * |x[b, t]|` with `l = k - D`, over `t` in
/// `first .. first + count` whose `t - l` lies in `0 .. n` (products reaching outside the array
/// are left out): `partial[((a * C + b) * (2D + 1) + k) * chunks + chunk]` sums the tiles
/// `chunk, chunk + chunks, ...` of `tile` samples of `t`.
///
/// One cube of `block` units per `(a, b, lag block, chunk)`, numbered
/// `((a * C + b) * blocks + lag block) * chunks + chunk`; unit `i` takes lag `k = lag block *
/// block + i` (units past `2D` compute nothing useful and write nothing). Per tile the cube
/// stages `|x_b|` over the tile and `|x_a|` over the tile widened by the block's lags in shared
/// memory (zeros outside the array), then each unit sums its products over the tile in order
/// and adds the tile's sum to its total. A NaN or infinite sample among a lag's products makes
/// its sum NaN or infinite; samples no product of a written lag uses are never loaded into it.
#[cube(launch)]
pub(super) fn lagged_products(
    x: &[f32],
    partial: &mut [f32],
    channels: u32,
    samples: u32,
    first: u32,
    count: u32,
    max_lag: u32,
    chunks: u32,
    #[comptime] tile: usize,
    #[comptime] block: usize,
) {
    let c_count = usize::cast_from(channels);
    let d = usize::cast_from(max_lag);
    let lags = 2 * d + 1;
    let blocks = lags.div_ceil(block);
    let chunk_count = usize::cast_from(chunks);
    let cube = CUBE_POS;
    // Uniform over the cube: whole cubes past the last leave together.
    if cube < c_count * c_count * blocks * chunk_count {
        let chunk = cube % chunk_count;
        let lag_block = (cube / chunk_count) % blocks;
        let pair = cube / (chunk_count * blocks);
        let (a, b) = (pair / c_count, pair % c_count);
        let i = UNIT_POS as usize;
        let n = usize::cast_from(samples);
        let start = usize::cast_from(first);
        let len = usize::cast_from(count);
        let tiles = len.div_ceil(tile);
        // Array indices are kept unsigned as `index + offset`: inside when
        // `offset <= q < n + offset`.
        let offset = 2 * d + block;
        let mut sa = Shared::<[f32]>::new_slice(tile + block - 1);
        let mut sb = Shared::<[f32]>::new_slice(tile);
        let mut acc = 0.0f32;
        let mut tile_index = chunk;
        while tile_index < tiles {
            let t0 = start + tile_index * tile;
            let tile_len = min(tile, len - tile_index * tile);
            let mut s = i;
            while s < tile_len {
                sb[s] = f32::abs(x[b * n + t0 + s]);
                s += block;
            }
            // `sa[j]` = `|x_a|` at `t0 + d - lag block * block - (block - 1) + j`, so the product
            // of column `t0 + s` at lag `k` reads `sa[s + block - 1 - i]`.
            let base = t0 + 3 * d + 1 - lag_block * block;
            let mut j = i;
            while j < tile_len + block - 1 {
                let q = base + j;
                let inside = q >= offset && q < n + offset;
                let clamped = min(max(q, offset), n + offset - 1) - offset;
                sa[j] = select(inside, f32::abs(x[a * n + clamped]), 0.0f32);
                j += block;
            }
            sync_cube();
            let mut tile_sum = 0.0f32;
            for s in 0..tile_len {
                tile_sum += sa[s + block - 1 - i] * sb[s];
            }
            acc += tile_sum;
            sync_cube();
            tile_index += chunk_count;
        }
        let k = lag_block * block + i;
        if k < lags {
            partial[(pair * lags + k) * chunk_count + chunk] = acc;
        }
    }
}

/// `sums[v] = sum over c in 0 .. chunks of partial[v * chunks + c]`, in that order, for
/// `v < values`. One unit per value.
#[cube(launch)]
pub(super) fn sum_chunks(partial: &[f32], sums: &mut [f32], values: u32, chunks: u32) {
    let v = ABSOLUTE_POS;
    if v < usize::cast_from(values) {
        let chunk_count = usize::cast_from(chunks);
        let mut acc = 0.0f32;
        for c in 0..chunk_count {
            acc += partial[v * chunk_count + c];
        }
        sums[v] = acc;
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
