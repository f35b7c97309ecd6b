//! Motor units: territory, innervation zone, conduction delays, amplitudes and multiphasic
//! templates.

use std::f64::consts::PI;

use dspk_core::rng::SplitMix64;

use super::{DelayMode, EmgConfig, EmgUnit, Layout};

/// Lateral depth range of the territory centres, mm.
const DEPTH_MM: [f64; 2] = [0.3, 2.5];
/// Scale of the three Hermite coefficients (orders 1, 2, 3).
const COEFFICIENT_SCALE: [f64; 3] = [1.0, 0.7, 0.45];
/// The least |coefficient| of order 1.
const FIRST_COEFFICIENT_MIN: f64 = 0.5;
/// Innervation-zone spread around the middle of the line, a fraction of its span, per unit.
const IZ_SPREAD_UNIT: f64 = 0.25;
/// The same, for the one shared innervation zone.
const IZ_SPREAD_SHARED: f64 = 0.15;
/// Broadening and shape drift per decay length of distance.
const DRIFT_PER_DECAY: f64 = 0.12;
/// Template samples below this fraction of the largest |value| are trimmed from both ends.
const TRIM_FRACTION: f64 = 1e-4;

/// Drawn units with their templates.
pub(super) struct Units {
    /// The units.
    pub(super) units: Vec<EmgUnit>,
    /// `units x template_len x channels`, µV.
    pub(super) templates: Vec<f64>,
    /// Samples per template.
    pub(super) template_len: usize,
    /// The spike sample within a template.
    pub(super) template_center: usize,
}

/// Standard normal values, `n` of them.
fn normals(random: &mut SplitMix64, n: usize) -> Vec<f64> {
    (0..n).map(|_| random.normal()).collect()
}

/// Uniform values in `[low, high)`, `n` of them.
fn uniforms(random: &mut SplitMix64, [low, high]: [f64; 2], n: usize) -> Vec<f64> {
    (0..n).map(|_| random.uniform(low, high)).collect()
}

/// The physicists' Hermite polynomial `H_n(x)` times `exp(-x^2 / 2)`, for `n` in 1..=3.
fn hermite_function(n: usize, x: f64) -> f64 {
    let h = match n {
        1 => 2.0 * x,
        2 => 4.0 * x * x - 2.0,
        _ => 8.0 * x * x * x - 12.0 * x,
    };
    h * (-0.5 * x * x).exp()
}

/// The potential `sum_n c_n H_{n+1}(t / sigma) exp(-(t / sigma)^2 / 2)` at `times_ms`,
/// scaled to a largest |value| of 1 (left at 0 if it is 0 everywhere).
fn muap(times_ms: &[f64], sigma_ms: f64, coefficients: [f64; 3]) -> Vec<f64> {
    let mut w: Vec<f64> = times_ms
        .iter()
        .map(|&t| {
            let x = t / sigma_ms;
            coefficients
                .iter()
                .enumerate()
                .map(|(n, c)| c * hermite_function(n + 1, x))
                .sum()
        })
        .collect();
    let peak = w.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    if peak > 0.0 {
        for v in &mut w {
            *v /= peak;
        }
    }
    w
}

/// The index of the first largest |value| (numpy's `argmax(abs(x))`).
fn argmax_abs(values: &[f64]) -> usize {
    let mut best = 0;
    for (k, v) in values.iter().enumerate() {
        if v.abs() > values[best].abs() {
            best = k;
        }
    }
    best
}

/// The index of the first largest value.
fn argmax(values: &[f64]) -> usize {
    let mut best = 0;
    for (k, &v) in values.iter().enumerate() {
        if v > values[best] {
            best = k;
        }
    }
    best
}

