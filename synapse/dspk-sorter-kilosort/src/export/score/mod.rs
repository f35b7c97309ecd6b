//! The EMUsort score (`docs/KILOSORT4.md` §10.2): a number in `[0, 1]` per unit, and their mean
//! for a whole sort, with which EMUsort 1.1.0 ranks the sorts of a parameter sweep and may
//! filter units.
//!
//! A unit's score is the product of six factors built on SpikeInterface 0.104.7 quality metrics
//! (each factor can be switched off, see [`ScoreFactors`]):
//!
//! | factor | metric (SpikeInterface's) |
//! |---|---|
//! | `1 − rp_contamination` | Llobet et al. 2022 contamination, 1 ms refractory, 0 censored |
//! | `presence_ratio` | share of 20 s bins with over half the mean rate's spikes |
//! | `1 − amplitude_cutoff` (0 if undefined) | missed spikes from a 32-bin amplitude histogram |
//! | `1 / (1 + e^(rate + 1e−8 − 200))` | firing rate, spikes per second |
//! | `1 / (1 + e^(range + 1e−8 − 200))` | 95th − 5th percentile of the rate in 0.5 s bins |
//! | `1 − 1 / (1 + e^(snr − 4))` | signal-to-noise ratio, an input (the caller computes it) |
//!
//! The product is taken in EMUsort's grouping, `(1 − rp) × (presence × amplitude) × (rate ×
//! range) × snr`, and the 1e−8 is EMUsort's (`get_emusort_scores` of EMUsort 1.1.0), so scores
//! agree with EMUsort's to the last bits given the same metrics.
//!
//! The metrics follow SpikeInterface's definitions on a one-segment recording, edge cases
//! included (see [`UnitMetrics`] for when each is undefined). A metric SpikeInterface leaves
//! NaN is `None` here; a switched-on factor built on an undefined metric makes the unit's score
//! undefined (NaN × anything in EMUsort), except the amplitude factor, which EMUsort sets to 0.
//! On a recording shorter than one presence bin (20 s) every unit's score is therefore
//! undefined, as in EMUsort, unless the presence factor is off. The amplitude cutoff reads the
//! per-spike amplitudes it is given (SpikeInterface's are the filtered trace at each spike's
//! peak on the unit's best channel); only the shape of their distribution matters.
//! [`run_score`] is numpy's `nanmean` over the units' scores. Reference values from
//! SpikeInterface itself are in `tests/reference/score/` (the script that writes them is
//! beside the file).

mod amplitude;
mod train;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// Which factors enter a unit's score (all on by default, as in EMUsort). A factor switched off
/// counts as 1, and its metric no longer makes the score undefined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScoreFactors {
    /// `1 − rp_contamination`.
    pub rp_contamination: bool,
    /// `presence_ratio`.
    pub presence_ratio: bool,
    /// `1 − amplitude_cutoff` (0 when undefined).
    pub amplitude_cutoff: bool,
    /// The firing-rate sigmoid.
    pub firing_rate: bool,
    /// The firing-range sigmoid.
    pub firing_range: bool,
    /// The SNR sigmoid.
    pub snr: bool,
}

impl Default for ScoreFactors {
    fn default() -> Self {
        Self {
            rp_contamination: true,
            presence_ratio: true,
            amplitude_cutoff: true,
            firing_rate: true,
            firing_range: true,
            snr: true,
        }
    }
}

