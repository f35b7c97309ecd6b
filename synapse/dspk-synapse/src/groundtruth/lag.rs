//! Lag alignment of a sorting before comparison: each sorted cluster shifted by the one
//! constant lag that lines it up best with a ground-truth unit, as the project's `score.py
//! --max-lag-ms` does.
//!
//! A sorter may time its spikes on another landmark of the waveform than the ground truth
//! (another channel, another phase of a multiphasic potential, delay-aligned channels): its
//! times are then off by a constant per unit, and a comparison within 0.4 ms would miss them
//! all. [`align_lags`] finds and removes that constant; [`compare_to_ground_truth`] then scores
//! the shifted trains as usual.
//!
//! [`compare_to_ground_truth`]: super::compare_to_ground_truth

use dspk_core::SampleRate;

use super::trains::SpikeTrains;
use crate::{Error, Result};

/// The lag chosen for one sorted cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterLag {
    /// The lag removed, samples: the cluster's spikes moved from `t` to `t - lag` (positive:
    /// the sorter reported the spikes late).
    pub lag_samples: i64,
    /// The ground-truth unit (index in its unit order) the lag lines the cluster up with;
    /// `None` if no spike of the cluster lies within the lag range of any ground-truth spike
    /// (the lag is then 0).
    pub gt_unit: Option<usize>,
    /// Pairs of (cluster spike, ground-truth spike) within `+-delta` of the chosen lag.
    pub coincidences: u64,
    /// Spikes that the shift would have moved before sample 0, kept at sample 0.
    pub clamped: usize,
}

/// A sorting shifted by [`align_lags`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LagAlignment {
    /// The shifted trains, in the sorting's unit order and with its ids.
    pub trains: SpikeTrains,
    /// The lag of each sorted cluster, in the same order.
    pub lags: Vec<ClusterLag>,
}

/// Counts of `s - g` over every pair of `sorted` and `truth` spikes with `|s - g| <= max_lag`
/// (index `s - g + max_lag`): the cross-correlogram of the two trains (score.py's
/// `lag_histogram`). Both trains sorted.
fn lag_histogram(sorted: &[i64], truth: &[i64], max_lag: i64) -> Vec<u64> {
    let mut histogram = vec![0u64; (2 * max_lag + 1) as usize];
    let mut first = 0;
    for &s in sorted {
        while first < truth.len() && truth[first] < s - max_lag {
            first += 1;
        }
        for &g in truth[first..].iter().take_while(|&&g| g <= s + max_lag) {
            histogram[(s - g + max_lag) as usize] += 1;
        }
    }
    histogram
}

/// The best lag of one histogram: `(coincidences, index)` at the first index `k` maximising
/// `box[k] + 0.5 * tent[k] / (max(tent) + 1)`, with `box[k]` the counts within `+-window`
/// of `k` and `tent[k]` the same weighted by `window + 1 - |d|` (score.py's
/// `np.convolve(h, box, "same")` and `np.convolve(h, tent, "same")`: the box counts the
/// matches at each lag, the tent breaks ties on a flat top towards its densest centre).
fn best_lag(histogram: &[u64], window: usize) -> (u64, usize) {
    let n = histogram.len();
    let sums = |k: usize| {
        let (mut boxed, mut tent) = (0u64, 0u64);
        let first = k.saturating_sub(window);
        let last = (k + window).min(n - 1);
        for (j, &count) in histogram[first..=last].iter().enumerate() {
            boxed += count;
            tent += (window + 1 - k.abs_diff(first + j)) as u64 * count;
        }
        (boxed, tent)
    };
    let all: Vec<(u64, u64)> = (0..n).map(sums).collect();
    let tent_max = all.iter().map(|&(_, t)| t).max().unwrap_or(0) as f64;
    let mut best = (0u64, 0usize);
    let mut best_score = f64::NEG_INFINITY;
    for (k, &(boxed, tent)) in all.iter().enumerate() {
        let score = boxed as f64 + 0.5 * tent as f64 / (tent_max + 1.0);
        if score > best_score {
            best_score = score;
            best = (boxed, k);
        }
    }
    best
}

