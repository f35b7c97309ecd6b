//! Drift correction (Kilosort4 §3): the depth shift of every batch and block estimated from the
//! detected spikes ([`estimate_drift`]), and the per-batch matrices that read each channel at
//! its shifted position ([`ShiftInterpolation`]). Host code in `f64`.
//!
//! - `fingerprint`: depth bins and each batch's (depth, log-amplitude) spike histogram (§3.2);
//! - `register`: rigid then per-block registration of the fingerprints (§3.3);
//! - `smooth`: `scipy.ndimage.gaussian_filter` for the registration scores;
//! - `interpolate`: [`ShiftInterpolation`] and [`compose`] (§3.4).
//!
//! # One change from Kilosort 4.1.7
//!
//! Upstream, a batch without spikes has an all-zero fingerprint, every rigid score ties, the
//! first argmax picks -15 bins in each of the 9 applied iterations, and the batch ends about
//! -675 um away, which blanks it when the shift is applied. Here a batch without spikes:
//! keeps rigid shift 0 (it is not searched), is left out of every reference mean, and gets
//! `dshift = 0` for every block. Its per-block scores are 0, as upstream, and take part in the
//! smoothing along the batch axis as zeros. If the first reference batch
//! (`min(300, floor(Nb / 2))`) has no spikes, the batch with spikes nearest to it (the earlier
//! of two equally near) is the first reference. A recording without spikes gets all-zero shifts.
//! Everything else follows the specification.

mod correction;
mod fingerprint;
mod interpolate;
mod register;
mod smooth;

pub use interpolate::{ShiftInterpolation, compose};

use dspk_ops::linalg::WhiteningMatrix;

use crate::detection::{self, UniversalDetector};
use crate::runner::{CorrectedWindows, SortContext};
pub use crate::settings::DriftSettings;
use crate::{Error, Result};
use correction::DriftCorrectedWhitening;
use fingerprint::{DepthBins, fingerprints};
use register::{Blocks, COARSE_REACH, FINE_REACH, register};

/// The drift stage (`docs/KILOSORT4.md` §3): with `nblocks > 0`, a detection pass with
/// `detector` over the whitened recording, the drift estimated from the spikes' depths and
/// amplitudes (on the host), and `windows` drift-corrected from then on (their whitening,
/// `whitening`, replaced by whitening and shifting per batch). `None` with `nblocks = 0`.
///
/// # Errors
///
/// As [`estimate_drift`] and [`ShiftInterpolation::new`]; device and read errors.
pub fn run(
    ctx: &mut SortContext,
    windows: &mut CorrectedWindows,
    detector: &mut UniversalDetector,
    whitening: &WhiteningMatrix,
) -> Result<Option<DriftEstimate>> {
    let settings = ctx.settings();
    if settings.nblocks == 0 {
        return Ok(None);
    }
    let channel_y: Vec<f32> = ctx.probe().positions().iter().map(|p| p[1]).collect();
    if let Some(off) = check_probe(&channel_y, &settings.drift())? {
        ctx.warn(off);
        return Ok(None);
    }
    let found = detection::run(ctx, windows, detector, "drift detection")?;
    let batch = settings.batch_size;
    let batches = windows.num_samples().div_ceil(batch) as usize;
    let estimate = ctx.host("drift registration", |ctx| {
        let depth: Vec<f64> = found.depth.iter().map(|&d| f64::from(d)).collect();
        let amplitude: Vec<f64> = found.amplitude.iter().map(|&a| f64::from(a)).collect();
        let batch_of: Vec<usize> = found.sample.iter().map(|&s| (s / batch) as usize).collect();
        let channel_y: Vec<f32> = ctx.probe().positions().iter().map(|p| p[1]).collect();
        estimate_drift(
            &channel_y,
            &DriftSpikes {
                depth: &depth,
                amplitude: &amplitude,
                batch: &batch_of,
            },
            batches,
            &settings.drift(),
            ctx.threads(),
        )
    })?;
    windows.set_whitening(Box::new(DriftCorrectedWhitening::new(
        ctx.client(),
        ctx.probe(),
        settings.sig_interp,
        &estimate,
        whitening,
        batch,
        windows.max_read_len(),
        ctx.threads(),
    )?));
    Ok(Some(estimate))
}