/// The score's parameters, with EMUsort 1.1.0's values as defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScoreSettings {
    /// The factors that enter the score.
    pub factors: ScoreFactors,
    /// Refractory period of the contamination, ms (1.0).
    pub refractory_ms: f64,
    /// Censored period of the contamination, ms (0.0).
    pub censored_ms: f64,
    /// Presence-ratio bin, s (20.0).
    pub presence_bin_s: f64,
    /// A presence bin counts when it holds more than `⌊rate · bin · ratio⌋` spikes (0.5;
    /// SpikeInterface's `mean_fr_ratio_thresh`).
    pub presence_mean_rate_ratio: f64,
    /// Bins of the amplitude histogram (32).
    pub amplitude_bins: usize,
    /// Gaussian smoothing of the amplitude histogram, in bins (3.0; SpikeInterface's
    /// `histogram_smoothing_value`).
    pub amplitude_smoothing_bins: f64,
    /// The amplitude cutoff is undefined below this many spikes per histogram bin (4.0;
    /// SpikeInterface's `amplitudes_bins_min_ratio`).
    pub amplitude_bins_min_ratio: f64,
    /// Firing-range bin, s (0.5).
    pub firing_range_bin_s: f64,
    /// Low and high percentiles of the firing range (5, 95).
    pub firing_range_percentiles: [f64; 2],
    /// Midpoint of the firing-rate and firing-range sigmoids, Hz (200.0).
    pub rate_midpoint_hz: f64,
    /// Midpoint of the SNR sigmoid (4.0).
    pub snr_midpoint: f64,
}

impl Default for ScoreSettings {
    fn default() -> Self {
        Self {
            factors: ScoreFactors::default(),
            refractory_ms: 1.0,
            censored_ms: 0.0,
            presence_bin_s: 20.0,
            presence_mean_rate_ratio: 0.5,
            amplitude_bins: 32,
            amplitude_smoothing_bins: 3.0,
            amplitude_bins_min_ratio: 4.0,
            firing_range_bin_s: 0.5,
            firing_range_percentiles: [5.0, 95.0],
            rate_midpoint_hz: 200.0,
            snr_midpoint: 4.0,
        }
    }
}

impl ScoreSettings {
    /// Checks every setting on its own (those that depend on the sampling rate are checked
    /// by [`unit_metrics`]).
    ///
    /// # Errors
    ///
    /// [`Error::Setting`] naming the first setting out of range: a negative or non-finite
    /// period, refractory not longer than censored, a non-positive bin, a negative presence
    /// ratio (SpikeInterface raises there), percentiles outside `[0, 100]` or in the wrong
    /// order, a non-finite midpoint, and the amplitude histogram's settings.
    pub fn validate(&self) -> Result<()> {
        let bad = |name: &'static str, reason: String| Err(Error::Setting { name, reason });
        if !(self.censored_ms.is_finite() && self.censored_ms >= 0.0) {
            return bad(
                "censored_ms",
                format!("{} is not a duration", self.censored_ms),
            );
        }
        if !(self.refractory_ms.is_finite() && self.refractory_ms > self.censored_ms) {
            return bad(
                "refractory_ms",
                format!(
                    "{} must be finite and longer than censored_ms {}",
                    self.refractory_ms, self.censored_ms
                ),
            );
        }
        for (name, seconds) in [
            ("presence_bin_s", self.presence_bin_s),
            ("firing_range_bin_s", self.firing_range_bin_s),
        ] {
            if !(seconds.is_finite() && seconds > 0.0) {
                return bad(name, format!("{seconds} is not a positive duration"));
            }
        }
        if !(self.presence_mean_rate_ratio.is_finite() && self.presence_mean_rate_ratio >= 0.0) {
            return bad(
                "presence_mean_rate_ratio",
                format!(
                    "{} is not a non-negative ratio",
                    self.presence_mean_rate_ratio
                ),
            );
        }
        let [low, high] = self.firing_range_percentiles;
        if !((0.0..=100.0).contains(&low) && (0.0..=100.0).contains(&high) && low <= high) {
            return bad(
                "firing_range_percentiles",
                format!("[{low}, {high}] must be in [0, 100], low first"),
            );
        }
        for (name, value) in [
            ("rate_midpoint_hz", self.rate_midpoint_hz),
            ("snr_midpoint", self.snr_midpoint),
        ] {
            if !value.is_finite() {
                return bad(name, format!("{value} is not finite"));
            }
        }
        amplitude::check_settings(
            self.amplitude_bins,
            self.amplitude_smoothing_bins,
            self.amplitude_bins_min_ratio,
        )
    }
}

