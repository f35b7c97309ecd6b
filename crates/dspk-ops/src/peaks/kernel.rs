//! The peak detection kernels. Layout: `[channels, samples]`, channel-major. Candidates are
//! kept as order keys (`0` = none) in a `u32` buffer of the window's shape.

use cubecl::prelude::*;

use crate::stats::order_key;

/// How the height threshold is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum HeightMode {
    /// No threshold.
    Any,
    /// `scale` for every channel.
    Uniform,
    /// `scale * thresholds[c]` for channel `c`.
    PerChannel,
}

/// Sets the first `values` candidate keys to `0` (no candidate).
#[cube(launch_unchecked)]
pub(super) fn clear(keys: &mut [u32], values: u32) {
    let index = ABSOLUTE_POS;
    if index < usize::cast_from(values) {
        keys[index] = 0;
    }
}

/// Marks local maxima of `v = x` (or `v = -x` with `negative`) at or above the threshold, as
/// `scipy.signal.find_peaks` finds them: a flat run `v[l] == .. == v[r]` with `v[l - 1] < v[l]`
/// and `v[r + 1] < v[r]` (`1 <= l`, `r + 1 <= samples - 1`) is one peak at `(l + r) / 2`.
/// Unit `(c, s)` checks whether `s` is the left end `l` of such a run and then walks to its
/// right end, so each flat run is walked once. The peak's key ([`order_key`] of `v`, with
/// `-0` keyed as `+0` so that the two are one height as scipy compares them; never 0) goes to
/// `keys[c, (l + r) / 2]`.
///
/// NaN compares false, so NaN samples are never peaks and neither are their neighbours (as
/// scipy). Each NaN sample in `owned_start..owned_end`, and each channel whose threshold is
/// NaN, adds one to `counters[1]`.
#[cube(launch_unchecked)]
pub(super) fn mark(
    input: &[f32],
    thresholds: &[f32],
    keys: &mut [u32],
    counters: &[Atomic<u32>],
    values: u32,
    samples: u32,
    owned_start: u32,
    owned_end: u32,
    scale: f32,
    #[comptime] negative: bool,
    #[comptime] height: HeightMode,
) {
    let index = ABSOLUTE_POS;
    if index < usize::cast_from(values) {
        let n = usize::cast_from(samples);
        let channel = index / n;
        let row = channel * n;
        let s = index % n;
        let x = input[index];
        let owned = s >= usize::cast_from(owned_start) && s < usize::cast_from(owned_end);
        if owned && x.is_nan() {
            counters[1].fetch_add(1);
        }
        let threshold = match height {
            HeightMode::Any => 0.0f32,
            HeightMode::Uniform => scale,
            HeightMode::PerChannel => scale * thresholds[channel],
        };
        if height == HeightMode::PerChannel
            && s == usize::cast_from(owned_start)
            && threshold.is_nan()
        {
            counters[1].fetch_add(1);
        }
        if s >= 1 && s + 1 < n {
            let v = signed(x, negative);
            if signed(input[index - 1], negative) < v {
                let mut ahead = s + 1;
                while ahead < n - 1 && signed(input[row + ahead], negative) == v {
                    ahead += 1;
                }
                let high_enough = match height {
                    HeightMode::Any => true,
                    _ => v >= threshold,
                };
                if signed(input[row + ahead], negative) < v && high_enough {
                    // `v + 0.0` would turn -0 into +0 in IEEE arithmetic, but shader compilers
                    // may fold it to `v` (measured on lavapipe); a comparison cannot be folded.
                    let mut height = v;
                    if v == 0.0 {
                        height = 0.0;
                    }
                    keys[row + (s + ahead - 1) / 2] = order_key(height);
                }
            }
        }
    }
}

/// One unit per owned sample of each of the `channels` channels: keeps the candidates of
/// `owned_start..owned_end` that no other candidate within `reach`
/// samples beats (a higher value, or the same value earlier), and appends each kept one to
/// the output: slot `i = counters[0]++`, written only when `i < capacity`
/// (`positions[2i] = c`, `positions[2i + 1] = s`, `values[i] = x[c, s]`).
#[cube(launch_unchecked)]
pub(super) fn select(
    input: &[f32],
    keys: &[u32],
    counters: &[Atomic<u32>],
    positions: &mut [u32],
    values: &mut [f32],
    capacity: u32,
    channels: u32,
    samples: u32,
    owned_start: u32,
    owned_end: u32,
    reach: u32,
) {
    let owned = usize::cast_from(owned_end - owned_start);
    let unit = ABSOLUTE_POS;
    let n = usize::cast_from(samples);
    if unit < usize::cast_from(channels) * owned {
        let channel = unit / owned;
        let s = usize::cast_from(owned_start) + unit % owned;
        let row = channel * n;
        let key = keys[row + s];
        if key != 0 {
            let reach = usize::cast_from(reach);
            let first = s - min(s, reach);
            let last = min(s + reach, n - 1);
            let mut kept = true;
            let mut j = first;
            while kept && j <= last {
                let other = keys[row + j];
                if other > key || (other == key && j < s) {
                    kept = false;
                }
                j += 1;
            }
            if kept {
                let slot = usize::cast_from(counters[0].fetch_add(1));
                if slot < usize::cast_from(capacity) {
                    positions[2 * slot] = u32::cast_from(channel);
                    positions[2 * slot + 1] = u32::cast_from(s);
                    values[slot] = input[row + s];
                }
            }
        }
    }
}

/// `x`, or `-x` with `negative`.
#[cube]
fn signed(x: f32, #[comptime] negative: bool) -> f32 {
    let mut v = x;
    if negative {
        v = -x;
    }
    v
}
