//! Filters for rational resampling and decimation, as scipy's `resample_poly` and `decimate`
//! design them by default.

use super::fir::{Window, firwin};
use super::iir::{Band, cheby1};
use super::sos::Sos;
use crate::{Error, Result};

/// The FIR filter of a rational resampler by `up / down`, laid out as scipy's `resample_poly`
/// uses it: output sample `k` is `sum_i taps[k * down + half_len - i * up] * x[i]` over the
/// taps that exist (zeros beyond the input, scipy's `padtype="constant"`).
#[derive(Debug, Clone, PartialEq)]
pub struct PolyphaseFilter {
    /// Upsampling factor, reduced by the greatest common divisor.
    pub up: usize,
    /// Downsampling factor, reduced by the greatest common divisor.
    pub down: usize,
    /// Index of the centre tap: `(taps.len() - 1) / 2`.
    pub half_len: usize,
    /// The taps, already multiplied by `up` (as scipy does).
    pub taps: Vec<f64>,
}

impl PolyphaseFilter {
    /// A resampler by `up / down` with the given FIR `window` (scipy's `resample_poly(x, up,
    /// down, window=array)`): factors reduced by their gcd, taps = `window * up`, centre at
    /// `(len - 1) / 2`. When the reduced factors are both 1 the filter is the identity `[1]`,
    /// as scipy returns the input unchanged.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidParameter`] when `up` or `down` is 0, or `window` is empty or not finite.
    pub fn with_window(up: usize, down: usize, window: &[f64]) -> Result<Self> {
        let (up, down) = reduce(up, down)?;
        super::sos::check_coefficients("resample_poly: window", window)?;
        if up == 1 && down == 1 {
            return Ok(Self::identity());
        }
        Ok(Self {
            up,
            down,
            half_len: (window.len() - 1) / 2,
            taps: window.iter().map(|&w| w * up as f64).collect(),
        })
    }

    /// The number of output samples for `n_in` input samples: `ceil(n_in * up / down)`, or
    /// `None` on overflow.
    pub fn output_len(&self, n_in: usize) -> Option<usize> {
        n_in.checked_mul(self.up).map(|n| n.div_ceil(self.down))
    }

    fn identity() -> Self {
        Self {
            up: 1,
            down: 1,
            half_len: 0,
            taps: vec![1.0],
        }
    }
}

/// The default filter of `scipy.signal.resample_poly(x, up, down)`: after dividing `up` and
/// `down` by their gcd, `firwin(2 * half_len + 1, 1 / max(up, down), window=("kaiser", 5.0))`
/// with `half_len = 10 * max(up, down)`, times `up`. The identity `[1]` when `up == down`.
///
/// # Errors
///
/// [`Error::InvalidParameter`] when `up` or `down` is 0.
pub fn resample_poly_filter(up: usize, down: usize) -> Result<PolyphaseFilter> {
    let (up, down) = reduce(up, down)?;
    if up == 1 && down == 1 {
        return Ok(PolyphaseFilter::identity());
    }
    let max_rate = up.max(down);
    let half_len = 10 * max_rate;
    let taps = firwin(
        2 * half_len + 1,
        Band::Lowpass(1.0 / max_rate as f64),
        Window::Kaiser(5.0),
        2.0,
    )?;
    PolyphaseFilter::with_window(up, down, &taps)
}

/// The anti-aliasing filter of `scipy.signal.decimate(x, q)` (`ftype="iir"`, the default): an
/// order-8 Chebyshev type I lowpass with 0.05 dB ripple at `0.8 / q` of Nyquist,
/// `cheby1(8, 0.05, 0.8 / q, output="sos")`. It is applied forwards and backwards
/// ([`host::decimate`](super::host::decimate)).
///
/// # Errors
///
/// [`Error::InvalidParameter`] when `q` is 0.
pub fn decimate_iir(q: usize) -> Result<Sos> {
    check_factor("decimate: q", q)?;
    cheby1(8, 0.05, Band::Lowpass(0.8 / q as f64), 2.0)
}

/// The anti-aliasing filter of `scipy.signal.decimate(x, q, ftype="fir")`:
/// `firwin(20 * q + 1, 1 / q, window="hamming")`, applied as a zero-phase polyphase filter
/// (`resample_poly(x, 1, q, window=taps)`).
///
/// # Errors
///
/// [`Error::InvalidParameter`] when `q` is below 2 (the cutoff `1 / q` must be below Nyquist).
pub fn decimate_fir(q: usize) -> Result<PolyphaseFilter> {
    if q < 2 {
        return Err(Error::InvalidParameter {
            what: "decimate: q",
            reason: format!("an FIR decimation factor must be at least 2, got {q}"),
        });
    }
    let taps = firwin(
        20 * q + 1,
        Band::Lowpass(1.0 / q as f64),
        Window::Hamming,
        2.0,
    )?;
    PolyphaseFilter::with_window(1, q, &taps)
}

/// `up` and `down` divided by their gcd, after checking both are at least 1.
fn reduce(up: usize, down: usize) -> Result<(usize, usize)> {
    check_factor("resample_poly: up", up)?;
    check_factor("resample_poly: down", down)?;
    let (mut a, mut b) = (up, down);
    while b != 0 {
        (a, b) = (b, a % b);
    }
    Ok((up / a, down / a))
}

/// Checks a resampling factor: at least 1.
fn check_factor(what: &'static str, factor: usize) -> Result<()> {
    if factor == 0 {
        return Err(Error::InvalidParameter {
            what,
            reason: "the factor must be at least 1, got 0".to_string(),
        });
    }
    Ok(())
}
