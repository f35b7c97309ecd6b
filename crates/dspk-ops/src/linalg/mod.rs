//! Linear algebra in `f64` on the host: symmetric eigendecomposition and whitening matrices.
