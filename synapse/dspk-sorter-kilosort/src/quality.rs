//! The EMUsort score of a finished sort ([`score`](crate::score) per unit): each unit's SNR
//! from its template in the preprocessed (unwhitened) data and the channels' noise, its
//! per-spike amplitudes, and its train.
//!
//! Differences from EMUsort, which computes these with a SpikeInterface analyzer on the
//! filtered recording:
//! - the SNR is the unit's mean waveform's largest magnitude on its best channel, unwhitened
//!   (`Wrot⁻¹` applied to the whitened template, the inverse `whitening_mat_inv.npy` holds),
//!   over that channel's standard deviation from the whitening fit; SpikeInterface divides by
//!   a median-absolute-deviation noise level of random chunks, which spikes inflate less, so
//!   our SNR is lower on channels that spike densely;
//! - the amplitudes are Kilosort's per-spike amplitudes (`amplitudes.npy`), not
//!   SpikeInterface's `spike_amplitudes` (the filtered trace at the spike on the best channel):
//!   both scale with the spike's size, which is what the amplitude cutoff looks at.

use crate::fit::PreprocessingFit;
use crate::phy::inverse_with_ridge;
use crate::score::{ScoreSettings, UnitMetrics, unit_metrics};
use crate::sorting::Sorting;
use crate::{Error, Result};

/// Each unit's SNR (see the module doc) and best channel.
///
/// # Errors
///
/// [`Error::Input`] when the whitening matrix cannot be inverted or does not match the
/// sorting's channels.
pub fn unit_snr(sorting: &Sorting, fit: &PreprocessingFit) -> Result<Vec<f64>> {
    let c = sorting.channels;
    let dense = fit.whitening.dense();
    if dense.len() != c * c || fit.channel_std.len() != c {
        return Err(Error::Input {
            what: "unit SNR",
            reason: format!(
                "a whitening matrix of {} values and {} channel deviations for {c} channels",
                dense.len(),
                fit.channel_std.len()
            ),
        });
    }
    let inverse = inverse_with_ridge(&dense, c).ok_or_else(|| Error::Input {
        what: "unit SNR",
        reason: "the whitening matrix cannot be inverted".to_string(),
    })?;
    let nt = sorting.nt;
    let per = nt * c;
    Ok(sorting
        .templates
        .chunks_exact(per)
        .map(|template| {
            // Unwhitened: raw[t, i] = sum_j inverse[i, j] white[t, j].
            let mut best = (0f64, 0usize);
            for t in 0..nt {
                let row = &template[t * c..(t + 1) * c];
                for i in 0..c {
                    let raw: f64 = (0..c).map(|j| inverse[i * c + j] * f64::from(row[j])).sum();
                    if raw.abs() > best.0 {
                        best = (raw.abs(), i);
                    }
                }
            }
            let noise = f64::from(fit.channel_std[best.1]);
            if noise > 0.0 { best.0 / noise } else { 0.0 }
        })
        .collect())
}

/// Every unit's metrics and EMUsort score (`settings`: which factors and their parameters).
/// A unit whose train the metrics refuse (a non-finite amplitude, amplitudes too close
/// together for the cutoff's histogram) gets no metrics and no score rather than failing the
/// sort.
///
/// # Errors
///
/// As [`unit_snr`]; [`Error::Setting`] for settings [`ScoreSettings::validate`] refuses.
pub fn unit_scores(
    sorting: &Sorting,
    fit: &PreprocessingFit,
    settings: &ScoreSettings,
) -> Result<Vec<UnitMetrics>> {
    let snr = unit_snr(sorting, fit)?;
    let units = sorting.num_units();
    let mut times = vec![Vec::new(); units];
    let mut amplitudes = vec![Vec::new(); units];
    for ((&t, &u), &a) in sorting
        .spike_times
        .iter()
        .zip(&sorting.spike_clusters)
        .zip(&sorting.amplitudes)
    {
        times[u as usize].push(u64::try_from(t).unwrap_or(0));
        amplitudes[u as usize].push(a);
    }
    settings.validate()?;
    Ok((0..units)
        .map(|u| {
            unit_metrics(
                &times[u],
                &amplitudes[u],
                snr[u],
                sorting.sample_rate,
                sorting.num_samples,
                settings,
            )
            .unwrap_or(UnitMetrics {
                num_spikes: times[u].len(),
                rp_violations: 0,
                rp_contamination: None,
                presence_ratio: None,
                amplitude_cutoff: None,
                firing_rate: None,
                firing_range: None,
                snr: snr[u],
                score: None,
            })
        })
        .collect())
}
