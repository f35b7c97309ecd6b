//! The drift-split test of the global merges (dspk's own, decision 0005): two very similar
//! units whose spikes fell in batches the drift estimate moved by different amounts are the
//! parts of one unit that the drift correction left apart.
//!
//! The correction reads every channel at its shifted depth by kriging interpolation (§3.4),
//! which smooths a waveform the more the shift falls between the probe's contacts (on a
//! Neuropixels 1.0 probe a 20 um shift reads each channel between two columns, 40 um reads the
//! next contact of the same column). A unit's corrected waveform therefore changes with the
//! shift its batch got, and the final clustering cuts it by drift phase into parts that fire
//! at different times: their cross-correlogram has too few coincident spikes for Kilosort's
//! refractoriness test, so the Kilosort merges keep them apart (measured on the 384-channel
//! bench case in `docs/ACCURACY.md`).

use crate::drift::DriftEstimate;
use crate::export::postprocess::strongest_channels;

/// The similarity two units need for the drift-split test. On the public 384-channel bench
/// case, 39 of the 40 pairs of clusters of different true units at similarity >= 0.5
/// (Kilosort's threshold for its refractoriness test) stayed below it, and 31 of the 34 pairs
/// of parts of one unit reached it (decision 0005, item 13).
pub const DRIFT_SPLIT_SIMILARITY: f32 = 0.8;

/// The drift-split test: the drift estimate, where its batches lie in the recording, and how
/// different the shifts of two units' spikes must be.
#[derive(Debug, Clone, Copy)]
pub struct DriftSplit<'a> {
    pub(super) estimate: &'a DriftEstimate,
    /// Depth (um) of each channel of the units' templates.
    pub(super) channel_y: &'a [f32],
    /// Samples per batch of the estimate.
    pub(super) batch_size: u64,
    /// Width (um) of the shift bins the two units' spikes are counted in.
    pub(super) bin_um: f64,
    /// The largest overlap of two units' shift distributions at which they are one unit.
    pub(super) max_overlap: f64,
}

impl<'a> DriftSplit<'a> {
    /// The test for the drift `estimate` of batches of `batch_size` samples on channels at
    /// depths `channel_y` (um), counting spikes in shift bins of `bin_um` (Kilosort's
    /// `binning_depth`) and joining two units whose overlap ([`overlap`](Self::overlap)) is at
    /// most `max_overlap`.
    pub fn new(
        estimate: &'a DriftEstimate,
        channel_y: &'a [f32],
        batch_size: u64,
        bin_um: f64,
        max_overlap: f64,
    ) -> Self {
        Self {
            estimate,
            channel_y,
            batch_size,
            bin_um,
            max_overlap,
        }
    }

    /// How much two units' spikes share the drift: each unit's spikes (`a` and `b`, indices
    /// into `sample`) counted by the bin `floor(shift / bin_um)` of the shift the estimate
    /// gave depth `depth` (um) in their batch, and `sum over bins of min(a_bin / |a|, b_bin /
    /// |b|)`: 1 when both spread alike over the drift's shifts (two neurons that fire whatever
    /// the drift, and every pair on a recording without drift), 0 when no bin holds spikes of
    /// both. 1 when either unit has no spikes.
    pub fn overlap(&self, a: &[usize], b: &[usize], sample: &[i64], depth: f64) -> f64 {
        if a.is_empty() || b.is_empty() {
            return 1.0;
        }
        let bins: Vec<i64> = (0..self.estimate.n_batches())
            .map(|batch| (self.estimate.shift_at(batch, depth) / self.bin_um).floor() as i64)
            .collect();
        let low = bins.iter().copied().min().unwrap_or(0);
        let width = (bins.iter().copied().max().unwrap_or(0) - low + 1) as usize;
        let histogram = |spikes: &[usize]| {
            let mut counts = vec![0u64; width];
            for &m in spikes {
                let batch = usize::try_from(sample[m].max(0) as u64 / self.batch_size)
                    .unwrap_or(usize::MAX)
                    .min(bins.len() - 1);
                counts[(bins[batch] - low) as usize] += 1;
            }
            counts
        };
        let (ha, hb) = (histogram(a), histogram(b));
        let (na, nb) = (a.len() as f64, b.len() as f64);
        ha.iter()
            .zip(&hb)
            .map(|(&x, &y)| (x as f64 / na).min(y as f64 / nb))
            .sum()
    }

    /// The depth (um) of a `[channels, P]` template: that of its channel of largest norm (the
    /// first of equals), 0 for a template on no channel.
    pub fn depth(&self, template: &[f32]) -> f64 {
        let p = template.len() / self.channel_y.len().max(1);
        if p == 0 {
            return 0.0;
        }
        strongest_channels(template, p, 1)
            .first()
            .map_or(0.0, |&c| f64::from(self.channel_y[c as usize]))
    }

