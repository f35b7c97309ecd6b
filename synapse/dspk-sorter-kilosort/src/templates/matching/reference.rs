//! The `f64` host reference of learned-template matching: the computation
//! [`Matcher`](super::Matcher) documents, written plainly (scores recomputed from the residual
//! at every peel over all channels, instead of the device's sparse scores updated through
//! `ctc`).

use std::ops::Range;

use super::setup::nearest_channels;

/// One spike of the reference.
#[derive(Debug, Clone)]
pub(super) struct Spike {
    /// Score column in the window's array.
    pub(super) column: usize,
    pub(super) peel: usize,
    pub(super) template: usize,
    pub(super) score: f64,
    pub(super) scale: f64,
    /// `[nc, P]`.
    pub(super) features: Vec<f64>,
}

/// The learned templates and settings the reference matches with.
pub(super) struct Problem<'a> {
    /// `[N, P, C]`.
    pub(super) templates: &'a [f32],
    pub(super) n_templates: usize,
    /// `[P, nt]`.
    pub(super) wpca: &'a [f32],
    pub(super) nt: usize,
    pub(super) positions: &'a [[f32; 2]],
    pub(super) threshold: f64,
    pub(super) max_peels: usize,
    pub(super) nearest_chans: usize,
}

/// Spikes of the `channels x n` window `x` whose score columns lie in `owned`, ordered by
/// (column, peel).
pub(super) fn match_window(x: &[f32], owned: Range<usize>, problem: &Problem) -> Vec<Spike> {
    let channels = problem.positions.len();
    let n = x.len() / channels;
    let (nt, half, count) = (problem.nt, problem.nt / 2, problem.n_templates);
    let pcs = problem.wpca.len() / nt;
    let u =
        |m: usize, p: usize, c: usize| f64::from(problem.templates[(m * pcs + p) * channels + c]);
    let w = |p: usize, j: usize| f64::from(problem.wpca[p * nt + j]);
    let norms: Vec<f64> = (0..count)
        .map(|m| {
            (0..pcs)
                .flat_map(|p| (0..channels).map(move |c| (m, p, c)))
                .map(|(m, p, c)| u(m, p, c).powi(2))
                .sum()
        })
        .collect();
    let scoreable = half..n.saturating_sub(half).max(half);
    let mut xres: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    // PC projection of channel c of the residual at column t.
    let project = |xres: &[f64], c: usize, t: usize| -> Vec<f64> {
        (0..pcs)
            .map(|p| (0..nt).map(|j| xres[c * n + t + j - half] * w(p, j)).sum())
            .collect()
    };

    let mut found = Vec::new();
    for peel in 0..problem.max_peels {
        let mut b = vec![vec![0.0f64; n]; count];
        for t in scoreable.clone() {
            for c in 0..channels {
                let bp = project(&xres, c, t);
                for (m, row) in b.iter_mut().enumerate() {
                    row[t] += (0..pcs).map(|p| u(m, p, c) * bp[p]).sum::<f64>();
                }
            }
        }
        let mut best = vec![0.0f64; n];
        let mut arg = vec![0usize; n];
        for t in scoreable.clone() {
            for m in 0..count {
                let cf = b[m][t].max(0.0).powi(2) / norms[m];
                if m == 0 || cf > best[t] {
                    best[t] = cf;
                    arg[t] = m;
                }
            }
        }
        let mut peaks = Vec::new();
        for t in scoreable.clone() {
            let pool = best[t.saturating_sub(nt)..(t + nt + 1).min(n)]
                .iter()
                .copied()
                .fold(f64::NEG_INFINITY, f64::max);
            if pool > problem.threshold * problem.threshold && (pool - best[t]).abs() < 1e-9 {
                peaks.push(t);
            }
        }
        if peaks.is_empty() {
            break;
        }
        let mut fitted = Vec::new();
        for &t in &peaks {
            let m = arg[t];
            fitted.push((t, m, b[m][t] / norms[m]));
            found.push((t, peel, m, best[t].sqrt(), b[m][t] / norms[m]));
        }
        for (t, m, a) in fitted {
            for c in 0..channels {
                for j in 0..nt {
                    let wave: f64 = (0..pcs).map(|p| u(m, p, c) * w(p, j)).sum();
                    xres[c * n + t + j - half] -= a * wave;
                }
            }
        }
    }

    let nc = problem.nearest_chans.min(channels);
    let mut spikes: Vec<Spike> = found
        .into_iter()
        .filter(|(t, ..)| owned.contains(t))
        .map(|(t, peel, m, score, scale)| {
            let energy = |c: usize| (0..pcs).map(|p| u(m, p, c).powi(2)).sum::<f64>();
            let mut best = 0;
            for c in 1..channels {
                if energy(c) > energy(best) {
                    best = c;
                }
            }
            let features = nearest_channels(problem.positions, best, nc)
                .into_iter()
                .flat_map(|c| {
                    let projection = project(&xres, c, t);
                    (0..pcs)
                        .map(|p| projection[p] + scale * u(m, p, c))
                        .collect::<Vec<f64>>()
                })
                .collect();
            Spike {
                column: t,
                peel,
                template: m,
                score,
                scale,
                features,
            }
        })
        .collect();
    spikes.sort_by_key(|s| (s.column, s.peel));
    spikes
}
