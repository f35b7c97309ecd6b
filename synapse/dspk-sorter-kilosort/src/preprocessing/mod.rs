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

pub use chain::{Preprocessing, channel_offsets};
pub use fit::{FitKey, PreprocessingFit};
pub(crate) use whitening::selected_ranges;
pub use whitening::{WHITENING_EPS, Whitener, fit_whitening, whitening_batches};

use crate::runner::{CorrectedWindows, DeviceWindows, PassReport, SortContext, resident_budget};
use crate::{Error, KilosortSettings, Result};

/// Where the preprocessing stage reads from and what it may reuse, beyond the settings.
#[derive(Debug, Clone, Copy)]
pub struct Reading<'a> {
    /// Samples each window owns.
    pub window: u64,
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
    check_window(settings, reading.window)?;
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
    let budget = resident_budget(ctx.client(), settings.resident_bytes);
    let mut windows = DeviceWindows::new(
        ctx.client(),
        source,
        probe.channels().to_vec(),
        reading.window,
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
