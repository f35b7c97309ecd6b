//! Preprocessing (`docs/KILOSORT4.md` §2): the chain every pass runs on the device, and
//! its fit (channel offsets and the local whitening matrix).
//!
//! Per window, as Kilosort4 does per batch: sign (`invert_sign`), per-channel offset, common
//! median reference (`do_CAR`, torch's lower median), 300 Hz third-order Butterworth
//! high-pass, zero-phase; then whitening, which the passes apply themselves
//! ([`Whitener`]) because drift correction changes the matrix from batch to batch.
//!
//! EMUsort filters the recording first (SpikeInterface: a zero-phase Butterworth band-pass and
//! a zero-phase notch, `docs/KILOSORT4.md` §10.2); with `bandpass` / `notch_hz` set, those run
//! after the offsets and before the common reference (they are linear, so after or before the
//! offsets is the same away from the recording's ends).
//!
//! Two documented differences from Kilosort 4.1.7:
//! - the high-pass is our [`SosFilter`] run forward and backward with halos from the
//!   neighbouring windows, not Kilosort's circular FFT convolution over each padded batch,
//!   which wraps the batch's end into its start (`KILOSORT4.md` §2.2): our output does not
//!   depend on where windows begin; in batch interiors the two agree to float tolerance;
//! - the per-channel offset is one value per channel (the mean over the first window) instead
//!   of each batch's own mean, so windows of any length give the same samples; the high-pass
//!   removes what is left of the offset either way, and the offset only steers which channel
//!   the common median picks.

use std::ops::Range;

use cubecl::client::Client;
use dspk_core::RecordingSource;
use dspk_ops::design::{Band, butter, iirnotch};
use dspk_ops::linalg::{WhiteningMatrix, local_zca};
use dspk_ops::{
    ChannelAffine, ChannelMixing, CommonReference, CovarianceAccumulator, DeviceArray,
    DeviceWindow, Pipeline, Reference, SosFilter, Stage, mix_channels,
};

use crate::runner::Progress;
use crate::settings::KilosortSettings;
use crate::runner::{DeviceWindows, PassReport};
use crate::{Error, Result, SortProbe};

/// Eigenvalue floor of the local whitening, as Kilosort4 (`1e-6`, whitened-data units²).
pub const WHITENING_EPS: f64 = 1e-6;

/// The device chain run on every window before whitening.
#[derive(Debug, Clone, PartialEq)]
pub struct Preprocessing {
    offsets: Vec<f32>,
    sign: f32,
    car: bool,
    highpass: f64,
    /// `(low, high, order)` of the EMG band-pass.
    bandpass: Option<(f64, f64, usize)>,
    /// `(Hz, Q)` of the notch.
    notch: Option<(f64, f64)>,
    sample_rate: f64,
}

impl Preprocessing {
    /// The chain for channels whose offsets are `offsets` (subtracted after the sign), as
    /// `settings` says (`invert_sign`, `bandpass`, `notch_hz`, `do_CAR`, `highpass_cutoff`)
    /// at `sample_rate` Hz.
    ///
    /// # Errors
    ///
    /// [`Error::Setting`] for a cut-off or notch at or above Nyquist; the filters' design
    /// errors.
    pub fn new(offsets: Vec<f32>, settings: &KilosortSettings, sample_rate: f64) -> Result<Self> {
        let nyquist = sample_rate / 2.0;
        let mut below_nyquist = vec![("highpass_cutoff", settings.highpass_cutoff)];
        below_nyquist.extend(settings.bandpass.map(|[_, high]| ("bandpass", high)));
        below_nyquist.extend(settings.notch_hz.map(|hz| ("notch_hz", hz)));
        for (name, hz) in below_nyquist {
            if hz >= nyquist {
                return Err(Error::Setting {
                    name,
                    reason: format!("{hz} Hz is not below the Nyquist frequency ({nyquist} Hz)"),
                });
            }
        }
        let preprocessing = Self {
            offsets,
            sign: if settings.invert_sign { -1.0 } else { 1.0 },
            car: settings.do_car,
            highpass: settings.highpass_cutoff,
            bandpass: settings
                .bandpass
                .map(|[low, high]| (low, high, settings.bandpass_order)),
            notch: settings.notch_hz.map(|hz| (hz, settings.notch_q)),
            sample_rate,
        };
        preprocessing.settling()?;
        Ok(preprocessing)
    }

    /// The device pipeline: `sign * x - offset` per channel, the lower-median common
    /// reference, the zero-phase high-pass.
    ///
    /// # Errors
    ///
    /// As the stages' constructors (non-finite offsets, a filter design failure).
    pub fn pipeline(&self, client: &Client) -> Result<Pipeline> {
        let gains = vec![self.sign; self.offsets.len()];
        let offsets: Vec<f32> = self.offsets.iter().map(|o| -o).collect();
        let mut pipeline = Pipeline::new().with(ChannelAffine::new(client, &gains, &offsets)?);
        for filter in self.emg_filters()? {
            pipeline = pipeline.with(filter);
        }
        if self.car {
            pipeline = pipeline.with(CommonReference::new(Reference::LowerMedian));
        }
        Ok(pipeline.with(self.highpass()?))
    }

