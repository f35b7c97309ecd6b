//! Preprocessing (`docs/KILOSORT4.md` §2, §10.1.1): the device chain every pass runs
//! ([`Preprocessing`]), and what a sort fits before it looks for spikes ([`PreprocessingFit`]:
//! channel offsets, local whitening, channel noise, EMUsort's channel delays).
//!
//! [`run`] is the stage: it checks the recording against the probe and settings, fits (or
//! reuses) the preprocessing and hands back the recording's windows as every later stage sees
//! them: preprocessed, whitened and (EMUsort) delay-aligned on the device.

mod chain;
pub mod delays;
mod fit;
mod whitening;

use std::sync::Arc;
use std::time::Instant;

use dspk_core::{ComputeTarget, RecordingSource};
use dspk_ops::DeviceLimits;

pub use chain::{Preprocessing, channel_offsets};
pub use fit::{FitKey, PreprocessingFit};
pub(crate) use whitening::selected_ranges;
pub use whitening::{WHITENING_EPS, Whitener, fit_whitening, whitening_batches};

use crate::detection::centres::template_centres;
use crate::runner::{CorrectedWindows, DeviceWindows, PassReport, SortContext, resident_budget};
use crate::{Error, KilosortSettings, Result, SortProbe};

/// Where the preprocessing stage reads from and what it may reuse, beyond the settings.
#[derive(Debug, Clone, Copy)]
pub struct Reading<'a> {
    /// Samples each window owns; `None`: [`fitting_window`] (`batch_size`, or a divisor of it
    /// where the device's largest buffer is too small for a batch's scratch).
    pub window: Option<u64>,
    /// The device the client belongs to, so the reader can page-lock its buffers for it.
    pub target: Option<ComputeTarget>,
    /// A fit from an earlier run to reuse instead of fitting ([`PreprocessingFit::check`]).
    pub reuse: Option<&'a Arc<PreprocessingFit>>,
}

/// The preprocessing stage: checks `source` against the context's probe and settings, fits
/// the channel offsets (first batch, on the host), the local whitening and (with
/// `remove_chan_delays`) the channel delays, one pass each over the preprocessed windows, or
/// reuses `reading.reuse`; returns the fit and the windows whitened and delay-aligned, which
/// carry halos for every later stage (`nt + nt0min` samples plus the delay search's lag).
///
/// # Errors
///
/// [`Error::Setting`] for windows that are not batches with drift correction on;
/// [`Error::Input`] for NaN or infinite samples, a fit that does not belong to this run; read
/// and device errors. The settings, the recording's length and the probe's channels are
/// checked before this stage ([`Kilosort4::check`](crate::Kilosort4::check)).
pub fn run(
    ctx: &mut SortContext,
    source: Arc<dyn RecordingSource>,
    reading: Reading,
) -> Result<(Arc<PreprocessingFit>, CorrectedWindows)> {
    let (probe, settings) = (ctx.probe(), ctx.settings());
    let info = source.info().clone();
    let batch = settings.batch_size;
    let sample_rate = ctx.sample_rate();
    let key = FitKey::new(info.num_samples, sample_rate, probe, settings);
    if let Some(fit) = reading.reuse {
        fit.check(&key)?;
    }

    // Offsets: the mean of each channel over the first batch, read on the host.
    let offsets = match reading.reuse {
        Some(fit) => fit.offsets.clone(),
        None => {
            let started = Instant::now();
            let sign = if settings.invert_sign { -1.0 } else { 1.0 };
            let first = 0..batch.min(info.num_samples);
            let read = probe.len() as u64 * first.end * info.stored_format.size() as u64;
            let offsets = channel_offsets(source.as_ref(), probe.channels(), first, sign)?;
            let mut pass = PassReport::host("channel offsets", started);
            pass.read_bytes = read;
            ctx.record(pass);
            offsets
        }
    };
    let preprocessing = Preprocessing::new(offsets.clone(), settings, sample_rate)?;
    let delay_lag = if settings.remove_chan_delays {
        delays::max_delay_samples(settings, sample_rate)?
    } else {
        0
    };
    let halo = (settings.nt + settings.trough() + delay_lag) as u64;
    let window = match reading.window {
        Some(window) => window,
        None => {
            let halos = 2 * (preprocessing.settling()? as u64 + halo);
            let limits = DeviceLimits::of(ctx.client());
            fitting_window(
                settings,
                scratch_per_sample(probe, settings)?,
                halos,
                limits,
            )
        }
    };
    check_window(settings, window)?;
    let budget = resident_budget(ctx.client(), settings.resident_bytes);
    let mut windows = DeviceWindows::new(
        ctx.client(),
        source,
        probe.channels().to_vec(),
        window,
        halo,
        reading.target,
        Box::new(preprocessing),
        budget,
    )?;

    // Whitening and channel delays (both on the unwhitened windows).
    let fit = match reading.reuse {
        Some(fit) => fit.clone(),
        None => {
            let (whitening, channel_std) = fit_whitening(ctx, &mut windows)?;
            let delays = if settings.remove_chan_delays {
                Some(delays::run(ctx, &mut windows, delay_lag)?)
            } else {
                None
            };
            Arc::new(PreprocessingFit {
                offsets,
                whitening,
                channel_std,
                delays,
                key,
            })
        }
    };
    let max_samples = windows.max_read_len();
    let whitener = Whitener::new(
        ctx.client(),
        Whitener::sparse(ctx.client(), &fit.whitening)?,
        max_samples,
    )?;
    let aligner = match &fit.delays {
        Some(d) => Some(delays::DelayAligner::new(
            ctx.client(),
            &d.delays,
            max_samples,
        )?),
        None => None,
    };
    let windows = CorrectedWindows::new(
        ctx.client(),
        windows,
        Box::new(whitener),
        aligner.map(|a| (Box::new(a) as _, delay_lag)),
        halo,
    );
    Ok((fit, windows))
}

