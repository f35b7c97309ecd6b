//! The statistics kernels. Layout: `[channels, samples]`, channel-major.

use cubecl::prelude::*;

/// What [`sum_groups`] does with a group's sum before writing it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Finish {
    /// Writes the sum (an intermediate level).
    Sum,
    /// Writes `sum / count` (a mean).
    Mean,
    /// Writes `sqrt(sum / count)` (a standard deviation from a sum of squares).
    RootMean,
}

/// One level of a per-channel tree sum over `units = channels * groups` units. Row `c` of `input` is `input[c * len .. (c + 1) * len]`;
/// unit `u = c * groups + g` sums `input` values
/// `g * group .. min((g + 1) * group, len)` of row `c` with Neumaier compensation and writes
/// the compensated sum, finished as `finish` says, to `output[u]`.
///
/// With `centered`, each value is first replaced by `(x - center[c])^2` (the sum of squares
/// of a variance). An infinite running sum is written as it is (its compensation is NaN), so
/// overflow gives an infinity as numpy does and a NaN anywhere gives NaN.
#[cube(launch_unchecked)]
pub(super) fn sum_groups(
    input: &[f32],
    center: &[f32],
    output: &mut [f32],
    units: u32,
    len: u32,
    groups: u32,
    group: u32,
    count: f32,
    #[comptime] centered: bool,
    #[comptime] finish: Finish,
) {
    let unit = ABSOLUTE_POS;
    if unit < usize::cast_from(units) {
        let per_channel = usize::cast_from(groups);
        let channel = unit / per_channel;
        let len = usize::cast_from(len);
        let group = usize::cast_from(group);
        let start = (unit % per_channel) * group;
        let end = min(start + group, len);
        let row = channel * len;
        let mut mean = 0.0f32;
        if centered {
            mean = center[channel];
        }
        let mut sum = 0.0f32;
        let mut compensation = 0.0f32;
        for s in start..end {
            let mut x = input[row + s];
            if centered {
                let d = x - mean;
                x = d * d;
            }
            let t = sum + x;
            if f32::abs(sum) >= f32::abs(x) {
                compensation += (sum - t) + x;
            } else {
                compensation += (x - t) + sum;
            }
            sum = t;
        }
        let mut total = sum;
        if !sum.is_inf() {
            total = sum + compensation;
        }
        match finish {
            Finish::Sum => output[unit] = total,
            Finish::Mean => output[unit] = total / count,
            Finish::RootMean => output[unit] = f32::sqrt(total / count),
        }
    }
}

/// The order-preserving key of `x`: for non-NaN values, `x < y` exactly when
/// `key(x) < key(y)` (with `-0 < +0`); never `0` for a non-NaN value.
#[cube]
pub(crate) fn order_key(x: f32) -> u32 {
    let bits = u32::reinterpret(x);
    let mut key = bits | 0x8000_0000;
    if bits >= 0x8000_0000 {
        key = bits ^ 0xFFFF_FFFF;
    }
    key
}

/// The value whose [`order_key`] is `key`.
#[cube]
fn key_value(key: u32) -> f32 {
    let mut bits = key ^ 0xFFFF_FFFF;
    if key >= 0x8000_0000 {
        bits = key & 0x7FFF_FFFF;
    }
    f32::reinterpret(bits)
}

/// The sum of `value` over the units of the cube, returned to every unit. `scratch` holds one
/// value per unit and the cube has a power of two of units; every unit must call this.
#[cube]
fn cube_sum(scratch: &mut Shared<[u32]>, value: u32) -> u32 {
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

/// The minimum of `value` over the cube, as [`cube_sum`].
#[cube]
fn cube_min(scratch: &mut Shared<[u32]>, value: u32) -> u32 {
    let unit = UNIT_POS as usize;
    scratch[unit] = value;
    sync_cube();
    // A runtime stride: a comptime value cannot be mutated in the loop.
    let mut stride = (CUBE_DIM / 2) as usize;
    while stride > 0 {
        if unit < stride {
            scratch[unit] = min(scratch[unit], scratch[unit + stride]);
        }
        sync_cube();
        stride /= 2;
    }
    let total = scratch[0];
    sync_cube();
    total
}

/// The exact median of each channel (of `|x|` with `absolute`), divided by `divisor`: one cube of
/// `units` units (a power of two) per channel, `output[c]` for cube `c < channels`.
///
/// The lower middle element (rank `(n - 1) / 2`) is found by bisection on the order-preserving
/// `u32` key: 32 passes, each a cube-wide count of the keys at or below the pivot. For an even
/// `n` the upper middle element is the lower one again when it repeats, else the smallest key
/// above it (one more pass), and the median is their mean in `f32` (as `np.median`). A channel
/// holding a NaN gives NaN (one counting pass first).
#[cube(launch_unchecked)]
pub(super) fn channel_median(
    input: &[f32],
    output: &mut [f32],
    channels: u32,
    samples: u32,
    divisor: f32,
    #[comptime] units: usize,
    #[comptime] absolute: bool,
) {
    let channel = CUBE_POS;
    // Uniform over the cube: whole cubes past the last channel leave together.
    if channel < usize::cast_from(channels) {
        let n = usize::cast_from(samples);
        let row = channel * n;
        let unit = UNIT_POS as usize;
        let mut scratch = Shared::new_slice(units);

        // A NaN is written as found (WGSL has no NaN constant); any unit finding one may
        // write it, and the median is not written after.
        let mut nans = 0u32;
        let mut s = unit;
        while s < n {
            let x = input[row + s];
            if x.is_nan() {
                output[channel] = x;
                nans += 1;
            }
            s += units;
        }
        if cube_sum(&mut scratch, nans) == 0 {
            let rank = (samples - 1) / 2;
            let mut low = 0u32;
            let mut high = 0xFFFF_FFFFu32;
            while low < high {
                let pivot = low + (high - low) / 2;
                let mut below = 0u32;
                let mut s = unit;
                while s < n {
                    if sample_key(input[row + s], absolute) <= pivot {
                        below += 1;
                    }
                    s += units;
                }
                if cube_sum(&mut scratch, below) > rank {
                    high = pivot;
                } else {
                    low = pivot + 1;
                }
            }
            let lower = key_value(low);
            let mut median = lower;
            if (samples & 1) == 0 {
                let mut below = 0u32;
                let mut next = 0xFFFF_FFFFu32;
                let mut s = unit;
                while s < n {
                    let key = sample_key(input[row + s], absolute);
                    if key <= low {
                        below += 1;
                    } else {
                        next = min(next, key);
                    }
                    s += units;
                }
                let below = cube_sum(&mut scratch, below);
                let next = cube_min(&mut scratch, next);
                let mut upper = lower;
                if below <= samples / 2 {
                    upper = key_value(next);
                }
                median = (lower + upper) / 2.0;
            }
            if unit == 0 {
                output[channel] = median / divisor;
            }
        }
    }
}

/// The order key of `x` (of `|x|` with `absolute`).
#[cube]
fn sample_key(x: f32, #[comptime] absolute: bool) -> u32 {
    let mut value = x;
    if absolute {
        value = f32::abs(x);
    }
    order_key(value)
}
