//! Export-time post-processing (`docs/KILOSORT4.md` §8.4): from the merged spikes and units to a
//! finished [`Sorting`] — duplicate removal, unit labels and contamination, spike positions and
//! amplitudes, waveform templates, template similarity and the Phy PC features.
//!
//! Host code, one pass over the spikes per step.

use crate::algorithms::ccg::acg_refractory;
use crate::export::shadows::shadow_units;
use crate::export::sorting::{Sorting, UnitLabel};
use crate::merging::{WtW, check_spikes, similarity_matrix};
use crate::spikes::{LearnedChannels, MatchedSpikes};
use crate::{Error, KilosortSettings, Result};

/// Channels per spike in `pc_features.npy` (capped at the probe's channel count).
pub(crate) const PC_CHANNELS: usize = 10;

/// Finishes a sort (§8.4) from the merged spikes (`spikes`, in time order, features on
/// `channels.of(template)`), the unit of each spike (`clusters`), the units' mean features
/// (`units`, `[N, C, P]`, Kilosort's `Wall`), the principal components (`wpca`, `[P, nt]`) and
/// the probe's channel `positions` (µm, `C` of them).
///
/// * Duplicates: walking the spikes in order, a unit's spike is kept iff its sample is at least
///   the unit's last kept sample plus `floor(duplicate_spike_ms · fs / 1000)`; a unit's first
///   spike is always kept. Then, with `min_isi_ms` (dspk's own), walking each unit's kept
///   spikes in order, a spike closer than `floor(min_isi_ms · fs / 1000)` samples to the unit's
///   previous surviving spike is one spike with it: the one of larger amplitude (the norm of
///   its features; the earlier on a tie) survives. `kept` covers every input spike; every
///   other per-spike field holds the kept spikes only, in input order.
/// * Shadows: with `shadow_ms` (dspk's own), the units [`shadow_units`] finds in the kept
///   spikes, with a window of `floor(shadow_ms · fs / 1000)` samples and each unit's size the
///   norm of its `Wall` row, and only units labelled good on their kept spikes (as below)
///   casting shadows, lose every spike; their number is `Sorting::shadow_units`.
/// * Units with no kept spike are dropped and the rest numbered consecutively by old id.
/// * Labels: [`acg_refractory`] with `acg_threshold` on each unit's kept samples over
///   `sample_rate` ([`UnitLabel::Good`] iff refractory), `contamination_pct = 100 R12`.
/// * Spike position: the mean of the coordinates of the spike's feature channels that lie
///   strictly within `position_limit` of its template's best channel (the first of its
///   channel list), weighted by the norm of the spike's features on each (the best channel's
///   position when all those norms are 0, where Kilosort would divide by zero).
/// * Amplitudes: the Frobenius norm of a spike's features; unit amplitudes: of its `Wall` row.
/// * `templates[k, t, c] = Σ_p Wall[k, c, p] wPCA[p, t]`; `similar_templates` is
///   [`similarity_matrix`] of the kept units.
/// * PC features: each unit's [`PC_CHANNELS`] channels of largest norm of its mean features
///   (ties: lower channel first) form `pc_feature_ind`; each spike's features are written on
///   its own unit's channels, `[P, PC_CHANNELS]`, zero on a channel it has no feature on.
///   (Kilosort picks the channels from the mean of all spikes of the templates a unit uses and
///   lets a later unit overwrite the rows of spikes it shares; here every spike belongs to one
///   unit only.)
///
/// Host memory: 1 byte per input spike (`kept`) and, per kept spike, `28 + 4 P PC_CHANNELS`
/// bytes of output (268 at `P = 6`); before that, 8 bytes of trains while labelling and, with
/// `shadow_ms`, 16 while judging shadows.
///
/// # Errors
///
/// [`Error::Input`] when the spikes' fields disagree in length or are not in time order, a
/// spike's unit or template is out of range, the channel lists disagree with the spikes or the
/// probe, `units` is not whole `[C, P]` templates or holds a non-finite value, or `wpca` is not
/// whole rows of `nt`; [`Error::Setting`] when `sample_rate`, `nt0min`, `duplicate_spike_ms`,
/// `min_isi_ms`, `shadow_ms` or `position_limit` is out of range.
#[expect(
    clippy::too_many_arguments,
    reason = "the inputs are the outputs of separate stages; a struct would only rename them"
)]
pub(crate) fn finish_sorting(
    spikes: &MatchedSpikes,
    clusters: &[u32],
    channels: &LearnedChannels,
    units: &[f32],
    wpca: &[f32],
    nt: usize,
    nt0min: usize,
    positions: &[[f32; 2]],
    sample_rate: f64,
    num_samples: u64,
    settings: &KilosortSettings,
) -> Result<Sorting> {
    let wtw = WtW::new(wpca, nt)?;
    let p = wtw.p();
    let c = positions.len();
    check_inputs(spikes, clusters, channels, units, &wtw, c)?;
    check_settings(sample_rate, nt, nt0min, settings)?;
    let n_units = units.len() / (c * p);
    let window = (settings.duplicate_spike_ms * sample_rate / 1000.0).floor() as i64;

    // Duplicates, and the units that keep a spike.
    let mut last_kept: Vec<Option<i64>> = vec![None; n_units];
    let mut kept: Vec<bool> = spikes
        .sample
        .iter()
        .zip(clusters)
        .map(|(&t, &u)| {
            let last = &mut last_kept[u as usize];
            let keep = last.is_none_or(|l| t >= l.saturating_add(window));
            if keep {
                *last = Some(t);
            }
            keep
        })
        .collect();
    if let Some(min_isi_ms) = settings.min_isi_ms {
        let min_isi = (min_isi_ms * sample_rate / 1000.0).floor() as i64;
        keep_larger_within(spikes, clusters, n_units, min_isi, &mut kept);
    }
    // Each unit's auto-correlogram test on its kept spikes: the labels below, and which units
    // may cast shadows (removing a unit leaves every other unit's spikes as they are).
    let acg: Vec<_> = unit_trains(spikes, clusters, &kept, n_units, sample_rate)
        .iter()
        .map(|train| acg_refractory(train, settings.acg_threshold))
        .collect();
    let mut shadows = 0;
    if let Some(shadow_ms) = settings.shadow_ms {
        let window = (shadow_ms * sample_rate / 1000.0).floor() as i64;
        let sizes: Vec<f64> = units.chunks_exact(c * p).map(norm).collect();
        let refractory: Vec<bool> = acg.iter().map(|&(good, _)| good).collect();
        let shadow = shadow_units(
            &spikes.sample,
            clusters,
            &kept,
            &sizes,
            &refractory,
            window,
            num_samples,
        );
        shadows = shadow.iter().filter(|&&s| s).count();
        for (k, &u) in kept.iter_mut().zip(clusters) {
            *k &= !shadow[u as usize];
        }
    }
    let mut has_spike = vec![false; n_units];
    for (&k, &u) in kept.iter().zip(clusters) {
        has_spike[u as usize] |= k;
    }
    let survivors: Vec<usize> = (0..n_units).filter(|&k| has_spike[k]).collect();
    let mut new_id = vec![u32::MAX; n_units];
    for (i, &k) in survivors.iter().enumerate() {
        new_id[k] = i as u32;
    }
    let unit_features: Vec<f32> = survivors
        .iter()
        .flat_map(|&k| units[k * c * p..(k + 1) * c * p].iter().copied())
        .collect();
    let pc_channels = PC_CHANNELS.min(c);
    let pc_feature_ind: Vec<u32> = unit_features
        .chunks_exact(c * p)
        .flat_map(|w| strongest_channels(w, p, pc_channels))
        .collect();

    let mut sorting = Sorting {
        sample_rate,
        num_samples,
        channels: c,
        nt,
        nt0min,
        p,
        pc_channels,
        shadow_units: shadows,
        ..Sorting::default()
    };
    let limit2 = settings.position_limit * settings.position_limit;
    for m in (0..spikes.len()).filter(|&m| kept[m]) {
        let unit = new_id[clusters[m] as usize];
        let template = spikes.template[m];
        let feats = spikes.features_of(m);
        let chans = channels.of(template as usize);
        sorting.spike_times.push(spikes.sample[m]);
        sorting.spike_clusters.push(unit);
        sorting.spike_templates.push(template);
        sorting.amplitudes.push(norm(feats) as f32);
        sorting
            .spike_positions
            .push(position(feats, chans, positions, p, limit2));
        let ind = &pc_feature_ind[unit as usize * pc_channels..(unit as usize + 1) * pc_channels];
        let start = sorting.pc_features.len();
        sorting.pc_features.resize(start + p * pc_channels, 0.0);
        let rows = &mut sorting.pc_features[start..];
        for (i, ch) in ind.iter().enumerate() {
            if let Some(j) = chans.iter().position(|x| x == ch) {
                for q in 0..p {
                    rows[q * pc_channels + i] = feats[j * p + q];
                }
            }
        }
    }
    sorting.kept = kept;
    for &(good, metrics) in survivors.iter().map(|&k| &acg[k]) {
        sorting.labels.push(if good {
            UnitLabel::Good
        } else {
            UnitLabel::Mua
        });
        sorting.contamination_pct.push(100.0 * metrics.r12);
    }

    sorting.unit_amplitudes = unit_features
        .chunks_exact(c * p)
        .map(|w| norm(w) as f32)
        .collect();
    sorting.templates = waveforms(&unit_features, c, &wtw);
    sorting.similar_templates = similarity_matrix(&unit_features, c, &wtw)?;
    sorting.unit_features = unit_features;
    sorting.pc_feature_ind = pc_feature_ind;
    Ok(sorting)
}

