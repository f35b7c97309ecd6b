//! The envelope kernels: a fold of each column's samples (or of one part of a long column)
//! and an in-order merge of such partial folds.
//!
//! A fold of `n` rows is three `u32` buffers of `n` words: the minima's bits, the maxima's bits,
//! the NaN counts (each no larger than the samples it folds). Samples are read as their bits and
//! compared through [`order_key`]: integer comparisons that are IEEE `<` and `>` for every value
//! that is not NaN (subnormals included, `-0.0` equal to `0.0`), so no runtime's float handling
//! (flushed subnormals, `min` instructions that pick either zero) can change a bit.

// Kernels walk buffers by index: CubeCL has ranges, not slice iterators.
#![allow(clippy::needless_range_loop)]

use cubecl::prelude::*;

/// The bits of `+inf` (an empty column's minimum).
const POS_INF: u32 = 0x7F80_0000;
/// The bits of `-inf` (an empty column's maximum).
const NEG_INF: u32 = 0xFF80_0000;
/// The sign bit.
const SIGN: u32 = 0x8000_0000;
/// Everything but the sign bit.
const MAGNITUDE: u32 = 0x7FFF_FFFF;

/// The key of the non-NaN value with bits `bits`: `0x8000_0000` plus the value's signed
/// magnitude, so `key(x) < key(y)` exactly when `x < y` (and `-0.0`, `0.0` share one key).
#[cube]
fn order_key(bits: u32) -> u32 {
    let magnitude = bits & MAGNITUDE;
    let mut key = SIGN + magnitude;
    if bits >= SIGN {
        key = SIGN - magnitude;
    }
    key
}

/// Folds part `unit % parts` of column `(unit / parts) % width` of channel
/// `unit / parts / width` into word `unit` of `low`, `high` and `nans` (`units` words each).
///
/// `values` holds the `f32` samples' bits, `[channels, samples]`; column `k` is samples
/// `edges[k]..edges[k + 1]` of each row; its part `p` is the `part_len` samples from
/// `p * part_len` on (fewer or none at the column's end). Samples are taken in order: a value
/// below the running minimum (above the running maximum) replaces it, so of equal values
/// (`-0.0`, `0.0`) the first stays; NaN is counted and skipped. A part without a sample that
/// is not NaN gives `+inf` / `-inf`.
#[cube(launch)]
pub(super) fn fold_parts(
    values: &[u32],
    edges: &[u32],
    low_out: &mut [u32],
    high_out: &mut [u32],
    nan_out: &mut [u32],
    units: u32,
    samples: u32,
    width: u32,
    parts: u32,
    part_len: u32,
) {
    let unit = ABSOLUTE_POS;
    let units = usize::cast_from(units);
    if unit < units {
        let parts = usize::cast_from(parts);
        let width = usize::cast_from(width);
        let part_len = usize::cast_from(part_len);
        let row = unit / parts;
        let column = row % width;
        let first = usize::cast_from(edges[column]);
        let len = usize::cast_from(edges[column + 1]) - first;
        let offset = (unit % parts) * part_len;
        let mut start = 0usize;
        let mut end = 0usize;
        if offset < len {
            start = (row / width) * usize::cast_from(samples) + first + offset;
            end = start + min(part_len, len - offset);
        }
        let mut low = u32::new(POS_INF as i64);
        let mut low_key = order_key(POS_INF);
        let mut high = u32::new(NEG_INF as i64);
        let mut high_key = order_key(NEG_INF);
        let mut nan = 0u32;
        for i in start..end {
            let bits = values[i];
            if (bits & MAGNITUDE) > POS_INF {
                nan += 1;
            } else {
                let key = order_key(bits);
                if key < low_key {
                    low_key = key;
                    low = bits;
                }
                if key > high_key {
                    high_key = key;
                    high = bits;
                }
            }
        }
        low_out[unit] = low;
        high_out[unit] = high;
        nan_out[unit] = nan;
    }
}

/// Merges, in order, the partial folds `g * group .. min((g + 1) * group, parts)` of row `r`
/// of the inputs (`rows * parts` folds) into fold `unit = r * groups + g` of the outputs
/// (`units` folds): the first fold's minimum stays unless a later one is below it (the same rule as
/// within a part, so merging the parts of a column gives what folding it whole gives); NaN
/// counts add up.
#[cube(launch)]
pub(super) fn merge_parts(
    low_in: &[u32],
    high_in: &[u32],
    nan_in: &[u32],
    low_out: &mut [u32],
    high_out: &mut [u32],
    nan_out: &mut [u32],
    units: u32,
    parts: u32,
    groups: u32,
    group: u32,
) {
    let unit = ABSOLUTE_POS;
    let units = usize::cast_from(units);
    if unit < units {
        let parts = usize::cast_from(parts);
        let groups = usize::cast_from(groups);
        let group = usize::cast_from(group);
        let row = unit / groups;
        let from = (unit % groups) * group;
        let start = row * parts + from;
        let end = row * parts + min(from + group, parts);
        let mut low = u32::new(POS_INF as i64);
        let mut low_key = order_key(POS_INF);
        let mut high = u32::new(NEG_INF as i64);
        let mut high_key = order_key(NEG_INF);
        let mut nan = 0u32;
        for i in start..end {
            let part_low = low_in[i];
            let key = order_key(part_low);
            if key < low_key {
                low_key = key;
                low = part_low;
            }
            let part_high = high_in[i];
            let key = order_key(part_high);
            if key > high_key {
                high_key = key;
                high = part_high;
            }
            nan += nan_in[i];
        }
        low_out[unit] = low;
        high_out[unit] = high;
        nan_out[unit] = nan;
    }
}