/// One unit's metrics and score. `None` marks what SpikeInterface leaves NaN.
#[derive(Debug, Clone, PartialEq)]
pub struct UnitMetrics {
    /// Spikes of the unit.
    pub num_spikes: usize,
    /// Pairs of spikes closer than the refractory period (inclusive), counting each pair once.
    pub rp_violations: u64,
    /// Llobet et al.'s contamination in `[0, 1]`; `None` below two spikes.
    pub rp_contamination: Option<f64>,
    /// Fraction of full presence bins in which the unit fires; `None` without spikes or when
    /// the recording is shorter than one bin.
    pub presence_ratio: Option<f64>,
    /// Estimated fraction of missed spikes in `[0, 0.5]`; `None` below
    /// `amplitude_bins · amplitude_bins_min_ratio` spikes.
    pub amplitude_cutoff: Option<f64>,
    /// Spikes per second of recording; `None` without spikes.
    pub firing_rate: Option<f64>,
    /// Spread of the binned rate, Hz; `None` without spikes or when the recording is shorter
    /// than one bin.
    pub firing_range: Option<f64>,
    /// The SNR the caller gave.
    pub snr: f64,
    /// The product of the switched-on factors; `None` when one of them is undefined (a `None`
    /// metric other than the amplitude cutoff, or a NaN SNR).
    pub score: Option<f64>,
}

/// Computes one unit's metrics and EMUsort score.
///
/// `times` are the unit's spike times in samples, sorted, each below `num_samples`;
/// `amplitudes` its per-spike amplitudes in the same order (any sign: negated when their
/// median is negative, as SpikeInterface does); `snr` its signal-to-noise ratio;
/// `sample_rate` in Hz; `num_samples` the recording's length.
///
/// Durations in samples follow SpikeInterface: periods are `round(ms · rate · 1e-3)` (half to
/// even), bins `⌊s · rate⌋`.
///
/// # Errors
///
/// [`Error::Setting`] for settings that [`ScoreSettings::validate`] rejects, or whose bins or
/// periods round to fewer samples than needed at this sampling rate (a bin of 0 samples, a
/// refractory period not longer than the censored one); [`Error::Input`] for a non-positive or
/// non-finite sampling rate, an empty recording, unsorted times, a time at or past the end,
/// amplitudes of another length than the times, or a non-finite amplitude.
pub fn unit_metrics(
    times: &[u64],
    amplitudes: &[f32],
    snr: f64,
    sample_rate: f64,
    num_samples: u64,
    settings: &ScoreSettings,
) -> Result<UnitMetrics> {
    settings.validate()?;
    check_train(times, amplitudes, sample_rate, num_samples)?;
    let samples = |name: &'static str, ms: f64| -> Result<u64> {
        let s = (ms * sample_rate * 1e-3).round_ties_even();
        if s.is_finite() && s < 9.0e15 {
            Ok(s as u64)
        } else {
            Err(Error::Setting {
                name,
                reason: format!("{ms} ms is {s} samples at {sample_rate} Hz"),
            })
        }
    };
    let refractory = samples("refractory_ms", settings.refractory_ms)?;
    let censored = samples("censored_ms", settings.censored_ms)?;
    if refractory <= censored {
        return Err(Error::Setting {
            name: "refractory_ms",
            reason: format!(
                "{refractory} samples at {sample_rate} Hz, not longer than the censored period's \
                 {censored}"
            ),
        });
    }
    let bin = |name: &'static str, seconds: f64| -> Result<u64> {
        let b = (seconds * sample_rate).trunc();
        if (1.0..9.0e15).contains(&b) {
            Ok(b as u64)
        } else {
            Err(Error::Setting {
                name,
                reason: format!("{seconds} s is {b} samples at {sample_rate} Hz"),
            })
        }
    };
    let presence_bin = bin("presence_bin_s", settings.presence_bin_s)?;
    let range_bin = bin("firing_range_bin_s", settings.firing_range_bin_s)?;

    let (rp_violations, rp_contamination) =
        train::rp_violations(times, num_samples, refractory, censored);
    let presence_ratio = train::presence_ratio(
        times,
        sample_rate,
        num_samples,
        settings.presence_bin_s,
        presence_bin,
        settings.presence_mean_rate_ratio,
    );
    let amplitude_cutoff = amplitude::amplitude_cutoff(
        amplitudes,
        settings.amplitude_bins,
        settings.amplitude_smoothing_bins,
        settings.amplitude_bins_min_ratio,
    )?;
    let firing_rate = train::firing_rate(times.len(), sample_rate, num_samples);
    let firing_range = train::firing_range(
        times,
        num_samples,
        settings.firing_range_bin_s,
        range_bin,
        settings.firing_range_percentiles,
    );
    let mut metrics = UnitMetrics {
        num_spikes: times.len(),
        rp_violations,
        rp_contamination,
        presence_ratio,
        amplitude_cutoff,
        firing_rate,
        firing_range,
        snr,
        score: None,
    };
    metrics.score = unit_score(&metrics, settings);
    Ok(metrics)
}

