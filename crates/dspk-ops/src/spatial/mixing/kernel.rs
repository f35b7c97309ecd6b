//! Channel mixing kernels: `out[c, t] = sum_k w[c, k] * x[idx[c, k], t]` on a channel-major
//! `[channels, samples]` window.
//!
//! Each unit computes `span` samples `t = u + j * stride` (`j < span`) of one or more output
//! channels, so consecutive units read consecutive addresses of a channel, and each loaded
//! weight serves `span` samples. Samples past the end are loaded clamped and not written.

use cubecl::prelude::*;

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
) {
    let count = usize::cast_from(channels);
    let n = usize::cast_from(samples);
    let q = usize::cast_from(stride);
    let unit = ABSOLUTE_POS;
    if unit < usize::cast_from(units) {
        let first = (unit / q) * rows;
        let u = unit % q;
        let mut acc = Array::<f32>::new(rows * span);
        #[unroll]
        for i in 0..rows * span {
            acc[i] = 0.0f32;
        }
        let mut xs = Array::<f32>::new(span);
        for k in 0..count {
            #[unroll]
            for j in 0..span {
                xs[j] = input[k * n + min(u + j * q, n - 1)];
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
                let t = u + j * q;
                if first + r < count && t < n {
                    output[(first + r) * n + t] = acc[r * span + j];
                }
            }
        }
    }
}

/// Sparse mixing, `indices` and `weights` row-major `[channels, taps]`: each unit computes one
/// output channel for `span` samples. `units` is `channels * stride`.
#[cube(launch_unchecked)]
pub(super) fn mix_sparse(
    input: &[f32],
    indices: &[u32],
    weights: &[f32],
    output: &mut [f32],
    samples: u32,
    taps: u32,
    stride: u32,
    units: u32,
    #[comptime] span: usize,
) {
    let n = usize::cast_from(samples);
    let q = usize::cast_from(stride);
    let per_row = usize::cast_from(taps);
    let unit = ABSOLUTE_POS;
    if unit < usize::cast_from(units) {
        let c = unit / q;
        let u = unit % q;
        let mut acc = Array::<f32>::new(span);
        #[unroll]
        for j in 0..span {
            acc[j] = 0.0f32;
        }
        for k in 0..per_row {
            let tap = c * per_row + k;
            let source = usize::cast_from(indices[tap]) * n;
            let w = weights[tap];
            #[unroll]
            for j in 0..span {
                acc[j] += w * input[source + min(u + j * q, n - 1)];
            }
        }
        #[unroll]
        for j in 0..span {
            let t = u + j * q;
            if t < n {
                output[c * n + t] = acc[j];
            }
        }
    }
}
