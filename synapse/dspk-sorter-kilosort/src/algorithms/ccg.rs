//! Cross-correlogram refractoriness metrics (`docs/KILOSORT4.md` §8.3), in `f64` as Kilosort's
//! numba code computes them: the unit labels of the export (§8.4), the cross-refractory test of
//! the global merges (§8.2) and the tree cut's refractory test of Kilosort 4.0.18 (§6.7 step 2).
//!
//! The correlogram counts pairs with two pointers over the sorted trains, so its cost is the
//! number of pairs less than 0.5 s apart, not the product of the train lengths. Host memory:
//! the 1001 counts, nothing per spike.

/// Bins of the correlogram: lags -500..=500 ms, 1 ms each.
pub(crate) const CCG_BINS: usize = 1001;

/// Index of the zero-lag bin.
const ZERO_BIN: usize = 500;

/// Bin width in seconds.
const BIN_S: f64 = 0.001;

/// Half the correlogram's span in seconds.
const HALF_SPAN_S: f64 = 0.5;

/// The refractoriness statistics of one correlogram (§8.3).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct CcgMetrics {
    /// Smallest normalised rate near zero lag over the rate of the shoulders,
    /// `min_i R_i / (1e-10 + max(R00, R01))`.
    pub r12: f64,
    /// Smallest Poisson probability of seeing as few pairs near zero lag, `min_i p_i`.
    pub q12: f64,
    /// Largest raw mean count per bin among the far baseline and the two shoulders.
    pub q00: f64,
    /// Mean count of the far baseline (bins 1..=249 and 750..=999) over the Poisson norm.
    pub r00: f64,
    /// The larger mean count of the shoulders (bins 450..=489, 510..=549) over the Poisson norm.
    pub r01: f64,
}

impl CcgMetrics {
    /// The metrics of a correlogram that says nothing (an empty train, or trains with no time
    /// span): `R12 = 0` as Kilosort reports it, and `Q12 = 1`, `Q00 = ∞` so that no
    /// refractoriness test passes on it.
    const UNDEFINED: Self = Self {
        r12: 0.0,
        q12: 1.0,
        q00: f64::INFINITY,
        r00: 0.0,
        r01: 0.0,
    };
}

/// The cross-correlogram of two sorted trains in seconds: bin
/// `round_half_even((b - a) / 0.001) + 500` counts the pairs with `a ∈ (b - 0.5, b + 0.5]`
/// (`numpy.round` rounds half to even).
/// With `a` and `b` the same train, each spike pairs with itself in the zero-lag bin.
///
/// Exchanging the trains mirrors the counts (`K'[i] = K[1000 - i]`), except for pairs exactly
/// 0.5 s apart, which sit in bin 0 or bin 1000 depending on the order.
#[must_use]
pub(crate) fn ccg_counts(a: &[f64], b: &[f64]) -> Vec<u64> {
    let mut counts = vec![0u64; CCG_BINS];
    // Window of `a` for the current `b`: indices lo..hi hold the a with b - 0.5 < a <= b + 0.5.
    // Both ends only move forward as b grows.
    let (mut lo, mut hi) = (0usize, 0usize);
    for &tb in b {
        while lo < a.len() && a[lo] <= tb - HALF_SPAN_S {
            lo += 1;
        }
        hi = hi.max(lo);
        while hi < a.len() && a[hi] <= tb + HALF_SPAN_S {
            hi += 1;
        }
        for &ta in &a[lo..hi] {
            let bin = ((tb - ta) / BIN_S).round_ties_even() + ZERO_BIN as f64;
            // (b - a) lies in [-0.5, 0.5), so the bin is 0..=1000; the guard only keeps a
            // rounding surprise from indexing out of range.
            if (0.0..CCG_BINS as f64).contains(&bin) {
                counts[bin as usize] += 1;
            }
        }
    }
    counts
}

