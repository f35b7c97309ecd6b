//! Principal components of unit-norm clips without centring: the deterministic counterpart of
//! Kilosort4's randomized `TruncatedSVD` (§4).

use dspk_ops::linalg::symmetric_eigen;

use crate::Result;

/// The top `p` right singular vectors of the `n x d` row-major matrix `x` (no centring), `p x
/// d` row-major: the eigenvectors of the Gram matrix `x^T x` with the largest eigenvalues,
/// largest first. Each vector's sign makes its largest-magnitude entry (the first among equal
/// magnitudes) positive, the convention of sklearn's `svd_flip` on `V`.
///
/// Kilosort4 gets these from sklearn's randomized `TruncatedSVD` (5 power iterations, 10
/// oversamples), which approximates the same vectors with random error; this computes them
/// exactly (to `f64` rounding) with a symmetric eigensolver, so the result depends on nothing
/// but the clips. Within a repeated eigenvalue the basis is arbitrary, as in any SVD.
///
/// The Gram matrix is summed clip by clip in order (a fixed reduction order).
///
/// # Errors
///
/// [`Error::Ops`](crate::Error::Ops) when the eigensolver fails (it does not converge).
pub(super) fn principal_components(x: &[f64], d: usize, p: usize) -> Result<Vec<f64>> {
    let mut gram = vec![0.0f64; d * d];
    for row in x.chunks_exact(d) {
        for (i, &a) in row.iter().enumerate() {
            for (g, &b) in gram[i * d..=i * d + i].iter_mut().zip(row) {
                *g += a * b;
            }
        }
    }
    for i in 0..d {
        for j in 0..i {
            gram[j * d + i] = gram[i * d + j];
        }
    }
    let eigen = symmetric_eigen(&gram, d)?;
    let mut out = Vec::with_capacity(p * d);
    for column in (d - p..d).rev() {
        let mut vector: Vec<f64> = (0..d).map(|i| eigen.vectors[i * d + column]).collect();
        let largest = vector.iter().enumerate().fold(0, |best, (i, v)| {
            if v.abs() > vector[best].abs() {
                i
            } else {
                best
            }
        });
        if vector[largest] < 0.0 {
            vector.iter_mut().for_each(|v| *v = -*v);
        }
        out.extend(vector);
    }
    Ok(out)
}
