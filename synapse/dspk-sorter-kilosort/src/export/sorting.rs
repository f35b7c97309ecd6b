//! The finished sorting that the Phy writer and the summary picture take (`docs/KILOSORT4.md`
//! §8.4, §9).

/// Kilosort's unit label (`cluster_KSLabel.tsv`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitLabel {
    /// The unit's auto-correlogram is refractory (`R12 < acg_threshold` and `Q12 < 0.2`).
    Good,
    /// Multi-unit activity: not refractory.
    Mua,
}

impl UnitLabel {
    /// `good` or `mua`, as the TSV writes it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Good => "good",
            Self::Mua => "mua",
        }
    }
}

/// A finished sort: every kept spike (after duplicate removal) in time order with its unit, and
/// every unit's template, label and statistics (`docs/KILOSORT4.md` §8.4-9).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sorting {
    /// Samples per second of the recording.
    pub sample_rate: f64,
    /// Samples in the recording.
    pub num_samples: u64,
    /// Channels sorted (the probe's channel list).
    pub channels: usize,
    /// Template length `nt` and trough index `nt0min`.
    pub nt: usize,
    /// Trough index inside a template.
    pub nt0min: usize,
    /// Principal components per channel.
    pub p: usize,
    /// Trough sample of each kept spike, non-decreasing (`spike_times.npy`).
    pub spike_times: Vec<i64>,
    /// Unit of each kept spike (`spike_clusters.npy`, `spike_templates.npy`).
    pub spike_clusters: Vec<u32>,
    /// Learned template that matched each kept spike (`spike_detection_templates.npy`).
    pub spike_templates: Vec<u32>,
    /// `‖tF‖` of each kept spike (`amplitudes.npy`).
    pub amplitudes: Vec<f32>,
    /// `[x, y]` µm of each kept spike (`spike_positions.npy`).
    pub spike_positions: Vec<[f32; 2]>,
    /// Over every matched spike before duplicate removal: whether it was kept
    /// (`kept_spikes.npy`).
    pub kept: Vec<bool>,
    /// `[kept spikes, p, pc_channels]` (`pc_features.npy`).
    pub pc_features: Vec<f32>,
    /// `[units, pc_channels]` (`pc_feature_ind.npy`).
    pub pc_feature_ind: Vec<u32>,
    /// Channels per spike in `pc_features`.
    pub pc_channels: usize,
    /// `[units, channels, p]`: each unit's mean features (Kilosort's `Wall`).
    pub unit_features: Vec<f32>,
    /// `[units, nt, channels]`: each unit's waveform in whitened units (`templates.npy`,
    /// `Wall` times `wPCA`).
    pub templates: Vec<f32>,
    /// Label of each unit.
    pub labels: Vec<UnitLabel>,
    /// `100 * R12` of each unit's auto-correlogram (`cluster_ContamPct.tsv`).
    pub contamination_pct: Vec<f64>,
    /// `‖Wall_k‖` of each unit (`cluster_Amplitude.tsv`).
    pub unit_amplitudes: Vec<f32>,
    /// `[units, units]` template similarity, the maximum over lags (`similar_templates.npy`).
    pub similar_templates: Vec<f32>,
    /// Units removed as shadows of larger units (`shadow_ms`), not among `labels`.
    pub shadow_units: usize,
}

impl Sorting {
    /// Number of units.
    #[must_use]
    pub fn num_units(&self) -> usize {
        self.labels.len()
    }

    /// Number of kept spikes.
    #[must_use]
    pub fn num_spikes(&self) -> usize {
        self.spike_times.len()
    }

    /// Each unit's spike times, by unit id.
    #[must_use]
    pub fn trains(&self) -> Vec<Vec<i64>> {
        let mut trains = vec![Vec::new(); self.num_units()];
        for (&t, &c) in self.spike_times.iter().zip(&self.spike_clusters) {
            trains[c as usize].push(t);
        }
        trains
    }
}

