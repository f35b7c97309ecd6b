//! IIR filter design: Butterworth, Chebyshev type I and notch filters as second-order sections.

use std::f64::consts::PI;

use super::sos::Sos;
use super::zpk::Zpk;
use crate::{Error, Result};

/// The highest IIR order accepted: far past where a bilinear design in `f64` stays accurate.
pub const MAX_IIR_ORDER: usize = 64;

/// A filter's band edges in Hz (scipy's `Wn` with `btype`, given with `fs=`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Band {
    /// Passes below the cutoff (`btype="lowpass"`).
    Lowpass(f64),
    /// Passes above the cutoff (`btype="highpass"`).
    Highpass(f64),
    /// Passes between the two edges (`btype="bandpass"`), low edge first.
    Bandpass(f64, f64),
    /// Stops between the two edges (`btype="bandstop"`), low edge first.
    Bandstop(f64, f64),
}

impl Band {
    /// The edges divided by Nyquist (`fs / 2`), as scipy normalises `Wn`, after checking `fs`
    /// (error named `fs_what`) and that each edge lies strictly between 0 and Nyquist and band
    /// edges increase (error named `band_what`).
    pub(crate) fn normalized(
        self,
        band_what: &'static str,
        fs_what: &'static str,
        fs: f64,
    ) -> Result<Vec<f64>> {
        check_sample_rate(fs_what, fs)?;
        let edges = match self {
            Band::Lowpass(f) | Band::Highpass(f) => vec![f],
            Band::Bandpass(lo, hi) | Band::Bandstop(lo, hi) => vec![lo, hi],
        };
        for &f in &edges {
            if !(f > 0.0 && f < fs / 2.0) {
                return Err(Error::InvalidParameter {
                    what: band_what,
                    reason: format!(
                        "{f} Hz must lie strictly between 0 and fs/2 = {} Hz",
                        fs / 2.0
                    ),
                });
            }
        }
        if edges.len() == 2 && edges[0] >= edges[1] {
            return Err(Error::InvalidParameter {
                what: band_what,
                reason: format!(
                    "low edge {} Hz must be below high edge {} Hz",
                    edges[0], edges[1]
                ),
            });
        }
        Ok(edges.iter().map(|&f| f / (fs / 2.0)).collect())
    }
}

/// Checks a sample rate: finite and positive.
pub(crate) fn check_sample_rate(what: &'static str, fs: f64) -> Result<()> {
    if fs.is_finite() && fs > 0.0 {
        return Ok(());
    }
    Err(Error::InvalidParameter {
        what,
        reason: format!("sample rate {fs} Hz must be finite and positive"),
    })
}

/// A digital Butterworth filter of order `order` as second-order sections:
/// `scipy.signal.butter(order, Wn, btype, output="sos", fs=fs)`.
///
/// Designed as scipy does, in `f64`: the analog prototype (`buttap`), prewarped edges
/// `4 tan(pi Wn / 2)`, `lp2lp`/`lp2hp`/`lp2bp`/`lp2bs` in zero-pole-gain form, `bilinear_zpk` and
/// `zpk2sos` with nearest pairing, so the sections come in scipy's order, except where two
/// sections' pole radii agree to rounding (about one ulp, as two sections of
/// `butter(10, Bandpass(150, 14850), 30000)`): their order then follows the last bit of each
/// side's rounding and may differ from scipy's, the cascade being the same filter. Bandpass
/// and bandstop filters have `2 * order` poles. Coefficients agree with scipy 1.17 to about `1e-13` relative to
/// the section's largest coefficient (tested on orders 1 to 8).
///
/// # Errors
///
/// [`Error::InvalidParameter`] when `order` is 0 or above [`MAX_IIR_ORDER`], `fs` is not finite
/// and positive, an edge is not strictly between 0 and `fs / 2` (NaN included), or band edges do
/// not increase.
pub fn butter(order: usize, band: Band, fs: f64) -> Result<Sos> {
    check_order("butter: order", order)?;
    design(Zpk::buttap(order), ("butter: band", "butter: fs"), band, fs)
}

