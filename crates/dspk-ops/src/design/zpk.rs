//! Zeros, poles and gain: analog prototypes, frequency transformations, the bilinear transform
//! and the conversion to second-order sections, each following the scipy.signal function of the
//! same name (`buttap`, `cheb1ap`, `lp2lp_zpk`, ..., `bilinear_zpk`, `zpk2sos`).

use std::f64::consts::PI;

use super::complex::Complex;
use super::sos::Sos;
use crate::{Error, Result};

/// A transfer function as zeros, poles and a real gain.
#[derive(Debug, Clone)]
pub(crate) struct Zpk {
    pub(crate) zeros: Vec<Complex>,
    pub(crate) poles: Vec<Complex>,
    pub(crate) gain: f64,
}

impl Zpk {
    /// Poles minus zeros.
    fn degree(&self) -> usize {
        self.poles.len().saturating_sub(self.zeros.len())
    }

    /// Analog Butterworth lowpass prototype of order `n`, cutoff 1 rad/s (`scipy.signal.buttap`).
    pub(crate) fn buttap(n: usize) -> Self {
        let poles = pole_angles(n)
            .map(|theta| Complex::new(-theta.cos(), -theta.sin()))
            .collect();
        Self {
            zeros: Vec::new(),
            poles,
            gain: 1.0,
        }
    }

    /// Analog Chebyshev type I lowpass prototype of order `n` with `rp` dB of passband ripple
    /// (`scipy.signal.cheb1ap`).
    pub(crate) fn cheb1ap(n: usize, rp: f64) -> Self {
        let eps = (10f64.powf(0.1 * rp) - 1.0).sqrt();
        let mu = 1.0 / n as f64 * (1.0 / eps).asinh();
        // -sinh(mu + i theta) = -(sinh mu cos theta + i cosh mu sin theta)
        let poles: Vec<Complex> = pole_angles(n)
            .map(|theta| Complex::new(-(mu.sinh() * theta.cos()), -(mu.cosh() * theta.sin())))
            .collect();
        let negated: Vec<Complex> = poles.iter().map(|&p| -p).collect();
        let mut gain = Complex::product(&negated).re;
        if n.is_multiple_of(2) {
            gain /= (1.0 + eps * eps).sqrt();
        }
        Self {
            zeros: Vec::new(),
            poles,
            gain,
        }
    }

    /// Lowpass to lowpass with cutoff `wo` rad/s (`scipy.signal.lp2lp_zpk`).
    pub(crate) fn lp2lp(self, wo: f64) -> Self {
        let degree = self.degree();
        Self {
            zeros: self.zeros.iter().map(|z| z.scale(wo)).collect(),
            poles: self.poles.iter().map(|p| p.scale(wo)).collect(),
            gain: self.gain * wo.powf(degree as f64),
        }
    }

    /// Lowpass to highpass with cutoff `wo` rad/s (`scipy.signal.lp2hp_zpk`).
    pub(crate) fn lp2hp(self, wo: f64) -> Self {
        let degree = self.degree();
        let w = Complex::real(wo);
        let mut zeros: Vec<Complex> = self.zeros.iter().map(|&z| w / z).collect();
        zeros.extend(std::iter::repeat_n(Complex::real(0.0), degree));
        Self {
            zeros,
            poles: self.poles.iter().map(|&p| w / p).collect(),
            gain: self.gain * inverted_gain(&self.zeros, &self.poles),
        }
    }

    /// Lowpass to bandpass centred on `wo` rad/s with bandwidth `bw` (`scipy.signal.lp2bp_zpk`).
    pub(crate) fn lp2bp(self, wo: f64, bw: f64) -> Self {
        let degree = self.degree();
        let shift = |v: &[Complex]| split_pairs(v.iter().map(|x| x.scale(bw).scale(0.5)), wo);
        let mut zeros = shift(&self.zeros);
        zeros.extend(std::iter::repeat_n(Complex::real(0.0), degree));
        Self {
            zeros,
            poles: shift(&self.poles),
            gain: self.gain * bw.powf(degree as f64),
        }
    }

    /// Lowpass to bandstop centred on `wo` rad/s with bandwidth `bw` (`scipy.signal.lp2bs_zpk`).
    pub(crate) fn lp2bs(self, wo: f64, bw: f64) -> Self {
        let degree = self.degree();
        let half = Complex::real(bw / 2.0);
        let shift = |v: &[Complex]| split_pairs(v.iter().map(|&x| half / x), wo);
        let mut zeros = shift(&self.zeros);
        zeros.extend(std::iter::repeat_n(Complex::new(0.0, wo), degree));
        zeros.extend(std::iter::repeat_n(Complex::new(0.0, -wo), degree));
        Self {
            zeros,
            poles: shift(&self.poles),
            gain: self.gain * inverted_gain(&self.zeros, &self.poles),
        }
    }

