//! What the blocked kernels need from a filter design, computed once in `f64` on the host.
//!
//! Each second-order section `H(z) = b(z) / a(z)` is run as a two-state system in *increment*
//! form: with state `x = [x0, x1]` and input `u`,
//!
//! ```text
//! y  = d u + c0 x0 + c1 x1
//! x0 += e00 x0 + e01 x1 + g0 u
//! x1 += e10 x0 + e11 x1 + g1 u
//! ```
//!
//! where `E = A - I` for the state matrix `A`. Two choices make this accurate in `f32` for
//! poles near `z = 1` (decision 0007):
//!
//! - `E` is built from the poles directly (the coupled form `[[re, -im], [im, re]]` of a complex
//!   pair, the triangular form `[[p1, 0], [1, p2]]` of two real poles, minus `I`), so a pole
//!   keeps its distance to 1 to `f32` rounding; rounding the direct form's `a1 ~ -2`, `a2 ~ 1`
//!   to `f32` moves such poles by about `sqrt(eps)`, which is why scipy's direct form II
//!   transposed fails there in `f32`;
//! - the state coordinates are then *balanced* (controllability and observability Gramians
//!   equal and diagonal), so no state is large while contributing little to the output: the
//!   triangular form of a band-pass section with one pole near 1 cancels terms `10^4` times
//!   the output, the balanced one does not.
//!
//! The block transition is kept in the same form: `P - I` with `P = A^block_len` of the whole
//! cascade.

use crate::{Error, Result};

/// Coefficients per section in [`Plan::coefs`]: `[d, c0, c1, e00, e01, e10, e11, g0, g1]`.
pub(super) const COEFS: usize = 9;

/// A cascade of sections prepared for the device.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    /// [`COEFS`] values per section (see the module doc).
    pub(super) coefs: Vec<f64>,
    /// Row-major `2n x 2n` matrix `P - I`, `P` mapping the cascade's state at a block's start
    /// to its state at the block's end when the input is zero (`n` sections).
    pub(super) transition: Vec<f64>,
}

impl Plan {
    /// The plan for `sections` (scipy's `sos` rows `[b0, b1, b2, a0, a1, a2]` with `a0 = 1`, as
    /// [`Sos`](crate::design::Sos) guarantees) and blocks of `block_len` samples.
    pub(super) fn new(sections: &[[f64; 6]], block_len: usize) -> Self {
        let coefs: Vec<f64> = sections
            .iter()
            .flat_map(|section| {
                let nice = realize(section);
                balance(nice).unwrap_or(nice).flat()
            })
            .collect();
        let transition = power_minus_identity(&increment_matrix(&coefs), block_len);
        Self { coefs, transition }
    }

    /// The cascade's state (in this plan's coordinates) in steady state under a constant input
    /// of 1: scipy's `sosfilt_zi` expressed in the increment form. Multiply by the first sample.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidParameter`] when a section has a pole at `z = 1` (no steady state).
    pub(super) fn steady_state(&self) -> Result<Vec<f64>> {
        let mut gain = 1.0;
        let mut state = Vec::with_capacity(2 * self.coefs.len() / COEFS);
        for (index, c) in self.coefs.chunks_exact(COEFS).enumerate() {
            // Solve E x = -g gain: the state that a constant input `gain` leaves unchanged.
            let det = c[3] * c[6] - c[4] * c[5];
            if det == 0.0 || !det.is_finite() {
                return Err(Error::InvalidParameter {
                    what: "sos filter: steady state",
                    reason: format!(
                        "section {index} has a pole at z = 1, so a constant input has no \
                         steady state"
                    ),
                });
            }
            let x = [
                -gain * (c[6] * c[7] - c[4] * c[8]) / det,
                -gain * (c[3] * c[8] - c[5] * c[7]) / det,
            ];
            gain = c[0] * gain + c[1] * x[0] + c[2] * x[1];
            state.extend(x);
        }
        Ok(state)
    }
}

/// A two-state realization of one section: `y = d u + c x`, `x += e x + g u`.
#[derive(Debug, Clone, Copy)]
struct Realization {
    d: f64,
    c: [f64; 2],
    e: [[f64; 2]; 2],
    g: [f64; 2],
}

impl Realization {
    /// The [`COEFS`] layout.
    fn flat(self) -> [f64; COEFS] {
        let Self { d, c, e, g } = self;
        [
            d, c[0], c[1], e[0][0], e[0][1], e[1][0], e[1][1], g[0], g[1],
        ]
    }
}