/// Whether drift correction can run on a probe with channels at depths `channel_y` (um) with
/// `settings` (`nblocks >= 1`), decided before any data is read.
///
/// The registration (§3.3) rolls each batch's fingerprint circularly along its
/// `n = 1 + ceil((max - min + 1) / binning_depth)` depth bins by `-15..=15` bins, 9 times
/// over, keeping the first best roll. Over fewer than 31 bins two of those rolls are the same
/// roll; over 15 bins or fewer the roll by 0 equals the roll by `-n`, which comes first, so
/// every batch of a stationary recording moves by `-n` bins per iteration: on an 8-channel
/// probe spanning 60 um (14 bins) Kilosort 4.1.7's rules give `dshift` of about -630 um,
/// every channel is then read far off the probe and the corrected recording is blank
/// (measured, 10 s with 4 units: 258 spikes in the drift pass, `dshift` -576 to -631 um,
/// every entry of the corrected whitening below 0.005, 0 spikes after). A probe of at most 15
/// bins (a span under about 75 um at the default 5 um) is too short for the registration:
/// `Ok(Some(warning))`, the warning saying why drift correction is turned off (as Kilosort's
/// documentation advises for probes with few channels: `nblocks = 0`). From 16 bins on, the
/// roll by 0 is unique and the registration runs as Kilosort4's (a 12-channel probe of 22
/// bins is corrected and sorted well). `Ok(None)`: the probe is long enough (or
/// `nblocks = 0`, nothing to decide).
///
/// # Errors
///
/// As [`DriftSettings`]' checks; [`Error::Input`] for no channels or a non-finite depth;
/// [`Error::Setting`] (`nblocks`) when the probe is long enough but `nblocks` cuts it into
/// blocks shorter than the 11 bins the per-block search (`-5..=5` bins) needs, naming the
/// largest `nblocks` that fits.
pub fn check_probe(channel_y: &[f32], settings: &DriftSettings) -> Result<Option<String>> {
    settings.check()?;
    if settings.nblocks == 0 {
        return Ok(None);
    }
    check_depths(channel_y)?;
    let bins = DepthBins::new(channel_y, settings.binning_depth)?;
    let (low, high) = channel_y
        .iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), &y| {
            (l.min(y), h.max(y))
        });
    let span = high - low;
    let rigid = COARSE_REACH as usize + 1;
    if bins.n < rigid {
        return Ok(Some(format!(
            "drift correction is off (nblocks = {} was asked): the probe spans {span} um of \
             depth, {} bins of {} um, fewer than the {rigid} bins the drift registration's \
             +-{COARSE_REACH}-bin search needs (its estimate would move every channel off \
             the probe); Kilosort advises nblocks = 0 for such probes (set it to silence \
             this warning)",
            settings.nblocks, bins.n, settings.binning_depth,
        )));
    }
    let fine = (2 * FINE_REACH + 1) as usize;
    let fits = bins.n / fine;
    if bins.n / settings.nblocks < fine || Blocks::new(bins.n, settings.nblocks).is_err() {
        return Err(Error::Setting {
            name: "nblocks",
            reason: format!(
                "{} blocks over a probe spanning {span} um ({} bins of {} um) make blocks of \
                 {} bins, shorter than the {fine} bins the per-block search needs: use \
                 nblocks <= {fits} (1 for one rigid shift, 0 for no drift correction)",
                settings.nblocks,
                bins.n,
                settings.binning_depth,
                bins.n / settings.nblocks,
            ),
        });
    }
    Ok(None)
}

