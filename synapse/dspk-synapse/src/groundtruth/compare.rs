//! Comparison of a sorting with ground-truth spike trains, as SpikeInterface's
//! `compare_sorter_to_ground_truth` computes it.

use dspk_core::SampleRate;

use super::hungarian::linear_sum_assignment;
use super::trains::SpikeTrains;
use crate::{Error, Result};

/// Thresholds of a comparison; the defaults are SpikeInterface's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompareOptions {
    /// Spikes at most this many milliseconds apart coincide (converted to whole samples by
    /// truncation, see [`delta_frames`]).
    ///
    /// > default: 0.4
    pub delta_time_ms: f64,
    /// The least agreement of a Hungarian match.
    ///
    /// > default: 0.5
    pub match_score: f64,
    /// The least agreement of a best match.
    ///
    /// > default: 0.1
    pub chance_score: f64,
    /// The least agreement of a well-detected tested unit.
    ///
    /// > default: 0.8
    pub well_detected_score: f64,
    /// An unmatched tested unit whose best agreement reaches this is redundant, below it a
    /// false positive.
    ///
    /// > default: 0.2
    pub redundant_score: f64,
    /// A tested unit with agreement above this with two or more ground-truth units is
    /// overmerged.
    ///
    /// > default: 0.2
    pub overmerged_score: f64,
}

impl Default for CompareOptions {
    fn default() -> Self {
        Self {
            delta_time_ms: 0.4,
            match_score: 0.5,
            chance_score: 0.1,
            well_detected_score: 0.8,
            redundant_score: 0.2,
            overmerged_score: 0.2,
        }
    }
}

/// Which unit pairing the per-unit counts use (SpikeInterface's `match_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchMode {
    /// The Hungarian (optimal one-to-one) match.
    Hungarian,
    /// Each ground-truth unit's best match, on its own (a tested unit may serve several).
    Best,
}

/// The counts of one ground-truth unit against its matched tested unit (SpikeInterface's
/// `count_score` row).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnitCounts {
    /// The matched tested unit (index in the tested sorting), if any.
    pub tested: Option<usize>,
    /// Matched spikes.
    pub true_positives: u64,
    /// Ground-truth spikes not matched.
    pub false_negatives: u64,
    /// Tested spikes not matched.
    pub false_positives: u64,
    /// Spikes of the ground-truth unit.
    pub num_gt: u64,
    /// Spikes of the matched tested unit (0 without a match).
    pub num_tested: u64,
}

/// Performance of one ground-truth unit (SpikeInterface's `get_performance("by_unit")` row),
/// or their mean over units.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Performance {
    /// `tp / (tp + fn + fp)`.
    pub accuracy: f64,
    /// `tp / (tp + fn)`.
    pub recall: f64,
    /// `tp / (tp + fp)`.
    pub precision: f64,
    /// `fp / (tp + fp)`.
    pub false_discovery_rate: f64,
    /// `fn / num_gt`.
    pub miss_rate: f64,
}

/// How many tested units fall in each category (SpikeInterface's `count_units_categories`
/// with `exhaustive_gt=True`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnitCategories {
    /// Ground-truth units.
    pub num_gt: usize,
    /// Tested units.
    pub num_tested: usize,
    /// See [`GroundTruthComparison::well_detected_units`].
    pub well_detected: usize,
    /// See [`GroundTruthComparison::overmerged_units`].
    pub overmerged: usize,
    /// See [`GroundTruthComparison::redundant_units`].
    pub redundant: usize,
    /// See [`GroundTruthComparison::false_positive_units`].
    pub false_positive: usize,
    /// See [`GroundTruthComparison::bad_units`].
    pub bad: usize,
}

