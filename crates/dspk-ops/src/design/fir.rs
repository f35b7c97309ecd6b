//! FIR design by the window method (`scipy.signal.firwin`) and Kaiser's formulas.

use std::f64::consts::PI;

use super::iir::Band;
use crate::{Error, Result};

/// The largest Kaiser `beta` accepted: `I0(beta)` overflows `f64` a little above 700 (a
/// stopband attenuation over 6000 dB, far past anything `f64` taps can reach).
pub const MAX_KAISER_BETA: f64 = 700.0;

/// A symmetric window for [`firwin`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Window {
    /// `0.54 + 0.46 cos(x)`, `x` from `-pi` to `pi`: scipy's `"hamming"` (firwin's default).
    Hamming,
    /// `I0(beta sqrt(1 - (2n/(M-1) - 1)^2)) / I0(beta)`: scipy's `("kaiser", beta)`.
    Kaiser(f64),
}

impl Window {
    /// The `len` window values: `scipy.signal.get_window(window, len, fftbins=False)` (the
    /// symmetric window; all ones for `len <= 1`). Agrees with scipy to a few ulp.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidParameter`] when a Kaiser `beta` is not between 0 and [`MAX_KAISER_BETA`]
    /// (NaN included).
    pub fn symmetric(self, len: usize) -> Result<Vec<f64>> {
        if let Window::Kaiser(beta) = self
            && !(0.0..=MAX_KAISER_BETA).contains(&beta)
        {
            return Err(Error::InvalidParameter {
                what: "window: kaiser beta",
                reason: format!("beta {beta} must lie between 0 and {MAX_KAISER_BETA}"),
            });
        }
        if len <= 1 {
            return Ok(vec![1.0; len]);
        }
        let last = (len - 1) as f64;
        Ok(match self {
            Window::Hamming => {
                // numpy's linspace(-pi, pi, len), last point exact.
                let step = 2.0 * PI / last;
                (0..len)
                    .map(|i| {
                        let x = if i == len - 1 {
                            PI
                        } else {
                            i as f64 * step + -PI
                        };
                        0.54 + (1.0 - 0.54) * x.cos()
                    })
                    .collect()
            }
            Window::Kaiser(beta) => {
                let alpha = last / 2.0;
                let scale = bessel_i0(beta);
                (0..len)
                    .map(|i| {
                        let r = (i as f64 - alpha) / alpha;
                        bessel_i0(beta * (1.0 - r * r).sqrt()) / scale
                    })
                    .collect()
            }
        })
    }
}

/// A linear-phase FIR filter of `numtaps` taps by the window method, scaled to unit gain at the
/// centre of its first passband: `scipy.signal.firwin(numtaps, cutoff, window=window,
/// pass_zero=..., scale=True, fs=fs)` with `cutoff` and `pass_zero` given by `band`
/// (`Lowpass` = `pass_zero=True`, `Highpass` and `Bandpass` = `False`, `Bandstop` = `True`).
///
/// Taps agree with scipy 1.17 to about `1e-15` relative to the largest tap.
///
/// # Errors
///
/// [`Error::InvalidParameter`] when `numtaps` is 0, `fs` is not finite and positive, an edge is
/// not strictly between 0 and `fs / 2`, band edges do not increase, the window parameter is
/// invalid, or `numtaps` is even for a filter that passes Nyquist (`Highpass`, `Bandstop`),
/// which scipy refuses too.
pub fn firwin(numtaps: usize, band: Band, window: Window, fs: f64) -> Result<Vec<f64>> {
    let cutoff = band.normalized("firwin: band", "firwin: fs", fs)?;
    if numtaps == 0 {
        return Err(Error::InvalidParameter {
            what: "firwin: numtaps",
            reason: "at least one tap is needed, got 0".to_string(),
        });
    }
    let (pass_zero, pass_nyquist) = match band {
        Band::Lowpass(_) => (true, false),
        Band::Highpass(_) => (false, true),
        Band::Bandpass(..) => (false, false),
        Band::Bandstop(..) => (true, true),
    };
    if pass_nyquist && numtaps.is_multiple_of(2) {
        return Err(Error::InvalidParameter {
            what: "firwin: numtaps",
            reason: format!(
                "{numtaps} taps: a filter with an even number of taps has zero response at \
                 Nyquist, so it cannot be {band:?}"
            ),
        });
    }
    let mut edges = Vec::with_capacity(4);
    if pass_zero {
        edges.push(0.0);
    }
    edges.extend(cutoff);
    if pass_nyquist {
        edges.push(1.0);
    }
    let win = window.symmetric(numtaps)?;
    let alpha = 0.5 * (numtaps - 1) as f64;
    let m: Vec<f64> = (0..numtaps).map(|i| i as f64 - alpha).collect();
    let mut h = vec![0.0; numtaps];
    for pair in edges.chunks_exact(2) {
        let (left, right) = (pair[0], pair[1]);
        for (hi, &mi) in h.iter_mut().zip(&m) {
            *hi += right * sinc(right * mi);
            *hi -= left * sinc(left * mi);
        }
    }
    for (hi, wi) in h.iter_mut().zip(&win) {
        *hi *= wi;
    }
    let (left, right) = (edges[0], edges[1]);
    let scale_frequency = if left == 0.0 {
        0.0
    } else if right == 1.0 {
        1.0
    } else {
        0.5 * (left + right)
    };
    let s: f64 = h
        .iter()
        .zip(&m)
        .map(|(hi, mi)| hi * (PI * mi * scale_frequency).cos())
        .sum();
    for hi in &mut h {
        *hi /= s;
    }
    Ok(h)
}

