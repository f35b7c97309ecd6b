//! Kilosort4 §3.4: the matrices that resample every channel at its drift-shifted position by
//! Gaussian-kernel (kriging-style) interpolation.

use crate::{Error, Result};

/// The most channels accepted (the kernel matrices hold `C^2` values).
const MAX_CHANNELS: usize = 8192;

/// Kilosort4's ridge added to the kernel matrix's diagonal before inverting it.
const RIDGE: f64 = 0.01;

/// Gaussian-kernel interpolation of the channels at shifted positions, set up once per probe.
///
/// Holds the channel positions `p_c = (x_c, y_c)` (um, Kilosort4's `float32` values, computed
/// in `f64`) and `iKxx = (Kxx + 0.01 I)^-1` with `Kxx[i, j] = exp(-|p_i - p_j|^2 / (2 sig^2))`,
/// `sig` = `sig_interp`. [`ShiftInterpolation::matrix`] gives each batch's `M_b = Kq iKxx`.
#[derive(Debug, Clone, PartialEq)]
pub struct ShiftInterpolation {
    x: Vec<f64>,
    y: Vec<f64>,
    sig_interp: f64,
    inverse: Vec<f64>,
}

impl ShiftInterpolation {
    /// The interpolation for channels at `(channel_x[c], channel_y[c])` um with kernel width
    /// `sig_interp` um (Kilosort4's `sig_interp`, 20 by default).
    ///
    /// # Errors
    ///
    /// [`Error::Setting`] (`sig_interp`) unless it is finite and positive; [`Error::Input`]
    /// (`channel positions`) for no channels, more than 8192, `x` and `y` of different lengths,
    /// a non-finite position, or (not expected for finite positions) a kernel matrix the
    /// Cholesky factorisation finds not positive definite.
    pub fn new(channel_x: &[f32], channel_y: &[f32], sig_interp: f64) -> Result<Self> {
        if !(sig_interp.is_finite() && sig_interp > 0.0) {
            return Err(Error::Setting {
                name: "sig_interp",
                reason: format!("must be finite and positive, got {sig_interp}"),
            });
        }
        let input = |reason: String| Error::Input {
            what: "channel positions",
            reason,
        };
        let n = channel_x.len();
        if n == 0 || n > MAX_CHANNELS || channel_y.len() != n {
            return Err(input(format!(
                "{n} x and {} y positions (1..={MAX_CHANNELS} channels, as many of each)",
                channel_y.len()
            )));
        }
        if let Some(c) = (0..n).find(|&c| !(channel_x[c].is_finite() && channel_y[c].is_finite())) {
            return Err(input(format!(
                "channel {c} at ({}, {})",
                channel_x[c], channel_y[c]
            )));
        }
        let x: Vec<f64> = channel_x.iter().map(|&v| f64::from(v)).collect();
        let y: Vec<f64> = channel_y.iter().map(|&v| f64::from(v)).collect();
        let mut kxx = kernel(&x, &y, &x, &y, sig_interp);
        (0..n).for_each(|i| kxx[i * n + i] += RIDGE);
        let inverse = spd_inverse(&kxx, n)
            .ok_or_else(|| input("Kxx + 0.01 I is not positive definite".to_string()))?;
        Ok(Self {
            x,
            y,
            sig_interp,
            inverse,
        })
    }

    /// The number of channels `C`.
    pub fn n_channels(&self) -> usize {
        self.x.len()
    }

    /// The kernel width `sig_interp`, um.
    pub fn sig_interp(&self) -> f64 {
        self.sig_interp
    }

    /// `iKxx = (Kxx + 0.01 I)^-1`, `C x C` row-major.
    pub fn inverse_kernel(&self) -> &[f64] {
        &self.inverse
    }

