//! The `f64` host reference of universal-template detection: the computation
//! [`UniversalDetector`](super::UniversalDetector) documents, written plainly.

use std::ops::Range;

use crate::detection::centres::TemplateCentres;
use crate::detection::universal::UniversalTemplates;

/// One spike of the reference.
#[derive(Debug, Clone)]
pub(super) struct Spike {
    /// Column of the window's array.
    pub(super) column: usize,
    pub(super) centre: usize,
    pub(super) combo: usize,
    pub(super) sign: i8,
    pub(super) amplitude: f64,
    pub(super) x: f64,
    pub(super) depth: f64,
    /// `[nc, P]`.
    pub(super) features: Vec<f64>,
}

/// Spikes of the `channels x n` window `x` at columns `owned`, ordered by (column, centre).
pub(super) fn detect(
    x: &[f32],
    channels: usize,
    owned: Range<usize>,
    positions: &[[f32; 2]],
    centres: &TemplateCentres,
    templates: &UniversalTemplates,
    threshold: f64,
) -> Vec<Spike> {
    let n = x.len() / channels;
    let (nt, half, reach) = (templates.nt(), templates.nt() / 2, templates.nt0min());
    let (k_count, p_count) = (templates.k(), templates.p());
    let (g_count, nc, nn, s_count) = (centres.count(), centres.nc(), centres.nn(), centres.sizes());
    let ic = centres.nearest_channels();
    let ic2 = centres.nearest_centres();
    let w = centres.weights();
    let value = |c: usize, s: isize| -> f64 {
        if s < 0 || s >= n as isize {
            0.0
        } else {
            f64::from(x[c * n + s as usize])
        }
    };
    // Projections of `rows` (weights `nt` long) on channel `c` at column `t`.
    let project = |rows: &[f32], c: usize, t: usize| -> Vec<f64> {
        rows.chunks_exact(nt)
            .map(|row| {
                (0..nt)
                    .map(|j| value(c, (t + j) as isize - half as isize) * f64::from(row[j]))
                    .sum()
            })
            .collect()
    };

    let bt: Vec<Vec<Vec<f64>>> = (0..channels)
        .map(|c| (0..n).map(|t| project(templates.wtemp(), c, t)).collect())
        .collect();
    let mut amax = vec![0.0f64; g_count * n];
    let mut best = vec![(0usize, 1i8); g_count * n];
    for g in 0..g_count {
        for t in 0..n {
            let mut top = -1.0;
            for combo in 0..s_count * k_count {
                let (s, k) = (combo / k_count, combo % k_count);
                let a: f64 = (0..nc)
                    .map(|i| {
                        f64::from(w[(s * g_count + g) * nc + i]) * bt[ic[g * nc + i] as usize][t][k]
                    })
                    .sum();
                if a.abs() > top {
                    top = a.abs();
                    best[g * n + t] = (combo, if a < 0.0 { -1 } else { 1 });
                }
            }
            amax[g * n + t] = top;
        }
    }
    let pooled: Vec<f64> = (0..g_count * n)
        .map(|index| {
            let (g, t) = (index / n, index % n);
            (0..nn)
                .map(|j| amax[ic2[g * nn + j] as usize * n + t])
                .fold(f64::NEG_INFINITY, f64::max)
        })
        .collect();

    let mut spikes = Vec::new();
    for t in owned {
        for g in 0..g_count {
            let a = amax[g * n + t];
            let window = t.saturating_sub(reach)..(t + reach + 1).min(n);
            let peak = window
                .map(|u| pooled[g * n + u])
                .fold(f64::NEG_INFINITY, f64::max);
            if a > threshold && a == peak {
                let (combo, sign) = best[g * n + t];
                let k = combo % k_count;
                let (mut total, mut sx, mut sy) = (0.0, 0.0, 0.0);
                for &c in &ic[g * nc..(g + 1) * nc] {
                    let r = (f64::from(sign) * bt[c as usize][t][k]).max(0.0);
                    total += r;
                    sx += r * f64::from(positions[c as usize][0]);
                    sy += r * f64::from(positions[c as usize][1]);
                }
                let features = ic[g * nc..(g + 1) * nc]
                    .iter()
                    .flat_map(|&c| project(templates.wpca(), c as usize, t))
                    .collect::<Vec<f64>>();
                debug_assert_eq!(features.len(), nc * p_count);
                spikes.push(Spike {
                    column: t,
                    centre: g,
                    combo,
                    sign,
                    amplitude: a,
                    x: sx / total,
                    depth: sy / total,
                    features,
                });
            }
        }
    }
    spikes
}
