//! Whitening matrices from a channel covariance: ZCA over all channels or over each channel's
//! nearest neighbours (as Kilosort4 whitens).

use super::eigen::symmetric_eigen;
use crate::{Error, Result};

/// A whitening matrix `W` (`n x n`, whitened = `W x`) stored by rows with `k` entries each: row
/// `c` has weights `weights[c k .. c k + k]` on input channels `indices[c k .. c k + k]`. Full
/// ZCA has `k = n` (indices `0..n` in order); local ZCA has `k` = the neighbourhood size, the
/// channel itself first. The sparse form is what a device kernel reads; [`WhiteningMatrix::dense`]
/// gives the matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct WhiteningMatrix {
    n: usize,
    k: usize,
    indices: Vec<u32>,
    weights: Vec<f64>,
}

impl WhiteningMatrix {
    /// The number of channels.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Entries per row.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Input channel of each entry, `n x k` row-major.
    pub fn indices(&self) -> &[u32] {
        &self.indices
    }

    /// Weight of each entry, `n x k` row-major.
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// The dense `n x n` row-major matrix (zeros outside each row's entries).
    pub fn dense(&self) -> Vec<f64> {
        let mut w = vec![0.0; self.n * self.n];
        for (c, (idx, wt)) in self
            .indices
            .chunks_exact(self.k)
            .zip(self.weights.chunks_exact(self.k))
            .enumerate()
        {
            for (&j, &v) in idx.iter().zip(wt) {
                w[c * self.n + j as usize] = v;
            }
        }
        w
    }

    /// Applies the whitening to `x` (`[n, samples]` channel-major): `out[c][t] = sum_m
    /// weights[c][m] x[indices[c][m]][t]`, the `f64` host reference of a device whitening kernel.
    ///
    /// # Errors
    ///
    /// [`Error::Shape`] when `x.len() != n * samples`.
    pub fn apply(&self, x: &[f64], samples: usize) -> Result<Vec<f64>> {
        let expected = self.n.saturating_mul(samples);
        if x.len() != expected {
            return Err(Error::Shape {
                what: "WhiteningMatrix::apply: x",
                expected,
                actual: x.len(),
                unit: "values (channels x samples)",
            });
        }
        let mut out = vec![0.0; x.len()];
        for (c, row) in out.chunks_exact_mut(samples.max(1)).enumerate() {
            let range = c * self.k..(c + 1) * self.k;
            for (&j, &w) in self.indices[range.clone()].iter().zip(&self.weights[range]) {
                let input = &x[j as usize * samples..(j as usize + 1) * samples];
                for (o, v) in row.iter_mut().zip(input) {
                    *o += w * v;
                }
            }
        }
        Ok(out)
    }
}

/// ZCA whitening of the `n x n` covariance `cov`: `W = E diag(1 / sqrt(|l| + eps)) E^T` from
/// the eigendecomposition `cov = E diag(l) E^T`, so `W cov W ~ I` (exactly `I` for `eps = 0`
/// and a positive definite `cov`). `eps` is added to every eigenvalue's magnitude, in the units
/// of `cov`: Kilosort4 uses `1e-6` with its covariance `X X^T / samples` (see
/// [`second_moment`](super::second_moment)). This is Kilosort4's SVD form
/// (`E, d, _ = svd(cov); (E / sqrt(d + eps)) @ E.T`; the singular values of a symmetric matrix
/// are `|l|`), so a covariance made singular by a common reference (one eigenvalue 0, or a
/// rounding below it) is whitened, not refused. In numpy:
/// `w, e = np.linalg.eigh(cov); (e / np.sqrt(np.abs(w) + eps)) @ e.T`.
///
/// # Errors
///
/// As [`symmetric_eigen`], and [`Error::InvalidParameter`] when `n` is 0, `eps` is negative or
/// not finite, or `eps` is 0 and an eigenvalue is 0.
pub fn zca(cov: &[f64], n: usize, eps: f64) -> Result<WhiteningMatrix> {
    check_channels("zca: n", n)?;
    let weights = zca_dense(cov, n, eps, "zca: cov")?;
    let indices = (0..n).flat_map(|_| 0..n as u32).collect();
    Ok(WhiteningMatrix {
        n,
        k: n,
        indices,
        weights,
    })
}

