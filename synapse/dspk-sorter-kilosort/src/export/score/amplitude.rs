//! Amplitude cutoff: the fraction of a unit's spikes estimated missing below the detection
//! threshold, from the shape of its amplitude histogram (Hill et al. 2011, as SpikeInterface's
//! `amplitude_cutoff` computes it).
//!
//! The estimate is discrete: SpikeInterface smooths an integer histogram with
//! `scipy.ndimage.gaussian_filter1d`, whose output keeps the input's integer type (each smoothed
//! bin is truncated toward zero). The functions here reproduce each step's arithmetic — numpy's
//! float32 bin edges and bin assignment, scipy's kernel, its normalisation by numpy's pairwise
//! sum and its accumulation order — so the truncated bins, and hence the result, agree with
//! SpikeInterface's except where `exp` itself differs by an ulp between libm builds and a
//! smoothed bin lies within that ulp of an integer.

use crate::{Error, Result};

/// SpikeInterface's amplitude cutoff of one unit (`spikeinterface.metrics.quality.misc_metrics.
/// compute_amplitude_cutoffs` for one unit, with `num_histogram_bins = bins`,
/// `histogram_smoothing_value = smoothing_bins`, `amplitudes_bins_min_ratio = min_ratio`).
///
/// Steps: the amplitudes are negated when their median is negative (the metric expects a
/// positive distribution); `None` (SpikeInterface's NaN) when `amplitudes.len() / bins <
/// min_ratio`, which includes a unit without spikes; otherwise the `bins`-bin histogram over
/// `[min, max]` (numpy `histogram`, widened by 0.5 on each side when every amplitude is equal)
/// is smoothed by a Gaussian of `smoothing_bins` bins (scipy `gaussian_filter1d`, mode
/// `nearest`, truncated at 4 σ, integer output), and the spikes in the smoothed bins above the
/// last bin at least as high as the first one are counted as missed: the result is
/// `missed / (n + missed)`, at most 0.5.
///
/// # Errors
///
/// [`Error::Input`] for a non-finite amplitude, or a range so narrow that the float32 bin edges
/// are not increasing (numpy raises "Too many bins for data range" there); [`Error::Setting`]
/// for `bins == 0`, a non-finite or non-positive `smoothing_bins` or a non-finite `min_ratio`.
pub(super) fn amplitude_cutoff(
    amplitudes: &[f32],
    bins: usize,
    smoothing_bins: f64,
    min_ratio: f64,
) -> Result<Option<f64>> {
    check_settings(bins, smoothing_bins, min_ratio)?;
    if let Some(i) = amplitudes.iter().position(|a| !a.is_finite()) {
        return Err(Error::Input {
            what: "spike amplitudes",
            reason: format!("amplitude {i} is {}", amplitudes[i]),
        });
    }
    if (amplitudes.len() as f64) / (bins as f64) < min_ratio || amplitudes.is_empty() {
        return Ok(None);
    }
    let flip = median_is_negative(amplitudes);
    let values: Vec<f32> = amplitudes
        .iter()
        .map(|&a| if flip { -a } else { a })
        .collect();
    let counts = histogram_f32(&values, bins)?;
    let smoothed = gaussian_smooth_truncated(&counts, smoothing_bins);
    // The last bin at least as high as the first one; bin 0 qualifies, so there is one.
    let first = smoothed[0];
    let last_high = smoothed.iter().rposition(|&v| v >= first).unwrap_or(0);
    let missed: i64 = smoothed[last_high + 1..].iter().sum();
    let fraction = missed as f64 / (values.len() as i64 + missed) as f64;
    Ok(Some(fraction.min(0.5)))
}

/// Rejects settings under which SpikeInterface's computation fails or divides by zero.
pub(super) fn check_settings(bins: usize, smoothing_bins: f64, min_ratio: f64) -> Result<()> {
    if bins == 0 {
        return Err(Error::Setting {
            name: "amplitude_bins",
            reason: "the amplitude histogram needs at least one bin".into(),
        });
    }
    if !(smoothing_bins.is_finite() && smoothing_bins > 0.0) {
        return Err(Error::Setting {
            name: "amplitude_smoothing_bins",
            reason: format!("{smoothing_bins} is not a positive width"),
        });
    }
    if !min_ratio.is_finite() {
        return Err(Error::Setting {
            name: "amplitude_bins_min_ratio",
            reason: format!("{min_ratio} is not finite"),
        });
    }
    Ok(())
}

