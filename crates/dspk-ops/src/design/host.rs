//! `f64` host references of the filters, one channel at a time, with scipy.signal's exact
//! semantics. Device kernels are tested against these.
//!
//! Arithmetic follows scipy's operation order where it is simple (`sosfilt`, `lfilter` in direct
//! form II transposed), so results agree with scipy to a few ulp per sample; the tests allow
//! `1e-13` relative to the largest output.

use super::resample::{PolyphaseFilter, decimate_fir, decimate_iir, resample_poly_filter};
use super::sos::{Sos, check_coefficients, lfilter_zi, sos_step, sosfilt_zi};
use crate::{Error, Result};

/// Filters `x` through the sections: `scipy.signal.sosfilt(sos, x, zi=zi)`.
///
/// With `zi`, the filter starts from that state (one `[z0, z1]` per section, scipy's layout) and
/// `zi` receives the final state (scipy's `zf`), so consecutive chunks filter like one signal.
/// Without, it starts from rest.
///
/// # Errors
///
/// [`Error::Shape`] when `zi` does not have one state per section.
pub fn sosfilt(sos: &Sos, x: &[f64], zi: Option<&mut [[f64; 2]]>) -> Result<Vec<f64>> {
    let mut rest;
    let state = match zi {
        Some(zi) => {
            if zi.len() != sos.len() {
                return Err(Error::Shape {
                    what: "sosfilt: zi",
                    expected: sos.len(),
                    actual: zi.len(),
                    unit: "sections",
                });
            }
            zi
        }
        None => {
            rest = vec![[0.0; 2]; sos.len()];
            &mut rest[..]
        }
    };
    Ok(x.iter()
        .map(|&v| sos_step(sos.sections(), state, v))
        .collect())
}

/// The default `padlen` of `scipy.signal.sosfiltfilt`: `3 * (2 * len(sos) + 1 - min(number of
/// sections with b2 == 0, number with a2 == 0))`.
pub fn sosfiltfilt_padlen(sos: &Sos) -> usize {
    let b2_zero = sos.sections().iter().filter(|s| s[2] == 0.0).count();
    let a2_zero = sos.sections().iter().filter(|s| s[5] == 0.0).count();
    3 * (2 * sos.len() + 1 - b2_zero.min(a2_zero))
}

/// Zero-phase filtering forwards then backwards: `scipy.signal.sosfiltfilt(sos, x,
/// padtype="odd", padlen=padlen)` (`None` = [`sosfiltfilt_padlen`]).
///
/// `x` is extended at each end by `padlen` samples of odd reflection (`2 x[0] - x[padlen..1]`),
/// each pass starts from [`sosfilt_zi`] times its first sample, and the extension is cut off.
///
/// # Errors
///
/// [`Error::InvalidParameter`] when `x` is not longer than `padlen` (scipy refuses too) or a
/// section has a pole at `z = 1`.
pub fn sosfiltfilt(sos: &Sos, x: &[f64], padlen: Option<usize>) -> Result<Vec<f64>> {
    let edge = padlen.unwrap_or_else(|| sosfiltfilt_padlen(sos));
    let ext = odd_ext("sosfiltfilt: x", x, edge)?;
    let zi = sosfilt_zi(sos)?;
    let pass = |signal: &[f64]| -> Result<Vec<f64>> {
        let mut state: Vec<[f64; 2]> = zi
            .iter()
            .map(|z| [z[0] * signal[0], z[1] * signal[0]])
            .collect();
        sosfilt(sos, signal, Some(&mut state))
    };
    let mut y = pass(&ext)?;
    y.reverse();
    let mut y = pass(&y)?;
    y.reverse();
    Ok(y[edge..edge + x.len()].to_vec())
}

/// Filters `x` by `b / a` in direct form II transposed: `scipy.signal.lfilter(b, a, x, zi=zi)`.
///
/// `b` and `a` are divided by `a[0]`. With `zi` (`max(len(a), len(b)) - 1` values) the filter
/// starts from that state and `zi` receives the final state (scipy's `zf`).
///
/// # Errors
///
/// [`Error::InvalidParameter`] when `b` or `a` is empty or not finite, or `a[0]` is 0;
/// [`Error::Shape`] when `zi` has the wrong length.
pub fn lfilter(b: &[f64], a: &[f64], x: &[f64], zi: Option<&mut [f64]>) -> Result<Vec<f64>> {
    check_coefficients("lfilter: b", b)?;
    check_coefficients("lfilter: a", a)?;
    if a[0] == 0.0 {
        return Err(Error::InvalidParameter {
            what: "lfilter: a",
            reason: "a[0] must not be 0".to_string(),
        });
    }
    let n = a.len().max(b.len());
    let normalized = |v: &[f64]| -> Vec<f64> {
        let mut out: Vec<f64> = v.iter().map(|&c| c / a[0]).collect();
        out.resize(n, 0.0);
        out
    };
    let (b, a) = (normalized(b), normalized(a));
    let mut rest;
    let state = match zi {
        Some(zi) => {
            if zi.len() != n - 1 {
                return Err(Error::Shape {
                    what: "lfilter: zi",
                    expected: n - 1,
                    actual: zi.len(),
                    unit: "values",
                });
            }
            zi
        }
        None => {
            rest = vec![0.0; n - 1];
            &mut rest[..]
        }
    };
    let mut y = Vec::with_capacity(x.len());
    for &xn in x {
        let Some((&first, _)) = state.split_first() else {
            y.push(b[0] * xn);
            continue;
        };
        let yn = first + b[0] * xn;
        for k in 0..n - 2 {
            state[k] = state[k + 1] + xn * b[k + 1] - yn * a[k + 1];
        }
        state[n - 2] = xn * b[n - 1] - yn * a[n - 1];
        y.push(yn);
    }
    Ok(y)
}