/// The detected spikes drift is estimated from (Kilosort4's `st0` columns 1, 2 and 4), one
/// entry per spike in each slice.
#[derive(Debug, Clone, Copy)]
pub struct DriftSpikes<'a> {
    /// Depth, um (the channel-weighted `y` of universal detection).
    pub depth: &'a [f64],
    /// Amplitude (the universal-template score, `> Th_universal` for a detected spike).
    pub amplitude: &'a [f64],
    /// Batch index, `0..n_batches`.
    pub batch: &'a [usize],
}

/// The drift of a recording: `dshift`, the shift (um) of every batch and block, and where the
/// blocks are.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DriftEstimate {
    n_batches: usize,
    n_blocks: usize,
    dshift: Vec<f64>,
    block_centres: Vec<f64>,
    spike_counts: Vec<usize>,
}

impl DriftEstimate {
    /// Kilosort4's `dshift`: `n_batches x n_blocks` row-major, um. Sign: `dshift ~ -(the
    /// units' displacement)` up to a constant per block (units that moved 10 um up give about
    /// -10 um); 0 for every block of a batch without spikes.
    pub fn dshift(&self) -> &[f64] {
        &self.dshift
    }

    /// The shifts of batch `b` (one per block, um), `None` past the last batch: what
    /// [`ShiftInterpolation::matrix`] takes with [`block_centres`](Self::block_centres).
    pub fn batch_shifts(&self, b: usize) -> Option<&[f64]> {
        self.dshift.chunks_exact(self.n_blocks).nth(b)
    }

    /// The shift (um) the estimate gives depth `y` (um) in batch `b` (the last batch past the
    /// end): the batch's one shift with one block, else its block shifts interpolated at `y`
    /// as [`ShiftInterpolation::channel_shifts`] does for a channel.
    pub fn shift_at(&self, b: usize, y: f64) -> f64 {
        let b = b.min(self.n_batches - 1);
        let shifts = &self.dshift[b * self.n_blocks..(b + 1) * self.n_blocks];
        interpolate::shift_at_depth(shifts, &self.block_centres, y)
    }

    /// An estimate of the given shifts (`n_batches x n_blocks` row-major, one block per
    /// centre), for tests of what reads an estimate.
    #[cfg(test)]
    pub(crate) fn from_shifts(dshift: Vec<f64>, block_centres: Vec<f64>) -> Self {
        let n_blocks = block_centres.len();
        let n_batches = dshift.len() / n_blocks;
        Self {
            n_batches,
            n_blocks,
            dshift,
            block_centres,
            spike_counts: vec![1; n_batches],
        }
    }

    /// The number of batches.
    pub fn n_batches(&self) -> usize {
        self.n_batches
    }

    /// The number of blocks, `2 nblocks - 1`.
    pub fn n_blocks(&self) -> usize {
        self.n_blocks
    }

    /// Kilosort4's `yblk`: each block's mean bin depth `ysamp` (um, see [`estimate_drift`]).
    pub fn block_centres(&self) -> &[f64] {
        &self.block_centres
    }

    /// The spikes of each batch.
    pub fn spike_counts(&self) -> &[usize] {
        &self.spike_counts
    }
}

