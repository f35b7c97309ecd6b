//! The preprocessing chain (`docs/KILOSORT4.md` §2.1-2.2) every pass runs on the device, and the
//! channel offsets it subtracts.
//!
//! Per window, as Kilosort4 does per batch: sign (`invert_sign`), per-channel offset, common
//! median reference (`do_CAR`, torch's lower median), 300 Hz third-order Butterworth
//! high-pass, zero-phase; then whitening, which the passes apply themselves
//! ([`Whitener`](super::Whitener)) because drift correction changes the matrix from batch to
//! batch.
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
use dspk_ops::{ChannelAffine, CommonReference, Pipeline, Reference, SosFilter, Stage};

use crate::runner::WindowChain;
use crate::{Error, KilosortSettings, Result};

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

impl WindowChain for Preprocessing {
    fn pipeline(&self, client: &Client) -> Result<Pipeline> {
        Preprocessing::pipeline(self, client)
    }

    fn settling(&self) -> Result<usize> {
        Preprocessing::settling(self)
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
