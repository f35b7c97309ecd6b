//! The EMUsort score of a finished sort ([`score`](crate::export::score) per unit): each unit's SNR
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

use crate::export::phy::inverse_with_ridge;
use crate::export::score::{ScoreSettings, UnitMetrics, unit_metrics};
use crate::export::sorting::Sorting;
use crate::preprocessing::PreprocessingFit;
use crate::{Error, Result};

/// Where a unit's mean waveform peaks in the preprocessed (unwhitened) data: its template
/// unwhitened by `Wrot⁻¹` (the inverse `whitening_mat_inv.npy` holds), at its largest
/// magnitude (the first on ties).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct UnitPeak {
    /// The best channel (index into the sorted channels).
    pub channel: usize,
    /// The template sample of the peak (the spike time is at `nt0min`).
    pub sample: usize,
    /// The peak's magnitude, in the recording's units after preprocessing.
    pub magnitude: f64,
}

/// Each unit's [`UnitPeak`].
///
/// # Errors
///
/// [`Error::Input`] when the whitening matrix cannot be inverted or does not match the
/// sorting's channels.
pub(crate) fn unit_peaks(sorting: &Sorting, fit: &PreprocessingFit) -> Result<Vec<UnitPeak>> {
    let c = sorting.channels;
    let dense = fit.whitening.dense();
    if dense.len() != c * c {
        return Err(Error::Input {
            what: "unit peaks",
            reason: format!(
                "a whitening matrix of {} values for {c} channels",
                dense.len()
            ),
        });
    }
    let inverse = inverse_with_ridge(&dense, c).ok_or_else(|| Error::Input {
        what: "unit peaks",
        reason: "the whitening matrix cannot be inverted".to_string(),
    })?;
    let nt = sorting.nt;
    Ok(sorting
        .templates
        .chunks_exact(nt * c)
        .map(|template| {
            // Unwhitened: raw[t, i] = sum_j inverse[i, j] white[t, j].
            let mut best = UnitPeak {
                channel: 0,
                sample: sorting.nt0min,
                magnitude: 0.0,
            };
            for (t, row) in template.chunks_exact(c).enumerate() {
                for i in 0..c {
                    let raw: f64 = (0..c).map(|j| inverse[i * c + j] * f64::from(row[j])).sum();
                    if raw.abs() > best.magnitude {
                        best = UnitPeak {
                            channel: i,
                            sample: t,
                            magnitude: raw.abs(),
                        };
                    }
                }
            }
            best
        })
        .collect())
}

/// Each unit's SNR (see the module doc): its [`UnitPeak`]'s magnitude over its channel's
/// standard deviation.
///
/// # Errors
///
/// As [`unit_peaks`]; [`Error::Input`] when the fit's channel deviations do not match.
pub(crate) fn unit_snr(sorting: &Sorting, fit: &PreprocessingFit) -> Result<Vec<f64>> {
    if fit.channel_std.len() != sorting.channels {
        return Err(Error::Input {
            what: "unit SNR",
            reason: format!(
                "{} channel deviations for {} channels",
                fit.channel_std.len(),
                sorting.channels
            ),
        });
    }
    Ok(unit_peaks(sorting, fit)?
        .iter()
        .map(|peak| {
            let noise = f64::from(fit.channel_std[peak.channel]);
            if noise > 0.0 {
                peak.magnitude / noise
            } else {
                0.0
            }
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
pub(crate) fn unit_scores(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preprocessing::FitKey;
    use crate::{KilosortSettings, SortProbe};

    #[test]
    fn peaks_are_found_on_the_unwhitened_template() {
        // Wrot = diag(2, 0.5): unwhitening halves channel 0 and doubles channel 1.
        let whitening = dspk_ops::linalg::zca(&[0.25, 0.0, 0.0, 4.0], 2, 0.0).unwrap();
        let probe = SortProbe::line(vec![0, 1], 2.0).unwrap();
        let fit = PreprocessingFit {
            offsets: vec![0.0; 2],
            whitening,
            channel_std: vec![1.0, 2.0],
            delays: None,
            key: FitKey::new(100, 30_000.0, &probe, &KilosortSettings::default()),
        };
        let sorting = Sorting {
            channels: 2,
            nt: 3,
            nt0min: 1,
            // [t, c]: the whitened peak is channel 0 at t = 1, the unwhitened one channel 1 at
            // t = 2 (0.9 * 2 = 1.8 > 3.0 / 2).
            templates: vec![1.0, 0.3, -3.0, 0.5, 0.0, 0.9],
            labels: vec![crate::export::sorting::UnitLabel::Good],
            ..Sorting::default()
        };
        let peaks = unit_peaks(&sorting, &fit).unwrap();
        assert_eq!((peaks[0].channel, peaks[0].sample), (1, 2));
        assert!((peaks[0].magnitude - 1.8).abs() < 1e-4, "{peaks:?}");
        let snr = unit_snr(&sorting, &fit).unwrap();
        assert!((snr[0] - 0.9).abs() < 1e-4, "{snr:?}");
        let short = PreprocessingFit {
            channel_std: vec![1.0],
            ..fit
        };
        assert!(unit_snr(&sorting, &short).is_err());
    }
}
