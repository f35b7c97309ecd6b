//! Host precompute of learned-template matching (Kilosort4 §7, "Setup"): each template's
//! nonzero channels, norms, waveforms, the template-template cross-correlations `ctc` and the
//! channels features are taken on.

use super::MatchSettings;
use crate::spikes::LearnedChannels;
use crate::{Error, Result};

/// Everything matching needs about the learned templates, in `f32` for the device (computed
/// in `f64`).
///
/// A template's *slots* are its nonzero channels (some `U[n, p, c] != 0`), ascending, padded
/// to `slots` entries with channel 0 and zero weights: sums over slots equal sums over all
/// channels exactly, because the skipped terms are zero.
#[derive(Debug, Clone)]
pub(super) struct Tables {
    /// Templates `N`.
    pub(super) templates: usize,
    /// Channels `C`.
    pub(super) channels: usize,
    /// Principal components `P`.
    pub(super) pcs: usize,
    /// Template length (odd).
    pub(super) nt: usize,
    /// Trough index inside a template.
    pub(super) nt0min: usize,
    /// Slots per template: the most nonzero channels of any template.
    pub(super) slots: usize,
    /// `[N, slots]`: the slot's channel.
    pub(super) slot_channel: Vec<u32>,
    /// `[N, slots, P]`: `U[n, p, slot_channel]` (0 in padding).
    pub(super) slot_weights: Vec<f32>,
    /// `[N, C]`: the slot of channel `c` in template `n`, `u32::MAX` where `U[n, :, c] = 0`.
    pub(super) slot_of: Vec<u32>,
    /// `[N, slots, nt]`: the waveform `sum_p U[n, p, c] * wPCA[p, j]` on each slot's channel.
    pub(super) waveforms: Vec<f32>,
    /// `[N]`: `nm[n] = sum U[n]^2`.
    pub(super) norms: Vec<f32>,
    /// `[N, N, 2 nt - 1]`: `ctc[n, m, l + nt - 1]`, what a unit of template `n` at column `t`
    /// contributes to the score `B[m, t + l]`: `sum_{p,q} (sum_c U[m, p, c] U[n, q, c]) *
    /// sum_j wPCA[p, j] wPCA[q, j + l]` (Kilosort's `ctc[m, n, l]`; lags `|l| >= nt` are zero
    /// and not stored).
    pub(super) ctc: Vec<f32>,
    /// `[N, nc, P]`: `U[n, :, iCC[i, iU[n]]]` (Kilosort's `Ucc`).
    pub(super) ucc: Vec<f32>,
    /// `wPCA` `[P, nt]`.
    pub(super) wpca: Vec<f32>,
    /// Feature channels of each template.
    pub(super) feature_channels: LearnedChannels,
}

