//! EMUsort's channel delays (`docs/KILOSORT4.md` §10.1.1), on the device: estimated from the
//! lagged correlations of normalised channel magnitudes ([`DelayEstimator`], on preprocessed
//! windows before whitening), removed from every window by moving each row by its delay
//! ([`DelayAligner`], after whitening).
//!
//! Both read real neighbouring samples from the windows' halos where EMUsort rolls each padded
//! batch circularly, so results do not depend on where windows begin: estimation needs
//! `max_lag` samples of halo, alignment [`DelayAligner::halo`] more than the stages after it.

mod align;
mod estimate;
mod kernel;
#[cfg(test)]
mod reference;
#[cfg(test)]
mod tests;

pub use align::DelayAligner;
pub use estimate::{ChannelDelays, DelayEstimator, emusort_max_lag};

use cubecl::client::Client;
use dspk_ops::DeviceWindow;

use super::{selected_ranges, whitening_batches};
use crate::runner::{DeviceWindows, SortContext, WindowTransform};
use crate::{Error, KilosortSettings, Result};

/// The longest channel delay searched, in samples: `floor(max_chan_delay_ms * fs / 1000)`
/// (EMUsort's `floor(fs / 500)` for 2 ms).
///
/// # Errors
///
/// [`Error::Setting`] when that is 0 samples.
pub fn max_delay_samples(settings: &KilosortSettings, sample_rate: f64) -> Result<usize> {
    let lag = (settings.max_chan_delay_ms * sample_rate / 1000.0).floor();
    if !(1.0..1e6).contains(&lag) {
        return Err(Error::Setting {
            name: "max_chan_delay_ms",
            reason: format!(
                "{} ms is {lag} samples at {sample_rate} Hz: the delay search needs at least one",
                settings.max_chan_delay_ms
            ),
        });
    }
    Ok(lag as usize)
}

/// EMUsort's channel delays (`docs/KILOSORT4.md` §10.1.1): lagged correlations of the
/// normalised, rectified, preprocessed (unwhitened) channels over the whitening batches, up to
/// `max_lag` samples. One pass over the windows holding those batches, recorded in `ctx`.
///
/// # Errors
///
/// [`Error::Input`] when the recording is too short for the search or every channel carries
/// the same signal; device and read errors.
pub fn run(
    ctx: &mut SortContext,
    windows: &mut DeviceWindows,
    max_lag: usize,
) -> Result<ChannelDelays> {
    let client = ctx.client().clone();
    let batch = ctx.settings().batch_size;
    let batches = windows.num_samples().div_ceil(batch) as usize;
    let selected = whitening_batches(batches, ctx.settings().nskip);
    let channels = windows.channels();
    let mut estimator = DelayEstimator::new(&client, channels, max_lag)?;
    let overlaps = |w: &dspk_core::HaloWindow| {
        let valid = w.valid();
        let (first, last) = (valid.start / batch, valid.end.div_ceil(batch));
        (first..last).any(|b| selected.binary_search(&(b as usize)).is_ok())
    };
    ctx.pass_selected(windows, "channel delays", overlaps, |w| {
        for range in selected_ranges(w, &selected, batch) {
            // A batch's sliver at a window's edge too short to hold a lag adds nothing.
            if range.len() > max_lag {
                estimator.accumulate_range(&client, w, range)?;
            }
        }
        Ok(())
    })?;
    if estimator.ranges() == 0 {
        return Err(Error::Input {
            what: "channel delays",
            reason: format!(
                "the recording ({} samples) is too short for a delay search of ±{max_lag} samples",
                windows.num_samples()
            ),
        });
    }
    let delays = estimator.finish()?;
    if all_channels_alike(&delays, channels) {
        return Err(Error::Input {
            what: "channel delays",
            reason: format!(
                "all {channels} channels carry the same signal (every pair correlates as a \
                 channel with itself, at lag 0): there are no delays to estimate"
            ),
        });
    }
    Ok(delays)
}

/// Whether every pair of channels correlates as each channel does with itself, at lag 0:
/// the same signal on every channel (to float rounding).
fn all_channels_alike(delays: &ChannelDelays, channels: usize) -> bool {
    (0..channels).all(|a| {
        let own = delays.peak[a * channels + a];
        (0..channels).all(|b| {
            let i = a * channels + b;
            delays.lag[i] == 0 && (delays.peak[i] - own).abs() <= 1e-6 * own.abs()
        })
    })
}

impl WindowTransform for DelayAligner {
    fn apply(&mut self, client: &Client, window: &DeviceWindow) -> Result<&DeviceWindow> {
        self.align(client, window)
    }
}