    /// The shift `delta_c` (um) of every channel for one batch's block shifts `shifts` (um, one
    /// per block, a row of [`DriftEstimate::dshift`](super::DriftEstimate::dshift)) at the
    /// block centres `block_centres` (um, strictly increasing).
    ///
    /// One block: `delta_c = shifts[0]`. Several: the piecewise-linear function through the
    /// points `(block_centres[j], shifts[j])` at `y_c`, its end segments continued as straight
    /// lines outside `[block_centres[0], block_centres[last]]`: `numpy.interp` inside, and
    /// `scipy.interpolate.interp1d(..., fill_value="extrapolate")` everywhere.
    ///
    /// # Errors
    ///
    /// [`Error::Input`] (`drift shifts`) when `shifts` is empty, its length differs from
    /// `block_centres`', a value is not finite, or the centres do not increase strictly.
    pub fn channel_shifts(&self, shifts: &[f64], block_centres: &[f64]) -> Result<Vec<f64>> {
        let input = |reason: String| Error::Input {
            what: "drift shifts",
            reason,
        };
        if shifts.is_empty() || shifts.len() != block_centres.len() {
            return Err(input(format!(
                "{} shifts for {} block centres (as many, at least one)",
                shifts.len(),
                block_centres.len()
            )));
        }
        if let Some(j) =
            (0..shifts.len()).find(|&j| !(shifts[j].is_finite() && block_centres[j].is_finite()))
        {
            return Err(input(format!(
                "block {j}: shift {} at {} um",
                shifts[j], block_centres[j]
            )));
        }
        if let Some(j) =
            (1..block_centres.len()).find(|&j| block_centres[j] <= block_centres[j - 1])
        {
            return Err(input(format!(
                "block centres {} and {} um do not increase",
                block_centres[j - 1],
                block_centres[j]
            )));
        }
        Ok(self
            .y
            .iter()
            .map(|&y| shift_at_depth(shifts, block_centres, y))
            .collect())
    }

    /// The interpolation matrix `M_b = Kq iKxx` (`C x C` row-major, output channel by input
    /// channel) of one batch: channel `c` is read at `q_c = (x_c, y_c - delta_c)` with
    /// `delta_c` from [`channel_shifts`](Self::channel_shifts), and
    /// `Kq[i, j] = exp(-|q_i - p_j|^2 / (2 sig^2))`. Kilosort4 corrects a whitened batch `X`
    /// as `(M_b W) X`; [`compose`] forms `M_b W`. Computed on one thread.
    ///
    /// # Errors
    ///
    /// As [`channel_shifts`](Self::channel_shifts).
    pub fn matrix(&self, shifts: &[f64], block_centres: &[f64]) -> Result<Vec<f64>> {
        let kq = self.target_kernel(shifts, block_centres)?;
        Ok(product(&kq, &self.inverse, self.n_channels(), 1))
    }

    /// `Kq` of [`matrix`](Self::matrix) alone (`C x C` row-major): with `P = iKxx W` formed once
    /// ([`compose`] of [`inverse_kernel`](Self::inverse_kernel) and `W`), `Kq P` is a batch's
    /// corrected whitening `M_b W` for one matrix product per batch instead of two.
    ///
    /// # Errors
    ///
    /// As [`channel_shifts`](Self::channel_shifts).
    pub fn target_kernel(&self, shifts: &[f64], block_centres: &[f64]) -> Result<Vec<f64>> {
        let delta = self.channel_shifts(shifts, block_centres)?;
        let qy: Vec<f64> = self.y.iter().zip(&delta).map(|(y, d)| y - d).collect();
        Ok(kernel(&self.x, &qy, &self.x, &self.y, self.sig_interp))
    }
}

/// The shift at depth `y` (um) of one batch's block shifts `shifts` at the block centres
/// `block_centres` (as many, at least one, strictly increasing; checked by the callers): the
/// one shift of a single block, else the piecewise-linear function through
/// `(block_centres[j], shifts[j])`, its end segments continued outside (`interp1d(...,
/// fill_value="extrapolate")`).
pub(super) fn shift_at_depth(shifts: &[f64], block_centres: &[f64], y: f64) -> f64 {
    if let [only] = shifts {
        return *only;
    }
    let last = block_centres.len() - 2;
    // The segment [k, k + 1] holding y, or the end segment beyond either end.
    let k = block_centres[1..=last].partition_point(|&c| c <= y);
    let (x0, x1) = (block_centres[k], block_centres[k + 1]);
    shifts[k] + (shifts[k + 1] - shifts[k]) * (y - x0) / (x1 - x0)
}

/// `K[i, j] = exp(-((ax_i - bx_j)^2 + (ay_i - by_j)^2) / (2 sig^2))`, `|a| x |b|` row-major.
fn kernel(ax: &[f64], ay: &[f64], bx: &[f64], by: &[f64], sig: f64) -> Vec<f64> {
    let scale = -0.5 / (sig * sig);
    ax.iter()
        .zip(ay)
        .flat_map(|(xa, ya)| {
            bx.iter()
                .zip(by)
                .map(move |(xb, yb)| (scale * ((xa - xb).powi(2) + (ya - yb).powi(2))).exp())
        })
        .collect()
}