impl Sorting {
    /// Moves every spike of unit `u` by `shifts[u]` samples (clamped to the recording) and
    /// puts the spikes back in time order (stable: a unit's spikes keep their order), with
    /// every per-spike array permuted alike. [`kept`](Self::kept) is over the matched spikes
    /// and is left as it is.
    ///
    /// # Errors
    ///
    /// [`Error::Input`](crate::Error::Input) when `shifts` does not have one value per unit.
    pub fn shift_unit_times(&mut self, shifts: &[i64]) -> crate::Result<()> {
        if shifts.len() != self.num_units() {
            return Err(crate::Error::Input {
                what: "unit time shifts",
                reason: format!("{} shifts for {} units", shifts.len(), self.num_units()),
            });
        }
        if shifts.iter().all(|&s| s == 0) {
            return Ok(());
        }
        let last = i64::try_from(self.num_samples.saturating_sub(1)).unwrap_or(i64::MAX);
        for (t, &u) in self.spike_times.iter_mut().zip(&self.spike_clusters) {
            *t = (*t + shifts[u as usize]).clamp(0, last);
        }
        let mut order: Vec<usize> = (0..self.spike_times.len()).collect();
        order.sort_by_key(|&i| self.spike_times[i]);
        self.spike_times = permuted(&self.spike_times, &order);
        self.spike_clusters = permuted(&self.spike_clusters, &order);
        self.spike_templates = permuted(&self.spike_templates, &order);
        self.amplitudes = permuted(&self.amplitudes, &order);
        self.spike_positions = permuted(&self.spike_positions, &order);
        let per = self.p * self.pc_channels;
        if per > 0 && self.pc_features.len() == per * order.len() {
            self.pc_features = order
                .iter()
                .flat_map(|&i| self.pc_features[i * per..(i + 1) * per].iter().copied())
                .collect();
        }
        Ok(())
    }
}

/// `values` in the order `order` gives.
fn permuted<T: Copy>(values: &[T], order: &[usize]) -> Vec<T> {
    order.iter().map(|&i| values[i]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trains_gather_each_units_spikes_in_order() {
        let sorting = Sorting {
            spike_times: vec![1, 5, 9, 12],
            spike_clusters: vec![1, 0, 1, 1],
            labels: vec![UnitLabel::Good, UnitLabel::Mua],
            ..Sorting::default()
        };
        assert_eq!(sorting.trains(), vec![vec![5], vec![1, 9, 12]]);
    }

    #[test]
    fn shifting_units_keeps_every_spike_array_in_step() {
        let mut sorting = Sorting {
            num_samples: 100,
            nt: 1,
            channels: 2,
            p: 1,
            pc_channels: 1,
            spike_times: vec![10, 20, 30, 40],
            spike_clusters: vec![0, 1, 0, 1],
            spike_templates: vec![0, 1, 0, 1],
            amplitudes: vec![1.0, 2.0, 3.0, 4.0],
            spike_positions: vec![[0.0, 1.0], [0.0, 2.0], [0.0, 3.0], [0.0, 4.0]],
            pc_features: vec![1.0, 2.0, 3.0, 4.0],
            labels: vec![UnitLabel::Good, UnitLabel::Mua],
            ..Sorting::default()
        };
        sorting.shift_unit_times(&[15, -95]).unwrap();
        assert_eq!(sorting.spike_times, vec![0, 0, 25, 45]);
        assert_eq!(sorting.spike_clusters, vec![1, 1, 0, 0]);
        assert_eq!(sorting.amplitudes, vec![2.0, 4.0, 1.0, 3.0]);
        assert_eq!(sorting.pc_features, vec![2.0, 4.0, 1.0, 3.0]);
        assert_eq!(sorting.spike_positions[0], [0.0, 2.0]);
        assert!(sorting.shift_unit_times(&[1]).is_err());
    }
}