/// Local ZCA whitening: for each channel `c`, the `n_nearest` channels nearest to it by the
/// Euclidean distance between `positions` (itself first, then by distance, ties by channel
/// index), the [`zca`] of their sub-covariance, and row `c` of `W` = that matrix's row for `c`
/// placed on those channels. `k = min(n_nearest, n)` entries per row; Kilosort4's default
/// neighbourhood is 32 channels with `eps = 1e-6`.
///
/// Kilosort4's `whitening_local` writes each neighbourhood's row for `c` into column `c` of its
/// matrix instead; that matrix is the transpose of this one, and its ties follow numpy's
/// unstable argsort.
///
/// # Errors
///
/// [`Error::Shape`] when `cov` does not hold `n * n` values for `n = positions.len()`;
/// [`Error::InvalidParameter`] when there are no channels, `n_nearest` is 0, a position is not finite, or as [`zca`]
/// for a neighbourhood.
pub fn local_zca(
    cov: &[f64],
    positions: &[(f64, f64)],
    n_nearest: usize,
    eps: f64,
) -> Result<WhiteningMatrix> {
    let n = positions.len();
    check_channels("local_zca: positions", n)?;
    if cov.len() != n * n {
        return Err(Error::Shape {
            what: "local_zca: cov",
            expected: n * n,
            actual: cov.len(),
            unit: "values (channels squared)",
        });
    }
    if n_nearest == 0 {
        return Err(Error::InvalidParameter {
            what: "local_zca: n_nearest",
            reason: "the neighbourhood needs at least 1 channel, got 0".to_string(),
        });
    }
    if let Some((c, p)) = positions
        .iter()
        .enumerate()
        .find(|(_, p)| !(p.0.is_finite() && p.1.is_finite()))
    {
        return Err(Error::InvalidParameter {
            what: "local_zca: positions",
            reason: format!("channel {c} position {p:?} is not finite"),
        });
    }
    let k = n_nearest.min(n);
    let mut indices = Vec::with_capacity(n * k);
    let mut weights = Vec::with_capacity(n * k);
    let mut sub = vec![0.0; k * k];
    for (c, &(xc, yc)) in positions.iter().enumerate() {
        let distance = |j: usize| (positions[j].0 - xc).powi(2) + (positions[j].1 - yc).powi(2);
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&i, &j| {
            (i != c)
                .cmp(&(j != c))
                .then(distance(i).total_cmp(&distance(j)))
                .then(i.cmp(&j))
        });
        let near = &order[..k];
        for (a, &i) in near.iter().enumerate() {
            for (b, &j) in near.iter().enumerate() {
                sub[a * k + b] = cov[i * n + j];
            }
        }
        let local = zca_dense(&sub, k, eps, "local_zca: cov")?;
        // `n * n` values fit in memory, so every channel index fits in u32.
        indices.extend(near.iter().map(|&j| j as u32));
        weights.extend_from_slice(&local[..k]);
    }
    Ok(WhiteningMatrix {
        n,
        k,
        indices,
        weights,
    })
}

/// Checks that there is at least one channel.
fn check_channels(what: &'static str, n: usize) -> Result<()> {
    if n == 0 {
        return Err(Error::InvalidParameter {
            what,
            reason: "at least one channel is needed, got 0".to_string(),
        });
    }
    Ok(())
}

/// `E diag(1 / sqrt(l + eps)) E^T`, dense row-major.
fn zca_dense(cov: &[f64], n: usize, eps: f64, what: &'static str) -> Result<Vec<f64>> {
    if !(eps.is_finite() && eps >= 0.0) {
        return Err(Error::InvalidParameter {
            what: "zca: eps",
            reason: format!("{eps} must be finite and non-negative"),
        });
    }
    let eigen = symmetric_eigen(cov, n)?;
    let mut scales = Vec::with_capacity(n);
    for &l in &eigen.values {
        // The singular values of a symmetric matrix are its eigenvalues' magnitudes, and the
        // sign of a negative one cancels in `E diag E^T`: so `|l|` is the SVD form Kilosort4
        // uses, which never fails on a covariance made singular by a common reference.
        let scale = l.abs() + eps;
        if !(scale > 0.0 && scale.is_finite()) {
            return Err(Error::InvalidParameter {
                what,
                reason: format!(
                    "eigenvalue {l} plus eps {eps}: the covariance has a zero (or non-finite) \
                     eigenvalue and eps is 0"
                ),
            });
        }
        scales.push(1.0 / scale.sqrt());
    }
    let e = &eigen.vectors;
    let mut w = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let v: f64 = (0..n)
                .map(|m| e[i * n + m] * scales[m] * e[j * n + m])
                .sum();
            w[i * n + j] = v;
            w[j * n + i] = v;
        }
    }
    Ok(w)
}