/// One section `[b0, b1, b2, 1, a1, a2]` with its poles in `E` (coupled or triangular form).
///
/// With `n = b1 - b0 a1` and `m = b2 - b0 a2`, `H(z) = b0 + (n z + m) / (z^2 + a1 z + a2)`;
/// the input enters the first state only, so `c` follows from matching the strictly proper
/// part.
fn realize(section: &[f64; 6]) -> Realization {
    let [b0, b1, b2, _, a1, a2] = *section;
    let (n, m) = (b1 - b0 * a1, b2 - b0 * a2);
    let disc = a1 * a1 - 4.0 * a2;
    let (c, e) = if disc < 0.0 {
        // Complex pair re +- i im: (zI - A)^-1 [1, 0] = [z - re, im] / a(z).
        let re_minus_one = -(a1 + 2.0) / 2.0;
        let re = -a1 / 2.0;
        let im = (-disc).sqrt() / 2.0;
        (
            [n, (m + n * re) / im],
            [[re_minus_one, -im], [im, re_minus_one]],
        )
    } else {
        // Real poles p1, p2 (the larger in magnitude from the formula, the other from the
        // product a2, so that p1 + p2 and p1 p2 keep a1 and a2 to rounding):
        // (zI - A)^-1 [1, 0] = [z - p2, 1] / a(z).
        let q = -(a1 + disc.sqrt().copysign(a1)) / 2.0;
        let (p1, p2) = if q == 0.0 { (0.0, 0.0) } else { (q, a2 / q) };
        ([n, m + n * p2], [[p1 - 1.0, 0.0], [1.0, p2 - 1.0]])
    };
    Realization {
        d: b0,
        c,
        e,
        g: [1.0, 0.0],
    }
}

/// 2 x 2 matrix product.
fn mul(a: [[f64; 2]; 2], b: [[f64; 2]; 2]) -> [[f64; 2]; 2] {
    let entry = |i: usize, j: usize| a[i][0] * b[0][j] + a[i][1] * b[1][j];
    [[entry(0, 0), entry(0, 1)], [entry(1, 0), entry(1, 1)]]
}

/// 2 x 2 transpose.
fn transpose(a: [[f64; 2]; 2]) -> [[f64; 2]; 2] {
    [[a[0][0], a[1][0]], [a[0][1], a[1][1]]]
}

/// The symmetric `W` with `A W A^T - W + q = 0` for `A = I + e`, written without `A` (as
/// `e W + W e^T + e W e^T = -q`) so that poles near 1 lose nothing; `None` when singular.
fn gramian(e: [[f64; 2]; 2], q: [[f64; 2]; 2]) -> Option<[[f64; 2]; 2]> {
    let basis = [
        [[1.0, 0.0], [0.0, 0.0]],
        [[0.0, 1.0], [1.0, 0.0]],
        [[0.0, 0.0], [0.0, 1.0]],
    ];
    let mut m = [[0.0; 4]; 3];
    for (j, s) in basis.into_iter().enumerate() {
        let es = mul(e, s);
        let l = mul(es, transpose(e));
        let image = [
            es[0][0] + es[0][0] + l[0][0],
            es[0][1] + es[1][0] + l[0][1],
            es[1][1] + es[1][1] + l[1][1],
        ];
        for (row, value) in image.into_iter().enumerate() {
            m[row][j] = value;
        }
    }
    for (row, value) in [q[0][0], q[0][1], q[1][1]].into_iter().enumerate() {
        m[row][3] = -value;
    }
    // Gaussian elimination with partial pivoting on the 3 x 4 augmented matrix.
    for col in 0..3 {
        let pivot = (col..3).max_by(|&a, &b| m[a][col].abs().total_cmp(&m[b][col].abs()))?;
        m.swap(col, pivot);
        if m[col][col] == 0.0 {
            return None;
        }
        let pivot_row = m[col];
        for row in &mut m[col + 1..] {
            let f = row[col] / pivot_row[col];
            for (value, above) in row.iter_mut().zip(pivot_row).skip(col) {
                *value -= f * above;
            }
        }
    }
    let mut w = [0.0; 3];
    for row in (0..3).rev() {
        let tail: f64 = (row + 1..3).map(|k| m[row][k] * w[k]).sum();
        w[row] = (m[row][3] - tail) / m[row][row];
    }
    Some([[w[0], w[1]], [w[1], w[2]]])
}