    /// Samples of halo the chain needs on each side of the samples it must get right: the
    /// filters' settling lengths summed (the other stages work sample by sample). Equals
    /// [`pipeline`](Self::pipeline)`(..).settling()`, without building it on a device.
    ///
    /// # Errors
    ///
    /// As [`pipeline`](Self::pipeline) for the filters' design.
    pub fn settling(&self) -> Result<usize> {
        let emg: usize = self.emg_filters()?.iter().map(Stage::settling).sum();
        Ok(emg + self.highpass()?.settling())
    }

    /// The zero-phase EMG band-pass and notch (SpikeInterface's `bandpass_filter` and
    /// `notch_filter` as EMUsort calls them), those that are set.
    fn emg_filters(&self) -> Result<Vec<SosFilter>> {
        let mut filters = Vec::new();
        if let Some((low, high, order)) = self.bandpass {
            let sos = butter(order, Band::Bandpass(low, high), self.sample_rate)?;
            filters.push(SosFilter::zero_phase(&sos)?);
        }
        if let Some((hz, q)) = self.notch {
            let sos = iirnotch(hz, q, self.sample_rate)?;
            filters.push(SosFilter::zero_phase(&sos)?);
        }
        Ok(filters)
    }

    /// The zero-phase 3rd-order Butterworth high-pass.
    fn highpass(&self) -> Result<SosFilter> {
        let sos = butter(3, Band::Highpass(self.highpass), self.sample_rate)?;
        Ok(SosFilter::zero_phase(&sos)?)
    }

    /// The offsets subtracted (after the sign), one per sorted channel.
    #[must_use]
    pub fn offsets(&self) -> &[f32] {
        &self.offsets
    }
}

/// The mean of each of `channels` over `samples` of `source`, times `sign`, read on the host
/// and summed in `f64`: the offsets of [`Preprocessing`].
///
/// # Errors
///
/// [`Error::Input`] for an empty range or a channel holding a NaN or infinite sample in it;
/// the source's read errors.
pub fn channel_offsets(
    source: &dyn RecordingSource,
    channels: &[usize],
    samples: Range<u64>,
    sign: f32,
) -> Result<Vec<f32>> {
    let n = usize::try_from(samples.end.saturating_sub(samples.start)).unwrap_or(0);
    if n == 0 {
        return Err(Error::Input {
            what: "recording",
            reason: "no samples to estimate the channel offsets from".to_string(),
        });
    }
    let mut values = vec![0f32; channels.len() * n];
    source.read(channels, samples.clone(), &mut values)?;
    channels
        .iter()
        .zip(values.chunks_exact(n))
        .map(|(&channel, row)| {
            if let Some(s) = row.iter().position(|v| !v.is_finite()) {
                return Err(Error::Input {
                    what: "recording",
                    reason: format!(
                        "channel {channel} sample {} is {}: NaN and infinite samples cannot be sorted",
                        samples.start + s as u64,
                        row[s]
                    ),
                });
            }
            let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / n as f64;
            Ok((mean * f64::from(sign)) as f32)
        })
        .collect()
}

/// The batches whose samples enter the whitening covariance: `0, nskip, 2 nskip, ...` below
/// `batches - 1` (Kilosort4 never uses the last batch), or batch 0 when there is only one (where
/// Kilosort4 divides by zero; we use it).
#[must_use]
pub fn whitening_batches(batches: usize, nskip: usize) -> Vec<usize> {
    if batches <= 1 {
        return vec![0; batches];
    }
    (0..batches - 1).step_by(nskip.max(1)).collect()
}

