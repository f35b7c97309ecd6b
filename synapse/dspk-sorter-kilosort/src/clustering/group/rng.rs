//! The clustering's random numbers: counter-based streams of [`SplitMix64`] (output `counter` of
//! a generator seeded with the stream's key, itself output `stream` of one seeded with the seed) and
//! weighted sampling without replacement by exponential keys (Efraimidis-Spirakis).
//!
//! Kilosort draws with torch's `multinomial` (Philox on CUDA, Mersenne Twister on the CPU), so no
//! reimplementation can match its draws (`docs/KILOSORT4.md` §6.4); this one is the same on every
//! machine, and every draw is a pure function of (seed, stream, counter).

use dspk_core::rng::SplitMix64;

/// One stream of counter-based random numbers.
#[derive(Debug, Clone, Copy)]
pub(super) struct CounterRng {
    key: u64,
}

impl CounterRng {
    /// Stream `stream` of seed `seed`.
    pub(super) fn new(seed: u64, stream: u64) -> Self {
        Self {
            key: SplitMix64::at(seed, stream),
        }
    }

    /// The 64 random bits of `counter`.
    pub(super) fn bits(self, counter: u64) -> u64 {
        SplitMix64::at(self.key, counter)
    }

    /// A uniform number in (0, 1] for `counter` (53 random bits).
    pub(super) fn uniform(self, counter: u64) -> f64 {
        // (bits >> 11) < 2^53 is exact in f64; + 1 keeps 0 out (for the logarithm).
        ((self.bits(counter) >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// Draws up to `count` distinct indices of `weights` without replacement, each draw with
/// probability proportional to the weights of the indices not drawn yet (what torch's
/// `multinomial(weights, count, replacement=False)` samples), returned in draw order.
///
/// Index `i` gets the exponential clock `-ln(u_i) / w_i` (`u_i` = `rng.uniform(i)`); the `count`
/// smallest clocks, in increasing order (ties: lower index), are the draws. Indices of weight 0
/// (or not finite and positive) are never drawn, so fewer than `count` come back when fewer
/// weights are positive. `scratch` is reused between calls.
pub(super) fn weighted_sample(
    weights: &[f64],
    count: usize,
    rng: CounterRng,
    scratch: &mut Vec<(f64, u32)>,
) -> Vec<usize> {
    scratch.clear();
    for (i, &w) in weights.iter().enumerate() {
        if w > 0.0 && w.is_finite() {
            scratch.push((-rng.uniform(i as u64).ln() / w, i as u32));
        }
    }
    let order = |a: &(f64, u32), b: &(f64, u32)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
    if count == 0 {
        return Vec::new();
    }
    if scratch.len() > count {
        scratch.select_nth_unstable_by(count - 1, order);
        scratch.truncate(count);
    }
    scratch.sort_unstable_by(order);
    scratch.iter().map(|&(_, i)| i as usize).collect()
}
