//! Second-order sections and their steady-state initial conditions.

use crate::{Error, Result};

/// A cascade of second-order sections, one `[b0, b1, b2, a0, a1, a2]` row per section with
/// `a0 = 1`: the layout of scipy's `sos` arrays (`output="sos"`), filtered first row first.
///
/// Each section is `H(z) = (b0 + b1 z^-1 + b2 z^-2) / (1 + a1 z^-1 + a2 z^-2)`; the overall gain
/// sits in the first section's numerator, as scipy puts it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sos {
    sections: Vec<[f64; 6]>,
}

impl Sos {
    /// Sections given as scipy's `sos` rows.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidParameter`] when there are no sections, a coefficient is not finite, or a
    /// section's `a0` is not exactly 1 (scipy's `sosfilt` refuses those too).
    pub fn new(sections: Vec<[f64; 6]>) -> Result<Self> {
        if sections.is_empty() {
            return Err(Error::InvalidParameter {
                what: "Sos: sections",
                reason: "at least one section is needed".to_string(),
            });
        }
        for (index, section) in sections.iter().enumerate() {
            if section.iter().any(|c| !c.is_finite()) {
                return Err(Error::InvalidParameter {
                    what: "Sos: sections",
                    reason: format!(
                        "section {index} has a coefficient that is not finite: {section:?}"
                    ),
                });
            }
            if section[3] != 1.0 {
                return Err(Error::InvalidParameter {
                    what: "Sos: sections",
                    reason: format!("section {index} has a0 = {}, not 1", section[3]),
                });
            }
        }
        Ok(Self { sections })
    }

    /// The sections, first applied first.
    pub fn sections(&self) -> &[[f64; 6]] {
        &self.sections
    }

    /// The coefficients in one row-major `[sections, 6]` slice (scipy's `sos.ravel()`), ready
    /// to cast and upload.
    pub fn as_flat(&self) -> &[f64] {
        self.sections.as_flattened()
    }

    /// The number of sections.
    pub fn len(&self) -> usize {
        self.sections.len()
    }

    /// Always `false`: an `Sos` has at least one section.
    pub fn is_empty(&self) -> bool {
        self.sections.is_empty()
    }
}

/// The initial state of each section for a step response in steady state: scipy's
/// `scipy.signal.sosfilt_zi(sos)`. Multiply by the first input sample to start filtering a
/// signal without a transient (what `sosfiltfilt` does).
///
/// Each section's state is [`lfilter_zi`] of its coefficients, scaled by the DC gain of the
/// sections before it. Agrees with scipy to rounding: about `1e-15` relative, more when a section
/// has a pole very near `z = 1` (its `1 + a1 + a2` is then small and the system ill-conditioned).
///
/// # Errors
///
/// [`Error::InvalidParameter`] when a section has a pole exactly at `z = 1` (no steady state).
pub fn sosfilt_zi(sos: &Sos) -> Result<Vec<[f64; 2]>> {
    let mut scale = 1.0;
    let mut states = Vec::with_capacity(sos.len());
    for s in sos.sections() {
        let zi = lfilter_zi(&s[..3], &s[3..])?;
        states.push([scale * zi[0], scale * zi[1]]);
        scale *= (s[0] + s[1] + s[2]) / (s[3] + s[4] + s[5]);
    }
    Ok(states)
}