/// The Kaiser window `beta` for a stopband attenuation of `atten_db` dB:
/// `scipy.signal.kaiser_beta(a)` (`0.1102 (a - 8.7)` above 50 dB, `0.5842 (a - 21)^0.4 +
/// 0.07886 (a - 21)` above 21 dB, else 0).
pub fn kaiser_beta(atten_db: f64) -> f64 {
    if atten_db > 50.0 {
        0.1102 * (atten_db - 8.7)
    } else if atten_db > 21.0 {
        0.5842 * (atten_db - 21.0).powf(0.4) + 0.07886 * (atten_db - 21.0)
    } else {
        0.0
    }
}

/// The attenuation in dB that a Kaiser FIR of `numtaps` taps reaches with a transition `width`
/// (a fraction of Nyquist): `scipy.signal.kaiser_atten(numtaps, width)`, `2.285 (numtaps - 1)
/// pi width + 7.95`.
pub fn kaiser_atten(numtaps: usize, width: f64) -> f64 {
    2.285 * (numtaps as f64 - 1.0) * PI * width + 7.95
}

/// The number of taps and the Kaiser `beta` reaching `ripple_db` dB of ripple/attenuation with a
/// transition `width` (a fraction of Nyquist): `scipy.signal.kaiserord(ripple, width)`.
///
/// # Errors
///
/// [`Error::InvalidParameter`] when `|ripple_db|` is below 8 dB (Kaiser's formula does not hold
/// there; scipy refuses too) or not finite, or `width` is not finite and positive.
pub fn kaiserord(ripple_db: f64, width: f64) -> Result<(usize, f64)> {
    let a = ripple_db.abs();
    if !(a.is_finite() && a >= 8.0) {
        return Err(Error::InvalidParameter {
            what: "kaiserord: ripple",
            reason: format!("{a} dB is too small for the Kaiser formula (at least 8 dB)"),
        });
    }
    if !(width.is_finite() && width > 0.0) {
        return Err(Error::InvalidParameter {
            what: "kaiserord: width",
            reason: format!("transition width {width} must be finite and positive"),
        });
    }
    let numtaps = (a - 7.95) / 2.285 / (PI * width) + 1.0;
    Ok((numtaps.ceil() as usize, kaiser_beta(a)))
}

/// numpy's `sinc(x) = sin(pi x) / (pi x)`, 1 at 0.
fn sinc(x: f64) -> f64 {
    if x == 0.0 {
        1.0
    } else {
        let y = PI * x;
        y.sin() / y
    }
}

/// The modified Bessel function of the first kind, order 0, by its power series
/// `sum ((x/2)^k / k!)^2`; all terms are positive, so the sum is accurate to a few ulp for the
/// window range (`|x|` up to a few tens).
fn bessel_i0(x: f64) -> f64 {
    let q = x * x / 4.0;
    let mut term = 1.0;
    let mut sum = 1.0;
    let mut k = 1.0;
    while term > f64::EPSILON * 1e-2 * sum {
        term *= q / (k * k);
        sum += term;
        k += 1.0;
    }
    sum
}
