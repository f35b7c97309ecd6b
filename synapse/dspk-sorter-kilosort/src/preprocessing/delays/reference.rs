//! `f64` host references of the delay estimate and the alignment.

use std::ops::Range;

/// The `CC[a, b, l + D]` of one range of a `channels x n` window `x` (see
/// [`DelayEstimator`](super::DelayEstimator)): unbiased deviations over `range`, products whose
/// `t - l` falls outside `0 .. n` left out of the mean.
pub(super) fn correlation(x: &[f32], channels: usize, range: Range<usize>, d: usize) -> Vec<f64> {
    let n = x.len() / channels;
    let row = |c: usize| &x[c * n..(c + 1) * n];
    let deviation: Vec<f64> = (0..channels)
        .map(|c| {
            let values = &row(c)[range.clone()];
            let mean = values.iter().map(|&v| f64::from(v)).sum::<f64>() / values.len() as f64;
            let squares: f64 = values.iter().map(|&v| (f64::from(v) - mean).powi(2)).sum();
            (squares / (values.len() - 1) as f64).sqrt()
        })
        .collect();
    let mut cc = Vec::with_capacity(channels * channels * (2 * d + 1));
    for a in 0..channels {
        for b in 0..channels {
            for l in -(d as i64)..=d as i64 {
                let (mut sum, mut count) = (0.0, 0usize);
                for t in range.clone() {
                    let source = t as i64 - l;
                    if (0..n as i64).contains(&source) {
                        sum +=
                            f64::from(row(a)[source as usize]).abs() * f64::from(row(b)[t]).abs();
                        count += 1;
                    }
                }
                cc.push(sum / count as f64 / (deviation[a] * deviation[b]));
            }
        }
    }
    cc
}

/// `out[b, t] = x[b, t + delays[b]]`, zero where that index falls outside `0 .. n`.
pub(super) fn align(x: &[f32], delays: &[i32]) -> Vec<f32> {
    let n = x.len() / delays.len();
    let mut out = vec![0.0f32; x.len()];
    for (b, &d) in delays.iter().enumerate() {
        for t in 0..n {
            let source = t as i64 + i64::from(d);
            if (0..n as i64).contains(&source) {
                out[b * n + t] = x[b * n + source as usize];
            }
        }
    }
    out
}