/// Kilosort's correlogram metrics (§8.3) of two sorted trains in seconds.
///
/// `T` is the span of both trains together and `norm = n_a n_b 0.001 / T`, the count per bin of
/// two independent Poisson trains. `R00` is the mean count of bins 1..=249 and 750..=999 over
/// `norm`, `R01` the larger of the mean counts of bins 450..=489 and 510..=549 over `norm`, `Q00`
/// the largest of those three raw means. With the zero-lag bin set to 0, for `i = 1..=10`:
/// `R_i = Σ K[500-i..=500+i] / (2 i norm)` and `p_i = ½ (1 + erf((n - λ) / sqrt(1e-10 + 2λ)))`
/// with `n` half that sum and `λ = Q00 i`; `R12 = min R_i / (1e-10 + max(R00, R01))`,
/// `Q12 = min p_i`.
///
/// An empty train or a zero span gives `R12 = 0`, `Q12 = 1`, `Q00 = ∞` (no test passes).
#[must_use]
pub(crate) fn ccg_metrics(a: &[f64], b: &[f64]) -> CcgMetrics {
    let (Some(&a0), Some(&a1), Some(&b0), Some(&b1)) = (a.first(), a.last(), b.first(), b.last())
    else {
        return CcgMetrics::UNDEFINED;
    };
    let span = a1.max(b1) - a0.min(b0);
    if span <= 0.0 || !span.is_finite() {
        return CcgMetrics::UNDEFINED;
    }
    let mut k = ccg_counts(a, b);
    let norm = a.len() as f64 * b.len() as f64 * BIN_S / span;
    // Counts are integers, so their sums (and hence the means) are exact in any order.
    let sum = |from: usize, to: usize| k[from..=to].iter().sum::<u64>() as f64;
    let far = (sum(1, 249) + sum(750, 999)) / 499.0;
    let left = sum(450, 489) / 40.0;
    let right = sum(510, 549) / 40.0;
    let r00 = far / norm;
    let r01 = left.max(right) / norm;
    let q00 = far.max(left).max(right);
    k[ZERO_BIN] = 0;
    let (mut r_min, mut p_min) = (f64::INFINITY, f64::INFINITY);
    for i in 1..=10usize {
        let near = k[ZERO_BIN - i..=ZERO_BIN + i].iter().sum::<u64>() as f64;
        r_min = r_min.min(near / (2.0 * i as f64 * norm));
        let lambda = q00 * i as f64;
        let n = near / 2.0;
        let p = 0.5 * (1.0 + erf((n - lambda) / (1e-10 + 2.0 * lambda).sqrt()));
        p_min = p_min.min(p);
    }
    CcgMetrics {
        r12: r_min / (1e-10 + r00.max(r01)),
        q12: p_min,
        q00,
        r00,
        r01,
    }
}

/// Kilosort's "good" test on a unit's auto-correlogram (§8.3): refractory when
/// `R12 < acg_threshold` and `Q12 < 0.2`. A train of at most 10 spikes or with no time span is
/// not refractory and reports `R12 = 0`. The train is in seconds and sorted.
#[must_use]
pub(crate) fn acg_refractory(train: &[f64], acg_threshold: f64) -> (bool, CcgMetrics) {
    if train.len() <= 10 {
        return (false, CcgMetrics::UNDEFINED);
    }
    let metrics = ccg_metrics(train, train);
    let refractory = metrics.r12 < acg_threshold && metrics.q12 < 0.2;
    (refractory, metrics)
}

/// The global merges' cross-refractory test (§8.2): `R12 < ccg_threshold` and `Q12 < 0.05`
/// on the cross-correlogram of two sorted trains in seconds, with no guard on the number of
/// spikes.
#[must_use]
pub(crate) fn cross_refractory(a: &[f64], b: &[f64], ccg_threshold: f64) -> bool {
    let metrics = ccg_metrics(a, b);
    metrics.r12 < ccg_threshold && metrics.q12 < 0.05
}

/// The tree cut's cross-refractory test of Kilosort 4.0.18 (§6.7 step 2, §10.3):
/// `R12 < 0.25` and (`Q12 < 0.05` or `Q00 < 0.25`). Kilosort 4.1.7's version of the test never
/// fires; this is the one that works.
#[must_use]
pub(crate) fn tree_cross_refractory(a: &[f64], b: &[f64]) -> bool {
    let metrics = ccg_metrics(a, b);
    metrics.r12 < 0.25 && (metrics.q12 < 0.05 || metrics.q00 < 0.25)
}

