//! Channel products kernels: `S[i, j] = sum_t x[i, t] * x[j, t]` over an owned sample range of
//! a channel-major `[channels, samples]` window, on an extended channel set where channel
//! `channels` is a row of ones (so `S[i, channels]` is the sum of channel `i`).
//!
//! [`tile_products`] gives each unit a `TILE x TILE` block of `S` (upper triangle of blocks
//! only) and every `splits`-th sample of the range; consecutive units take consecutive samples,
//! so each of its `2 * TILE` loads per sample is coalesced across units, and each loaded value
//! serves `TILE` multiply-adds. [`fold_partials`] sums the `splits` partial blocks in a fixed
//! order and writes each product to both `S[i, j]` and `S[j, i]`.

use cubecl::prelude::*;

use crate::launch::unit_index;

/// Partial `TILE x TILE` blocks of channel products. Unit `tile * splits + s` handles block
/// `pairs[tile] = (row block << 16) | column block` and samples `start + s + m * splits` below
/// `start + len`, and writes its block element `e` to `partials[(tile * TILE^2 + e) * splits +
/// s]`. Rows past `channels` read as ones (row `channels`) or zeros (beyond).
#[cube(launch_unchecked)]
pub(super) fn tile_products(
    window: &[f32],
    pairs: &[u32],
    partials: &mut [f32],
    channels: u32,
    samples: u32,
    start: u32,
    len: u32,
    splits: u32,
    units: u32,
    #[comptime] tile: usize,
    #[comptime] blocked: bool,
) {
    let unit = unit_index(blocked);
    if unit < usize::cast_from(units) {
        let split_count = usize::cast_from(splits);
        let tile_index = unit / split_count;
        let s = unit % split_count;
        let pair = pairs[tile_index];
        let row_block = usize::cast_from(pair >> 16) * tile;
        let column_block = usize::cast_from(pair & 0xFFFF) * tile;
        let count = usize::cast_from(channels);
        let n = usize::cast_from(samples);

        // Base address, whether the row is real, and the value of a virtual row.
        let mut row_base = Array::<usize>::new(tile);
        let mut row_real = Array::<bool>::new(tile);
        let mut row_fill = Array::<f32>::new(tile);
        let mut column_base = Array::<usize>::new(tile);
        let mut column_real = Array::<bool>::new(tile);
        let mut column_fill = Array::<f32>::new(tile);
        #[unroll]
        for r in 0..tile {
            let row = row_block + r;
            row_base[r] = min(row, count - 1) * n;
            row_real[r] = row < count;
            row_fill[r] = select(row == count, 1.0f32, 0.0f32);
            let column = column_block + r;
            column_base[r] = min(column, count - 1) * n;
            column_real[r] = column < count;
            column_fill[r] = select(column == count, 1.0f32, 0.0f32);
        }

        let mut acc = Array::<f32>::new(tile * tile);
        #[unroll]
        for e in 0..tile * tile {
            acc[e] = 0.0f32;
        }
        let mut a = Array::<f32>::new(tile);
        let mut b = Array::<f32>::new(tile);
        let end = usize::cast_from(start) + usize::cast_from(len);
        for t in range_stepped(usize::cast_from(start) + s, end, split_count) {
            #[unroll]
            for r in 0..tile {
                a[r] = select(row_real[r], window[row_base[r] + t], row_fill[r]);
                b[r] = select(column_real[r], window[column_base[r] + t], column_fill[r]);
            }
            #[unroll]
            for r in 0..tile {
                #[unroll]
                for q in 0..tile {
                    acc[r * tile + q] += a[r] * b[q];
                }
            }
        }
        #[unroll]
        for e in 0..tile * tile {
            partials[(tile_index * tile * tile + e) * split_count + s] = acc[e];
        }
    }
}

/// Sums the `splits` partials of each block element in order into `out`, a row-major
/// `[dim, dim]` matrix (`dim = channels + 1`), writing `out[i, j]` and `out[j, i]`. One unit
/// per element of each block: `units = tiles * TILE^2`.
#[cube(launch_unchecked)]
pub(super) fn fold_partials(
    partials: &[f32],
    pairs: &[u32],
    out: &mut [f32],
    dim: u32,
    splits: u32,
    units: u32,
    #[comptime] tile: usize,
    #[comptime] blocked: bool,
) {
    let unit = unit_index(blocked);
    if unit < usize::cast_from(units) {
        let split_count = usize::cast_from(splits);
        let tile_index = unit / (tile * tile);
        let e = unit % (tile * tile);
        let pair = pairs[tile_index];
        let i = usize::cast_from(pair >> 16) * tile + e / tile;
        let j = usize::cast_from(pair & 0xFFFF) * tile + e % tile;
        let d = usize::cast_from(dim);
        if i < d && j < d {
            let base = unit * split_count;
            let mut sum = 0.0f32;
            for s in 0..split_count {
                sum += partials[base + s];
            }
            out[i * d + j] = sum;
            out[j * d + i] = sum;
        }
    }
}

/// `total[k] += other[k]` for `k < len`.
#[cube(launch_unchecked)]
pub(super) fn add_into(total: &mut [f32], other: &[f32], len: u32, #[comptime] blocked: bool) {
    let k = unit_index(blocked);
    if k < usize::cast_from(len) {
        total[k] += other[k];
    }
}
