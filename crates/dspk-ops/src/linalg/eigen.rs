//! Symmetric eigendecomposition by the cyclic Jacobi method.

use crate::{Error, Result};

/// Sweeps after which [`symmetric_eigen`] gives up (Jacobi converges quadratically: 6 to 12
/// sweeps for any matrix met in practice).
const MAX_SWEEPS: usize = 64;

/// Relative asymmetry `|a_ij - a_ji| / max |a|` above which a matrix is refused as not symmetric
/// (loose enough for a covariance summed in `f32`).
const SYMMETRY_TOLERANCE: f64 = 1e-6;

/// Eigenvalues and eigenvectors of a real symmetric matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct SymmetricEigen {
    /// The `n` eigenvalues, ascending (numpy's `w`).
    pub values: Vec<f64>,
    /// The eigenvectors, `n x n` row-major with column `i` the unit eigenvector of `values[i]`:
    /// the layout of numpy's `v` (`v[:, i]`). Each column's sign is arbitrary, as in numpy.
    pub vectors: Vec<f64>,
}

/// The eigendecomposition of the symmetric `n x n` row-major `matrix`: `numpy.linalg.eigh(a)`
/// (which reads the lower triangle; so does this), up to the sign of each eigenvector and the
/// basis chosen within a repeated eigenvalue.
///
/// Cyclic Jacobi rotations until every off-diagonal element is negligible against its diagonal
/// pair (`|a_pq| <= eps sqrt(|a_pp a_qq|)`), which gives eigenvalues and residuals
/// `||A v - l v||` of order `n eps ||A||` (tested: below `1e-12 ||A||_F` up to `n = 384`).
/// `O(n^3)` per sweep; `n = 384` takes well under a second in a release build.
///
/// # Errors
///
/// [`Error::Shape`] when `matrix` does not hold `n * n` values; [`Error::InvalidParameter`] when a
/// value is not finite, the matrix is not symmetric (`|a_ij - a_ji| > 1e-6 max |a|`), or the
/// iteration has not converged after 64 sweeps.
pub fn symmetric_eigen(matrix: &[f64], n: usize) -> Result<SymmetricEigen> {
    let expected = n.checked_mul(n).ok_or(Error::InvalidParameter {
        what: "symmetric_eigen: n",
        reason: format!("{n} x {n} overflows"),
    })?;
    if matrix.len() != expected {
        return Err(Error::Shape {
            what: "symmetric_eigen: matrix",
            expected,
            actual: matrix.len(),
            unit: "values",
        });
    }
    if let Some(v) = matrix.iter().find(|v| !v.is_finite()) {
        return Err(Error::InvalidParameter {
            what: "symmetric_eigen: matrix",
            reason: format!("value {v} is not finite"),
        });
    }
    let largest = matrix.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
    let mut a = vec![0.0; expected];
    for i in 0..n {
        for j in 0..=i {
            let (lower, upper) = (matrix[i * n + j], matrix[j * n + i]);
            if (lower - upper).abs() > SYMMETRY_TOLERANCE * largest {
                return Err(Error::InvalidParameter {
                    what: "symmetric_eigen: matrix",
                    reason: format!(
                        "not symmetric: a[{i}][{j}] = {lower} but a[{j}][{i}] = {upper}"
                    ),
                });
            }
            a[i * n + j] = lower;
            a[j * n + i] = lower;
        }
    }
    // Frobenius norm, scaled so squares cannot overflow.
    let scale = largest.max(f64::MIN_POSITIVE);
    let norm = scale * a.iter().map(|v| (v / scale).powi(2)).sum::<f64>().sqrt();
    // Rows of `vt` are the eigenvectors (V transposed), so rotations update contiguous rows.
    let mut vt = vec![0.0; expected];
    for i in 0..n {
        vt[i * n + i] = 1.0;
    }
    for _ in 0..MAX_SWEEPS {
        let mut rotated = false;
        for p in 0..n {
            for q in p + 1..n {
                rotated |= rotate(&mut a, &mut vt, n, p, q, norm);
            }
        }
        if !rotated {
            return Ok(sorted(&a, &vt, n));
        }
    }
    Err(Error::InvalidParameter {
        what: "symmetric_eigen: matrix",
        reason: format!("Jacobi iteration did not converge in {MAX_SWEEPS} sweeps"),
    })
}

/// One Jacobi rotation in the `(p, q)` plane zeroing `a[p][q]`, or, when that element is already
/// negligible, setting it to zero; returns whether a rotation was applied.
fn rotate(a: &mut [f64], vt: &mut [f64], n: usize, p: usize, q: usize, norm: f64) -> bool {
    let apq = a[p * n + q];
    let (app, aqq) = (a[p * n + p], a[q * n + q]);
    if apq.abs() <= f64::EPSILON * app.abs().sqrt() * aqq.abs().sqrt()
        || apq.abs() <= f64::EPSILON * f64::EPSILON * norm
    {
        a[p * n + q] = 0.0;
        a[q * n + p] = 0.0;
        return false;
    }
    let theta = (aqq - app) / (2.0 * apq);
    let t = (1.0 / (theta.abs() + theta.hypot(1.0))).copysign(theta);
    let c = 1.0 / t.hypot(1.0);
    let s = t * c;
    let plane = |m: &mut [f64]| {
        let (head, tail) = m.split_at_mut(q * n);
        let (row_p, row_q) = (&mut head[p * n..p * n + n], &mut tail[..n]);
        for (x, y) in row_p.iter_mut().zip(row_q.iter_mut()) {
            let (xp, xq) = (*x, *y);
            *x = c * xp - s * xq;
            *y = s * xp + c * xq;
        }
    };
    plane(a);
    plane(vt);
    a[p * n + p] = app - t * apq;
    a[q * n + q] = aqq + t * apq;
    a[p * n + q] = 0.0;
    a[q * n + p] = 0.0;
    // Columns p and q mirror the updated rows (the matrix stays symmetric).
    for k in 0..n {
        a[k * n + p] = a[p * n + k];
        a[k * n + q] = a[q * n + k];
    }
    true
}

/// Eigenvalues ascending with their vectors as columns.
fn sorted(a: &[f64], vt: &[f64], n: usize) -> SymmetricEigen {
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| a[i * n + i].total_cmp(&a[j * n + j]));
    let values = order.iter().map(|&i| a[i * n + i]).collect();
    let mut vectors = vec![0.0; n * n];
    for (column, &i) in order.iter().enumerate() {
        for row in 0..n {
            vectors[row * n + column] = vt[i * n + row];
        }
    }
    SymmetricEigen { values, vectors }
}