/// The error function to about 1e-15 (`scipy.special.erf`, `math.erf`): the series
/// `erf(x) = 2/√π e^{-x²} Σ 2ⁿ x^{2n+1} / (1·3···(2n+1))` (positive terms, no cancellation)
/// below 2.5, the continued fraction of `erfc` above.
fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    let two_over_sqrt_pi = std::f64::consts::FRAC_2_SQRT_PI;
    let value = if a < 2.5 {
        let a2 = a * a;
        let (mut term, mut sum) = (a, a);
        for n in 1..200 {
            term *= 2.0 * a2 / (2 * n + 1) as f64;
            sum += term;
            if term <= sum * 1e-17 {
                break;
            }
        }
        two_over_sqrt_pi * (-a2).exp() * sum
    } else if a < 6.0 {
        // erfc(a) = e^{-a²}/√π / (a + (1/2)/(a + 1/(a + (3/2)/(a + ...)))), from the tail.
        let mut f = a;
        for k in (1..=120).rev() {
            f = a + (k as f64 / 2.0) / f;
        }
        1.0 - 0.5 * two_over_sqrt_pi * (-a * a).exp() / f
    } else {
        1.0
    };
    value.copysign(x)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A seeded xorshift stream of uniforms in (0, 1).
    pub(crate) struct Uniform(pub(crate) u64);

    impl Uniform {
        pub(crate) fn next(&mut self) -> f64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            ((self.0 >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        }
    }

    /// A Poisson train of `rate` Hz over `seconds`, with a dead time after every spike.
    pub(crate) fn poisson(seed: u64, rate: f64, seconds: f64, dead: f64) -> Vec<f64> {
        let mut u = Uniform(seed);
        let (mut t, mut train) = (0.0, Vec::new());
        loop {
            t += dead - u.next().ln() / rate;
            if t >= seconds {
                return train;
            }
            train.push(t);
        }
    }

    /// The correlogram by brute force over all pairs.
    fn counts_by_pairs(a: &[f64], b: &[f64]) -> Vec<u64> {
        let mut k = vec![0u64; CCG_BINS];
        for &tb in b {
            for &ta in a {
                if ta > tb - 0.5 && ta <= tb + 0.5 {
                    let bin = ((tb - ta) / 0.001).round_ties_even() as i64 + 500;
                    k[bin as usize] += 1;
                }
            }
        }
        k
    }

    #[test]
    fn erf_matches_tabulated_values() {
        for (x, want) in [
            (0.0, 0.0),
            (0.1, 0.112_462_916_018_284_9),
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (2.0, 0.995_322_265_018_952_7),
            (2.5, 0.999_593_047_982_555),
            (3.0, 0.999_977_909_503_001_4),
            (4.0, 0.999_999_984_582_742_1),
            (-1.0, -0.842_700_792_949_714_9),
        ] {
            let got = erf(x);
            assert!((got - want).abs() <= 2e-15, "erf({x}) = {got}, want {want}");
        }
        assert!(erf(f64::NAN).is_nan());
        assert_eq!(erf(10.0), 1.0);
    }

    #[test]
    fn counts_round_half_to_even_and_keep_the_half_open_window() {
        // a = 0 and b = x.5 ms: (b - a) / 0.001 is exactly x.5 in f64 for these values, so
        // the bin is the even neighbour (numpy.round), not the one away from zero.
        for (b, want) in [
            (0.0005, 500),
            (-0.0005, 500),
            (0.0015, 502),
            (0.0025, 502),
            (0.0035, 504),
            (-0.0035, 496),
            (0.0045, 504),
            (-0.0125, 488),
        ] {
            let quotient: f64 = b / 0.001;
            assert_eq!(
                quotient.abs().fract(),
                0.5,
                "{b} / 0.001 is not an exact half"
            );
            let k = ccg_counts(&[0.0], &[b]);
            assert_eq!(k.iter().sum::<u64>(), 1);
            assert_eq!(k[want], 1, "b = {b}");
        }
        // The window is (b - 0.5, b + 0.5]: 0.5 s before is out, 0.5 s after is in (bin 0).
        assert_eq!(ccg_counts(&[0.5], &[1.0]).iter().sum::<u64>(), 0);
        let k = ccg_counts(&[1.5], &[1.0]);
        assert_eq!((k[0], k.iter().sum::<u64>()), (1, 1));
    }

    #[test]
    fn two_pointer_counts_equal_all_pairs() {
        let a = poisson(7, 40.0, 20.0, 0.0);
        let b = poisson(8, 25.0, 20.0, 0.001);
        assert_eq!(ccg_counts(&a, &b), counts_by_pairs(&a, &b));
        assert_eq!(ccg_counts(&a, &a), counts_by_pairs(&a, &a));
        assert_eq!(ccg_counts(&[], &b), vec![0; CCG_BINS]);
    }

    #[test]
    fn exchanging_trains_mirrors_counts_and_keeps_the_near_zero_statistics() {
        let a = poisson(11, 30.0, 30.0, 0.0);
        let b = poisson(12, 20.0, 30.0, 0.0);
        let ab = ccg_counts(&a, &b);
        let ba = ccg_counts(&b, &a);
        // Bins 0 and 1000 hold the pairs exactly 0.5 s apart, which depend on the order.
        for i in 1..CCG_BINS - 1 {
            assert_eq!(ab[i], ba[CCG_BINS - 1 - i], "bin {i}");
        }
        // The R_i windows are symmetric around zero lag, so min R_i and Q12 agree; R00 and R01
        // average windows that are not exact mirrors (1..=249 vs 751..=999), so only nearly.
        let (m_ab, m_ba) = (ccg_metrics(&a, &b), ccg_metrics(&b, &a));
        assert!((m_ab.r00 - m_ba.r00).abs() < 0.02 * m_ab.r00);
        assert!((m_ab.r12 - m_ba.r12).abs() < 0.05 * m_ab.r12.max(1e-3));
        assert_eq!(
            cross_refractory(&a, &b, 0.25),
            cross_refractory(&b, &a, 0.25)
        );
    }

    #[test]
    fn hand_computed_metrics() {
        // Train a: 0, 0.1, 0.2, ..., 1.9 s (20 spikes); b: a + 3 ms. Span T = 1.903 s.
        let a: Vec<f64> = (0..20).map(|i| f64::from(i) * 0.1).collect();
        let b: Vec<f64> = a.iter().map(|t| t + 0.003).collect();
        let m = ccg_metrics(&a, &b);
        let k = ccg_counts(&a, &b);
        // Every (a_i, b_j) with |b_j - a_i| < 0.5: lags 3 ms + 100 ms * d for d = -4..=4
        // (-5 gives -497 ms, also inside; 5 gives 503 ms, outside).
        let mut expect = vec![0u64; CCG_BINS];
        for d in -5i32..=4 {
            let pairs = 20 - d.unsigned_abs() as u64;
            expect[(500 + 3 + 100 * d) as usize] = pairs;
        }
        assert_eq!(k, expect);
        let norm = 20.0 * 20.0 * 0.001 / 1.903;
        // Far baseline bins 1..=249 hold lag -497 (bin 3, 15 pairs), -397 (103, 16),
        // -297 (203, 17); 750..=999 hold 803 (17), 903 (16). Mean over 499 bins.
        let far = f64::from(15 + 16 + 17 + 17 + 16) / 499.0;
        // Shoulders 450..=489 and 510..=549 are empty.
        assert!((m.r00 - far / norm).abs() < 1e-12);
        assert_eq!(m.r01, 0.0);
        assert_eq!(m.q00, far);
        // Bin 503 (20 pairs) is inside R_i for i >= 3: R_1 = R_2 = 0, so R12 = 0.
        assert_eq!(m.r12, 0.0);
        // p_1 = ½(1 + erf(-λ / sqrt(1e-10 + 2λ))) with λ = Q00; p_i grows once the 20 pairs
        // enter, so the minimum is over i = 1, 2 and the smaller one is i = 2.
        let lambda = 2.0 * far;
        let p2 = 0.5 * (1.0 + erf(-lambda / (1e-10 + 2.0 * lambda).sqrt()));
        assert_eq!(m.q12, p2);
        assert!(p2 < 0.5);
    }

    #[test]
    fn dead_time_poisson_is_refractory_and_plain_poisson_is_not() {
        let refractory = poisson(3, 20.0, 600.0, 0.002);
        let (is_ref, m) = acg_refractory(&refractory, 0.2);
        assert!(is_ref, "{m:?}");
        assert!(m.r12 < 0.05, "{m:?}");
        let plain = poisson(4, 20.0, 600.0, 0.0);
        let (is_ref, m) = acg_refractory(&plain, 0.2);
        assert!(!is_ref, "{m:?}");
        assert!(m.r12 > 0.7 && m.r12 < 1.3, "{m:?}");
    }

    #[test]
    fn short_or_spanless_trains_are_not_refractory() {
        let ten: Vec<f64> = (0..10).map(|i| f64::from(i) * 0.1).collect();
        let (is_ref, m) = acg_refractory(&ten, 0.2);
        assert!(!is_ref);
        assert_eq!(m.r12, 0.0);
        let (is_ref, m) = acg_refractory(&[2.0; 20], 0.2);
        assert!(!is_ref);
        assert_eq!(m.r12, 0.0);
        assert!(!cross_refractory(&[], &[1.0, 2.0], 0.25));
        assert!(!tree_cross_refractory(&[1.0], &[1.0]));
    }

    #[test]
    fn halves_of_one_refractory_unit_are_cross_refractory_and_strangers_are_not() {
        let unit = poisson(5, 30.0, 300.0, 0.002);
        let (a, b): (Vec<f64>, Vec<f64>) = {
            let mut u = Uniform(6);
            let mut a = Vec::new();
            let mut b = Vec::new();
            for &t in &unit {
                if u.next() < 0.5 { a.push(t) } else { b.push(t) }
            }
            (a, b)
        };
        assert!(cross_refractory(&a, &b, 0.25));
        assert!(tree_cross_refractory(&a, &b));
        let other = poisson(9, 30.0, 300.0, 0.002);
        assert!(!cross_refractory(&a, &other, 0.25));
        assert!(!tree_cross_refractory(&a, &other));
        // Q00 < 0.25 makes sparse pairs cross-refractory on R12 alone in the tree test:
        // 2 spikes against 2, 100 s apart, share no pair within 10 ms.
        let sparse_a = [0.0, 50.0];
        let sparse_b = [25.0, 100.0];
        assert!(tree_cross_refractory(&sparse_a, &sparse_b));
        assert!(!cross_refractory(&sparse_a, &sparse_b, 0.25));
    }
}