/// Draws every unit and builds its template (the model is documented on
/// [`EmgRecording`](super::EmgRecording)); `thresholds` are the units' recruitment thresholds.
pub(super) fn draw(
    config: &EmgConfig,
    layout: &Layout,
    thresholds: &[f64],
    random: &mut SplitMix64,
) -> Units {
    let (channels, count) = (config.channels, config.units);
    let per_ms = layout.per_ms();
    let span = (channels - 1) as f64 * config.pitch_mm;
    let xs: Vec<f64> = (0..channels).map(|c| c as f64 * config.pitch_mm).collect();

    let [low, high] = config.amplitude_uv;
    let mut amplitudes: Vec<f64> = uniforms(random, [low.ln(), high.ln()], count)
        .into_iter()
        .map(f64::exp)
        .collect();
    amplitudes.sort_by(f64::total_cmp);
    let territory_x = if channels > 1 {
        uniforms(random, [0.0, span], count)
    } else {
        vec![0.0; count]
    };
    let territory_y = uniforms(random, DEPTH_MM, count);
    let sigmas = uniforms(random, config.sigma_ms, count);
    let coefficients: Vec<[f64; 3]> = (0..count)
        .map(|_| {
            let mut c = COEFFICIENT_SCALE.map(|scale| random.normal() * scale);
            c[0] = c[0].signum() * c[0].abs().max(FIRST_COEFFICIENT_MIN);
            c
        })
        .collect();
    let (zones, mut velocities) = match config.delay_mode {
        DelayMode::Shared => {
            let zone = span / 2.0 + random.uniform(-IZ_SPREAD_SHARED, IZ_SPREAD_SHARED) * span;
            let velocity = random.uniform(config.velocity_m_s[0], config.velocity_m_s[1]);
            (vec![zone; count], vec![velocity; count])
        }
        DelayMode::Unit => {
            let zones = uniforms(random, [-IZ_SPREAD_UNIT, IZ_SPREAD_UNIT], count)
                .into_iter()
                .map(|f| span / 2.0 + f * span)
                .collect();
            (zones, uniforms(random, config.velocity_m_s, count))
        }
    };
    let shape_drift = normals(random, count * channels * 3);

    // Travel times from the innervation zone (m/s == mm/ms, so ms), distances to the
    // territory centres (mm), amplitude factors and best channels.
    let travel: Vec<Vec<f64>> = (0..count)
        .map(|u| {
            xs.iter()
                .map(|x| (x - zones[u]).abs() / velocities[u])
                .collect()
        })
        .collect();
    let distance: Vec<Vec<f64>> = (0..count)
        .map(|u| {
            xs.iter()
                .map(|x| (x - territory_x[u]).hypot(territory_y[u]))
                .collect()
        })
        .collect();
    let gains: Vec<Vec<f64>> = distance
        .iter()
        .map(|d| d.iter().map(|r| (-r / config.decay_mm).exp()).collect())
        .collect();
    let best: Vec<usize> = gains.iter().map(|g| argmax(g)).collect();
    let spread: Vec<f64> = (0..count)
        .map(|u| {
            travel[u]
                .iter()
                .fold(0.0f64, |m, t| m.max((t - travel[u][best[u]]).abs()))
        })
        .collect();
    // Velocities are raised so that the delays stay within the bound.
    let scales: Vec<f64> = match config.delay_mode {
        DelayMode::Shared => {
            let widest = spread.iter().fold(0.0f64, |m, &s| m.max(s));
            vec![(widest / config.max_delay_ms).max(1.0); count]
        }
        DelayMode::Unit => spread
            .iter()
            .map(|s| (s / config.max_delay_ms).max(1.0))
            .collect(),
    };
    for (v, s) in velocities.iter_mut().zip(&scales) {
        *v *= s;
    }
    let delays: Vec<Vec<i64>> = match config.delay_mode {
        DelayMode::Shared => {
            // One integer channel profile, so units differ by exact constants.
            let profile: Vec<i64> = travel[0]
                .iter()
                .map(|t| (t / scales[0] * per_ms).round_ties_even() as i64)
                .collect();
            best.iter()
                .map(|&b| profile.iter().map(|p| p - profile[b]).collect())
                .collect()
        }
        DelayMode::Unit => (0..count)
            .map(|u| {
                travel[u]
                    .iter()
                    .map(|t| {
                        ((t - travel[u][best[u]]) / scales[u] * per_ms).round_ties_even() as i64
                    })
                    .collect()
            })
            .collect(),
    };
    let delays: Vec<Vec<i64>> = delays
        .into_iter()
        .map(|d| {
            d.into_iter()
                .map(|v| v.clamp(-layout.max_delay, layout.max_delay))
                .collect()
        })
        .collect();

    // Templates on the untrimmed window: the best channel's largest |value| at `center`.
    let half = layout.half as i64;
    let times_ms: Vec<f64> = (-half..=half).map(|k| k as f64 / per_ms).collect();
    let taper: Vec<f64> = (-half..=half)
        .map(|k| {
            let x = ((half + 1 - k.abs()) as f64 / per_ms).clamp(0.0, 1.0);
            0.5 - 0.5 * (PI * x).cos()
        })
        .collect();
    let window = layout.window();
    let center = layout.center as i64;
    let mut full = vec![0.0f64; count * window * channels];
    for u in 0..count {
        let best_wave: Vec<f64> = muap(&times_ms, sigmas[u], coefficients[u])
            .iter()
            .zip(&taper)
            .map(|(w, t)| w * t)
            .collect();
        let peak_shift = argmax_abs(&best_wave) as i64 - half;
        for c in 0..channels {
            let wave = if c == best[u] {
                best_wave.clone()
            } else {
                let r = distance[u][c] / config.decay_mm;
                let sigma = sigmas[u] * (1.0 + DRIFT_PER_DECAY * r);
                let drift = &shape_drift[(u * channels + c) * 3..(u * channels + c + 1) * 3];
                let shape = [0, 1, 2].map(|n| coefficients[u][n] + DRIFT_PER_DECAY * r * drift[n]);
                muap(&times_ms, sigma, shape)
                    .iter()
                    .zip(&taper)
                    .map(|(w, t)| w * t)
                    .collect()
            };
            let factor = amplitudes[u] * gains[u][c] / gains[u][best[u]];
            // Non-negative: center >= 2 half + max delay >= half + |delay| + |peak shift|.
            let start = (center - half + delays[u][c] - peak_shift) as usize;
            for (k, w) in wave.iter().enumerate() {
                full[(u * window + start + k) * channels + c] += factor * w;
            }
        }
    }

    // Trim the samples that are negligible for every unit and channel, symmetrically.
    let largest = full.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let significant = |k: usize| {
        (0..count).any(|u| {
            full[(u * window + k) * channels..(u * window + k + 1) * channels]
                .iter()
                .any(|v| v.abs() > TRIM_FRACTION * largest)
        })
    };
    let center = layout.center;
    let first = (0..window).find(|&k| significant(k)).unwrap_or(center);
    let last = (0..window)
        .rev()
        .find(|&k| significant(k))
        .unwrap_or(center);
    let keep = (center - first.min(center)).max(last.max(center) - center) + 1;
    let keep = keep.min(center);
    let template_len = 2 * keep + 1;
    let mut templates = Vec::with_capacity(count * template_len * channels);
    for u in 0..count {
        let rows =
            (u * window + center - keep) * channels..(u * window + center + keep + 1) * channels;
        templates.extend_from_slice(&full[rows]);
    }

    let units = (0..count)
        .map(|u| {
            let size = template_len * channels;
            let peak = templates[u * size..(u + 1) * size]
                .iter()
                .fold(0.0f64, |m, v| m.max(v.abs()));
            EmgUnit {
                position_um: [territory_y[u] * 1000.0, territory_x[u] * 1000.0],
                amplitude_uv: amplitudes[u],
                peak_amplitude_uv: peak,
                sigma_ms: sigmas[u],
                coefficients: coefficients[u],
                innervation_zone_um: zones[u] * 1000.0,
                velocity_m_s: velocities[u],
                best_channel: best[u],
                delays_samples: delays[u].clone(),
                recruitment_threshold: thresholds[u],
            }
        })
        .collect();
    Units {
        units,
        templates,
        template_len,
        template_center: keep,
    }
}