/// The local whitening matrix (`Wrot`, `whitening_range` taps per row): the uncentred covariance
/// `sum Y Y^T / n` of the preprocessed samples of [`whitening_batches`] (batches of
/// `settings.batch_size` recording samples, whatever the windows are), then for each channel
/// the ZCA of its `whitening_range` nearest channels by distance (ties: the lower channel
/// index) with eigenvalue magnitudes plus [`WHITENING_EPS`] (Kilosort4's SVD form); also each
/// channel's standard deviation, `sqrt` of the covariance's diagonal. One pass.
///
/// # Errors
///
/// [`Error::Input`] when the covariance is not finite (NaN or infinite samples); device and
/// read errors of the pass.
pub fn fit_whitening(
    client: &Client,
    windows: &mut DeviceWindows,
    probe: &SortProbe,
    settings: &KilosortSettings,
    progress: &mut dyn FnMut(Progress),
) -> Result<(WhiteningMatrix, Vec<f32>, PassReport)> {
    let batch = settings.batch_size;
    let batches = windows.num_samples().div_ceil(batch) as usize;
    let selected = whitening_batches(batches, settings.nskip);
    let mut covariance = CovarianceAccumulator::new(client, probe.len())?;
    let report = windows.pass("whitening fit", progress, |window| {
        for range in selected_ranges(window, &selected, batch) {
            covariance.add(client, window.array(), range)?;
        }
        Ok(())
    })?;
    let cov = covariance.finish(client)?;
    if let Some(i) = cov.iter().position(|v| !v.is_finite()) {
        return Err(Error::Input {
            what: "recording",
            reason: format!(
                "the whitening covariance of channels {} and {} is {}: the recording holds NaN or infinite samples",
                i / probe.len(),
                i % probe.len(),
                cov[i]
            ),
        });
    }
    let positions: Vec<(f64, f64)> = probe
        .positions()
        .iter()
        .map(|p| (f64::from(p[0]), f64::from(p[1])))
        .collect();
    let white = local_zca(&cov, &positions, settings.whitening_range, WHITENING_EPS)?;
    let n = probe.len();
    let std = (0..n)
        .map(|c| cov[c * n + c].max(0.0).sqrt() as f32)
        .collect();
    Ok((white, std, report))
}

/// The local index ranges of `window`'s owned samples that fall in the `selected` batches of
/// `batch` recording samples each.
pub(crate) fn selected_ranges(
    window: &DeviceWindow,
    selected: &[usize],
    batch: u64,
) -> Vec<Range<usize>> {
    let owned = window.window().valid();
    let read_start = window.window().read().start;
    let first = owned.start / batch;
    let last = owned.end.div_ceil(batch);
    (first..last)
        .filter(|b| selected.binary_search(&(*b as usize)).is_ok())
        .filter_map(|b| {
            let start = (b * batch).max(owned.start);
            let end = ((b + 1) * batch).min(owned.end);
            (start < end).then(|| (start - read_start) as usize..(end - read_start) as usize)
        })
        .collect()
}

/// Applies a channel mixing (the whitening, or drift correction times whitening) to processed
/// windows, into a buffer of its own sized for the longest window.
pub struct Whitener {
    mixing: ChannelMixing,
    buffer: DeviceArray,
    current: Option<DeviceWindow>,
}

impl Whitener {
    /// A whitener by `mixing`, for windows of up to `max_samples`.
    ///
    /// # Errors
    ///
    /// As [`DeviceArray::empty`].
    pub fn new(client: &Client, mixing: ChannelMixing, max_samples: usize) -> Result<Self> {
        Ok(Self {
            buffer: DeviceArray::empty(client, mixing.channels(), max_samples.max(1))?,
            mixing,
            current: None,
        })
    }

    /// The sparse mixing of a local whitening matrix (its taps per row only).
    ///
    /// # Errors
    ///
    /// As [`ChannelMixing::from_sparse`].
    pub fn sparse(client: &Client, white: &WhiteningMatrix) -> Result<ChannelMixing> {
        let indices: Vec<usize> = white.indices().iter().map(|&i| i as usize).collect();
        Ok(ChannelMixing::from_sparse(
            client,
            &indices,
            white.weights(),
            white.n(),
        )?)
    }

    /// Mixes by the dense `C x C` row-major `matrix` from now on (drift correction changes it
    /// per batch): written in place into the dense mixing's buffer, allocated once.
    ///
    /// # Errors
    ///
    /// As [`ChannelMixing::set_dense`] and [`ChannelMixing::from_dense`].
    pub fn set_dense(&mut self, client: &Client, matrix: &[f64]) -> Result<()> {
        if self.mixing.is_dense() {
            self.mixing.set_dense(client, matrix)?;
        } else {
            self.mixing = ChannelMixing::from_dense(client, matrix, self.mixing.channels())?;
        }
        Ok(())
    }

    /// `matrix x window`, lent with the window's ranges (valid until the next call).
    ///
    /// # Errors
    ///
    /// As [`mix_channels`]; a window longer than the buffer.
    pub fn whiten(&mut self, client: &Client, window: &DeviceWindow) -> Result<&DeviceWindow> {
        let array = window.array();
        let out = self.buffer.front(array.channels(), array.samples())?;
        mix_channels(client, array, &out, &self.mixing)?;
        Ok(&*self
            .current
            .insert(DeviceWindow::new(out, window.window().clone())?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitening_batches_follow_kilosort4_and_use_a_lone_batch() {
        assert_eq!(whitening_batches(0, 25), Vec::<usize>::new());
        assert_eq!(whitening_batches(1, 25), vec![0]);
        assert_eq!(whitening_batches(2, 25), vec![0]);
        assert_eq!(whitening_batches(26, 25), vec![0]);
        assert_eq!(whitening_batches(27, 25), vec![0, 25]);
        assert_eq!(whitening_batches(10, 3), vec![0, 3, 6]);
    }
}