/// The balanced realization of `r` (Gramians equal and diagonal), the similarity applied to
/// `E` itself so that it keeps its precision; `None` when `r` is not minimal (a first-order
/// section, a pole cancelled by a zero) or not stable, where `r` is used as it is.
fn balance(r: Realization) -> Option<Realization> {
    let outer = |v: [f64; 2]| [[v[0] * v[0], v[0] * v[1]], [v[1] * v[0], v[1] * v[1]]];
    let wc = gramian(r.e, outer(r.g))?;
    let wo = gramian(transpose(r.e), outer(r.c))?;
    // Wc = R R^T (Cholesky), R^T Wo R = U diag(lambda) U^T, T = R U diag(lambda^-1/4).
    let r11 = wc[0][0].sqrt();
    let r21 = wc[1][0] / r11;
    let r22 = (wc[1][1] - r21 * r21).sqrt();
    let chol = [[r11, 0.0], [r21, r22]];
    let chol_inv = [[1.0 / r11, 0.0], [-r21 / (r11 * r22), 1.0 / r22]];
    let m = mul(mul(transpose(chol), wo), chol);
    let theta = 0.5 * (2.0 * m[0][1]).atan2(m[0][0] - m[1][1]);
    let (sin, cos) = theta.sin_cos();
    let u = [[cos, -sin], [sin, cos]];
    let lambda = [
        m[0][0] * cos * cos + 2.0 * m[0][1] * sin * cos + m[1][1] * sin * sin,
        m[0][0] * sin * sin - 2.0 * m[0][1] * sin * cos + m[1][1] * cos * cos,
    ];
    let largest = lambda[0].max(lambda[1]);
    if !(lambda[0].min(lambda[1]) > 1e-12 * largest && largest.is_finite()) {
        return None;
    }
    let scale = lambda.map(|l| l.powf(-0.25));
    let t = mul(mul(chol, u), [[scale[0], 0.0], [0.0, scale[1]]]);
    let t_inv = mul(
        mul([[1.0 / scale[0], 0.0], [0.0, 1.0 / scale[1]]], transpose(u)),
        chol_inv,
    );
    let balanced = Realization {
        d: r.d,
        c: [
            r.c[0] * t[0][0] + r.c[1] * t[1][0],
            r.c[0] * t[0][1] + r.c[1] * t[1][1],
        ],
        e: mul(mul(t_inv, r.e), t),
        g: [
            t_inv[0][0] * r.g[0] + t_inv[0][1] * r.g[1],
            t_inv[1][0] * r.g[0] + t_inv[1][1] * r.g[1],
        ],
    };
    balanced
        .flat()
        .iter()
        .all(|v| v.is_finite())
        .then_some(balanced)
}

/// One sample `input` through the cascade in increment form: writes each state's increment to
/// `increments` (same layout as `state`, which is left unchanged) and returns the output.
pub(super) fn increments(coefs: &[f64], state: &[f64], input: f64, increments: &mut [f64]) -> f64 {
    let mut u = input;
    for ((c, x), dx) in coefs
        .chunks_exact(COEFS)
        .zip(state.chunks_exact(2))
        .zip(increments.chunks_exact_mut(2))
    {
        let y = c[0] * u + c[1] * x[0] + c[2] * x[1];
        dx[0] = c[3] * x[0] + c[4] * x[1] + c[7] * u;
        dx[1] = c[5] * x[0] + c[6] * x[1] + c[8] * u;
        u = y;
    }
    u
}

/// The cascade's `A - I` (row-major `2n x 2n`): column `j` is the increment of unit state `j`
/// under zero input, computed directly (never as `A e_j - e_j`, which would cancel).
fn increment_matrix(coefs: &[f64]) -> Vec<f64> {
    let dim = 2 * coefs.len() / COEFS;
    let mut matrix = vec![0.0; dim * dim];
    let mut unit = vec![0.0; dim];
    let mut column = vec![0.0; dim];
    for j in 0..dim {
        unit[j] = 1.0;
        increments(coefs, &unit, 0.0, &mut column);
        unit[j] = 0.0;
        for (row, &value) in column.iter().enumerate() {
            matrix[row * dim + j] = value;
        }
    }
    matrix
}

