//! Small dense kernels of the clustering, each with a fixed summation order (so results do not
//! depend on anything but the inputs).

use std::ops::Range;

/// `sum_k a[k] b[k]` in f32, summed sequentially in `k` (each product rounded, then added):
/// the order [`products`] uses for every entry, so the two agree to the bit.
pub(super) fn dot_seq(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).fold(0.0f32, |s, (x, y)| s + x * y)
}

/// `sum_t max(2 g_t - vc - e_t, 0)` (each term in f32, as the initialisation's gain): blocks of
/// 64 terms summed in f32 in eight interleaved lanes (`t mod 8`, combined pairwise), the block
/// sums and the tail added in f64 in order.
pub(super) fn gain_sum(g: &[f32], e: &[f32], vc: f32) -> f64 {
    let gain = |g: f32, e: f32| {
        let v = 2.0 * g - vc - e;
        if v > 0.0 { v } else { 0.0 }
    };
    let mut total = 0.0f64;
    let (cg, ce) = (g.chunks_exact(64), e.chunks_exact(64));
    let (rg, re) = (cg.remainder(), ce.remainder());
    for (bg, be) in cg.zip(ce) {
        let mut acc = [0.0f32; 8];
        for (x, y) in bg.chunks_exact(8).zip(be.chunks_exact(8)) {
            for k in 0..8 {
                acc[k] += gain(x[k], y[k]);
            }
        }
        total += f64::from(
            ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])),
        );
    }
    rg.iter()
        .zip(re)
        .fold(total, |s, (&x, &y)| s + f64::from(gain(x, y)))
}

/// Rows of the [`products`] register tile.
const TILE_ROWS: usize = 6;
/// Columns of the [`products`] register tile (two SSE vectors).
const TILE_COLS: usize = 8;

/// The products of the rows of `a` ([rows, d] row-major) with the columns `span` of `bt`
/// ([d, ldb] row-major, i.e. the other matrix transposed): `out[r * ldo + j] = sum_k a[r, k]
/// bt[k, span.start + j]`, every entry a sequential sum over `k` in f32 as [`dot_seq`] computes it, so
/// the result does not depend on the tiling. Register tiles of 4 x 8 entries, vectorised along
/// the columns.
pub(super) fn products(
    a: &[f32],
    d: usize,
    bt: &[f32],
    ldb: usize,
    span: Range<usize>,
    out: &mut [f32],
    ldo: usize,
) {
    let (col0, cols) = (span.start, span.len());
    let rows = a.len().checked_div(d).unwrap_or(0);
    for r in (0..rows).step_by(TILE_ROWS) {
        let nr = (rows - r).min(TILE_ROWS);
        for j in (0..cols).step_by(TILE_COLS) {
            let nj = (cols - j).min(TILE_COLS);
            let mut acc = [[0.0f32; TILE_COLS]; TILE_ROWS];
            if nr == TILE_ROWS && nj == TILE_COLS {
                for k in 0..d {
                    let b = &bt[k * ldb + col0 + j..][..TILE_COLS];
                    for (q, row) in acc.iter_mut().enumerate() {
                        let av = a[(r + q) * d + k];
                        for (o, &bv) in row.iter_mut().zip(b) {
                            *o += av * bv;
                        }
                    }
                }
            } else {
                for k in 0..d {
                    let b = &bt[k * ldb + col0 + j..][..nj];
                    for (q, row) in acc.iter_mut().enumerate().take(nr) {
                        let av = a[(r + q) * d + k];
                        for (o, &bv) in row.iter_mut().zip(b) {
                            *o += av * bv;
                        }
                    }
                }
            }
            for (q, row) in acc.iter().enumerate().take(nr) {
                out[(r + q) * ldo + j..][..nj].copy_from_slice(&row[..nj]);
            }
        }
    }
}

/// `x` ([n, d] row-major) transposed to [d, n].
pub(super) fn transpose(x: &[f32], n: usize, d: usize) -> Vec<f32> {
    let mut t = vec![0.0f32; x.len()];
    for (i, row) in x.chunks_exact(d).enumerate() {
        for (k, &v) in row.iter().enumerate() {
            t[k * n + i] = v;
        }
    }
    t
}

/// `||a - b||^2` of two f32 rows, computed in f64 with four interleaved partial sums (lanes
/// `k mod 4`), then the tail.
pub(super) fn sq_dist_f32(a: &[f32], b: &[f32]) -> f64 {
    let mut acc = [0.0f64; 4];
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for k in 0..4 {
            let t = f64::from(x[k]) - f64::from(y[k]);
            acc[k] += t * t;
        }
    }
    let mut tail = 0.0f64;
    for (x, y) in ra.iter().zip(rb) {
        let t = f64::from(*x) - f64::from(*y);
        tail += t * t;
    }
    ((acc[0] + acc[2]) + (acc[1] + acc[3])) + tail
}

/// Solves `a x = b` for a symmetric positive definite `a` ([m, m] row-major; only its upper
/// triangle is read) by Cholesky factorisation in f64; `None` when a pivot is not positive
/// (the matrix is not positive definite, or not finite).
pub(super) fn solve_spd(a: &[f64], b: &[f64], m: usize) -> Option<Vec<f64>> {
    // Lower factor L (row-major) with A = L L^T, from the upper triangle of A (A[j][i], j <= i).
    let mut l = vec![0.0f64; m * m];
    for i in 0..m {
        for j in 0..=i {
            let mut s = a[j * m + i];
            for k in 0..j {
                s -= l[i * m + k] * l[j * m + k];
            }
            if i == j {
                if !(s > 0.0 && s.is_finite()) {
                    return None;
                }
                l[i * m + i] = s.sqrt();
            } else {
                l[i * m + j] = s / l[j * m + j];
            }
        }
    }
    // Forward (L y = b), then backward (L^T x = y).
    let mut y = vec![0.0f64; m];
    for i in 0..m {
        let mut s = b[i];
        for k in 0..i {
            s -= l[i * m + k] * y[k];
        }
        y[i] = s / l[i * m + i];
    }
    let mut x = vec![0.0f64; m];
    for i in (0..m).rev() {
        let mut s = y[i];
        for k in i + 1..m {
            s -= l[k * m + i] * x[k];
        }
        x[i] = s / l[i * m + i];
    }
    Some(x)
}

/// The rows `rows` of the row-major `x` of `d` values per row, in that order, row-major.
pub(super) fn gather_rows(x: &[f32], d: usize, rows: &[usize]) -> Vec<f32> {
    rows.iter()
        .flat_map(|&r| x[r * d..(r + 1) * d].iter().copied())
        .collect()
}
