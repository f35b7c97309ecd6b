//! Kilosort4 §3.2: the depth bins of a probe and each batch's spike fingerprint, a histogram
//! over (depth bin, log-amplitude column) compressed as `log2(1 + count)`.

use super::DriftSpikes;
use crate::{Error, Result};

/// Amplitude columns of a fingerprint (`log10` amplitude from `Th_universal` to 100 in 20 steps).
pub(super) const COLUMNS: usize = 20;

/// Amplitudes above this are counted in the last column.
const AMPLITUDE_CAP: f64 = 99.0;

/// The most fingerprint values (`n_batches x n_bins x 20`) accepted: the 32-bit limit of a
/// device buffer (DESIGN.md), so the fingerprints can move to the device unchanged.
const MAX_VALUES: usize = u32::MAX as usize;

/// The depth bins of a probe: `y0 = min(yc) - 1`, `n = 1 + ceil((max(yc) - y0) / width)` bins
/// of `width` um (766 of 5 um for Neuropixels 1.0), computed in `f64` from the `f32` positions.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct DepthBins {
    pub(super) y0: f64,
    pub(super) width: f64,
    pub(super) n: usize,
}

impl DepthBins {
    /// The bins of channels at depths `channel_y` (non-empty and finite: the caller checks) for
    /// a finite positive `width`; [`Error::Setting`] (`binning_depth`) when they would number
    /// more than [`MAX_VALUES`] / 20.
    pub(super) fn new(channel_y: &[f32], width: f64) -> Result<Self> {
        let (low, high) = channel_y
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &y| {
                (l.min(f64::from(y)), h.max(f64::from(y)))
            });
        let y0 = low - 1.0;
        let n = 1.0 + ((high - y0) / width).ceil();
        if n > (MAX_VALUES / COLUMNS) as f64 {
            return Err(Error::Setting {
                name: "binning_depth",
                reason: format!(
                    "{width} um bins over {} um of probe make {n} bins",
                    high - low
                ),
            });
        }
        Ok(Self {
            y0,
            width,
            n: n as usize,
        })
    }

    /// Kilosort4's `ysamp[i] = y0 + width i - width / 2` (not the bin's true centre, which is
    /// `width / 2` higher: kept as specified).
    pub(super) fn sample_depth(&self, i: usize) -> f64 {
        self.y0 + self.width * i as f64 - self.width / 2.0
    }

    /// The bin of `depth`: `floor((depth - y0) / width)`, `None` outside `0..n`.
    fn row(&self, depth: f64) -> Option<usize> {
        let row = ((depth - self.y0) / self.width).floor();
        (row >= 0.0 && row < self.n as f64).then_some(row as usize)
    }
}

/// The amplitude column of `amplitude`: `floor(1e-5 + 20 u)` with
/// `u = (log10(min(amplitude, 99)) - log10(th)) / (2 - log10(th))`; `None` outside `0..20`
/// (an amplitude below the detection threshold `th`, or not positive).
fn column(amplitude: f64, th: f64) -> Option<usize> {
    let u = (amplitude.min(AMPLITUDE_CAP).log10() - th.log10()) / (2.0 - th.log10());
    let col = (1e-5 + COLUMNS as f64 * u).floor();
    (col >= 0.0 && col < COLUMNS as f64).then_some(col as usize)
}

/// Fingerprints of all batches and the spike count of each batch.
pub(super) struct Fingerprints {
    /// `F[b, row, col] = log2(1 + count)`, `n_batches x n_bins x 20` row-major.
    pub(super) values: Vec<f64>,
    /// Spikes per batch.
    pub(super) counts: Vec<usize>,
}

/// Bins every spike (§3.2) into its batch's fingerprint.
///
/// # Errors
///
/// [`Error::Setting`] (`n_batches`) when the fingerprints would exceed [`MAX_VALUES`];
/// [`Error::Input`] (`drift spikes`) for a spike with a batch index `>= n_batches`, a
/// non-finite depth or amplitude, a depth outside the bins or an amplitude below `th`.
pub(super) fn fingerprints(
    bins: &DepthBins,
    spikes: &DriftSpikes<'_>,
    n_batches: usize,
    th: f64,
) -> Result<Fingerprints> {
    let per_batch = bins.n * COLUMNS;
    let total = n_batches
        .checked_mul(per_batch)
        .filter(|&v| v <= MAX_VALUES);
    let Some(total) = total else {
        return Err(Error::Setting {
            name: "n_batches",
            reason: format!(
                "{n_batches} batches of {} depth bins exceed {MAX_VALUES} fingerprint values",
                bins.n
            ),
        });
    };
    let mut values = vec![0.0f64; total];
    let mut counts = vec![0; n_batches];
    let spike_error = |k: usize, reason: String| Error::Input {
        what: "drift spikes",
        reason: format!("spike {k}: {reason}"),
    };
    for (k, ((&depth, &amplitude), &batch)) in spikes
        .depth
        .iter()
        .zip(spikes.amplitude)
        .zip(spikes.batch)
        .enumerate()
    {
        if batch >= n_batches {
            return Err(spike_error(k, format!("batch {batch} of {n_batches}")));
        }
        if !depth.is_finite() || !amplitude.is_finite() {
            return Err(spike_error(
                k,
                format!("depth {depth} um, amplitude {amplitude}"),
            ));
        }
        let row = bins.row(depth).ok_or_else(|| {
            let top = bins.y0 + bins.width * bins.n as f64;
            spike_error(
                k,
                format!("depth {depth} um outside the bins [{}, {top})", bins.y0),
            )
        })?;
        let col = column(amplitude, th).ok_or_else(|| {
            spike_error(k, format!("amplitude {amplitude} below Th_universal {th}"))
        })?;
        values[batch * per_batch + row * COLUMNS + col] += 1.0;
        counts[batch] += 1;
    }
    values.iter_mut().for_each(|v| *v = (1.0 + *v).log2());
    Ok(Fingerprints { values, counts })
}

#[cfg(test)]
mod tests {
    use super::{DepthBins, column};

    #[test]
    fn drift_bins_of_neuropixels_1() {
        // NP1.0 rows at 20..3840 um: y0 = 19, 1 + ceil(3821 / 5) = 766 bins.
        let y: Vec<f32> = (1..=192).map(|r| 20.0 * r as f32).collect();
        let bins = DepthBins::new(&y, 5.0).unwrap();
        assert_eq!((bins.y0, bins.n), (19.0, 766));
        assert_eq!(bins.sample_depth(0), 16.5);
        assert_eq!(bins.row(20.0), Some(0));
        assert_eq!(bins.row(24.0), Some(1));
        assert_eq!(bins.row(3840.0), Some(764));
        assert_eq!(bins.row(18.9), None);
        assert_eq!(bins.row(19.0 + 5.0 * 766.0), None);
    }

    #[test]
    fn drift_amplitude_columns() {
        assert_eq!(column(9.0, 9.0), Some(0));
        assert_eq!(column(8.9, 9.0), None);
        assert_eq!(column(0.0, 9.0), None);
        assert_eq!(column(98.9, 9.0), Some(19));
        assert_eq!(column(1e6, 9.0), Some(19));
        // u = 0.5 exactly at the geometric mean of 9 and 100: column 10.
        assert_eq!(column(30.0, 9.0), Some(10));
    }
}