/// Each unit's kept spike times in seconds (by old unit id).
fn unit_trains(
    spikes: &MatchedSpikes,
    clusters: &[u32],
    kept: &[bool],
    n_units: usize,
    sample_rate: f64,
) -> Vec<Vec<f64>> {
    let mut trains: Vec<Vec<f64>> = vec![Vec::new(); n_units];
    for m in (0..spikes.len()).filter(|&m| kept[m]) {
        trains[clusters[m] as usize].push(spikes.sample[m] as f64 / sample_rate);
    }
    trains
}

/// Checks the shapes and ranges of the spikes, clusters, channel lists and units.
fn check_inputs(
    spikes: &MatchedSpikes,
    clusters: &[u32],
    channels: &LearnedChannels,
    units: &[f32],
    wtw: &WtW,
    c: usize,
) -> Result<()> {
    let p = wtw.p();
    check_spikes(spikes, p)?;
    if c == 0 || !units.len().is_multiple_of(c * p) {
        return Err(Error::Input {
            what: "unit templates",
            reason: format!("{} values are not whole [{c}, {p}] templates", units.len()),
        });
    }
    if let Some(i) = units.iter().position(|v| !v.is_finite()) {
        return Err(Error::Input {
            what: "unit templates",
            reason: format!("value {i} is {}", units[i]),
        });
    }
    let n_units = units.len() / (c * p);
    if clusters.len() != spikes.len() {
        return Err(Error::Input {
            what: "spike clusters",
            reason: format!("{} labels for {} spikes", clusters.len(), spikes.len()),
        });
    }
    if let Some(m) = clusters.iter().position(|&u| u as usize >= n_units) {
        return Err(Error::Input {
            what: "spike clusters",
            reason: format!("spike {m} has unit {}, of {n_units}", clusters[m]),
        });
    }
    if let Some(m) = spikes.sample.windows(2).position(|w| w[1] < w[0]) {
        return Err(Error::Input {
            what: "matched spikes",
            reason: format!("spike {} comes before spike {m} in time", m + 1),
        });
    }
    if !spikes.is_empty() && channels.nc != spikes.nc() {
        return Err(Error::Input {
            what: "learned channels",
            reason: format!(
                "{} channels per template, the spikes have {}",
                channels.nc,
                spikes.nc()
            ),
        });
    }
    if let Some(m) = spikes
        .template
        .iter()
        .position(|&t| t as usize >= channels.len())
    {
        return Err(Error::Input {
            what: "matched spikes",
            reason: format!(
                "spike {m} has template {}, of {}",
                spikes.template[m],
                channels.len()
            ),
        });
    }
    if let Some(i) = channels.channels.iter().position(|&ch| ch as usize >= c) {
        return Err(Error::Input {
            what: "learned channels",
            reason: format!("entry {i} is channel {}, of {c}", channels.channels[i]),
        });
    }
    Ok(())
}