    /// The bilinear transform at sample rate `fs` (`scipy.signal.bilinear_zpk`): zeros at
    /// infinity go to Nyquist (`z = -1`).
    pub(crate) fn bilinear(self, fs: f64) -> Self {
        let degree = self.degree();
        let fs2 = Complex::real(2.0 * fs);
        let map =
            |v: &[Complex]| -> Vec<Complex> { v.iter().map(|&x| (fs2 + x) / (fs2 - x)).collect() };
        let mut zeros = map(&self.zeros);
        zeros.extend(std::iter::repeat_n(Complex::real(-1.0), degree));
        let num: Vec<Complex> = self.zeros.iter().map(|&z| fs2 - z).collect();
        let den: Vec<Complex> = self.poles.iter().map(|&p| fs2 - p).collect();
        Self {
            zeros,
            poles: map(&self.poles),
            gain: self.gain * (Complex::product(&num) / Complex::product(&den)).re,
        }
    }

    /// Second-order sections with scipy's default digital pairing, `zpk2sos(z, p, k)` with
    /// `pairing='nearest'`: the same sections in the same order.
    ///
    /// Poles are taken from the one nearest the unit circle down, each paired with the zero
    /// nearest to it, and placed from the last section backwards; the gain goes in the first
    /// section.
    pub(crate) fn to_sos(&self) -> Result<Sos> {
        let (mut z, mut p) = (self.zeros.clone(), self.poles.clone());
        if z.is_empty() && p.is_empty() {
            return Sos::new(vec![[self.gain, 0.0, 0.0, 1.0, 0.0, 0.0]]);
        }
        let len = z.len().max(p.len());
        z.resize(len, Complex::real(0.0));
        p.resize(len, Complex::real(0.0));
        let n_sections = len.div_ceil(2);
        if len % 2 == 1 {
            z.push(Complex::real(0.0));
            p.push(Complex::real(0.0));
        }
        let mut z = cplxreal(z)?;
        let mut p = cplxreal(p)?;
        let mut sections = vec![[0.0; 6]; n_sections];
        let missing = || Error::InvalidParameter {
            what: "zpk2sos: zeros",
            reason: "no zero left to pair with a pole".to_string(),
        };
        for si in (0..n_sections).rev() {
            let p1 = p.remove(worst(&p, |_| true).ok_or_else(missing)?);
            let real_poles = p.iter().filter(|v| v.is_real()).count();
            let real_zeros = z.iter().filter(|v| v.is_real()).count();
            sections[si] = if p1.is_real() && real_poles == 0 {
                // The last real pole: pair it with the nearest real zero, one order each.
                let z1 = z.remove(nearest(&z, p1, Some(true)).ok_or_else(missing)?);
                single_section(&[z1, Complex::real(0.0)], &[p1, Complex::real(0.0)])
            } else if p.len() + 1 == z.len() && !p1.is_real() && real_poles == 1 && real_zeros == 1
            {
                // One real pole and one real zero left: this complex pole takes a complex zero.
                let z1 = z.remove(nearest(&z, p1, Some(false)).ok_or_else(missing)?);
                single_section(&[z1, z1.conj()], &[p1, p1.conj()])
            } else {
                let p2 = if p1.is_real() {
                    p.remove(worst(&p, |v| v.is_real()).ok_or_else(missing)?)
                } else {
                    p1.conj()
                };
                match nearest(&z, p1, None) {
                    None => single_section(&[], &[p1, p2]),
                    Some(index) => {
                        let z1 = z.remove(index);
                        if !z1.is_real() {
                            single_section(&[z1, z1.conj()], &[p1, p2])
                        } else if z.is_empty() {
                            single_section(&[z1], &[p1, p2])
                        } else {
                            let z2 = z.remove(nearest(&z, p1, Some(true)).ok_or_else(missing)?);
                            single_section(&[z1, z2], &[p1, p2])
                        }
                    }
                }
            };
        }
        for c in &mut sections[0][..3] {
            *c *= self.gain;
        }
        Sos::new(sections)
    }
}

/// The angles `pi m / (2n)`, `m = -n+1, -n+3, ..., n-1`, of the prototype poles.
fn pole_angles(n: usize) -> impl Iterator<Item = f64> {
    let n = n as i64;
    (0..n).map(move |i| PI * (-n + 1 + 2 * i) as f64 / (2 * n) as f64)
}

/// `real(prod(-zeros) / prod(-poles))`: the gain correction of an inversion `s -> wo / s`.
fn inverted_gain(zeros: &[Complex], poles: &[Complex]) -> f64 {
    let nz: Vec<Complex> = zeros.iter().map(|&z| -z).collect();
    let np: Vec<Complex> = poles.iter().map(|&p| -p).collect();
    (Complex::product(&nz) / Complex::product(&np)).re
}

