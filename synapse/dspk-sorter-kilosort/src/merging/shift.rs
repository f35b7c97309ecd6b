//! Moving features in time (`docs/KILOSORT4.md` §8.2): PC features are turned into waveforms
//! through `wPCA`, shifted by a whole number of samples with the vacated samples filled from the
//! nearest surviving one, and projected back. All three steps are linear, so they are one
//! `P x P` matrix per shift.

/// The `P x P` matrix that shifts features by `dt` samples: `S[p, q] = Σ_τ wPCA[p, τ]
/// wPCA[q, clamp(τ - dt, 0, nt - 1)]`, so that `f'[p] = Σ_q S[p, q] f[q]` holds the projection of
/// the waveform `new[τ] = old[τ - dt]` (`dt > 0` moves content to later samples), the `|dt|`
/// vacated samples taking the value of the nearest surviving one.
pub(super) fn shift_matrix(wpca: &[f32], nt: usize, dt: i64) -> Vec<f64> {
    let p = wpca.len() / nt;
    let last = nt as i64 - 1;
    let mut s = vec![0.0f64; p * p];
    for a in 0..p {
        for b in 0..p {
            let mut sum = 0.0f64;
            for tau in 0..nt {
                let src = (tau as i64 - dt).clamp(0, last) as usize;
                sum += f64::from(wpca[a * nt + tau]) * f64::from(wpca[b * nt + src]);
            }
            s[a * p + b] = sum;
        }
    }
    s
}

/// Applies a shift matrix ([`shift_matrix`]) to every `P`-long row of `rows` in place.
pub(super) fn shift_rows(rows: &mut [f32], s: &[f64], p: usize) {
    let mut out = vec![0.0f64; p];
    for row in rows.chunks_exact_mut(p) {
        for (a, o) in out.iter_mut().enumerate() {
            *o = s[a * p..(a + 1) * p]
                .iter()
                .zip(row.iter())
                .map(|(&m, &f)| m * f64::from(f))
                .sum();
        }
        for (f, &o) in row.iter_mut().zip(&out) {
            *f = o as f32;
        }
    }
}