/// The coincidence window in samples: `delta_time_ms / 1000 * rate` truncated toward zero, as
/// SpikeInterface's `int(delta_time / 1000 * sampling_frequency)` (0.4 ms at 30 kHz: 12; at
/// 32 kHz: 12.8 -> 12).
///
/// # Errors
///
/// [`Error::Argument`] if `delta_time_ms` is negative or not finite.
pub fn delta_frames(delta_time_ms: f64, sample_rate: SampleRate) -> Result<u64> {
    if !(delta_time_ms.is_finite() && delta_time_ms >= 0.0) {
        return Err(Error::Argument(format!(
            "delta_time must be a finite number of milliseconds >= 0, got {delta_time_ms}"
        )));
    }
    // `as` truncates toward zero (and saturates), as Python's int() of a float does.
    Ok((delta_time_ms / 1000.0 * sample_rate.as_hz()) as u64)
}

/// The match counts `m[i][j]` of ground-truth unit `i` and tested unit `j` (row-major,
/// `gt.num_units() x tested.num_units()`), spikes coinciding within `delta_frames` samples:
/// SpikeInterface's `make_match_count_matrix` (one segment, `ensure_symmetry=False`).
///
/// Both sortings are swept as one spike vector each in time order. For each ground-truth spike,
/// every tested spike within `delta_frames` (inclusive) is visited in order; the pair counts for
/// its unit pair unless that ground-truth spike or that tested spike is the one the unit pair
/// last counted. So a ground-truth spike counts at most once per tested unit; a tested spike
/// can count again after a burst, which the final cap at the tested unit's spike count bounds.
#[must_use]
pub fn match_count_matrix(gt: &SpikeTrains, tested: &SpikeTrains, delta_frames: u64) -> Vec<u64> {
    let (n1, n2) = (gt.num_units(), tested.num_units());
    let mut counts = vec![0u64; n1 * n2];
    let mut last_gt = vec![usize::MAX; n1 * n2];
    let mut last_tested = vec![usize::MAX; n1 * n2];
    let spikes1 = gt.spike_vector();
    let spikes2 = tested.spike_vector();
    let delta = i64::try_from(delta_frames).unwrap_or(i64::MAX);
    let mut first = 0;
    for (k1, &(frame1, unit1)) in spikes1.iter().enumerate() {
        while first < spikes2.len() && spikes2[first].0 < frame1.saturating_sub(delta) {
            first += 1;
        }
        let end = frame1.saturating_add(delta);
        for (k2, &(frame2, unit2)) in spikes2.iter().enumerate().skip(first) {
            if frame2 > end {
                break;
            }
            let cell = unit1 * n2 + unit2;
            if last_gt[cell] != k1 && last_tested[cell] != k2 {
                last_gt[cell] = k1;
                last_tested[cell] = k2;
                counts[cell] += 1;
            }
        }
    }
    let counts2 = tested.spike_counts();
    for row in counts.chunks_exact_mut(n2.max(1)) {
        for (count, &n) in row.iter_mut().zip(&counts2) {
            *count = (*count).min(n as u64);
        }
    }
    counts
}

/// The result of [`compare_to_ground_truth`]: match counts, agreements, matches, per-unit
/// performance and unit categories. Units are indices in the order of the two
/// [`SpikeTrains`] (ids through [`gt_ids`](Self::gt_ids) and [`tested_ids`](Self::tested_ids)).
#[derive(Debug, Clone)]
pub struct GroundTruthComparison {
    options: CompareOptions,
    delta_frames: u64,
    gt_ids: Vec<String>,
    tested_ids: Vec<String>,
    gt_counts: Vec<u64>,
    tested_counts: Vec<u64>,
    match_counts: Vec<u64>,
    agreement: Vec<f64>,
    hungarian_12: Vec<Option<usize>>,
    hungarian_21: Vec<Option<usize>>,
    best_12: Vec<Option<usize>>,
    best_21: Vec<Option<usize>>,
}

