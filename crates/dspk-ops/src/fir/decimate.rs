//! `Decimate`: scipy's `decimate` on the device.

use cubecl::client::Client;

use super::Fir;
use crate::design::host::DecimateFilter;
use crate::design::{decimate_fir, decimate_iir};
use crate::iir::SosFilter;
use crate::{DeviceArray, Result};

/// Downsampling by an integer factor `q` after an anti-aliasing filter, on every channel of a
/// `[channels, samples]` `f32` window: `scipy.signal.decimate(x, q, ftype=..., zero_phase=True)`,
/// `ceil(samples / q)` outputs per channel.
///
/// - [`DecimateFilter::Iir`] (scipy's default): the order-8 Chebyshev I filter
///   ([`decimate_iir`]) applied forward and backward ([`SosFilter::zero_phase`]), keeping every
///   `q`-th sample as the backward pass writes (the kept samples are computed once, the
///   others never written);
/// - [`DecimateFilter::Fir`]: the Hamming-window FIR of `20 q + 1` taps ([`decimate_fir`]) as
///   a polyphase filter ([`Fir::resample`]), which computes only the kept samples.
///
/// Accuracy and NaN behaviour are those of the underlying filter.
#[derive(Debug)]
pub struct Decimate {
    factor: usize,
    filter: Filter,
}

#[derive(Debug)]
enum Filter {
    Iir(Box<SosFilter>),
    Fir(Fir),
}

impl Decimate {
    /// A decimator by `q` with scipy's default filter of the given type.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidParameter`](crate::Error::InvalidParameter) for `q = 0` (or a `q` whose
    /// filter cannot be designed).
    pub fn new(q: usize, filter: DecimateFilter) -> Result<Self> {
        let filter = match filter {
            DecimateFilter::Iir => Filter::Iir(Box::new(
                SosFilter::zero_phase(&decimate_iir(q)?)?.with_decimation(q),
            )),
            DecimateFilter::Fir => Filter::Fir(Fir::resample(&decimate_fir(q)?)?),
        };
        Ok(Self { factor: q, filter })
    }

    /// The decimation factor.
    #[must_use]
    pub fn factor(&self) -> usize {
        self.factor
    }

    /// Output samples per channel for `samples` input samples: `ceil(samples / q)`.
    #[must_use]
    pub fn output_len(&self, samples: usize) -> usize {
        samples.div_ceil(self.factor)
    }

    /// Decimates every channel of `input` into `output` (`channels x output_len(samples)`),
    /// queued on `client`.
    ///
    /// # Errors
    ///
    /// As [`SosFilter::run`] or [`Fir::run`] (the IIR filter needs more than 27 samples).
    pub fn run(
        &mut self,
        client: &Client,
        input: &DeviceArray,
        output: &DeviceArray,
    ) -> Result<()> {
        match &mut self.filter {
            Filter::Iir(filter) => filter.run(client, input, output),
            Filter::Fir(filter) => filter.run(client, input, output),
        }
    }
}
