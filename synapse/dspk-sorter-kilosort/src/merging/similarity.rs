//! Template similarity over time lags (`docs/KILOSORT4.md` §7 `WtW`, §8.2): the correlation of
//! two units' waveforms, each normalised, at every relative shift, computed in PC space through
//! the lagged cross-products of the principal components.

use crate::{Error, Result};

/// The lagged cross-products of the principal components, `WtW[p, q, ℓ] = Σ_j wPCA[p, j]
/// wPCA[q, j + ℓ]` for `ℓ = -nt..=nt` (terms outside the template are zero), with the
/// components themselves. Lag index `i` stands for `ℓ = i - nt`; index `nt` is zero lag.
#[derive(Debug, Clone, PartialEq)]
pub struct WtW {
    p: usize,
    nt: usize,
    wpca: Vec<f32>,
    /// `[p, p, 2 nt + 1]` row-major.
    values: Vec<f64>,
}

impl WtW {
    /// The cross-products of `wpca`, `p x nt` row-major ([`UniversalTemplates::wpca`]),
    /// summed in `f64`.
    ///
    /// [`UniversalTemplates::wpca`]: crate::detection::universal::UniversalTemplates::wpca
    ///
    /// # Errors
    ///
    /// [`Error::Input`] when `nt` is 0, `wpca` is empty or not whole rows of `nt`, or holds a
    /// value that is not finite.
    pub fn new(wpca: &[f32], nt: usize) -> Result<Self> {
        if nt == 0 || wpca.is_empty() || !wpca.len().is_multiple_of(nt) {
            return Err(Error::Input {
                what: "wPCA",
                reason: format!("{} values are not whole rows of nt = {nt}", wpca.len()),
            });
        }
        if let Some(i) = wpca.iter().position(|v| !v.is_finite()) {
            return Err(Error::Input {
                what: "wPCA",
                reason: format!("value {i} is {}", wpca[i]),
            });
        }
        let p = wpca.len() / nt;
        let lags = 2 * nt + 1;
        let mut values = vec![0.0f64; p * p * lags];
        for a in 0..p {
            let ra = &wpca[a * nt..(a + 1) * nt];
            for b in 0..p {
                let rb = &wpca[b * nt..(b + 1) * nt];
                for li in 0..lags {
                    // ℓ = li - nt; j runs where both j and j + ℓ lie in 0..nt.
                    let (xa, xb) = if li >= nt {
                        let s = (li - nt).min(nt);
                        (&ra[..nt - s], &rb[s..])
                    } else {
                        let s = nt - li;
                        (&ra[s..], &rb[..nt - s])
                    };
                    let sum: f64 = xa
                        .iter()
                        .zip(xb)
                        .map(|(&x, &y)| f64::from(x) * f64::from(y))
                        .sum();
                    values[(a * p + b) * lags + li] = sum;
                }
            }
        }
        Ok(Self {
            p,
            nt,
            wpca: wpca.to_vec(),
            values,
        })
    }

    /// Principal components `P`.
    #[must_use]
    pub fn p(&self) -> usize {
        self.p
    }

    /// Template length `nt`.
    #[must_use]
    pub fn nt(&self) -> usize {
        self.nt
    }

    /// Number of lags, `2 nt + 1`.
    #[must_use]
    pub fn lags(&self) -> usize {
        2 * self.nt + 1
    }

    /// The principal components, `p x nt` row-major.
    #[must_use]
    pub fn wpca(&self) -> &[f32] {
        &self.wpca
    }

    /// `WtW[p, q, ℓ]` at lag index `li` (`ℓ = li - nt`).
    #[must_use]
    pub fn at(&self, p: usize, q: usize, li: usize) -> f64 {
        self.values[(p * self.p + q) * self.lags() + li]
    }

    /// `c(ℓ) = Σ_{p,q} m[p, q] WtW[p, q, ℓ]` for a `P x P` matrix `m`; the maximum over lags
    /// and its first index.
    fn best_lag(&self, m: &[f64]) -> (f64, usize) {
        let lags = self.lags();
        let mut c = vec![0.0f64; lags];
        for (pq, &w) in m.iter().enumerate() {
            if w == 0.0 {
                continue;
            }
            let row = &self.values[pq * lags..(pq + 1) * lags];
            for (acc, &v) in c.iter_mut().zip(row) {
                *acc += w * v;
            }
        }
        let mut best = (c[0], 0);
        for (li, &v) in c.iter().enumerate().skip(1) {
            if v > best.0 {
                best = (v, li);
            }
        }
        best
    }
}

/// The similarity of two unit templates `wk`, `wj` (each `[C, P]` row-major mean features):
/// each is divided by its Frobenius norm plus `1e-6`, and `c(ℓ) = Σ_{p,q} (Σ_c Ŵk[c, p]
/// Ŵj[c, q]) WtW[p, q, ℓ]` is the correlation of their waveforms with `wj` moved by `ℓ`
/// samples against `wk`. Returns `max_ℓ c(ℓ)` and its first lag index (`nt` is zero lag).
///
/// # Errors
///
/// [`Error::Input`] when the templates differ in length or are not whole rows of `P`.
pub fn similarity(wk: &[f32], wj: &[f32], wtw: &WtW) -> Result<(f32, usize)> {
    let p = wtw.p();
    if wk.len() != wj.len() || !wk.len().is_multiple_of(p) {
        return Err(Error::Input {
            what: "unit templates",
            reason: format!(
                "{} and {} values are not two [channels, {p}] templates",
                wk.len(),
                wj.len()
            ),
        });
    }
    let bank = Bank::new(&[wk, wj].concat(), wk.len() / p, p)?;
    let (sim, lag) = bank.similarity(0, 1, wtw);
    Ok((sim, lag))
}