/// Compares the `tested` sorting with the ground truth `gt`, both sampled at `sample_rate`:
/// SpikeInterface's `compare_sorter_to_ground_truth(gt, tested, exhaustive_gt=True)` with
/// `agreement_method="count"`.
///
/// For every ground-truth unit `i` and tested unit `j`:
///
/// 1. `m[i][j]`: spikes of `i` and `j` at most `delta_frames` samples apart, counted as
///    SpikeInterface's `make_match_count_matrix` does (both spike vectors swept in time order;
///    a pair counts unless its ground-truth spike or its tested spike was the one last matched
///    for this unit pair; the count is then capped at the tested unit's spike count);
/// 2. agreement `m / (n_i + n_j - m)` (0 when both units are empty);
/// 3. the Hungarian match: the one-to-one assignment with the largest total agreement among
///    agreements of at least `match_score`, keeping only pairs at or above it; and the best
///    match of every unit on either side (largest agreement, at least `chance_score`);
/// 4. per ground-truth unit, `tp = m` of its match, `fn = n_i - tp`, `fp = n_j - tp`, and
///    accuracy `tp / (tp + fn + fp)`, recall `tp / (tp + fn)`, precision `tp / (tp + fp)`,
///    false discovery rate `fp / (tp + fp)`, miss rate `fn / n_i` (all 0 for a unit with no
///    spikes or no true positive);
/// 5. unit categories: well detected, redundant, overmerged, false positive, bad.
///
/// # Errors
///
/// [`Error::Argument`] if `delta_time_ms` is negative or not finite, or a score threshold is
/// not finite.
pub fn compare_to_ground_truth(
    gt: &SpikeTrains,
    tested: &SpikeTrains,
    sample_rate: SampleRate,
    options: &CompareOptions,
) -> Result<GroundTruthComparison> {
    let delta = delta_frames(options.delta_time_ms, sample_rate)?;
    for (name, value) in [
        ("match_score", options.match_score),
        ("chance_score", options.chance_score),
        ("well_detected_score", options.well_detected_score),
        ("redundant_score", options.redundant_score),
        ("overmerged_score", options.overmerged_score),
    ] {
        if !value.is_finite() {
            return Err(Error::Argument(format!(
                "{name} must be finite, got {value}"
            )));
        }
    }
    let (n1, n2) = (gt.num_units(), tested.num_units());
    let gt_counts: Vec<u64> = gt.spike_counts().iter().map(|&n| n as u64).collect();
    let tested_counts: Vec<u64> = tested.spike_counts().iter().map(|&n| n as u64).collect();
    let match_counts = match_count_matrix(gt, tested, delta);
    let mut agreement = vec![0.0f64; n1 * n2];
    for i in 0..n1 {
        for j in 0..n2 {
            let m = match_counts[i * n2 + j];
            let union = gt_counts[i] + tested_counts[j] - m;
            if union > 0 {
                agreement[i * n2 + j] = m as f64 / union as f64;
            }
        }
    }

    // Hungarian match on agreements thresholded at match_score (the rest count as 0).
    let cost: Vec<f64> = agreement
        .iter()
        .map(|&a| if a < options.match_score { 0.0 } else { -a })
        .collect();
    let mut hungarian_12 = vec![None; n1];
    let mut hungarian_21 = vec![None; n2];
    for (i, j) in linear_sum_assignment(&cost, n1, n2)? {
        if agreement[i * n2 + j] >= options.match_score {
            hungarian_12[i] = Some(j);
            hungarian_21[j] = Some(i);
        }
    }

    // Best matches: the first largest agreement of each row / column, if at least chance.
    let best = |scores: &mut dyn Iterator<Item = (usize, f64)>| {
        let mut top: Option<(usize, f64)> = None;
        for (k, score) in scores {
            if top.is_none_or(|(_, s)| score > s) {
                top = Some((k, score));
            }
        }
        top.filter(|&(_, s)| s >= options.chance_score)
            .map(|(k, _)| k)
    };
    let best_12 = (0..n1)
        .map(|i| best(&mut (0..n2).map(|j| (j, agreement[i * n2 + j]))))
        .collect();
    let best_21 = (0..n2)
        .map(|j| best(&mut (0..n1).map(|i| (i, agreement[i * n2 + j]))))
        .collect();

    Ok(GroundTruthComparison {
        options: *options,
        delta_frames: delta,
        gt_ids: gt.ids().to_vec(),
        tested_ids: tested.ids().to_vec(),
        gt_counts,
        tested_counts,
        match_counts,
        agreement,
        hungarian_12,
        hungarian_21,
        best_12,
        best_21,
    })
}