    /// Whether units `a` and `b` (spike indices into `sample`), of template similarity
    /// `similarity`, are one unit split by the drift: similarity at least
    /// [`DRIFT_SPLIT_SIMILARITY`] and [`overlap`](Self::overlap) at the depth of `template`
    /// (`a`'s, `[channels, P]`) at most the test's `max_overlap`.
    pub fn splits(
        &self,
        a: &[usize],
        b: &[usize],
        sample: &[i64],
        template: &[f32],
        similarity: f32,
    ) -> bool {
        similarity >= DRIFT_SPLIT_SIMILARITY
            && self.overlap(a, b, sample, self.depth(template)) <= self.max_overlap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two channels, at 0 and 100 um.
    const Y: [f32; 2] = [0.0, 100.0];
    /// A `[2, 1]` template on channel 0.
    const LOW: [f32; 2] = [1.0, 0.5];

    /// Rigid shifts of 0, 10 and 20 um over six batches of 100 samples.
    fn estimate() -> DriftEstimate {
        DriftEstimate::from_shifts(vec![0.0, 0.0, 10.0, 10.0, 20.0, 20.0], vec![100.0])
    }

    #[test]
    fn overlap_counts_spikes_by_the_shift_of_their_batch() {
        let est = estimate();
        let test = DriftSplit::new(&est, &Y, 100, 5.0, 0.5);
        // One spike per batch, in batch order.
        let sample: Vec<i64> = (0..6).map(|b| b * 100 + 7).collect();
        // Batches 0 and 1 (shift 0) against 4 and 5 (shift 20): nothing shared.
        assert_eq!(test.overlap(&[0, 1], &[4, 5], &sample, 50.0), 0.0);
        // Batches 0, 2 against 1, 3: the same shifts in the same shares.
        assert!((test.overlap(&[0, 2], &[1, 3], &sample, 50.0) - 1.0).abs() < 1e-12);
        // a: shifts 0, 0, 10, 20; b: 10, 20: min(1/4, 1/2) twice.
        assert!((test.overlap(&[0, 1, 2, 4], &[3, 5], &sample, 50.0) - 0.5).abs() < 1e-12);
        // Spikes past the last batch count in it; an empty unit overlaps fully.
        assert_eq!(test.overlap(&[0], &[1, 2], &[3, 10_000, 600], 50.0), 0.0);
        assert_eq!(test.overlap(&[], &[0], &sample, 50.0), 1.0);
    }

    #[test]
    fn no_drift_never_splits() {
        let est = DriftEstimate::from_shifts(vec![2.5; 6], vec![100.0]);
        let test = DriftSplit::new(&est, &Y, 100, 5.0, 0.5);
        let sample: Vec<i64> = (0..6).map(|b| b * 100).collect();
        assert_eq!(test.overlap(&[0, 1, 2], &[3, 4, 5], &sample, 0.0), 1.0);
        assert!(!test.splits(&[0, 1, 2], &[3, 4, 5], &sample, &LOW, 1.0));
    }

    #[test]
    fn splits_needs_both_similarity_and_separate_shifts() {
        let est = estimate();
        let test = DriftSplit::new(&est, &Y, 100, 5.0, 0.5);
        let sample: Vec<i64> = (0..6).map(|b| b * 100).collect();
        assert!(test.splits(&[0, 1], &[4, 5], &sample, &LOW, DRIFT_SPLIT_SIMILARITY));
        assert!(!test.splits(
            &[0, 1],
            &[4, 5],
            &sample,
            &LOW,
            DRIFT_SPLIT_SIMILARITY - 0.01
        ));
        assert!(!test.splits(&[0, 2], &[1, 3], &sample, &LOW, 1.0));
    }

    #[test]
    fn non_rigid_shifts_are_read_at_the_depth() {
        // Two blocks at 0 and 100 um: the lower one still, the upper one moving 0, 20.
        let est = DriftEstimate::from_shifts(vec![0.0, 0.0, 0.0, 20.0], vec![0.0, 100.0]);
        let test = DriftSplit::new(&est, &Y, 100, 5.0, 0.5);
        let sample = [10, 110];
        assert_eq!(test.depth(&LOW), 0.0);
        assert_eq!(test.depth(&[0.1, -0.9]), 100.0);
        assert!(!test.splits(&[0], &[1], &sample, &LOW, 1.0));
        assert!(test.splits(&[0], &[1], &sample, &[0.1, -0.9], 1.0));
    }
}