#[cfg(test)]
mod tests {
    use super::{argmax_abs, hermite_function, muap};

    #[test]
    fn hermite_functions_match_their_polynomials() {
        // H1 = 2x, H2 = 4x^2 - 2, H3 = 8x^3 - 12x, times exp(-x^2/2), at x = 1.5.
        let g = (-0.5f64 * 2.25).exp();
        assert!((hermite_function(1, 1.5) - 3.0 * g).abs() < 1e-12);
        assert!((hermite_function(2, 1.5) - 7.0 * g).abs() < 1e-12);
        assert!((hermite_function(3, 1.5) - 9.0 * g).abs() < 1e-12);
    }

    #[test]
    fn muap_is_normalised_to_unit_peak() {
        let times: Vec<f64> = (-150..=150).map(|k| f64::from(k) / 30.0).collect();
        let w = muap(&times, 0.5, [1.0, -0.4, 0.3]);
        let peak = w[argmax_abs(&w)].abs();
        assert!((peak - 1.0).abs() < 1e-12);
        // Order 1 alone is odd: its peaks sit at t = +-sigma.
        let odd = muap(&times, 0.5, [1.0, 0.0, 0.0]);
        let k = argmax_abs(&odd);
        assert!(
            (times[k].abs() - 0.5).abs() < 1e-9,
            "peak at {} ms",
            times[k]
        );
    }
}