/// Each `x` becomes `x + sqrt(x^2 - wo^2)` (first half) and `x - sqrt(x^2 - wo^2)` (second half).
fn split_pairs(values: impl Iterator<Item = Complex>, wo: f64) -> Vec<Complex> {
    let values: Vec<Complex> = values.collect();
    let roots: Vec<Complex> = values
        .iter()
        .map(|&x| (x * x - Complex::real(wo * wo)).sqrt())
        .collect();
    let plus = values.iter().zip(&roots).map(|(&x, &r)| x + r);
    let minus = values.iter().zip(&roots).map(|(&x, &r)| x - r);
    plus.chain(minus).collect()
}

/// scipy's `_cplxreal`, concatenated: one member (positive imaginary part, averaged with its
/// partner's conjugate) of each conjugate pair, then the real values (imaginary part exactly 0),
/// each group sorted by real part.
fn cplxreal(mut values: Vec<Complex>) -> Result<Vec<Complex>> {
    let tol = 100.0 * f64::EPSILON;
    // Stable sort by real part, then |imag| (numpy's lexsort).
    values.sort_by(|a, b| {
        a.re.total_cmp(&b.re)
            .then(a.im.abs().total_cmp(&b.im.abs()))
    });
    let is_real = |v: &Complex| v.im.abs() <= tol * v.abs();
    let reals: Vec<Complex> = values
        .iter()
        .filter(|v| is_real(v))
        .map(|v| Complex::real(v.re))
        .collect();
    let mut positive: Vec<Complex> = values
        .iter()
        .filter(|v| !is_real(v) && v.im > 0.0)
        .copied()
        .collect();
    let mut negative: Vec<Complex> = values
        .iter()
        .filter(|v| !is_real(v) && v.im < 0.0)
        .copied()
        .collect();
    let unpaired = || Error::InvalidParameter {
        what: "zpk2sos: roots",
        reason: "a complex value has no matching conjugate".to_string(),
    };
    if positive.len() != negative.len() {
        return Err(unpaired());
    }
    // Runs of (nearly) equal real parts are sorted by |imag|.
    let mut start = 0;
    while start < positive.len() {
        let mut stop = start;
        while stop + 1 < positive.len()
            && positive[stop + 1].re - positive[stop].re <= tol * positive[stop].abs()
        {
            stop += 1;
        }
        if stop > start {
            for chunk in [&mut positive[start..=stop], &mut negative[start..=stop]] {
                chunk.sort_by(|a, b| a.im.abs().total_cmp(&b.im.abs()));
            }
        }
        start = stop + 1;
    }
    let mut out = Vec::with_capacity(values.len());
    for (&zp, &zn) in positive.iter().zip(&negative) {
        if (zp - zn.conj()).abs() > tol * zn.abs() {
            return Err(unpaired());
        }
        let sum = zp + zn.conj();
        out.push(Complex::new(sum.re / 2.0, sum.im / 2.0));
    }
    out.extend(reals);
    Ok(out)
}

/// The first index among `values` passing `keep` whose magnitude is nearest 1 (the "worst" pole).
fn worst(values: &[Complex], keep: impl Fn(&Complex) -> bool) -> Option<usize> {
    let distance = |v: &Complex| (1.0 - v.abs()).abs();
    let mut best: Option<usize> = None;
    for (i, v) in values.iter().enumerate().filter(|(_, v)| keep(v)) {
        if best.is_none_or(|b| distance(v) < distance(&values[b])) {
            best = Some(i);
        }
    }
    best
}

/// The index of the value nearest `to`, among the real ones (`Some(true)`), the complex ones
/// (`Some(false)`) or all (`None`); the first one on ties.
fn nearest(values: &[Complex], to: Complex, real: Option<bool>) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, v) in values.iter().enumerate() {
        if real.is_some_and(|r| r != v.is_real()) {
            continue;
        }
        if best.is_none_or(|b| (*v - to).abs() < (values[b] - to).abs()) {
            best = Some(i);
        }
    }
    best
}

/// One section from up to two zeros and poles: `b` and `a` are the monic polynomials with those
/// roots, right-aligned in the section like scipy's `_single_zpksos`.
fn single_section(zeros: &[Complex], poles: &[Complex]) -> [f64; 6] {
    let mut section = [0.0; 6];
    let b = poly(zeros);
    let a = poly(poles);
    section[3 - b.len()..3].copy_from_slice(&b);
    section[6 - a.len()..6].copy_from_slice(&a);
    section
}

/// The real parts of the monic polynomial with `roots` (numpy's `poly`, built by convolving
/// `[1, -r]` factors).
fn poly(roots: &[Complex]) -> Vec<f64> {
    let mut c = vec![Complex::real(1.0)];
    for &r in roots {
        let mut next = vec![Complex::real(0.0); c.len() + 1];
        for (i, &ci) in c.iter().enumerate() {
            next[i] = next[i] + ci;
            next[i + 1] = next[i + 1] + ci * (-r);
        }
        c = next;
    }
    c.iter().map(|v| v.re).collect()
}