/// The default `padlen` of `scipy.signal.filtfilt(b, a, x)`: `3 * max(len(a), len(b))`.
pub fn filtfilt_padlen(b: &[f64], a: &[f64]) -> usize {
    3 * a.len().max(b.len())
}

/// Zero-phase filtering by `b / a` forwards then backwards: `scipy.signal.filtfilt(b, a, x,
/// padtype="odd", padlen=padlen, method="pad")` (`None` = [`filtfilt_padlen`]).
///
/// # Errors
///
/// As [`lfilter`] and [`lfilter_zi`], and [`Error::InvalidParameter`] when `x` is not longer
/// than `padlen`.
pub fn filtfilt(b: &[f64], a: &[f64], x: &[f64], padlen: Option<usize>) -> Result<Vec<f64>> {
    let edge = padlen.unwrap_or_else(|| filtfilt_padlen(b, a));
    let ext = odd_ext("filtfilt: x", x, edge)?;
    let zi = lfilter_zi(b, a)?;
    let pass = |signal: &[f64]| -> Result<Vec<f64>> {
        let mut state: Vec<f64> = zi.iter().map(|z| z * signal[0]).collect();
        lfilter(b, a, signal, Some(&mut state))
    };
    let mut y = pass(&ext)?;
    y.reverse();
    let mut y = pass(&y)?;
    y.reverse();
    Ok(y[edge..edge + x.len()].to_vec())
}

/// Resamples `x` by `up / down` with scipy's default filter:
/// `scipy.signal.resample_poly(x, up, down)` (Kaiser window, beta 5, zeros beyond the ends).
/// Returns `ceil(len * up / down)` samples (after reducing `up / down`), `x` itself when the
/// ratio is 1.
///
/// # Errors
///
/// As [`resample_poly_filter`], and [`Error::InvalidParameter`] when the output length
/// overflows.
pub fn resample_poly(x: &[f64], up: usize, down: usize) -> Result<Vec<f64>> {
    resample_poly_with(&resample_poly_filter(up, down)?, x)
}

/// Resamples `x` with a given polyphase filter: `scipy.signal.resample_poly(x, filter.up,
/// filter.down, window=taps)` with `padtype="constant"` (zeros beyond the ends).
///
/// # Errors
///
/// [`Error::InvalidParameter`] when `filter.up` or `filter.down` is 0 (the fields are public) or
/// the output length overflows `usize`.
pub fn resample_poly_with(filter: &PolyphaseFilter, x: &[f64]) -> Result<Vec<f64>> {
    if filter.up == 0 || filter.down == 0 {
        return Err(Error::InvalidParameter {
            what: "resample_poly: filter",
            reason: format!(
                "up = {} and down = {} must be at least 1",
                filter.up, filter.down
            ),
        });
    }
    let n_out = filter
        .output_len(x.len())
        .ok_or_else(|| Error::InvalidParameter {
            what: "resample_poly: x",
            reason: format!("{} samples times up = {} overflows", x.len(), filter.up),
        })?;
    let (up, down, taps) = (filter.up, filter.down, &filter.taps);
    Ok((0..n_out)
        .map(|k| {
            // Output k sees input i through tap t - i * up, t = k * down + half_len.
            let t = k * down + filter.half_len;
            let first = (t + 1).saturating_sub(taps.len()).div_ceil(up);
            let last = (t / up).min(x.len().saturating_sub(1));
            (first..=last)
                .rev()
                .filter(|&i| i < x.len())
                .map(|i| taps[t - i * up] * x[i])
                .sum()
        })
        .collect())
}

/// Which anti-aliasing filter [`decimate`] uses (scipy's `ftype`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecimateFilter {
    /// [`decimate_iir`] applied with `sosfiltfilt`, then every `q`-th
    /// sample (`ftype="iir"`, scipy's default).
    Iir,
    /// [`decimate_fir`] applied as a zero-phase polyphase filter
    /// (`ftype="fir"`).
    Fir,
}

/// Downsamples `x` by `q` after an anti-aliasing filter: `scipy.signal.decimate(x, q,
/// ftype=..., zero_phase=True)`. Returns `ceil(len / q)` samples.
///
/// # Errors
///
/// As [`decimate_iir`] / [`decimate_fir`] and [`sosfiltfilt`] (`x` must be longer than the
/// IIR filter's 27-sample padding).
pub fn decimate(x: &[f64], q: usize, filter: DecimateFilter) -> Result<Vec<f64>> {
    match filter {
        DecimateFilter::Iir => {
            let y = sosfiltfilt(&decimate_iir(q)?, x, None)?;
            Ok(y.into_iter().step_by(q).collect())
        }
        DecimateFilter::Fir => resample_poly_with(&decimate_fir(q)?, x),
    }
}

/// `x` with `edge` samples of odd extension at each end (scipy's `odd_ext`).
fn odd_ext(what: &'static str, x: &[f64], edge: usize) -> Result<Vec<f64>> {
    if x.len() <= edge {
        return Err(Error::InvalidParameter {
            what,
            reason: format!(
                "{} samples: the signal must be longer than padlen = {edge}",
                x.len()
            ),
        });
    }
    let (first, last) = (x[0], x[x.len() - 1]);
    let mut ext = Vec::with_capacity(x.len() + 2 * edge);
    ext.extend((1..=edge).rev().map(|i| 2.0 * first - x[i]));
    ext.extend_from_slice(x);
    ext.extend((1..=edge).map(|i| 2.0 * last - x[x.len() - 1 - i]));
    Ok(ext)
}
