//! Channel-delay kernels. Layout: a window's array `x[c * n + t]`, `n` samples per channel
//! (halos included). Every sum runs over its index in a fixed order (a fixed stride per lane,
//! then a fixed tree over the lanes), so results do not depend on scheduling; no atomics. The
//! kernels that synchronise their cube split their work into lanes (or lags) fixed at compile
//! time, which the cube's units share out, so their results do not depend on the number of
//! units either: the launch takes that from the device (the cpu runtime runs one thread per
//! unit and allows few).

use cubecl::prelude::*;

/// The sum of `scratch[0 .. lanes]` (`lanes` a power of two), returned to every unit of the
/// cube; every unit must call this once the lanes are written. The tree adds lane `l + stride`
/// into lane `l`, halving `stride` from `lanes / 2` to 1; unit `u` adds lanes `u, u + units,
/// ...` at each level, so the sum is the same number for any number of units.
#[cube]
fn lane_sum(scratch: &mut Shared<[f32]>, #[comptime] lanes: usize) -> f32 {
    let unit = UNIT_POS as usize;
    let units = CUBE_DIM as usize;
    sync_cube();
    // A runtime stride: a comptime value cannot be mutated in the loop.
    let mut stride = (lanes / 2).runtime();
    while stride > 0 {
        let mut lane = unit;
        while lane < stride {
            scratch[lane] += scratch[lane + stride];
            lane += units;
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
/// per channel, of any number of units; lane `l` of `lanes` (a power of two) sums samples `l,
/// l + lanes, ...` in order, unit `u` taking lanes `u, u + units, ...`, then [`lane_sum`]. A
/// NaN or infinite sample gives NaN or infinity.
#[cube(launch)]
pub(super) fn range_deviation(
    x: &[f32],
    deviation: &mut [f32],
    channels: u32,
    samples: u32,
    first: u32,
    count: u32,
    #[comptime] lanes: usize,
) {
    let c = CUBE_POS;
    // Uniform over the cube: whole cubes past the last channel leave together.
    if c < usize::cast_from(channels) {
        let unit = UNIT_POS as usize;
        let units = CUBE_DIM as usize;
        let len = usize::cast_from(count);
        let row = c * usize::cast_from(samples) + usize::cast_from(first);
        let mut scratch = Shared::new_slice(lanes);
        let mut lane = unit;
        while lane < lanes {
            let mut sum = 0.0f32;
            let mut s = lane;
            while s < len {
                sum += x[row + s];
                s += lanes;
            }
            scratch[lane] = sum;
            lane += units;
        }
        let mean = lane_sum(&mut scratch, lanes) / f32::cast_from(count);
        let mut lane = unit;
        while lane < lanes {
            let mut squares = 0.0f32;
            let mut s = lane;
            while s < len {
                let d = x[row + s] - mean;
                squares += d * d;
                s += lanes;
            }
            scratch[lane] = squares;
            lane += units;
        }
        let total = lane_sum(&mut scratch, lanes);
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
/// One cube of `units` units (a power of two, at most `block`) per `(a, b, lag block, chunk)`,
/// numbered `((a * C + b) * blocks + lag block) * chunks + chunk`; a cube covers the `block`
/// lags `k = lag block * block + i`, unit `u` taking `i = u, u + units, ...` (lags past `2D`
/// compute nothing useful and write nothing). Per tile the cube stages `|x_b|` over the tile
/// and `|x_a|` over the tile widened by the block's lags in shared memory (zeros outside the
/// array), then each unit sums each of its lags' products over the tile in order and adds the
/// tile's sum to the lag's total: the same operations in the same order for any `units`. A NaN
/// or infinite sample among a lag's products makes its sum NaN or infinite; samples no product
/// of a written lag uses are never loaded into it.
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
    #[comptime] units: usize,
) {
    // Lags per unit.
    let per = comptime!(block / units);
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
        let unit = UNIT_POS as usize;
        let n = usize::cast_from(samples);
        let start = usize::cast_from(first);
        let len = usize::cast_from(count);
        let tiles = len.div_ceil(tile);
        // Array indices are kept unsigned as `index + offset`: inside when
        // `offset <= q < n + offset`.
        let offset = 2 * d + block;
        let mut sa = Shared::<[f32]>::new_slice(tile + block - 1);
        let mut sb = Shared::<[f32]>::new_slice(tile);
        let mut acc = Array::<f32>::new(per);
        let mut tile_sum = Array::<f32>::new(per);
        #[unroll]
        for v in 0..per {
            acc[v] = 0.0f32;
        }
        let mut tile_index = chunk;
        while tile_index < tiles {
            let t0 = start + tile_index * tile;
            let tile_len = min(tile, len - tile_index * tile);
            let mut s = unit;
            while s < tile_len {
                sb[s] = f32::abs(x[b * n + t0 + s]);
                s += units;
            }
            // `sa[j]` = `|x_a|` at `t0 + d - lag block * block - (block - 1) + j`, so the product
            // of column `t0 + s` at lag `k = lag block * block + i` reads `sa[s + block - 1 - i]`.
            let base = t0 + 3 * d + 1 - lag_block * block;
            let mut j = unit;
            while j < tile_len + block - 1 {
                let q = base + j;
                let inside = q >= offset && q < n + offset;
                let clamped = min(max(q, offset), n + offset - 1) - offset;
                sa[j] = select(inside, f32::abs(x[a * n + clamped]), 0.0f32);
                j += units;
            }
            sync_cube();
            #[unroll]
            for v in 0..per {
                tile_sum[v] = 0.0f32;
            }
            for s in 0..tile_len {
                #[unroll]
                for v in 0..per {
                    tile_sum[v] += sa[s + block - 1 - (unit + v * units)] * sb[s];
                }
            }
            #[unroll]
            for v in 0..per {
                acc[v] += tile_sum[v];
            }
            sync_cube();
            tile_index += chunk_count;
        }
        #[unroll]
        for v in 0..per {
            let k = lag_block * block + unit + v * units;
            if k < lags {
                partial[(pair * lags + k) * chunk_count + chunk] = acc[v];
            }
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