/// Estimates the drift of a recording of `n_batches` batches from its detected `spikes` on
/// channels at depths `channel_y` (um), as Kilosort 4.1.7's §3.2 and §3.3, with the change for
/// batches without spikes stated in the [module documentation](self).
///
/// - Fingerprints (§3.2): `y0 = min(channel_y) - 1`, `nbins = 1 + ceil((max - y0) / binning_depth)`
///   bins, spike row `floor((depth - y0) / binning_depth)`, amplitude column
///   `floor(1e-5 + 20 (log10(min(a, 99)) - log10(Th)) / (2 - log10(Th)))`,
///   `F = log2(1 + count)`; bin depths `ysamp[i] = y0 + binning_depth (i - 1/2)`.
/// - Registration (§3.3): `F` less its mean over depth; 9 rigid iterations, each taking the
///   first argmax over circular rolls `-15..=15` bins of the correlation with the reference
///   and rolling by it, the reference then set to the mean; `2 nblocks - 1` blocks of
///   `floor(nbins / nblocks)` bins starting at `round_half_even(linspace(0, nbins - len,
///   2 nblocks - 1))`; per-block scores for rolls `-5..=5` (circular within the block),
///   smoothed by `scipy.ndimage.gaussian_filter(sigma=drift_smoothing, mode='reflect')`
///   along (shift, batch, block), upsampled to `-5 + 0.1 u`, `u = 0..=100`
///   (`sum_s exp(-(s - v)^2 / 2) score[s]`, first argmax);
///   `dshift = binning_depth (rigid + fine)`; block centre = mean `ysamp` of its bins.
///
/// Costs `9 x 31 x nbins x 20` multiply-adds per batch (13 million for Neuropixels 1.0) and
/// `8 x 20 x nbins` bytes per batch. The rigid search runs on up to `threads` threads, each
/// batch's search by one thread alone, so the estimate does not depend on `threads`.
///
/// # Errors
///
/// [`Error::Setting`] for a setting out of range (`nblocks` 0, more than the depth bins, or so
/// many that two blocks start on one bin; a non-positive `binning_depth` or `sig_interp`;
/// `drift_smoothing` outside `[0, 1000]`; `Th_universal` outside `(0, 100)`) or more than
/// `2^32 - 1` fingerprint values; [`Error::Input`] for `n_batches = 0`, no channels, a
/// non-finite channel depth, spike slices of different lengths, or a spike with a batch index
/// `>= n_batches`, a non-finite depth or amplitude, a depth outside the probe's bins or an
/// amplitude below `Th_universal`.
pub fn estimate_drift(
    channel_y: &[f32],
    spikes: &DriftSpikes<'_>,
    n_batches: usize,
    settings: &DriftSettings,
    threads: usize,
) -> Result<DriftEstimate> {
    settings.check()?;
    if n_batches == 0 {
        return Err(Error::Input {
            what: "recording",
            reason: "no batches".to_string(),
        });
    }
    check_depths(channel_y)?;
    let n = spikes.depth.len();
    if spikes.amplitude.len() != n || spikes.batch.len() != n {
        return Err(Error::Input {
            what: "drift spikes",
            reason: format!(
                "{n} depths, {} amplitudes and {} batch indices (one of each per spike)",
                spikes.amplitude.len(),
                spikes.batch.len()
            ),
        });
    }
    let bins = DepthBins::new(channel_y, settings.binning_depth)?;
    let blocks = Blocks::new(bins.n, settings.nblocks)?;
    let prints = fingerprints(&bins, spikes, n_batches, settings.th_universal)?;
    let active: Vec<bool> = prints.counts.iter().map(|&c| c > 0).collect();
    let shifts = register(
        prints.values,
        bins.n,
        &active,
        &blocks,
        settings.drift_smoothing,
        threads,
    );
    let block_centres = blocks
        .starts
        .iter()
        .map(|&s| {
            (s..s + blocks.len)
                .map(|i| bins.sample_depth(i))
                .sum::<f64>()
                / blocks.len as f64
        })
        .collect();
    Ok(DriftEstimate {
        n_batches,
        n_blocks: blocks.starts.len(),
        dshift: shifts.iter().map(|s| settings.binning_depth * s).collect(),
        block_centres,
        spike_counts: prints.counts,
    })
}

/// The channels' depths can be binned: at least one channel, every depth finite.
fn check_depths(channel_y: &[f32]) -> Result<()> {
    if channel_y.is_empty() {
        return Err(Error::Input {
            what: "channel positions",
            reason: "no channels".to_string(),
        });
    }
    if let Some(c) = channel_y.iter().position(|y| !y.is_finite()) {
        return Err(Error::Input {
            what: "channel positions",
            reason: format!("channel {c} at depth {}", channel_y[c]),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