/// Checks the sample rate, trough index and the export settings.
fn check_settings(
    sample_rate: f64,
    nt: usize,
    nt0min: usize,
    settings: &KilosortSettings,
) -> Result<()> {
    if !(sample_rate.is_finite() && sample_rate > 0.0) {
        return Err(Error::Setting {
            name: "fs",
            reason: format!("the sample rate must be positive, got {sample_rate}"),
        });
    }
    if nt0min >= nt {
        return Err(Error::Setting {
            name: "nt0min",
            reason: format!("the trough index {nt0min} must lie inside the {nt} samples"),
        });
    }
    if !(settings.duplicate_spike_ms.is_finite() && settings.duplicate_spike_ms >= 0.0) {
        return Err(Error::Setting {
            name: "duplicate_spike_ms",
            reason: format!("must be at least 0, got {}", settings.duplicate_spike_ms),
        });
    }
    if let Some(min_isi_ms) = settings.min_isi_ms
        && !(min_isi_ms.is_finite() && min_isi_ms >= 0.0)
    {
        return Err(Error::Setting {
            name: "min_isi_ms",
            reason: format!("must be at least 0 when given, got {min_isi_ms}"),
        });
    }
    if let Some(shadow_ms) = settings.shadow_ms
        && !(shadow_ms.is_finite() && shadow_ms >= 0.0)
    {
        return Err(Error::Setting {
            name: "shadow_ms",
            reason: format!("must be at least 0 when given, got {shadow_ms}"),
        });
    }
    if !(settings.position_limit.is_finite() && settings.position_limit >= 0.0) {
        return Err(Error::Setting {
            name: "position_limit",
            reason: format!("must be at least 0, got {}", settings.position_limit),
        });
    }
    Ok(())
}

