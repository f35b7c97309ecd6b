//! The median filter and Gaussian smoothing kernels. Layout: `[channels, samples]`,
//! channel-major; one unit per output sample, reading its window from `input`.

use cubecl::prelude::*;

/// Median filter along time with zero padding, one unit per value of the window (`values`
/// of them): `output[c, s]` is the median of
/// `x[c, s - half ..= s + half]`, samples outside `0..samples` counting as `0.0`
/// (`scipy.signal.medfilt`). The median is the window value with at most `half` values below
/// it and more than `half` at or below it, found by rank counting (`O(k^2)` comparisons for
/// `k = 2 * half + 1`). A window holding a NaN gives that NaN.
#[cube(launch_unchecked)]
pub(super) fn medfilt(input: &[f32], output: &mut [f32], values: u32, samples: u32, half: u32) {
    let index = ABSOLUTE_POS;
    if index < usize::cast_from(values) {
        let n = usize::cast_from(samples);
        let half = usize::cast_from(half);
        let size = 2 * half + 1;
        let row = (index / n) * n;
        let s = index % n;
        let mut result = 0.0f32;
        let mut has_nan = false;
        for i in 0..size {
            let x = window_value(input, row, s + i, half, n);
            if x.is_nan() {
                result = x;
                has_nan = true;
            }
        }
        let mut i = 0usize;
        let mut found = has_nan;
        while !found && i < size {
            let candidate = window_value(input, row, s + i, half, n);
            let mut below = 0usize;
            let mut equal = 0usize;
            for j in 0..size {
                let x = window_value(input, row, s + j, half, n);
                if x < candidate {
                    below += 1;
                } else if x == candidate {
                    equal += 1;
                }
            }
            if below <= half && half < below + equal {
                result = candidate;
                found = true;
            }
            i += 1;
        }
        output[index] = result;
    }
}

/// `x[row + shifted - half]`, or `0.0` outside `0..n` (zero padding).
#[cube]
fn window_value(input: &[f32], row: usize, shifted: usize, half: usize, n: usize) -> f32 {
    let mut x = 0.0f32;
    if shifted >= half && shifted - half < n {
        x = input[row + shifted - half];
    }
    x
}

/// Correlation with `weights` (`2 * radius + 1` values) along time, one unit per value of the
/// window (`values` of them), mode `reflect`
/// (`d c b a | a b c d | d c b a`), as `scipy.ndimage.correlate1d`: `output[c, s] =
/// sum_t weights[t] * x[c, reflect(s + t - radius)]`.
///
/// The reflected index of `m = s + t - radius` is found from `q = (m + shift) mod period`
/// with `period = 2 * samples` and `shift` a multiple of the period at least `radius` (so no
/// negative intermediate): `q` itself below `samples`, else `period - 1 - q`. This holds for a
/// radius longer than the signal too (the reflection repeats with period `2 * samples`).
#[cube(launch_unchecked)]
pub(super) fn correlate_reflect(
    input: &[f32],
    weights: &[f32],
    output: &mut [f32],
    values: u32,
    samples: u32,
    radius: u32,
    shift: u32,
) {
    let index = ABSOLUTE_POS;
    if index < usize::cast_from(values) {
        let n = usize::cast_from(samples);
        let radius = usize::cast_from(radius);
        let period = 2 * n;
        let row = (index / n) * n;
        let s = index % n;
        let mut sum = 0.0f32;
        let taps = 2 * radius + 1;
        let mut t = 0usize;
        while t < taps {
            let shifted = s + t;
            let source = if shifted >= radius && shifted - radius < n {
                shifted - radius
            } else {
                let q = (shifted + usize::cast_from(shift) - radius) % period;
                if q < n { q } else { period - 1 - q }
            };
            sum += weights[t] * input[row + source];
            t += 1;
        }
        output[index] = sum;
    }
}