/// Whether numpy's `median` of the (finite, non-empty) amplitudes is negative: the middle
/// value, or the mean of the two middle values, whose sign is that of their exact sum.
fn median_is_negative(amplitudes: &[f32]) -> bool {
    let mut sorted = amplitudes.to_vec();
    sorted.sort_by(f32::total_cmp);
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2] < 0.0
    } else {
        f64::from(sorted[n / 2 - 1]) + f64::from(sorted[n / 2]) < 0.0
    }
}

/// numpy's `histogram(values, bins)` of float32 values (finite, non-empty): edges from
/// `linspace(min, max, bins + 1)` evaluated in float32 (`i · step + min`, the last edge `max`),
/// each value placed by numpy's estimate `((v − min) / (max − min)) · bins` and its one-step
/// correction against the edges; bins are half-open except the last, which is closed.
pub(super) fn histogram_f32(values: &[f32], bins: usize) -> Result<Vec<u64>> {
    let (mut lo, mut hi) = values
        .iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
    if lo == hi {
        lo -= 0.5;
        hi += 0.5;
    }
    let div = bins as f32;
    let delta = hi - lo;
    let step = delta / div;
    let mut edges: Vec<f32> = (0..=bins)
        .map(|i| {
            if step == 0.0 {
                (i as f32 / div) * delta + lo
            } else {
                i as f32 * step + lo
            }
        })
        .collect();
    edges[bins] = hi;
    if edges.windows(2).any(|w| w[0] >= w[1]) {
        return Err(Error::Input {
            what: "spike amplitudes",
            reason: format!(
                "the range [{lo}, {hi}] is too narrow for {bins} float32 bins (numpy raises \
                 \"Too many bins for data range\")"
            ),
        });
    }
    let mut counts = vec![0u64; bins];
    for &v in values {
        let estimate = ((v - lo) / delta) * div;
        let mut index = (estimate as usize).min(bins);
        if index == bins {
            index -= 1;
        }
        if v < edges[index] {
            index -= 1;
        } else if v >= edges[index + 1] && index != bins - 1 {
            index += 1;
        }
        counts[index] += 1;
    }
    Ok(counts)
}

/// scipy's `gaussian_filter1d(counts, sigma, mode="nearest")` on an integer array: the kernel
/// `exp(−0.5/σ² · x²)` for `x` in `−r..=r`, `r = ⌊4σ + 0.5⌋`, divided by its numpy sum; each
/// output starts from the centre term and adds the symmetric pairs from the farthest in,
/// samples beyond the ends repeating the end values; the result is truncated to an integer.
pub(super) fn gaussian_smooth_truncated(counts: &[u64], sigma: f64) -> Vec<i64> {
    let radius = (4.0 * sigma + 0.5) as usize;
    let sigma2 = sigma * sigma;
    let raw: Vec<f64> = (0..=2 * radius)
        .map(|i| {
            let x = i as f64 - radius as f64;
            (-0.5 / sigma2 * (x * x)).exp()
        })
        .collect();
    let total = pairwise_sum(&raw);
    let weights: Vec<f64> = raw.iter().map(|w| w / total).collect();
    let n = counts.len() as isize;
    let at = |k: isize| counts[k.clamp(0, n - 1) as usize] as f64;
    (0..n)
        .map(|i| {
            let mut acc = at(i) * weights[radius];
            for d in (1..=radius).rev() {
                let d_signed = d as isize;
                acc += (at(i - d_signed) + at(i + d_signed)) * weights[radius - d];
            }
            // Non-negative and far below 2^63: the cast truncates like scipy's C cast.
            acc as i64
        })
        .collect()
}

/// numpy's pairwise summation of a float64 array (`np.sum` on a contiguous array): plain
/// accumulation below 8 values, eight interleaved partial sums up to 128, halves above that
/// (split at a multiple of 8).
pub(super) fn pairwise_sum(values: &[f64]) -> f64 {
    let n = values.len();
    if n < 8 {
        values.iter().fold(0.0, |acc, v| acc + v)
    } else if n <= 128 {
        let mut partial = [0.0f64; 8];
        partial.copy_from_slice(&values[..8]);
        let whole = n - n % 8;
        for chunk in values[8..whole].chunks_exact(8) {
            for (p, v) in partial.iter_mut().zip(chunk) {
                *p += v;
            }
        }
        let mut sum = ((partial[0] + partial[1]) + (partial[2] + partial[3]))
            + ((partial[4] + partial[5]) + (partial[6] + partial[7]));
        for v in &values[whole..] {
            sum += v;
        }
        sum
    } else {
        let mut half = n / 2;
        half -= half % 8;
        pairwise_sum(&values[..half]) + pairwise_sum(&values[half..])
    }
}
