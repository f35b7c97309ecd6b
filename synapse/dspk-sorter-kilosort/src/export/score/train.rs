//! Spike-train quality metrics of one unit, as SpikeInterface 0.104.7 computes them on a
//! one-segment recording: refractory-period violations and contamination, presence ratio,
//! firing rate and firing range.
//!
//! Spike times are sample indices, sorted, below `num_samples`. Durations follow SpikeInterface:
//! a recording lasts `num_samples / sample_rate` seconds; a bin of `s` seconds is
//! `⌊s · sample_rate⌋` samples (Python's `int`), and time bins start at sample 0, the partial
//! bin at the end of the recording being dropped (bin edges `0, b, 2b, …, ⌊N/b⌋·b`, the last
//! bin closed like numpy's `histogram`).

/// Refractory-period violations and contamination of one unit (SpikeInterface's
/// `compute_refrac_period_violations`, the contamination of Llobet et al. 2022).
///
/// `refractory` and `censored` are the periods in samples (SpikeInterface rounds
/// `ms · sample_rate · 1e-3` half to even). A violation is a pair of spikes `i < j` with
/// `t_j − t_i ≤ refractory` (equal times included; the censored period does not remove pairs,
/// as in SpikeInterface). With `n` spikes, `v` violations and `N` samples, the contamination is
/// `1 − √(1 − v·(N − 2·n·censored) / (n²·(refractory − censored)))`, and 1 when the root's
/// argument is negative; `None` (SpikeInterface's NaN) below two spikes. The caller guarantees
/// `refractory > censored`.
#[must_use]
pub(super) fn rp_violations(
    times: &[u64],
    num_samples: u64,
    refractory: u64,
    censored: u64,
) -> (u64, Option<f64>) {
    let mut violations = 0u64;
    let mut first = 0usize;
    for (j, &t) in times.iter().enumerate() {
        while t - times[first] > refractory {
            first += 1;
        }
        violations += (j - first) as u64;
    }
    let n = times.len() as i128;
    if n <= 1 {
        return (violations, None);
    }
    // Integers as SpikeInterface has them (exact below 2^53, which a recording of days keeps),
    // converted to float64 for the division as numpy's int64 true division does.
    let numerator =
        i128::from(violations) * (i128::from(num_samples) - 2 * n * i128::from(censored));
    let denominator = n * n * (i128::from(refractory) - i128::from(censored));
    let root = 1.0 - numerator as f64 / denominator as f64;
    let contamination = if root < 0.0 { 1.0 } else { 1.0 - root.sqrt() };
    (violations, Some(contamination))
}

/// Presence ratio of one unit (SpikeInterface's `compute_presence_ratios` with
/// `bin_duration_s = bin_samples / sample_rate` rounded down to samples and
/// `mean_fr_ratio_thresh = mean_rate_ratio`): the fraction of full bins holding more than
/// `⌊rate · bin_s · mean_rate_ratio⌋` spikes, where `rate` is the unit's mean rate over the
/// whole recording (spikes in the dropped partial bin count toward the rate, not toward a bin).
///
/// `None` (NaN) when the recording is shorter than one bin or the unit has no spike.
#[must_use]
pub(super) fn presence_ratio(
    times: &[u64],
    sample_rate: f64,
    num_samples: u64,
    bin_s: f64,
    bin_samples: u64,
    mean_rate_ratio: f64,
) -> Option<f64> {
    if num_samples < bin_samples || times.is_empty() {
        return None;
    }
    let counts = bin_counts(times, num_samples, bin_samples);
    let rate = times.len() as f64 / (num_samples as f64 / sample_rate);
    let threshold = (rate * bin_s * mean_rate_ratio).floor();
    let present = counts.iter().filter(|&&c| c as f64 > threshold).count();
    Some(present as f64 / counts.len() as f64)
}

/// Firing rate of one unit in spikes per second (SpikeInterface's `compute_firing_rates`):
/// spikes over `num_samples / sample_rate`; `None` (NaN) without spikes.
#[must_use]
pub(super) fn firing_rate(num_spikes: usize, sample_rate: f64, num_samples: u64) -> Option<f64> {
    (num_spikes > 0).then(|| num_spikes as f64 / (num_samples as f64 / sample_rate))
}

/// Firing range of one unit (SpikeInterface's `compute_firing_ranges`): the unit's rate in each
/// full bin (`count / bin_s`), then numpy's `percentile(rates, high) − percentile(rates, low)`
/// (linear interpolation). `None` (NaN) without spikes or when the recording is shorter than
/// one bin.
#[must_use]
pub(super) fn firing_range(
    times: &[u64],
    num_samples: u64,
    bin_s: f64,
    bin_samples: u64,
    percentiles: [f64; 2],
) -> Option<f64> {
    if times.is_empty() || num_samples < bin_samples {
        return None;
    }
    let mut rates: Vec<f64> = bin_counts(times, num_samples, bin_samples)
        .into_iter()
        .map(|c| c as f64 / bin_s)
        .collect();
    rates.sort_by(f64::total_cmp);
    Some(percentile_linear(&rates, percentiles[1]) - percentile_linear(&rates, percentiles[0]))
}

/// Spike counts in the full bins `[k·b, (k+1)·b)` of a recording of `num_samples` (the last
/// full bin closed at its right edge, later spikes dropped), as numpy's `histogram` with
/// SpikeInterface's integer edges. Needs `num_samples ≥ bin_samples ≥ 1`.
fn bin_counts(times: &[u64], num_samples: u64, bin_samples: u64) -> Vec<u64> {
    let bins = num_samples / bin_samples;
    let end = bins * bin_samples;
    let mut counts = vec![0u64; bins as usize];
    for &t in times.iter().take_while(|&&t| t <= end) {
        counts[((t / bin_samples).min(bins - 1)) as usize] += 1;
    }
    counts
}

/// numpy's `percentile(sorted, q)` with the default linear method on sorted, non-empty,
/// finite values: virtual index `(n − 1) · q/100`, and between neighbours `a`, `b` at fraction
/// `g` the value `a + (b − a)·g`, or `b − (b − a)·(1 − g)` when `g ≥ 0.5` (numpy's `_lerp`).
fn percentile_linear(sorted: &[f64], q: f64) -> f64 {
    let last = sorted.len() - 1;
    let virtual_index = last as f64 * (q / 100.0);
    if virtual_index >= last as f64 {
        return sorted[last];
    }
    if virtual_index <= 0.0 {
        return sorted[0];
    }
    let below = virtual_index.floor();
    let gamma = virtual_index - below;
    let a = sorted[below as usize];
    let b = sorted[below as usize + 1];
    let diff = b - a;
    if gamma >= 0.5 {
        b - diff * (1.0 - gamma)
    } else {
        a + diff * gamma
    }
}
