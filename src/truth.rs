//! A sorting of generated ground truth as the sort examples run and report it: their flags
//! ([`SortFlags`]), SpikeInterface's comparison of the sorted units with the true ones, the
//! units found and the mean accuracy, and the bounds a run must reach (`--min-units`,
//! `--min-accuracy`).

use std::fmt;

use dspk::SampleRate;
use dspk::kilosort::export::sorting::Sorting;
use dspk::synapse::groundtruth::{
    CompareOptions, GroundTruthComparison, MatchMode, Performance, SpikeTrains, UnitCategories,
    compare_to_ground_truth,
};

use dspk_cli::flags::Reader;
use dspk_cli::settings::parse_set;

use crate::Error;

/// The flags of a sort of generated ground truth, as the `sort` and `emusort` examples take
/// them: the recording's `--seconds`, `--channels`, `--units` and `--seed`, the sorter's
/// `--set KEY=VALUE` pairs, and the bounds `--min-units N` and `--min-accuracy A` (0: none).
#[derive(Debug, Clone, PartialEq)]
pub struct SortFlags {
    /// Seconds of recording.
    pub seconds: u64,
    /// Channels.
    pub channels: u64,
    /// True units.
    pub units: u64,
    /// The generator's seed.
    pub seed: u64,
    /// `--set` pairs, in order.
    pub sets: Vec<(String, String)>,
    /// The fewest units found a run accepts.
    pub min_units: u64,
    /// The lowest mean accuracy a run accepts.
    pub min_accuracy: f64,
    /// The fewest channels `--channels` takes.
    least_channels: u64,
}

impl SortFlags {
    /// The defaults of an example: `seconds`, `channels` (and at least `least_channels`),
    /// `units` and `seed`, no `--set`, no bounds.
    #[must_use]
    pub fn new(
        seconds: u64,
        (channels, least_channels): (u64, u64),
        units: u64,
        seed: u64,
    ) -> Self {
        Self {
            seconds,
            channels,
            units,
            seed,
            sets: Vec::new(),
            min_units: 0,
            min_accuracy: 0.0,
            least_channels,
        }
    }

    /// Reads `flag` and its value from `reader` when it is one of these flags; whether it was.
    ///
    /// # Errors
    ///
    /// The reader's message for a missing or refused value.
    pub fn read(&mut self, reader: &mut Reader, flag: &str) -> Result<bool, String> {
        match flag {
            "--seconds" => self.seconds = reader.whole(flag, 1..=100_000)?,
            "--channels" => self.channels = reader.whole(flag, self.least_channels..=100_000)?,
            "--units" => self.units = reader.whole(flag, 1..=100_000)?,
            "--seed" => self.seed = reader.whole(flag, 0..=u64::MAX)?,
            "--set" => self.sets.push(parse_set(&reader.text(flag)?)?),
            "--min-units" => self.min_units = reader.whole(flag, 0..=100_000)?,
            "--min-accuracy" => self.min_accuracy = reader.fraction(flag)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

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
    fn sort_flags_read_their_values_and_leave_the_others() {
        let args = "--seconds 20 --set nblocks=0 --units 3 --channels 1 --min-accuracy 0.9 --out";
        let mut reader = Reader::new("emusort", args.split(' ').map(std::ffi::OsString::from));
        let mut flags = SortFlags::new(60, (16, 2), 8, 1);
        let mut others = Vec::new();
        let error = reader
            .read_flags(|reader, flag| {
                if !flags.read(reader, flag)? {
                    others.push(flag.to_string());
                }
                Ok(())
            })
            .unwrap_err();
        assert_eq!(
            error,
            "emusort --channels needs a whole number from 2 to 100000"
        );
        assert_eq!((flags.seconds, flags.units, flags.channels), (20, 3, 16));
        assert_eq!(flags.sets, [("nblocks".to_string(), "0".to_string())]);
        assert!(others.is_empty());
        // A flag of the example's own is left to it, with its value.
        let args = ["--out", "sorted", "--min-units", "2"].map(std::ffi::OsString::from);
        let mut reader = Reader::new("sort", args);
        let mut flags = SortFlags::new(30, (64, 1), 16, 2026);
        let run = reader
            .read_flags(|reader, flag| {
                if !flags.read(reader, flag)? {
                    others.push(reader.path(flag)?.display().to_string());
                }
                Ok(())
            })
            .unwrap();
        assert!(run);
        assert_eq!(others, ["sorted"]);
        assert_eq!((flags.min_units, flags.min_accuracy), (2, 0.0));
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