/// The product `a b` of two `n x n` row-major matrices (lengths checked by the caller), rows
/// shared among up to `threads` threads (each row is summed in the same order whatever the
/// thread count, so the result does not depend on it).
fn product(a: &[f64], b: &[f64], n: usize, threads: usize) -> Vec<f64> {
    let mut out = vec![0.0; n * n];
    if n == 0 {
        return out;
    }
    let rows = n.div_ceil(threads.max(1)).max(8);
    std::thread::scope(|scope| {
        for (out_rows, a_rows) in out.chunks_mut(rows * n).zip(a.chunks(rows * n)) {
            scope.spawn(move || {
                for (out_row, a_row) in out_rows.chunks_exact_mut(n).zip(a_rows.chunks_exact(n)) {
                    for (&a_ik, b_row) in a_row.iter().zip(b.chunks_exact(n)) {
                        out_row
                            .iter_mut()
                            .zip(b_row)
                            .for_each(|(o, b_kj)| *o += a_ik * b_kj);
                    }
                }
            });
        }
    });
    out
}

/// The product `m w` of two `n x n` row-major matrices (`numpy.matmul`): an interpolation
/// matrix of [`ShiftInterpolation::matrix`] times the whitening matrix, what Kilosort4 applies
/// to a batch. Rows are computed on up to `threads` threads; the result does not depend on
/// the count.
///
/// # Errors
///
/// [`Error::Input`] (`matrices`) when `m` or `w` does not hold `n x n` values.
pub fn compose(m: &[f64], w: &[f64], n: usize, threads: usize) -> Result<Vec<f64>> {
    if n.checked_mul(n)
        .is_none_or(|nn| m.len() != nn || w.len() != nn)
    {
        return Err(Error::Input {
            what: "matrices",
            reason: format!(
                "{} and {} values for two {n} x {n} matrices",
                m.len(),
                w.len()
            ),
        });
    }
    Ok(product(m, w, n, threads))
}

/// The inverse of a symmetric positive definite `n x n` matrix, by its Cholesky factor
/// `A = L L^T` and one forward and one back substitution per column; `None` when a pivot is
/// not positive (the matrix is not positive definite in floating point).
fn spd_inverse(a: &[f64], n: usize) -> Option<Vec<f64>> {
    let mut l = vec![0.0; n * n];
    for j in 0..n {
        let pivot = a[j * n + j] - l[j * n..j * n + j].iter().map(|v| v * v).sum::<f64>();
        if pivot.is_nan() || pivot <= 0.0 {
            return None;
        }
        let d = pivot.sqrt();
        l[j * n + j] = d;
        for i in j + 1..n {
            let dot: f64 = (0..j).map(|k| l[i * n + k] * l[j * n + k]).sum();
            l[i * n + j] = (a[i * n + j] - dot) / d;
        }
    }
    let mut inverse = vec![0.0; n * n];
    let mut col = vec![0.0; n];
    for c in 0..n {
        for i in 0..n {
            let dot: f64 = (0..i).map(|k| l[i * n + k] * col[k]).sum();
            col[i] = (f64::from(u8::from(i == c)) - dot) / l[i * n + i];
        }
        for i in (0..n).rev() {
            let dot: f64 = (i + 1..n).map(|k| l[k * n + i] * col[k]).sum();
            col[i] = (col[i] - dot) / l[i * n + i];
        }
        (0..n).for_each(|i| inverse[i * n + c] = col[i]);
    }
    Some(inverse)
}

#[cfg(test)]
mod tests {
    use super::{ShiftInterpolation, compose, kernel, product};

    /// One column of channels at x = 0, y = 0, 20, ..., 20 (n - 1) um.
    fn column(n: usize) -> (Vec<f32>, Vec<f32>) {
        (vec![0.0; n], (0..n).map(|c| 20.0 * c as f32).collect())
    }