impl GroundTruthComparison {
    /// The options the comparison used.
    #[must_use]
    pub fn options(&self) -> &CompareOptions {
        &self.options
    }

    /// The coincidence window in samples ([`delta_frames`]).
    #[must_use]
    pub fn delta_frames(&self) -> u64 {
        self.delta_frames
    }

    /// The ground-truth unit ids, in row order.
    #[must_use]
    pub fn gt_ids(&self) -> &[String] {
        &self.gt_ids
    }

    /// The tested unit ids, in column order.
    #[must_use]
    pub fn tested_ids(&self) -> &[String] {
        &self.tested_ids
    }

    /// The match counts, row-major `num_gt x num_tested` ([`match_count_matrix`]).
    #[must_use]
    pub fn match_counts(&self) -> &[u64] {
        &self.match_counts
    }

    /// The agreement scores `m / (n_gt + n_tested - m)`, row-major `num_gt x num_tested`
    /// (SpikeInterface's `agreement_scores`).
    #[must_use]
    pub fn agreement_scores(&self) -> &[f64] {
        &self.agreement
    }

    /// The agreement of ground-truth unit `gt` and tested unit `tested`.
    ///
    /// # Panics
    ///
    /// If either index is out of range.
    #[must_use]
    pub fn agreement(&self, gt: usize, tested: usize) -> f64 {
        assert!(
            tested < self.tested_ids.len(),
            "tested unit {tested} out of range"
        );
        self.agreement[gt * self.tested_ids.len() + tested]
    }

    /// The Hungarian match of each ground-truth unit (SpikeInterface's `hungarian_match_12`).
    #[must_use]
    pub fn hungarian_match(&self) -> &[Option<usize>] {
        &self.hungarian_12
    }

    /// The Hungarian match of each tested unit (`hungarian_match_21`).
    #[must_use]
    pub fn hungarian_match_tested(&self) -> &[Option<usize>] {
        &self.hungarian_21
    }

    /// The best match of each ground-truth unit: the tested unit with the largest agreement
    /// (the first one on ties) if it reaches `chance_score` (`best_match_12`).
    #[must_use]
    pub fn best_match(&self) -> &[Option<usize>] {
        &self.best_12
    }

    /// The best match of each tested unit among ground-truth units (`best_match_21`).
    #[must_use]
    pub fn best_match_tested(&self) -> &[Option<usize>] {
        &self.best_21
    }

    /// The counts of each ground-truth unit against its match under `mode`
    /// (SpikeInterface's `count_score`).
    #[must_use]
    pub fn counts(&self, mode: MatchMode) -> Vec<UnitCounts> {
        let matches = match mode {
            MatchMode::Hungarian => &self.hungarian_12,
            MatchMode::Best => &self.best_12,
        };
        let n2 = self.tested_ids.len();
        matches
            .iter()
            .enumerate()
            .map(|(i, &tested)| {
                let num_gt = self.gt_counts[i];
                match tested {
                    Some(j) => {
                        let tp = self.match_counts[i * n2 + j];
                        UnitCounts {
                            tested,
                            true_positives: tp,
                            false_negatives: num_gt - tp,
                            false_positives: self.tested_counts[j] - tp,
                            num_gt,
                            num_tested: self.tested_counts[j],
                        }
                    }
                    None => UnitCounts {
                        tested,
                        true_positives: 0,
                        false_negatives: num_gt,
                        false_positives: 0,
                        num_gt,
                        num_tested: 0,
                    },
                }
            })
            .collect()
    }

    /// The performance of each ground-truth unit under `mode` (SpikeInterface's
    /// `get_performance(method="by_unit")`); all zero for a unit without spikes or without a
    /// true positive.
    #[must_use]
    pub fn performance(&self, mode: MatchMode) -> Vec<Performance> {
        self.counts(mode)
            .iter()
            .map(|c| {
                if c.num_gt == 0 || c.true_positives == 0 {
                    return Performance {
                        accuracy: 0.0,
                        recall: 0.0,
                        precision: 0.0,
                        false_discovery_rate: 0.0,
                        miss_rate: 0.0,
                    };
                }
                let (tp, fn_, fp) = (
                    c.true_positives as f64,
                    c.false_negatives as f64,
                    c.false_positives as f64,
                );
                Performance {
                    accuracy: tp / (tp + fn_ + fp),
                    recall: tp / (tp + fn_),
                    precision: tp / (tp + fp),
                    false_discovery_rate: fp / (tp + fp),
                    miss_rate: fn_ / c.num_gt as f64,
                }
            })
            .collect()
    }

