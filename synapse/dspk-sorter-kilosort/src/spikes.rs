//! The spikes that pass between the stages of a sort, on the host: one table type,
//! [`Spikes`], with the PC features every kind of spike carries and the columns of its kind:
//! those universal-template detection finds ([`DetectedSpikes`], `docs/KILOSORT4.md` §5), those
//! learned-template matching finds ([`MatchedSpikes`], §7); and the channels each learned
//! template's spikes carry features on ([`LearnedChannels`]).

use std::ops::{Deref, DerefMut};

/// The columns of one kind of spike (one entry per spike in each).
pub trait SpikeColumns: Default {
    /// Spikes in the columns.
    fn count(&self) -> usize;

    /// Host bytes one spike takes in the columns.
    fn bytes_per_spike(&self) -> usize;
}

/// Spikes with PC features: the columns of their kind `K` (reached through `Deref`, e.g.
/// `spikes.sample`) and `[n, nc, p]` row-major features, spike `m`'s `q`-th component on the
/// `i`-th channel of the item it is attached to (a template centre's nearest channels, a learned
/// template's channels) at `(m * nc + i) * p + q` (Kilosort's `tF`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Spikes<K> {
    columns: K,
    /// The PC features, `[n, nc, p]` row-major.
    pub features: Vec<f32>,
    nc: usize,
    p: usize,
}

impl<K: SpikeColumns> Spikes<K> {
    /// No spikes, for `nc` channels per spike and `p` principal components.
    #[must_use]
    pub fn new(nc: usize, p: usize) -> Self {
        Self {
            columns: K::default(),
            features: Vec::new(),
            nc,
            p,
        }
    }

    /// Number of spikes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.columns.count()
    }

    /// Whether there is no spike.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Channels per spike in [`features`](Self::features).
    #[must_use]
    pub fn nc(&self) -> usize {
        self.nc
    }

    /// Principal components per channel in [`features`](Self::features).
    #[must_use]
    pub fn p(&self) -> usize {
        self.p
    }

    /// The `nc x p` features of spike `m`.
    #[must_use]
    pub fn features_of(&self, m: usize) -> &[f32] {
        let w = self.nc * self.p;
        &self.features[m * w..(m + 1) * w]
    }

    /// Gives empty spikes the shape `nc x p`; whether the spikes have that shape.
    pub(crate) fn adopt_shape(&mut self, nc: usize, p: usize) -> bool {
        if self.is_empty() {
            self.nc = nc;
            self.p = p;
        }
        self.nc == nc && self.p == p
    }

    /// Host bytes one spike takes across all columns and its features.
    #[must_use]
    pub fn bytes_per_spike(&self) -> usize {
        self.columns.bytes_per_spike() + self.nc * self.p * size_of::<f32>()
    }
}

impl<K> Deref for Spikes<K> {
    type Target = K;

    fn deref(&self) -> &K {
        &self.columns
    }
}

impl<K> DerefMut for Spikes<K> {
    fn deref_mut(&mut self) -> &mut K {
        &mut self.columns
    }
}

/// Spikes found by [`UniversalDetector`](crate::detection::UniversalDetector), ordered by
/// `(sample, centre)` (each window's spikes are sorted so; windows come in time order and own
/// disjoint samples); features on the centre's nearest channels.
pub type DetectedSpikes = Spikes<Detected>;

/// Spikes found by learned-template matching, in time order (ties: batch, peel, position in the
/// peel, so the order is the same run after run); features on the template's channels
/// ([`LearnedChannels::of`]): the batch's final residual plus the spike's own fitted template.
pub type MatchedSpikes = Spikes<Matched>;

/// The columns of a detected spike.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Detected {
    /// Recording sample of the spike's score column `t`: the template's sample `j` lies on the
    /// recording sample `t + j - nt / 2`, so its trough (`nt0min`) is at `t - (nt / 2 -
    /// nt0min)` (Kilosort's convention: 10 samples before `t` with `nt = 61`, `nt0min = 20`).
    pub sample: Vec<u64>,
    /// Index of the template centre that detected it (into
    /// [`TemplateCentres`](crate::detection::centres::TemplateCentres)).
    pub centre: Vec<u32>,
    /// The best (size, template) combination, `s * K + k` (Kilosort's `st0` column 3).
    pub combo: Vec<u16>,
    /// The score `|A|` (Kilosort's `Amax`), above the threshold.
    pub amplitude: Vec<f32>,
    /// The sign of the score: `1` or `-1` (a negative-going spike scores negative against
    /// trough-first templates).
    pub sign: Vec<i8>,
    /// Position x in um: the channels' x weighted by the positive part of their projections.
    pub x: Vec<f32>,
    /// Depth y in um, weighted as `x` (Kilosort's `st0` column 1).
    pub depth: Vec<f32>,
}

impl SpikeColumns for Detected {
    fn count(&self) -> usize {
        self.sample.len()
    }

    fn bytes_per_spike(&self) -> usize {
        size_of::<u64>()
            + size_of::<u32>()
            + size_of::<u16>()
            + size_of::<f32>()
            + size_of::<i8>()
            + 2 * size_of::<f32>()
    }
}

/// The columns of a matched spike.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Matched {
    /// Trough sample of the spike, counted from the recording's first sample.
    pub sample: Vec<i64>,
    /// The learned template that matched it (Kilosort's `st[:, 1]`).
    pub template: Vec<u32>,
    /// The score: the projection on the unit-norm template (Kilosort's `th_amp`, `st[:, 2]`).
    pub score: Vec<f32>,
    /// The fitted scaling of the template (`B[n, t] / nm[n]`).
    pub scale: Vec<f32>,
}

impl SpikeColumns for Matched {
    fn count(&self) -> usize {
        self.sample.len()
    }

    fn bytes_per_spike(&self) -> usize {
        size_of::<i64>() + size_of::<u32>() + 2 * size_of::<f32>()
    }
}

/// The channels each learned template's spikes carry features on: `nc` channels per template,
/// the `nc` nearest channels to the template's best channel (Kilosort's `iCC[:, iU[n]]`),
/// nearest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LearnedChannels {
    /// `[templates, nc]` row-major channel indices (positions in the probe's channel list).
    pub channels: Vec<u32>,
    /// Channels per template.
    pub nc: usize,
}

impl LearnedChannels {
    /// The channels of template `n`.
    #[must_use]
    pub fn of(&self, n: usize) -> &[u32] {
        &self.channels[n * self.nc..(n + 1) * self.nc]
    }

    /// Number of templates.
    #[must_use]
    pub fn len(&self) -> usize {
        self.channels.len().checked_div(self.nc).unwrap_or(0)
    }

    /// Whether there is no template.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.channels.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_matched_spike_with_ten_channels_of_six_components_takes_260_bytes() {
        assert_eq!(MatchedSpikes::new(10, 6).bytes_per_spike(), 260);
    }

    #[test]
    fn learned_channels_list_each_templates_channels() {
        let channels = LearnedChannels {
            channels: vec![0, 1, 2, 3, 4, 5],
            nc: 3,
        };
        assert_eq!((channels.len(), channels.of(1)), (2, &[3u32, 4, 5][..]));
    }
}
