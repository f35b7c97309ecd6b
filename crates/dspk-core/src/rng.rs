//! A small seeded random generator, [`SplitMix64`], for reproducible synthetic data and tests.

use std::f64::consts::TAU;

/// `SplitMix64` (Steele, Lea and Flood, 2014): a seeded 64-bit generator, fast and well mixed,
/// not for cryptography.
///
/// Output number `k` (from 0) of a generator made from `seed` is
/// `mix(seed + (k + 1) * GAMMA)`, so any output can also be computed directly with
/// [`SplitMix64::at`], without stepping: synthetic recordings use that to compute any sample
/// from its index alone.
///
/// ```
/// use dspk_core::rng::SplitMix64;
///
/// let mut rng = SplitMix64::new(7);
/// let first = rng.next_u64();
/// assert_eq!(first, SplitMix64::at(7, 0));
/// assert_eq!(rng.next_u64(), SplitMix64::at(7, 1));
/// let x = rng.next_f64();
/// assert!((0.0..1.0).contains(&x));
/// ```
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// The increment of the state per output (the odd integer nearest `2^64 / phi`).
    pub const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

    /// A generator from `seed`.
    #[must_use]
    pub const fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The output function: a bijective, well-mixed 64-bit hash of `z`.
    #[must_use]
    pub const fn mix(mut z: u64) -> u64 {
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Output number `index` (from 0) of a generator made from `seed`: what the
    /// `index + 1`-th call of [`next_u64`](Self::next_u64) returns.
    #[must_use]
    pub const fn at(seed: u64, index: u64) -> u64 {
        Self::mix(seed.wrapping_add(index.wrapping_add(1).wrapping_mul(Self::GAMMA)))
    }

    /// The next 64 random bits.
    pub const fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(Self::GAMMA);
        Self::mix(self.state)
    }

    /// Uniform in `[0, 1)`: the top 53 bits of [`next_u64`](Self::next_u64) over `2^53`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[low, high)`: `low + (high - low) * next_f64()`.
    pub fn uniform(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.next_f64()
    }

    /// Uniform in `[0, n)`: [`next_u64`](Self::next_u64) modulo `n` (biased by less than
    /// `n / 2^64`).
    ///
    /// # Panics
    ///
    /// If `n` is zero.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "below(0)");
        self.next_u64() % n
    }

    /// Standard normal, by Box-Muller from two [`next_f64`](Self::next_f64) draws `u`, `v`:
    /// `sqrt(-2 ln(1 - u)) cos(2 pi v)`.
    pub fn normal(&mut self) -> f64 {
        let u = 1.0 - self.next_f64();
        (-2.0 * u.ln()).sqrt() * (TAU * self.next_f64()).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::SplitMix64;

    #[test]
    fn matches_the_reference_sequence() {
        // The first outputs of SplitMix64 seeded with 0 (the reference C implementation).
        let mut rng = SplitMix64::new(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(rng.next_u64(), 0x06C4_5D18_8009_454F);
    }

    #[test]
    fn at_equals_stepping() {
        let mut rng = SplitMix64::new(0xDEAD_BEEF);
        for index in 0..100 {
            assert_eq!(rng.next_u64(), SplitMix64::at(0xDEAD_BEEF, index));
        }
    }

    #[test]
    fn draws_stay_in_their_ranges() {
        let mut rng = SplitMix64::new(3);
        for _ in 0..10_000 {
            assert!((0.0..1.0).contains(&rng.next_f64()));
            assert!((-2.0..5.0).contains(&rng.uniform(-2.0, 5.0)));
            assert!(rng.below(7) < 7);
            assert!(rng.normal().is_finite());
        }
    }

    #[test]
    fn normal_has_unit_moments() {
        let mut rng = SplitMix64::new(11);
        let n = 200_000;
        let draws: Vec<f64> = (0..n).map(|_| rng.normal()).collect();
        let mean = draws.iter().sum::<f64>() / n as f64;
        let variance = draws.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.01, "mean {mean}");
        assert!((variance - 1.0).abs() < 0.01, "variance {variance}");
    }
}