/// The score of a unit whose metrics are known: the product, in EMUsort's grouping (see the
/// module doc), of the factors `settings.factors` switches on, a factor switched off counting
/// as 1; `None` when a switched-on factor is undefined. Exposed for callers that recompute the
/// score with other factors.
#[must_use]
pub fn unit_score(metrics: &UnitMetrics, settings: &ScoreSettings) -> Option<f64> {
    let on = &settings.factors;
    // EMUsort adds 1e-8 to the rate and the range inside their sigmoids.
    let rate_term = |hz: f64| 1.0 / (1.0 + ((hz + 1e-8) - settings.rate_midpoint_hz).exp());
    let factor =
        |switched_on: bool, value: Option<f64>| if switched_on { value } else { Some(1.0) };
    // EMUsort's grouping: type I × (presence × amplitude) × (rate × range) × SNR.
    let type_1 = factor(
        on.rp_contamination,
        metrics.rp_contamination.map(|c| 1.0 - c),
    )?;
    let type_2 = factor(on.presence_ratio, metrics.presence_ratio)?
        * factor(
            on.amplitude_cutoff,
            Some(metrics.amplitude_cutoff.map_or(0.0, |c| 1.0 - c)),
        )?;
    let validity = factor(on.firing_rate, metrics.firing_rate.map(rate_term))?
        * factor(on.firing_range, metrics.firing_range.map(rate_term))?;
    let snr_term = 1.0 - 1.0 / (1.0 + (metrics.snr - settings.snr_midpoint).exp());
    let score = type_1 * type_2 * validity * factor(on.snr, Some(snr_term))?;
    (!score.is_nan()).then_some(score)
}

/// The score of a whole sort: numpy's `nanmean` of the units' scores (undefined ones left
/// out, the sum taken in numpy's pairwise order); `None` when no unit has a score.
#[must_use]
pub fn run_score(units: &[UnitMetrics]) -> Option<f64> {
    let values: Vec<f64> = units.iter().map(|u| u.score.unwrap_or(0.0)).collect();
    let count = units.iter().filter(|u| u.score.is_some()).count();
    (count > 0).then(|| amplitude::pairwise_sum(&values) / count as f64)
}

/// Rejects a spike train the metrics are not defined on.
fn check_train(
    times: &[u64],
    amplitudes: &[f32],
    sample_rate: f64,
    num_samples: u64,
) -> Result<()> {
    let bad = |reason: String| {
        Err(Error::Input {
            what: "unit spike train",
            reason,
        })
    };
    if !(sample_rate.is_finite() && sample_rate > 0.0) {
        return bad(format!("sampling rate {sample_rate} Hz is not positive"));
    }
    if num_samples == 0 {
        return bad("the recording has no samples".into());
    }
    if amplitudes.len() != times.len() {
        return bad(format!(
            "{} amplitudes for {} spikes",
            amplitudes.len(),
            times.len()
        ));
    }
    if let Some(i) = times.windows(2).position(|w| w[1] < w[0]) {
        return bad(format!(
            "spike {} at sample {} comes before spike {i} at {}",
            i + 1,
            times[i + 1],
            times[i]
        ));
    }
    if let Some(&last) = times.last()
        && last >= num_samples
    {
        return bad(format!(
            "spike at sample {last} is past the recording's {num_samples} samples"
        ));
    }
    Ok(())
}