/// The initial state of a direct-form II transposed filter `b / a` for a step response in steady
/// state: scipy's `scipy.signal.lfilter_zi(b, a)`, `max(len(a), len(b)) - 1` values.
///
/// Like scipy: leading zeros of `a` are dropped, both are divided by `a[0]`, the shorter is padded
/// with zeros, and `zi = A zi + B` is solved (`A` the transposed companion matrix of `a`,
/// `B = b[1:] - a[1:] b[0]`) by LU with partial pivoting, as `numpy.linalg.solve` does.
///
/// # Errors
///
/// [`Error::InvalidParameter`] when `b` is empty, `a` has no nonzero coefficient, a coefficient is
/// not finite, or `a` has a root at `z = 1` (no steady state).
pub fn lfilter_zi(b: &[f64], a: &[f64]) -> Result<Vec<f64>> {
    check_coefficients("lfilter_zi: b", b)?;
    check_coefficients("lfilter_zi: a", a)?;
    let first = a
        .iter()
        .position(|&c| c != 0.0)
        .ok_or_else(|| Error::InvalidParameter {
            what: "lfilter_zi: a",
            reason: "there must be at least one nonzero coefficient".to_string(),
        })?;
    let a = &a[first..];
    let n = a.len().max(b.len());
    let norm = |v: &[f64]| -> Vec<f64> {
        let mut out: Vec<f64> = v
            .iter()
            .map(|&c| if a[0] == 1.0 { c } else { c / a[0] })
            .collect();
        out.resize(n, 0.0);
        out
    };
    let (b, a) = (norm(b), norm(a));
    let m = n - 1;
    // I - companion(a)^T: first column 1 + a[1], a[2], ...; ones negated on the superdiagonal.
    let mut matrix = vec![0.0; m * m];
    for i in 0..m {
        matrix[i * m + i] = 1.0;
        matrix[i * m] += a[i + 1];
        if i + 1 < m {
            matrix[i * m + i + 1] = -1.0;
        }
    }
    let rhs: Vec<f64> = (1..n).map(|i| b[i] - a[i] * b[0]).collect();
    solve(matrix, rhs, m).ok_or_else(|| Error::InvalidParameter {
        what: "lfilter_zi: a",
        reason: format!("{a:?} has a root at z = 1: the filter has no steady state"),
    })
}

/// Checks that `values` is not empty and all finite.
pub(crate) fn check_coefficients(what: &'static str, values: &[f64]) -> Result<()> {
    if values.is_empty() {
        return Err(Error::InvalidParameter {
            what,
            reason: "no coefficients given".to_string(),
        });
    }
    if let Some(v) = values.iter().find(|v| !v.is_finite()) {
        return Err(Error::InvalidParameter {
            what,
            reason: format!("coefficient {v} is not finite"),
        });
    }
    Ok(())
}

/// Solves `matrix x = rhs` (`matrix` row-major `m x m`) by Gaussian elimination with partial
/// pivoting; `None` when a pivot is exactly zero (singular).
fn solve(mut matrix: Vec<f64>, mut rhs: Vec<f64>, m: usize) -> Option<Vec<f64>> {
    for col in 0..m {
        let mut pivot = col;
        for i in col + 1..m {
            if matrix[i * m + col].abs() > matrix[pivot * m + col].abs() {
                pivot = i;
            }
        }
        if matrix[pivot * m + col] == 0.0 {
            return None;
        }
        if pivot != col {
            for j in 0..m {
                matrix.swap(pivot * m + j, col * m + j);
            }
            rhs.swap(pivot, col);
        }
        for row in col + 1..m {
            let factor = matrix[row * m + col] / matrix[col * m + col];
            if factor != 0.0 {
                for j in col + 1..m {
                    matrix[row * m + j] -= factor * matrix[col * m + j];
                }
                rhs[row] -= factor * rhs[col];
            }
        }
    }
    for row in (0..m).rev() {
        let tail: f64 = (row + 1..m).map(|j| matrix[row * m + j] * rhs[j]).sum();
        rhs[row] = (rhs[row] - tail) / matrix[row * m + row];
    }
    Some(rhs)
}

/// One sample through the cascade in direct form II transposed, updating `state` (one `[z0, z1]`
/// per section): the arithmetic of scipy's `sosfilt`, operation for operation.
pub(crate) fn sos_step(sections: &[[f64; 6]], state: &mut [[f64; 2]], mut x: f64) -> f64 {
    for (s, z) in sections.iter().zip(state.iter_mut()) {
        let y = s[0] * x + z[0];
        z[0] = s[1] * x - s[4] * y + z[1];
        z[1] = s[2] * x - s[5] * y;
        x = y;
    }
    x
}