/// The most 4-byte values per sample of a window that one device buffer of a detection or
/// matching pass holds: detection's template projections (channels x `n_templates`), its
/// centre scores (one per template centre), matching's PC projections (channels x `n_pcs`).
/// (Matching's template scores, one per learned template, are not known yet: they are
/// checked when allocated.)
fn scratch_per_sample(probe: &SortProbe, settings: &KilosortSettings) -> Result<u64> {
    let centres = template_centres(probe.positions(), probe.shanks(), &settings.centres())?;
    let channels = probe.len();
    let widest = (channels * settings.n_templates)
        .max(channels * settings.n_pcs)
        .max(centres.count());
    Ok(widest as u64)
}

/// Samples each window owns when the run does not set them: `batch_size`, or where a window
/// of a batch plus `halos` samples would need more than `limit`'s largest buffer for
/// `per_sample` 4-byte values per sample (a 96-channel probe's detection scratch on lavapipe,
/// whose buffers hold at most 128 MiB), the largest divisor of `batch_size` whose windows fit
/// (drift correction shifts whole batches, so a window must lie in one; the spikes found do
/// not depend on the window length, `tests/determinism.rs`). When none of at least
/// [`MIN_FITTING_WINDOW`] samples fits, `batch_size`: the pass that allocates the buffer then
/// names it and the limit.
#[must_use]
pub fn fitting_window(
    settings: &KilosortSettings,
    per_sample: u64,
    halos: u64,
    limit: DeviceLimits,
) -> u64 {
    let fits = |window: u64| {
        let values = (window + halos).saturating_mul(per_sample);
        limit.check("window", values, 4).is_ok()
    };
    let batch = settings.batch_size;
    (1..=batch / MIN_FITTING_WINDOW.min(batch))
        .filter(|k| batch.is_multiple_of(*k))
        .map(|k| batch / k)
        .find(|&window| fits(window))
        .unwrap_or(batch)
}

/// The shortest window [`fitting_window`] chooses (1/30 s at 30 kHz).
pub const MIN_FITTING_WINDOW: u64 = 1_000;

/// Drift correction shifts whole batches: with it on, a window must lie in one batch.
fn check_window(settings: &KilosortSettings, window: u64) -> Result<()> {
    if settings.nblocks > 0 && !settings.batch_size.is_multiple_of(window.max(1)) {
        return Err(Error::Setting {
            name: "nblocks",
            reason: format!(
                "drift correction shifts whole batches: windows of {window} samples must divide \
                 batch_size = {} (or nblocks = 0)",
                settings.batch_size
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use dspk_ops::DeviceLimits;

    use super::fitting_window;
    use crate::KilosortSettings;

    fn limits(max_buffer_bytes: u64) -> DeviceLimits {
        DeviceLimits {
            max_values: u64::from(u32::MAX),
            max_buffer_bytes,
        }
    }

    #[test]
    fn a_window_is_a_batch_unless_its_scratch_is_over_the_largest_buffer() {
        let settings = KilosortSettings::default(); // batch_size 60 000
        let lavapipe = limits(128 << 20);
        // 64 channels x 6 templates: 60 000 + 600 samples take 93 MB.
        assert_eq!(fitting_window(&settings, 384, 600, lavapipe), 60_000);
        // 96 channels: 140 MB for a batch; half a batch fits.
        assert_eq!(fitting_window(&settings, 576, 600, lavapipe), 30_000);
        // 384 channels: (w + 600) * 2304 * 4 <= 134 217 728 -> w <= 13 963: 12 000 divides.
        assert_eq!(fitting_window(&settings, 2304, 600, lavapipe), 12_000);
        // Nothing of at least 1 000 samples fits: the batch (the pass names the buffer).
        assert_eq!(fitting_window(&settings, 1 << 20, 600, lavapipe), 60_000);
        // 32-bit indexing binds too: at most u32::MAX values in one buffer.
        let huge = limits(u64::MAX);
        assert_eq!(fitting_window(&settings, 1 << 16, 0, huge), 60_000);
        assert_eq!(fitting_window(&settings, 1 << 17, 0, huge), 30_000);
        // A batch shorter than the shortest window chosen stays whole.
        let short = KilosortSettings {
            batch_size: 500,
            ..KilosortSettings::default()
        };
        assert_eq!(fitting_window(&short, 1 << 30, 0, lavapipe), 500);
    }
}