impl Tables {
    /// Checks the inputs and computes the tables (see [`Matcher::new`](super::Matcher::new)
    /// for the arguments).
    pub(super) fn new(
        templates: &[f32],
        n_templates: usize,
        wpca: &[f32],
        nt: usize,
        nt0min: usize,
        positions: &[[f32; 2]],
        settings: &MatchSettings,
    ) -> Result<Self> {
        check_settings(settings)?;
        if nt.is_multiple_of(2) || nt0min >= nt {
            return Err(Error::Input {
                what: "matching templates",
                reason: format!("template length {nt} must be odd and above nt0min {nt0min}"),
            });
        }
        let channels = positions.len();
        if channels == 0 || n_templates == 0 {
            return Err(Error::Input {
                what: "matching templates",
                reason: format!("{n_templates} templates on {channels} channels"),
            });
        }
        if wpca.is_empty() || !wpca.len().is_multiple_of(nt) {
            return Err(Error::Input {
                what: "matching wPCA",
                reason: format!("{} values are not whole rows of {nt}", wpca.len()),
            });
        }
        let pcs = wpca.len() / nt;
        if templates.len() != n_templates * pcs * channels {
            return Err(Error::Input {
                what: "matching templates",
                reason: format!(
                    "{} values, {n_templates} templates x {pcs} PCs x {channels} channels need {}",
                    templates.len(),
                    n_templates * pcs * channels
                ),
            });
        }
        if let Some(i) = templates.iter().position(|v| !v.is_finite()) {
            return Err(Error::Input {
                what: "matching templates",
                reason: format!("value {i} is {}", templates[i]),
            });
        }
        if let Some(i) = wpca.iter().position(|v| !v.is_finite()) {
            return Err(Error::Input {
                what: "matching wPCA",
                reason: format!("value {i} is {}", wpca[i]),
            });
        }
        if let Some(c) = positions
            .iter()
            .position(|p| !p.iter().all(|v| v.is_finite()))
        {
            return Err(Error::Input {
                what: "matching probe",
                reason: format!("channel {c} has position {:?}", positions[c]),
            });
        }
        let u = |n: usize, p: usize, c: usize| f64::from(templates[(n * pcs + p) * channels + c]);

        // Nonzero channels, norms, best channels.
        let mut nonzero: Vec<Vec<usize>> = Vec::with_capacity(n_templates);
        let mut norms = Vec::with_capacity(n_templates);
        let mut best_channel = Vec::with_capacity(n_templates);
        for n in 0..n_templates {
            let energy: Vec<f64> = (0..channels)
                .map(|c| (0..pcs).map(|p| u(n, p, c).powi(2)).sum())
                .collect();
            let total: f64 = energy.iter().sum();
            if total <= 0.0 || !total.is_finite() {
                return Err(Error::Input {
                    what: "matching templates",
                    reason: format!("template {n} has squared norm {total}"),
                });
            }
            // First argmax: a later channel must be strictly larger.
            let mut best = 0;
            for (c, &e) in energy.iter().enumerate() {
                if e > energy[best] {
                    best = c;
                }
            }
            best_channel.push(best);
            norms.push(total);
            nonzero.push(
                (0..channels)
                    .filter(|&c| (0..pcs).any(|p| u(n, p, c) != 0.0))
                    .collect(),
            );
        }
        let slots = nonzero.iter().map(Vec::len).max().unwrap_or(1).max(1);
        let mut slot_channel = vec![0u32; n_templates * slots];
        let mut slot_weights = vec![0.0f32; n_templates * slots * pcs];
        let mut slot_of = vec![u32::MAX; n_templates * channels];
        let mut waveforms = vec![0.0f32; n_templates * slots * nt];
        for (n, chans) in nonzero.iter().enumerate() {
            for (s, &c) in chans.iter().enumerate() {
                slot_channel[n * slots + s] = c as u32;
                slot_of[n * channels + c] = s as u32;
                for p in 0..pcs {
                    slot_weights[(n * slots + s) * pcs + p] = u(n, p, c) as f32;
                }
                for j in 0..nt {
                    let w: f64 = (0..pcs)
                        .map(|p| u(n, p, c) * f64::from(wpca[p * nt + j]))
                        .sum();
                    waveforms[(n * slots + s) * nt + j] = w as f32;
                }
            }
        }

        // WtW[p, q, l + nt - 1] = sum_j wPCA[p, j] wPCA[q, j + l].
        let lags = 2 * nt - 1;
        let mut wtw = vec![0.0f64; pcs * pcs * lags];
        for p in 0..pcs {
            for q in 0..pcs {
                for (li, slot) in wtw[(p * pcs + q) * lags..(p * pcs + q + 1) * lags]
                    .iter_mut()
                    .enumerate()
                {
                    let l = li as isize - (nt as isize - 1);
                    *slot = (0..nt as isize)
                        .filter(|&j| (0..nt as isize).contains(&(j + l)))
                        .map(|j| {
                            f64::from(wpca[p * nt + j as usize])
                                * f64::from(wpca[q * nt + (j + l) as usize])
                        })
                        .sum();
                }
            }
        }
        // ctc: only pairs sharing a channel are nonzero.
        let mut ctc = vec![0.0f32; n_templates * n_templates * lags];
        let mut overlap = vec![0.0f64; pcs * pcs];
        for n in 0..n_templates {
            for m in 0..n_templates {
                overlap.fill(0.0);
                let mut shared = false;
                for &c in &nonzero[n] {
                    if slot_of[m * channels + c] == u32::MAX {
                        continue;
                    }
                    shared = true;
                    for p in 0..pcs {
                        for q in 0..pcs {
                            overlap[p * pcs + q] += u(m, p, c) * u(n, q, c);
                        }
                    }
                }
                if !shared {
                    continue;
                }
                let row = &mut ctc[(n * n_templates + m) * lags..(n * n_templates + m + 1) * lags];
                for (li, value) in row.iter_mut().enumerate() {
                    let sum: f64 = (0..pcs * pcs)
                        .map(|pq| overlap[pq] * wtw[pq * lags + li])
                        .sum();
                    *value = sum as f32;
                }
            }
        }

        // Feature channels: the nc nearest to each template's best channel.
        let nc = settings.nearest_chans.min(channels);
        let mut feature_channels = Vec::with_capacity(n_templates * nc);
        let mut ucc = Vec::with_capacity(n_templates * nc * pcs);
        for (n, &best) in best_channel.iter().enumerate() {
            for c in nearest_channels(positions, best, nc) {
                feature_channels.push(c as u32);
                ucc.extend((0..pcs).map(|p| templates[(n * pcs + p) * channels + c]));
            }
        }
        Ok(Self {
            templates: n_templates,
            channels,
            pcs,
            nt,
            nt0min,
            slots,
            slot_channel,
            slot_weights,
            slot_of,
            waveforms,
            norms: norms.iter().map(|&v| v as f32).collect(),
            ctc,
            ucc,
            wpca: wpca.to_vec(),
            feature_channels: LearnedChannels {
                channels: feature_channels,
                nc,
            },
        })
    }
}

/// Checks the matching settings.
fn check_settings(settings: &MatchSettings) -> Result<()> {
    if !(settings.th_learned.is_finite() && settings.th_learned > 0.0) {
        return Err(Error::Setting {
            name: "Th_learned",
            reason: format!("must be finite and positive, got {}", settings.th_learned),
        });
    }
    if settings.max_peels == 0 {
        return Err(Error::Setting {
            name: "max_peels",
            reason: "must be at least 1".into(),
        });
    }
    if settings.nearest_chans == 0 {
        return Err(Error::Setting {
            name: "nearest_chans",
            reason: "must be at least 1".into(),
        });
    }
    Ok(())
}

/// The `count` channels nearest channel `centre` (itself first), by squared distance, ties by
/// channel index (Kilosort's `iCC[:, centre]`, with a stable order where it has ties).
pub(super) fn nearest_channels(positions: &[[f32; 2]], centre: usize, count: usize) -> Vec<usize> {
    let [x0, y0] = positions[centre];
    let d2 = |c: usize| {
        let [x, y] = positions[c];
        (x - x0).powi(2) + (y - y0).powi(2)
    };
    let mut order: Vec<usize> = (0..positions.len()).collect();
    order.sort_by(|&a, &b| d2(a).total_cmp(&d2(b)).then(a.cmp(&b)));
    order.truncate(count);
    order
}