/// The longest settling length [`Sos::settling_length`] computes; longer ones are refused.
pub const MAX_SETTLING_LENGTH: usize = 1 << 26;

impl Sos {
    /// The number of samples after which the impulse response stays below `rel_tol` times its
    /// peak magnitude: one more than the index of the last sample exceeding that bound. Use it to
    /// size the halo of a window so a chunked (forward or forward-backward) filter matches the
    /// whole-recording one to about `rel_tol`. For `sosfiltfilt` the same halo on each side
    /// serves: each pass's edge transient decays like the impulse response (tested: windows with
    /// a `1e-9` halo match the whole-signal result to `1e-7` of its peak).
    ///
    /// Computed by running the filter on a unit impulse for `4 L + 64` samples, where
    /// `L = ceil(ln(rel_tol) / ln(r))` is when `r^n`, `r` the largest pole radius, falls to
    /// `rel_tol`; the margin covers repeated poles and gain.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidParameter`] when `rel_tol` is not strictly between 0 and 1, a pole lies on
    /// or outside the unit circle (the response never settles), `4 L + 64` exceeds
    /// [`MAX_SETTLING_LENGTH`], or the response still exceeds the bound in the last quarter of
    /// the samples run.
    pub fn settling_length(&self, rel_tol: f64) -> Result<usize> {
        if !(rel_tol > 0.0 && rel_tol < 1.0) {
            return Err(Error::InvalidParameter {
                what: "settling_length: rel_tol",
                reason: format!("{rel_tol} must lie strictly between 0 and 1"),
            });
        }
        let radius = self
            .sections
            .iter()
            .map(|s| pole_radius(s[4], s[5]))
            .fold(0.0, f64::max);
        if radius >= 1.0 {
            return Err(Error::InvalidParameter {
                what: "settling_length: sos",
                reason: format!(
                    "largest pole radius {radius} is not below 1: the filter never settles"
                ),
            });
        }
        let decay = if radius == 0.0 {
            0.0
        } else {
            (rel_tol.ln() / radius.ln()).ceil()
        };
        let run = 4.0 * decay + 64.0;
        if run > MAX_SETTLING_LENGTH as f64 {
            return Err(Error::InvalidParameter {
                what: "settling_length: sos",
                reason: format!(
                    "largest pole radius {radius} needs {run} samples, over the limit of {MAX_SETTLING_LENGTH}"
                ),
            });
        }
        let run = run as usize;
        // Two passes over the impulse response: its peak, then the last sample above the bound.
        let impulse = || {
            let mut state = vec![[0.0; 2]; self.len()];
            (0..run).map(move |n| {
                sos_step(&self.sections, &mut state, if n == 0 { 1.0 } else { 0.0 }).abs()
            })
        };
        let peak = impulse().fold(0.0, f64::max);
        let last = impulse().enumerate().fold(
            0,
            |last, (n, m)| if m > rel_tol * peak { n + 1 } else { last },
        );
        if last > run - run / 4 {
            return Err(Error::InvalidParameter {
                what: "settling_length: sos",
                reason: format!(
                    "the impulse response still exceeds {rel_tol} of its peak after {last} samples"
                ),
            });
        }
        Ok(last)
    }
}

/// The largest magnitude of the roots of `z^2 + a1 z + a2`.
fn pole_radius(a1: f64, a2: f64) -> f64 {
    let disc = a1 * a1 - 4.0 * a2;
    if disc < 0.0 {
        a2.sqrt()
    } else {
        let root = disc.sqrt();
        ((-a1 + root) / 2.0).abs().max(((-a1 - root) / 2.0).abs())
    }
}
