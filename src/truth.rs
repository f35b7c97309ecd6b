//! A sorting scored against ground truth as the sort examples report it: SpikeInterface's
//! comparison of the sorted units with the true ones, the units found and the mean accuracy,
//! and the bounds a run must reach (`--min-units`, `--min-accuracy`).

use std::fmt;

use dspk::SampleRate;
use dspk::kilosort::sorting::Sorting;
use dspk::synapse::groundtruth::{
    CompareOptions, GroundTruthComparison, MatchMode, Performance, SpikeTrains, UnitCategories,
    compare_to_ground_truth,
};

use crate::Error;

/// A true unit counts as found at this accuracy (SpikeInterface's well-detected score).
pub const WELL_DETECTED: f64 = 0.8;

/// `sorting` compared with the true trains `truth` as SpikeInterface's
/// `compare_sorter_to_ground_truth` does (spikes within 0.4 ms, Hungarian matching).
///
/// # Errors
///
/// Spike trains the comparison refuses.
pub fn compare(
    truth: &SpikeTrains,
    sorting: &Sorting,
    rate: SampleRate,
) -> Result<GroundTruthComparison, dspk::synapse::Error> {
    let tested = sorted_trains(sorting)?;
    compare_to_ground_truth(truth, &tested, rate, &CompareOptions::default())
}

/// The sorting's units as spike trains.
///
/// # Errors
///
/// Spike trains the ground-truth tools refuse.
pub fn sorted_trains(sorting: &Sorting) -> Result<SpikeTrains, dspk::synapse::Error> {
    let labels: Vec<i64> = (sorting.spike_clusters.iter())
        .map(|&c| i64::from(c))
        .collect();
    SpikeTrains::from_labels(&sorting.spike_times, &labels)
}

/// The figures of a comparison the sort examples print and bound; shown as two lines,
/// `found:` (true units at accuracy >= [`WELL_DETECTED`] of all, the mean accuracy, recall and
/// precision) and `units:` (the sorted units' categories).
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// True units whose Hungarian match reaches [`WELL_DETECTED`] accuracy.
    pub found: usize,
    /// True units.
    pub units: usize,
    /// The mean over true units (Hungarian match).
    pub mean: Performance,
    /// The sorted units' categories.
    pub categories: UnitCategories,
}

impl Summary {
    /// The summary of `comparison`.
    #[must_use]
    pub fn of(comparison: &GroundTruthComparison) -> Self {
        let performance = comparison.performance(MatchMode::Hungarian);
        Self {
            found: (performance.iter())
                .filter(|p| p.accuracy >= WELL_DETECTED)
                .count(),
            units: performance.len(),
            mean: comparison.mean_performance(MatchMode::Hungarian),
            categories: comparison.unit_categories(),
        }
    }

    /// Whether the result reaches `min_units` units found and a mean accuracy of
    /// `min_accuracy` (0 accepts any; a NaN mean misses any bound above 0).
    ///
    /// # Errors
    ///
    /// [`Error::BelowBounds`] naming each bound missed.
    pub fn check(&self, min_units: u64, min_accuracy: f64) -> Result<(), Error> {
        let mut missed = Vec::new();
        if (self.found as u64) < min_units {
            missed.push(format!(
                "{} units at accuracy >= {WELL_DETECTED}, --min-units {min_units}",
                self.found
            ));
        }
        let mean = self.mean.accuracy;
        if min_accuracy > 0.0 && (mean.is_nan() || mean < min_accuracy) {
            missed.push(format!(
                "mean accuracy {mean:.3}, --min-accuracy {min_accuracy}"
            ));
        }
        if missed.is_empty() {
            Ok(())
        } else {
            Err(Error::BelowBounds { missed })
        }
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (mean, c) = (&self.mean, &self.categories);
        writeln!(
            f,
            "found:     {} of {} units with accuracy >= {WELL_DETECTED}; mean accuracy {:.3} \
             (recall {:.3}, precision {:.3})",
            self.found, self.units, mean.accuracy, mean.recall, mean.precision
        )?;
        writeln!(
            f,
            "units:     {} sorted: {} well detected, {} redundant, {} overmerged, {} false \
             positive, {} bad",
            c.num_tested, c.well_detected, c.redundant, c.overmerged, c.false_positive, c.bad
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two true units; the sorted unit `a` finds the first exactly, `b` half of the second.
    fn comparison() -> GroundTruthComparison {
        let train = |start: i64| (0..20).map(|k| start + 3_000 * k).collect::<Vec<i64>>();
        let truth =
            SpikeTrains::new(vec![("0".into(), train(100)), ("1".into(), train(1_600))]).unwrap();
        let half: Vec<i64> = train(1_600).into_iter().step_by(2).collect();
        let tested = SpikeTrains::new(vec![("a".into(), train(100)), ("b".into(), half)]).unwrap();
        let rate = SampleRate::from_hz(30_000).unwrap();
        compare_to_ground_truth(&truth, &tested, rate, &CompareOptions::default()).unwrap()
    }

    #[test]
    fn the_summary_counts_units_found_and_the_bounds_name_what_is_missed() {
        let summary = Summary::of(&comparison());
        assert_eq!((summary.found, summary.units), (1, 2));
        assert!((summary.mean.accuracy - 0.75).abs() < 1e-12, "{summary:?}");
        assert_eq!(
            summary.to_string().lines().next(),
            Some(
                "found:     1 of 2 units with accuracy >= 0.8; mean accuracy 0.750 (recall \
                 0.750, precision 1.000)"
            )
        );
        assert_eq!(summary.check(1, 0.75), Ok(()));
        assert_eq!(summary.check(0, 0.0), Ok(()));
        assert_eq!(
            summary.check(2, 0.9).unwrap_err().to_string(),
            "below the bounds asked for: 1 units at accuracy >= 0.8, --min-units 2; mean \
             accuracy 0.750, --min-accuracy 0.9"
        );
        let nan = Summary {
            mean: Performance {
                accuracy: f64::NAN,
                ..summary.mean
            },
            ..summary
        };
        assert!(nan.check(0, 0.1).is_err());
        assert_eq!(nan.check(0, 0.0), Ok(()));
    }
}
