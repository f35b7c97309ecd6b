//! Linear algebra in `f64` on the host: symmetric eigendecomposition and whitening matrices.
//!
//! - [`symmetric_eigen`]: `numpy.linalg.eigh` by cyclic Jacobi ([`SymmetricEigen`]);
//! - [`zca`] and [`local_zca`]: whitening matrices from a channel covariance ([`WhiteningMatrix`],
//!   dense or `k` entries per row for a device kernel);
//! - [`second_moment`] (`X X^T / samples`, what Kilosort4 whitens with) and [`covariance`]
//!   (`numpy.cov`).
//!
//! Matrices are row-major `Vec<f64>`; signals are `[channels, samples]` channel-major.

mod eigen;
mod moments;
mod whiten;

pub use eigen::{SymmetricEigen, symmetric_eigen};
pub use moments::{covariance, second_moment};
pub use whiten::{WhiteningMatrix, local_zca, zca};