/// A digital Chebyshev type I filter with `ripple_db` dB of passband ripple, as second-order
/// sections: `scipy.signal.cheby1(order, ripple_db, Wn, btype, output="sos", fs=fs)`.
///
/// The same chain as [`butter`] from the `cheb1ap` prototype; the same agreement with scipy.
///
/// # Errors
///
/// As [`butter`], and when `ripple_db` is not finite and positive.
pub fn cheby1(order: usize, ripple_db: f64, band: Band, fs: f64) -> Result<Sos> {
    check_order("cheby1: order", order)?;
    if !(ripple_db.is_finite() && ripple_db > 0.0) {
        return Err(Error::InvalidParameter {
            what: "cheby1: ripple_db",
            reason: format!("passband ripple {ripple_db} dB must be finite and positive"),
        });
    }
    design(
        Zpk::cheb1ap(order, ripple_db),
        ("cheby1: band", "cheby1: fs"),
        band,
        fs,
    )
}

/// A second-order IIR notch filter removing `w0` Hz with quality factor `q` (-3 dB bandwidth
/// `w0 / q`), as one section: `scipy.signal.iirnotch(w0, Q, fs)` (its `b` and `a` in one row).
///
/// # Errors
///
/// [`Error::InvalidParameter`] when `fs` is not finite and positive, `w0` is not strictly between
/// 0 and `fs / 2`, or `q` is not finite and positive.
pub fn iirnotch(w0: f64, q: f64, fs: f64) -> Result<Sos> {
    check_sample_rate("iirnotch: fs", fs)?;
    if !(w0 > 0.0 && w0 < fs / 2.0) {
        return Err(Error::InvalidParameter {
            what: "iirnotch: w0",
            reason: format!(
                "{w0} Hz must lie strictly between 0 and fs/2 = {} Hz",
                fs / 2.0
            ),
        });
    }
    if !(q.is_finite() && q > 0.0) {
        return Err(Error::InvalidParameter {
            what: "iirnotch: q",
            reason: format!("quality factor {q} must be finite and positive"),
        });
    }
    let w0 = 2.0 * w0 / fs;
    let bw = w0 / q * PI;
    let w0 = w0 * PI;
    let beta = (bw / 2.0).tan();
    let gain = 1.0 / (1.0 + beta);
    let cos = w0.cos();
    Sos::new(vec![[
        gain,
        gain * (-2.0 * cos),
        gain,
        1.0,
        -2.0 * gain * cos,
        2.0 * gain - 1.0,
    ]])
}

/// Checks an IIR order: 1 to [`MAX_IIR_ORDER`].
fn check_order(what: &'static str, order: usize) -> Result<()> {
    if (1..=MAX_IIR_ORDER).contains(&order) {
        return Ok(());
    }
    Err(Error::InvalidParameter {
        what,
        reason: format!("order {order} must be between 1 and {MAX_IIR_ORDER}"),
    })
}

/// scipy's `iirfilter` for a digital filter from an analog lowpass prototype.
fn design(
    prototype: Zpk,
    (band_what, fs_what): (&'static str, &'static str),
    band: Band,
    fs: f64,
) -> Result<Sos> {
    let wn = band.normalized(band_what, fs_what, fs)?;
    // Prewarp for the bilinear transform at fs = 2 (half-cycles per sample).
    let warped: Vec<f64> = wn
        .iter()
        .map(|&w| 2.0 * 2.0 * (PI * w / 2.0).tan())
        .collect();
    let analog = match band {
        Band::Lowpass(_) => prototype.lp2lp(warped[0]),
        Band::Highpass(_) => prototype.lp2hp(warped[0]),
        Band::Bandpass(..) | Band::Bandstop(..) => {
            let bw = warped[1] - warped[0];
            let wo = (warped[0] * warped[1]).sqrt();
            if matches!(band, Band::Bandpass(..)) {
                prototype.lp2bp(wo, bw)
            } else {
                prototype.lp2bs(wo, bw)
            }
        }
    };
    analog.bilinear(2.0).to_sos()
}