/// Of two kept spikes of one unit closer than `min_isi` samples (the later one against the
/// unit's previous surviving spike, in time order), unmarks in `kept` the one of smaller
/// feature norm (the later on a tie). `spikes` is in time order.
fn keep_larger_within(
    spikes: &MatchedSpikes,
    clusters: &[u32],
    n_units: usize,
    min_isi: i64,
    kept: &mut [bool],
) {
    let mut last: Vec<Option<(usize, f64)>> = vec![None; n_units];
    for m in 0..spikes.len() {
        if !kept[m] {
            continue;
        }
        let size = norm(spikes.features_of(m));
        let previous = &mut last[clusters[m] as usize];
        match *previous {
            Some((l, l_size)) if spikes.sample[m] - spikes.sample[l] < min_isi => {
                if size > l_size {
                    kept[l] = false;
                    *previous = Some((m, size));
                } else {
                    kept[m] = false;
                }
            }
            _ => *previous = Some((m, size)),
        }
    }
}

/// Frobenius norm, summed in `f64`.
fn norm(values: &[f32]) -> f64 {
    values
        .iter()
        .map(|&v| f64::from(v) * f64::from(v))
        .sum::<f64>()
        .sqrt()
}

/// The weighted mean position of a spike (see [`finish_sorting`]); `limit2` is the squared
/// position limit.
fn position(
    feats: &[f32],
    chans: &[u32],
    positions: &[[f32; 2]],
    p: usize,
    limit2: f64,
) -> [f32; 2] {
    let best = positions[chans[0] as usize];
    let (mut sw, mut sx, mut sy) = (0.0f64, 0.0f64, 0.0f64);
    for (i, &ch) in chans.iter().enumerate() {
        let [x, y] = positions[ch as usize];
        let dx = f64::from(x) - f64::from(best[0]);
        let dy = f64::from(y) - f64::from(best[1]);
        if dx * dx + dy * dy >= limit2 {
            continue;
        }
        let w = norm(&feats[i * p..(i + 1) * p]);
        sw += w;
        sx += w * f64::from(x);
        sy += w * f64::from(y);
    }
    if sw > 0.0 {
        [(sx / sw) as f32, (sy / sw) as f32]
    } else {
        best
    }
}

/// The `n` channels of largest feature norm of a `[C, P]` template, largest first (ties: lower
/// channel first).
pub(crate) fn strongest_channels(w: &[f32], p: usize, n: usize) -> Vec<u32> {
    let power: Vec<f64> = w
        .chunks_exact(p)
        .map(|row| row.iter().map(|&v| f64::from(v) * f64::from(v)).sum())
        .collect();
    let mut order: Vec<u32> = (0..power.len() as u32).collect();
    order.sort_by(|&a, &b| {
        power[b as usize]
            .total_cmp(&power[a as usize])
            .then(a.cmp(&b))
    });
    order.truncate(n);
    order
}

/// `[N, nt, C]` waveforms of `[N, C, P]` units, `T[k, t, c] = Σ_p W[k, c, p] wPCA[p, t]`.
fn waveforms(units: &[f32], c: usize, wtw: &WtW) -> Vec<f32> {
    let (p, nt, wpca) = (wtw.p(), wtw.nt(), wtw.wpca());
    let mut out = Vec::with_capacity(units.len() / p * nt);
    for w in units.chunks_exact(c * p) {
        for t in 0..nt {
            for row in w.chunks_exact(p) {
                let v: f64 = row
                    .iter()
                    .enumerate()
                    .map(|(q, &f)| f64::from(f) * f64::from(wpca[q * nt + t]))
                    .sum();
                out.push(v as f32);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