/// The similarity ([`similarity`]) of every pair of `units` (`[N, C, P]` row-major), `N x N`
/// row-major, the maximum over lags (Kilosort's `similar_templates.npy`; the diagonal is a
/// unit's similarity with itself, about 1, and is kept).
///
/// Pairs that share no channel with a non-zero value are 0 without further arithmetic, so the
/// cost is the number of overlapping pairs times `C P² + P² (2 nt + 1)`.
///
/// # Errors
///
/// [`Error::Input`] when `units` is not whole `[C, P]` templates or holds a non-finite value.
pub fn similarity_matrix(units: &[f32], channels: usize, wtw: &WtW) -> Result<Vec<f32>> {
    let bank = Bank::new(units, channels, wtw.p())?;
    let n = bank.len();
    let mut out = vec![0.0f32; n * n];
    for k in 0..n {
        for j in 0..n {
            out[k * n + j] = bank.similarity(k, j, wtw).0;
        }
    }
    Ok(out)
}

/// Unit templates `[N, C, P]` with what the similarity needs of each: the channels where it is
/// not zero and `1 / (‖W‖ + 1e-6)`.
#[derive(Debug, Clone)]
pub(super) struct Bank {
    pub(super) c: usize,
    pub(super) p: usize,
    pub(super) units: Vec<f32>,
    active: Vec<Vec<u32>>,
    scale: Vec<f64>,
}

impl Bank {
    /// The bank of `units`, `[N, channels, p]` row-major.
    pub(super) fn new(units: &[f32], channels: usize, p: usize) -> Result<Self> {
        let w = channels * p;
        if w == 0 || !units.len().is_multiple_of(w) {
            return Err(Error::Input {
                what: "unit templates",
                reason: format!(
                    "{} values are not whole [{channels}, {p}] templates",
                    units.len()
                ),
            });
        }
        if let Some(i) = units.iter().position(|v| !v.is_finite()) {
            return Err(Error::Input {
                what: "unit templates",
                reason: format!("value {i} (unit {}) is {}", i / w, units[i]),
            });
        }
        let n = units.len() / w;
        let mut bank = Self {
            c: channels,
            p,
            units: units.to_vec(),
            active: vec![Vec::new(); n],
            scale: vec![0.0; n],
        };
        for k in 0..n {
            bank.refresh(k);
        }
        Ok(bank)
    }

    /// Number of units.
    pub(super) fn len(&self) -> usize {
        self.scale.len()
    }

    /// Unit `k`'s `[C, P]` values.
    pub(super) fn unit(&self, k: usize) -> &[f32] {
        let w = self.c * self.p;
        &self.units[k * w..(k + 1) * w]
    }

    /// Unit `k`'s `[C, P]` values, to change (call [`Bank::refresh`] after).
    pub(super) fn unit_mut(&mut self, k: usize) -> &mut [f32] {
        let w = self.c * self.p;
        &mut self.units[k * w..(k + 1) * w]
    }

    /// Frobenius norm of unit `k`, in `f64`.
    pub(super) fn norm(&self, k: usize) -> f64 {
        self.unit(k)
            .iter()
            .map(|&v| f64::from(v) * f64::from(v))
            .sum::<f64>()
            .sqrt()
    }

    /// Recomputes unit `k`'s active channels and scale after its values changed.
    pub(super) fn refresh(&mut self, k: usize) {
        let p = self.p;
        let active: Vec<u32> = self
            .unit(k)
            .chunks_exact(p)
            .enumerate()
            .filter(|(_, row)| row.iter().any(|&v| v != 0.0))
            .map(|(c, _)| c as u32)
            .collect();
        self.scale[k] = 1.0 / (self.norm(k) + 1e-6);
        self.active[k] = active;
    }

    /// The similarity of units `k` and `j` and its first lag index (see [`similarity`]).
    pub(super) fn similarity(&self, k: usize, j: usize, wtw: &WtW) -> (f32, usize) {
        let p = self.p;
        let (uk, uj) = (self.unit(k), self.unit(j));
        let mut m = vec![0.0f64; p * p];
        let mut any = false;
        for &c in &self.active[k] {
            let c = c as usize;
            let (rk, rj) = (&uk[c * p..(c + 1) * p], &uj[c * p..(c + 1) * p]);
            if rj.iter().all(|&v| v == 0.0) {
                continue;
            }
            any = true;
            for (a, &x) in rk.iter().enumerate() {
                for (b, &y) in rj.iter().enumerate() {
                    m[a * p + b] += f64::from(x) * f64::from(y);
                }
            }
        }
        if !any {
            return (0.0, 0);
        }
        let s = self.scale[k] * self.scale[j];
        for v in &mut m {
            *v *= s;
        }
        let (best, li) = wtw.best_lag(&m);
        (best as f32, li)
    }
}