/// Shifts each cluster of `sorted` by the constant lag, within `+-max_lag_ms`, that lines up
/// most of its spikes with one unit of `gt`, as `score.py --max-lag-ms` does before scoring.
///
/// The rule (score.py's `align_lags`): with `L = round(max_lag_ms * fs / 1000)` and
/// `w = round(delta_time_ms * fs / 1000)` samples (rounded half to even, as Python's `round`;
/// note that [`delta_frames`](super::delta_frames) truncates instead), for every cluster and
/// every non-empty ground-truth unit the histogram of `s - g` over spike pairs with
/// `|s - g| <= L` is computed; at each lag the pairs within `+-w` of it are counted (a box),
/// and the lag chosen for that unit is the first maximising `box + 0.5 * tent / (max(tent) + 1)`
/// (`tent` the same count weighted by `w + 1 - |d|`, which only breaks ties on a flat top).
/// The cluster takes the lag of the unit with the most pairs in its box, the first unit (in
/// `gt`'s unit order; score.py's is ascending ids, which is the order of
/// [`SpikeTrains::from_labels`]) on ties; a cluster with no pair at all keeps lag 0. The
/// cluster's spikes move from `t` to `t - lag`; a time that would fall below 0 is kept at 0
/// ([`SpikeTrains`] holds no negative sample; score.py keeps it negative).
///
/// One departure: score.py's `np.convolve(.., "same")` returns `max(2L + 1, 2w + 1)` values,
/// so for `w > L` its index-to-lag mapping shifts; here the box and tent are always centred
/// on the lag, which is what it means for `w <= L`. With `max_lag_ms = 0` every lag is 0 and
/// the trains come back unchanged.
///
/// # Errors
///
/// [`Error::Argument`] if `max_lag_ms` or `delta_time_ms` is negative or not finite, or the
/// lag range is more than 10 s.
pub fn align_lags(
    gt: &SpikeTrains,
    sorted: &SpikeTrains,
    sample_rate: SampleRate,
    max_lag_ms: f64,
    delta_time_ms: f64,
) -> Result<LagAlignment> {
    /// The widest lag range, ms (the histogram has `2 L + 1` bins).
    const MAX_LAG_MS: f64 = 10_000.0;
    for (name, value) in [("max_lag_ms", max_lag_ms), ("delta_time_ms", delta_time_ms)] {
        if !(value.is_finite() && value >= 0.0) {
            return Err(Error::Argument(format!(
                "{name} must be a finite number of milliseconds >= 0, got {value}"
            )));
        }
    }
    if max_lag_ms > MAX_LAG_MS {
        return Err(Error::Argument(format!(
            "max_lag_ms must be at most {MAX_LAG_MS} ms, got {max_lag_ms}"
        )));
    }
    let fs = sample_rate.as_hz();
    let max_lag = (max_lag_ms * fs / 1000.0).round_ties_even() as i64;
    let window = (delta_time_ms * fs / 1000.0).round_ties_even() as usize;
    let mut lags = Vec::with_capacity(sorted.num_units());
    let mut units = Vec::with_capacity(sorted.num_units());
    for (j, id) in sorted.ids().iter().enumerate() {
        let train = sorted.train(j);
        let mut best = (0u64, 0i64, None);
        for u in 0..gt.num_units() {
            let truth = gt.train(u);
            if truth.is_empty() {
                continue;
            }
            let histogram = lag_histogram(train, truth, max_lag);
            let (coincidences, k) = best_lag(&histogram, window);
            if coincidences > best.0 {
                best = (coincidences, k as i64 - max_lag, Some(u));
            }
        }
        let (coincidences, lag, gt_unit) = best;
        let mut clamped = 0;
        let shifted: Vec<i64> = train
            .iter()
            .map(|&t| {
                let moved = t.saturating_sub(lag);
                if moved < 0 {
                    clamped += 1;
                }
                moved.max(0)
            })
            .collect();
        lags.push(ClusterLag {
            lag_samples: lag,
            gt_unit,
            coincidences,
            clamped,
        });
        units.push((id.clone(), shifted));
    }
    Ok(LagAlignment {
        trains: SpikeTrains::new(units)?,
        lags,
    })
}

#[cfg(test)]
mod tests {
    use super::{best_lag, lag_histogram};

    #[test]
    fn histogram_counts_every_pair_within_the_range() {
        // Pairs: 10-8 = 2, 10-12 = -2, 20-19 = 1, 20-23 = -3 (out of range 2), 30-30 = 0.
        let h = lag_histogram(&[10, 20, 30], &[8, 12, 19, 23, 30], 2);
        assert_eq!(h, vec![1, 0, 1, 1, 1]);
    }

    #[test]
    fn best_lag_prefers_the_centre_of_a_flat_top() {
        // Window 1: boxes [2, 3, 3, 2, 1, 0, 0], a flat top at indices 1 and 2.
        let h = [1, 1, 1, 1, 0, 0, 0];
        let (count, k) = best_lag(&h, 1);
        assert_eq!(count, 3);
        // Boxes at 1 and 2 are 3; tents 4 (1+2+1) and 4: the first wins.
        assert_eq!(k, 1);
        let (count, k) = best_lag(&[0, 0, 5, 0, 0], 1);
        assert_eq!((count, k), (5, 2));
    }
}