    /// The mean over ground-truth units of [`performance`](Self::performance)
    /// (SpikeInterface's `get_performance(method="pooled_with_average")`); NaN without
    /// ground-truth units.
    #[must_use]
    pub fn mean_performance(&self, mode: MatchMode) -> Performance {
        let units = self.performance(mode);
        let n = units.len() as f64;
        let mean = |f: fn(&Performance) -> f64| units.iter().map(f).sum::<f64>() / n;
        Performance {
            accuracy: mean(|p| p.accuracy),
            recall: mean(|p| p.recall),
            precision: mean(|p| p.precision),
            false_discovery_rate: mean(|p| p.false_discovery_rate),
            miss_rate: mean(|p| p.miss_rate),
        }
    }

    /// Tested units Hungarian-matched with agreement at least `well_detected_score`
    /// (`get_well_detected_units`), in tested order.
    #[must_use]
    pub fn well_detected_units(&self) -> Vec<usize> {
        (0..self.tested_ids.len())
            .filter(|&j| {
                self.hungarian_21[j]
                    .is_some_and(|i| self.agreement(i, j) >= self.options.well_detected_score)
            })
            .collect()
    }

    /// Tested units without a Hungarian match whose best match is none or agrees below
    /// `redundant_score` (`get_false_positive_units`; meaningful when the ground truth holds
    /// every unit of the recording).
    #[must_use]
    pub fn false_positive_units(&self) -> Vec<usize> {
        (0..self.tested_ids.len())
            .filter(|&j| {
                self.hungarian_21[j].is_none()
                    && self.best_21[j]
                        .is_none_or(|i| self.agreement(i, j) < self.options.redundant_score)
            })
            .collect()
    }

    /// Tested units without a Hungarian match whose best ground-truth match `i` agrees at
    /// least `redundant_score` while `i`'s own best match is another unit
    /// (`get_redundant_units`: a ground-truth unit found twice or more).
    #[must_use]
    pub fn redundant_units(&self) -> Vec<usize> {
        (0..self.tested_ids.len())
            .filter(|&j| {
                self.hungarian_21[j].is_none()
                    && self.best_21[j].is_some_and(|i| {
                        self.best_12[i] != Some(j)
                            && self.agreement(i, j) >= self.options.redundant_score
                    })
            })
            .collect()
    }

    /// Tested units agreeing above `overmerged_score` with two or more ground-truth units
    /// (`get_overmerged_units`).
    #[must_use]
    pub fn overmerged_units(&self) -> Vec<usize> {
        (0..self.tested_ids.len())
            .filter(|&j| {
                (0..self.gt_ids.len())
                    .filter(|&i| self.agreement(i, j) > self.options.overmerged_score)
                    .count()
                    > 1
            })
            .collect()
    }

    /// Tested units without a Hungarian match (`get_bad_units`: false positives and
    /// redundant units).
    #[must_use]
    pub fn bad_units(&self) -> Vec<usize> {
        (0..self.tested_ids.len())
            .filter(|&j| self.hungarian_21[j].is_none())
            .collect()
    }

    /// How many units fall in each category (`count_units_categories`).
    #[must_use]
    pub fn unit_categories(&self) -> UnitCategories {
        UnitCategories {
            num_gt: self.gt_ids.len(),
            num_tested: self.tested_ids.len(),
            well_detected: self.well_detected_units().len(),
            overmerged: self.overmerged_units().len(),
            redundant: self.redundant_units().len(),
            false_positive: self.false_positive_units().len(),
            bad: self.bad_units().len(),
        }
    }
}