    #[test]
    fn drift_zero_shift_gives_kxx_times_the_inverse() {
        // Two columns, 24 rows: a small Neuropixels-like probe.
        let x: Vec<f32> = (0..48)
            .map(|c| if c % 2 == 0 { 11.0 } else { 43.0 })
            .collect();
        let y: Vec<f32> = (0..48).map(|c| 20.0 * (c / 2) as f32).collect();
        let interp = ShiftInterpolation::new(&x, &y, 20.0).unwrap();
        let n = 48;
        let (xf, yf): (Vec<f64>, Vec<f64>) = x
            .iter()
            .zip(&y)
            .map(|(&a, &b)| (f64::from(a), f64::from(b)))
            .unzip();
        let kxx = kernel(&xf, &yf, &xf, &yf, 20.0);
        let mut ridged = kxx.clone();
        (0..n).for_each(|i| ridged[i * n + i] += 0.01);
        // iKxx is the inverse: (Kxx + 0.01 I) iKxx = I.
        let identity = product(&ridged, interp.inverse_kernel(), n, 2);
        for i in 0..n {
            for j in 0..n {
                let want = f64::from(u8::from(i == j));
                assert!((identity[i * n + j] - want).abs() < 1e-10, "({i}, {j})");
            }
        }
        // M (Kxx + 0.01 I) = Kxx, for a rigid and a two-block zero shift alike.
        for m in [
            interp.matrix(&[0.0], &[100.0]).unwrap(),
            interp.matrix(&[0.0, 0.0], &[100.0, 300.0]).unwrap(),
        ] {
            let back = product(&m, &ridged, n, 3);
            for (k, (b, want)) in back.iter().zip(&kxx).enumerate() {
                assert!((b - want).abs() < 1e-10, "entry {k}: {b} vs {want}");
            }
        }
    }

    #[test]
    fn drift_one_pitch_shift_moves_a_smooth_profile() {
        // A Gaussian profile (sd 60 um) at 400 um on a 40-channel column; dshift = -20 um
        // (units moved up by 20 um) reads every channel 20 um higher: out(y) ~ profile(y + 20).
        let (x, y) = column(40);
        let interp = ShiftInterpolation::new(&x, &y, 20.0).unwrap();
        let profile = |y: f64| (-(y - 400.0).powi(2) / (2.0 * 60.0 * 60.0)).exp();
        let input: Vec<f64> = y.iter().map(|&v| profile(f64::from(v))).collect();
        let m = interp.matrix(&[-20.0], &[400.0]).unwrap();
        let out: Vec<f64> = m
            .chunks_exact(40)
            .map(|row| row.iter().zip(&input).map(|(a, b)| a * b).sum())
            .collect();
        for c in 5..35 {
            let want = profile(f64::from(y[c]) + 20.0);
            assert!(
                (out[c] - want).abs() < 0.02,
                "channel {c}: {} vs {want}",
                out[c]
            );
        }
        let centroid = |v: &[f64]| {
            v.iter()
                .zip(&y)
                .map(|(a, &b)| a * f64::from(b))
                .sum::<f64>()
                / v.iter().sum::<f64>()
        };
        let moved = centroid(&input) - centroid(&out);
        assert!((moved - 20.0).abs() < 1.0, "the profile moved {moved} um");
    }

    #[test]
    fn drift_channel_shifts_interpolate_and_extrapolate() {
        let (x, y) = column(6); // y = 0, 20, ..., 100
        let interp = ShiftInterpolation::new(&x, &y, 20.0).unwrap();
        assert_eq!(interp.channel_shifts(&[3.0], &[50.0]).unwrap(), [3.0; 6]);
        // Through (30, 0), (50, 10), (90, 0): below 30 and above 90 the end lines continue.
        let got = interp
            .channel_shifts(&[0.0, 10.0, 0.0], &[30.0, 50.0, 90.0])
            .unwrap();
        let want = [-15.0, -5.0, 5.0, 7.5, 2.5, -2.5];
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-12, "{got:?}");
        }
    }

    #[test]
    fn drift_interpolation_refuses_bad_input() {
        let (x, y) = column(4);
        assert!(ShiftInterpolation::new(&[], &[], 20.0).is_err());
        assert!(ShiftInterpolation::new(&x, &y[..3], 20.0).is_err());
        assert!(ShiftInterpolation::new(&x, &y, 0.0).is_err());
        assert!(ShiftInterpolation::new(&x, &y, f64::NAN).is_err());
        assert!(ShiftInterpolation::new(&[0.0, f32::NAN], &[0.0, 1.0], 20.0).is_err());
        let interp = ShiftInterpolation::new(&x, &y, 20.0).unwrap();
        assert!(interp.matrix(&[], &[]).is_err());
        assert!(interp.matrix(&[1.0, 2.0], &[10.0]).is_err());
        assert!(interp.matrix(&[f64::INFINITY], &[10.0]).is_err());
        assert!(interp.matrix(&[1.0, 2.0], &[10.0, 10.0]).is_err());
        assert!(compose(&[1.0; 4], &[1.0; 3], 2, 1).is_err());
        assert_eq!(
            compose(&[1.0, 2.0, 3.0, 4.0], &[0.0, 1.0, 1.0, 0.0], 2, 2).unwrap(),
            [2.0, 1.0, 4.0, 3.0]
        );
    }
}
