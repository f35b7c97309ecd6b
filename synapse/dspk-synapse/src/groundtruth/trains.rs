//! Spike trains of a sorting: per unit, an id and sorted sample indices.

use std::collections::{BTreeMap, HashSet};

use crate::{Error, Result};

/// The spike trains of one sorting (one segment): per unit an id and the sample indices of its
/// spikes, non-decreasing and non-negative.
///
/// The counterpart of a SpikeInterface `BaseSorting` with one segment: units keep the order
/// they were given in (SpikeInterface's `unit_ids` order), which is the row/column order of
/// every matrix a [`GroundTruthComparison`](super::GroundTruthComparison) returns. A train may
/// be empty and may repeat a sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpikeTrains {
    ids: Vec<String>,
    trains: Vec<Vec<i64>>,
}

impl SpikeTrains {
    /// Spike trains from `(unit id, sample indices)` pairs, in that unit order.
    ///
    /// # Errors
    ///
    /// [`Error::Argument`] if two units share an id, or a train is not sorted (non-decreasing)
    /// or has a negative sample index.
    pub fn new(units: Vec<(String, Vec<i64>)>) -> Result<Self> {
        let mut seen = HashSet::new();
        let mut ids = Vec::with_capacity(units.len());
        let mut trains = Vec::with_capacity(units.len());
        for (id, train) in units {
            if !seen.insert(id.clone()) {
                return Err(Error::Argument(format!("unit id `{id}` appears twice")));
            }
            if let Some(&first) = train.first()
                && first < 0
            {
                return Err(Error::Argument(format!(
                    "unit `{id}` has a negative sample index {first}"
                )));
            }
            if let Some(k) = train.windows(2).position(|w| w[1] < w[0]) {
                return Err(Error::Argument(format!(
                    "the spike train of unit `{id}` is not sorted: sample {} (spike {k}) comes \
                     before {} (spike {})",
                    train[k],
                    train[k + 1],
                    k + 1
                )));
            }
            ids.push(id);
            trains.push(train);
        }
        Ok(Self { ids, trains })
    }

    /// Spike trains from one spike vector: `samples[k]` is the sample index of spike `k` and
    /// `labels[k]` its unit (as Phy's `spike_times.npy` and `spike_clusters.npy`). Units are
    /// ordered by label and named by it (`"3"`); each train is sorted.
    ///
    /// # Errors
    ///
    /// [`Error::Argument`] if the two slices differ in length or a sample index is negative.
    pub fn from_labels(samples: &[i64], labels: &[i64]) -> Result<Self> {
        if samples.len() != labels.len() {
            return Err(Error::Argument(format!(
                "{} spike samples but {} spike labels",
                samples.len(),
                labels.len()
            )));
        }
        let mut by_label: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
        for (k, (&sample, &label)) in samples.iter().zip(labels).enumerate() {
            if sample < 0 {
                return Err(Error::Argument(format!(
                    "spike {k} has a negative sample index {sample}"
                )));
            }
            by_label.entry(label).or_default().push(sample);
        }
        let units = by_label
            .into_iter()
            .map(|(label, mut train)| {
                train.sort_unstable();
                (label.to_string(), train)
            })
            .collect();
        Self::new(units)
    }

    /// The trains of a recording played `repeats` times end to end, each play `period`
    /// samples long: every spike `s` at `s + r * period` for `r` in `0..repeats` (the truth of
    /// a [`RepeatedRecording`](dspk_core::RepeatedRecording)).
    ///
    /// # Errors
    ///
    /// [`Error::Argument`] when a spike is not below `period` (the plays would overlap),
    /// `period` is not positive or the last sample overflows.
    pub fn repeated(&self, period: i64, repeats: u64) -> Result<Self> {
        if period <= 0 {
            return Err(Error::Argument(format!(
                "a repeat period of {period} samples"
            )));
        }
        if i64::try_from(repeats)
            .ok()
            .and_then(|r| r.checked_mul(period))
            .is_none()
        {
            return Err(Error::Argument(format!(
                "{repeats} repeats of {period} samples overflow a sample index"
            )));
        }
        let mut units = Vec::with_capacity(self.ids.len());
        for (id, train) in self.ids.iter().zip(&self.trains) {
            if let Some(&s) = train.iter().find(|&&s| s >= period) {
                return Err(Error::Argument(format!(
                    "unit `{id}` has a spike at sample {s}, not below the repeat period {period}"
                )));
            }
            let played = (0..repeats as i64)
                .flat_map(|r| train.iter().map(move |&s| s + r * period))
                .collect();
            units.push((id.clone(), played));
        }
        Self::new(units)
    }

    /// The number of units.
    #[must_use]
    pub fn num_units(&self) -> usize {
        self.ids.len()
    }

    /// The unit ids, in unit order.
    #[must_use]
    pub fn ids(&self) -> &[String] {
        &self.ids
    }

    /// The sample indices of unit `index` (in unit order).
    ///
    /// # Panics
    ///
    /// If `index >= num_units()`.
    #[must_use]
    pub fn train(&self, index: usize) -> &[i64] {
        &self.trains[index]
    }

    /// The position of the unit named `id` in unit order.
    #[must_use]
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.ids.iter().position(|u| u == id)
    }

    /// The number of spikes of each unit, in unit order.
    #[must_use]
    pub fn spike_counts(&self) -> Vec<usize> {
        self.trains.iter().map(Vec::len).collect()
    }

    /// The total number of spikes.
    #[must_use]
    pub fn num_spikes(&self) -> usize {
        self.trains.iter().map(Vec::len).sum()
    }

    /// Every spike as `(sample, unit index)`, sorted by sample then unit: SpikeInterface's
    /// spike vector.
    pub(crate) fn spike_vector(&self) -> Vec<(i64, usize)> {
        let mut spikes: Vec<(i64, usize)> = self
            .trains
            .iter()
            .enumerate()
            .flat_map(|(unit, train)| train.iter().map(move |&s| (s, unit)))
            .collect();
        spikes.sort_unstable();
        spikes
    }
}