/// `(I + e)^power - I` by binary powering in the same form (`(I + a)(I + b) - I = a + b + a b`),
/// so that powers of a matrix near the identity keep their small part exactly.
fn power_minus_identity(e: &[f64], power: usize) -> Vec<f64> {
    let dim = e.len().isqrt();
    let compose = |a: &[f64], b: &[f64]| -> Vec<f64> {
        let mut out: Vec<f64> = a.iter().zip(b).map(|(x, y)| x + y).collect();
        for i in 0..dim {
            for k in 0..dim {
                let aik = a[i * dim + k];
                for j in 0..dim {
                    out[i * dim + j] += aik * b[k * dim + j];
                }
            }
        }
        out
    };
    let mut result = vec![0.0; dim * dim];
    let mut base = e.to_vec();
    let mut remaining = power;
    while remaining > 0 {
        if remaining & 1 == 1 {
            result = compose(&result, &base);
        }
        remaining >>= 1;
        if remaining > 0 {
            base = compose(&base, &base);
        }
    }
    result
}

#[cfg(test)]
mod tests {
    //! The increment form against scipy's direct form II transposed, both in `f64`.
    use dspk_core::test_util::Rng;

    use super::*;
    use crate::design::host::sosfilt;
    use crate::design::{Sos, sosfilt_zi};

    /// Panics unless every `actual` value is within `tol` of `expected`.
    fn assert_close_f64(what: &str, actual: &[f64], expected: &[f64], tol: f64) {
        assert_eq!(actual.len(), expected.len(), "{what}: lengths");
        for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
            assert!(
                (a - e).abs() <= tol,
                "{what}[{i}]: {a} vs {e} (tolerance {tol})"
            );
        }
    }

    /// Random sections: complex pairs, real pairs (one at zero: a first-order section), a
    /// double real pole, poles within `1e-4` of `z = 1`.
    fn sections(rng: &mut Rng) -> Vec<[f64; 6]> {
        let mut out = Vec::new();
        for (r, theta) in [(0.95, 0.4), (0.9999, 1e-4), (0.5, 3.0)] {
            out.push([1.0, -0.3, 0.2, 1.0, -2.0 * r * f64::cos(theta), r * r]);
        }
        for (p1, p2) in [(0.9, -0.4), (0.99995, 0.0), (0.7, 0.7), (0.0, 0.0)] {
            out.push([
                rng.uniform(-1.0, 1.0),
                rng.uniform(-1.0, 1.0),
                rng.uniform(-1.0, 1.0),
                1.0,
                -(p1 + p2),
                p1 * p2,
            ]);
        }
        out
    }

    #[test]
    fn increment_form_equals_direct_form() {
        let mut rng = Rng::new(5);
        let sos = Sos::new(sections(&mut rng)).unwrap();
        let plan = Plan::new(sos.sections(), 1);
        let x: Vec<f64> = (0..3000).map(|_| rng.uniform(-1.0, 1.0) + 3.0).collect();
        let mut zi: Vec<[f64; 2]> = sosfilt_zi(&sos).unwrap();
        for z in &mut zi {
            *z = [z[0] * x[0], z[1] * x[0]];
        }
        let expected = sosfilt(&sos, &x, Some(&mut zi)).unwrap();
        let mut state: Vec<f64> = plan.steady_state().unwrap();
        state.iter_mut().for_each(|s| *s *= x[0]);
        let mut dx = vec![0.0; state.len()];
        let actual: Vec<f64> = x
            .iter()
            .map(|&u| {
                let y = increments(&plan.coefs, &state, u, &mut dx);
                state.iter_mut().zip(&dx).for_each(|(s, d)| *s += d);
                y
            })
            .collect();
        let scale = expected.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        assert_close_f64("increment form", &actual, &expected, 1e-9 * scale);
    }

    #[test]
    fn transition_is_the_block_power() {
        let mut rng = Rng::new(6);
        let sos = Sos::new(sections(&mut rng)).unwrap();
        let dim = 2 * sos.len();
        for block_len in [1, 7, 1024] {
            let plan = Plan::new(sos.sections(), block_len);
            for j in [0, 3, dim - 1] {
                let mut state = vec![0.0; dim];
                state[j] = 1.0;
                let mut dx = vec![0.0; dim];
                for _ in 0..block_len {
                    increments(&plan.coefs, &state, 0.0, &mut dx);
                    state.iter_mut().zip(&dx).for_each(|(s, d)| *s += d);
                }
                state[j] -= 1.0;
                let column: Vec<f64> = (0..dim).map(|i| plan.transition[i * dim + j]).collect();
                let scale = state.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                assert_close_f64(&format!("P - I column {j}"), &column, &state, 1e-12 * scale);
            }
        }
    }

    #[test]
    fn steady_state_refuses_a_pole_at_one() {
        let plan = Plan::new(&[[1.0, 0.0, 0.0, 1.0, -1.0, 0.0]], 8);
        assert!(matches!(
            plan.steady_state(),
            Err(Error::InvalidParameter { .. })
        ));
    }
}
