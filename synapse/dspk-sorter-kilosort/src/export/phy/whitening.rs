//! `whitening_mat_inv.npy`: the inverse of the whitening matrix, ridged as Kilosort ridges it.

/// What Kilosort adds to the whitening matrix's diagonal before inverting it for
/// `whitening_mat_inv.npy`.
pub(super) const INVERSE_RIDGE: f64 = 1e-5;

/// The inverse of `W + 1e-5 I` for the `c x c` row-major `w` (Kilosort's
/// `whitening_mat_inv.npy`, numpy's `linalg.inv` of the ridged matrix), by Gauss-Jordan
/// elimination with partial pivoting in `f64`; `None` if a pivot is below `1e-12` times the
/// largest entry, or an entry is not finite.
pub(crate) fn inverse_with_ridge(w: &[f64], c: usize) -> Option<Vec<f64>> {
    let mut a = w.to_vec();
    for i in 0..c {
        a[i * c + i] += INVERSE_RIDGE;
    }
    let scale = a.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    if a.iter().any(|v| !v.is_finite()) || (c > 0 && scale == 0.0) {
        return None;
    }
    let mut inv: Vec<f64> = (0..c * c)
        .map(|i| if i / c == i % c { 1.0 } else { 0.0 })
        .collect();
    for col in 0..c {
        let pivot =
            (col..c).max_by(|&i, &j| a[i * c + col].abs().total_cmp(&a[j * c + col].abs()))?;
        if a[pivot * c + col].abs() <= 1e-12 * scale {
            return None;
        }
        for k in 0..c {
            a.swap(col * c + k, pivot * c + k);
            inv.swap(col * c + k, pivot * c + k);
        }
        let p = a[col * c + col];
        for k in 0..c {
            a[col * c + k] /= p;
            inv[col * c + k] /= p;
        }
        for row in (0..c).filter(|&r| r != col) {
            let f = a[row * c + col];
            if f != 0.0 {
                for k in 0..c {
                    a[row * c + k] -= f * a[col * c + k];
                    inv[row * c + k] -= f * inv[col * c + k];
                }
            }
        }
    }
    Some(inv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ridged_inverse() {
        let w = [2.0, 1.0, 0.0, 1.0, 3.0, 1.0, 0.0, 1.0, 4.0];
        let inv = inverse_with_ridge(&w, 3).expect("invertible");
        for i in 0..3 {
            for j in 0..3 {
                let dot: f64 = (0..3)
                    .map(|k| {
                        let a = w[i * 3 + k] + if i == k { INVERSE_RIDGE } else { 0.0 };
                        a * inv[k * 3 + j]
                    })
                    .sum();
                let eye = if i == j { 1.0 } else { 0.0 };
                assert!((dot - eye).abs() < 1e-12, "({i}, {j}): {dot}");
            }
        }
        assert!(inverse_with_ridge(&[-1e-5, 0.0, 0.0, 1.0], 2).is_none());
        assert!(inverse_with_ridge(&[f64::NAN], 1).is_none());
        assert!(inverse_with_ridge(&[1.0, f64::NAN, 0.0, 1.0], 2).is_none());
        assert_eq!(inverse_with_ridge(&[], 0), Some(vec![]));
    }
}
