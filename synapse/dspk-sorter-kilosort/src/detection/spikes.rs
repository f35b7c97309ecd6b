//! The spikes universal-template detection finds, on the host.

/// Spikes found by [`UniversalDetector`](super::UniversalDetector), one entry per spike in each
/// field, ordered by `(sample, centre)` (each window's spikes are sorted so; windows come in time
/// order and own disjoint samples).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Spikes {
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
    /// PC features `[n, nc, p]` row-major: spike `m`'s projection of its centre's `i`-th
    /// nearest channel on component `q` at `(m * nc + i) * p + q` (Kilosort's `tF`).
    pub features: Vec<f32>,
    nc: usize,
    p: usize,
}

impl Spikes {
    /// No spikes, for `nc` channels per spike and `p` principal components.
    #[must_use]
    pub fn new(nc: usize, p: usize) -> Self {
        Self {
            nc,
            p,
            ..Self::default()
        }
    }

    /// Number of spikes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.sample.len()
    }

    /// Whether there is no spike.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.sample.is_empty()
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

    /// Gives empty spikes the shape `nc x p`; whether the spikes have that shape.
    pub(super) fn adopt_shape(&mut self, nc: usize, p: usize) -> bool {
        if self.is_empty() {
            self.nc = nc;
            self.p = p;
        }
        self.nc == nc && self.p == p
    }

    /// Host bytes one spike takes across all fields.
    #[must_use]
    pub fn bytes_per_spike(&self) -> usize {
        size_of::<u64>()
            + size_of::<u32>()
            + size_of::<u16>()
            + size_of::<f32>()
            + size_of::<i8>()
            + 2 * size_of::<f32>()
            + self.nc * self.p * size_of::<f32>()
    }
}
