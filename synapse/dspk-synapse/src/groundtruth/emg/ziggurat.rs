//! Standard normal values by the ziggurat method (Marsaglia and Tsang, 2000), from
//! [`SplitMix64`] draws: one `u64` per value almost always, no transcendental function.
//!
//! 128 layers of equal area `v` under `f(x) = exp(-x^2 / 2)` (plus the tail beyond `r`, in the
//! base layer). A draw picks a layer and a signed position in its rectangle from one `u64`
//! (bits 0..7 the layer, the top 53 bits the position: independent bits, so the layer and
//! the value are not correlated); points inside the curve's span are returned at once, the
//! rest go through the wedge test or, in the base layer, Marsaglia's tail method.

use dspk_core::rng::SplitMix64;

/// Layers.
const LAYERS: usize = 128;
/// The start of the tail: the right edge of the base layer's rectangle part.
const R: f64 = 3.442_619_855_899;
/// The area of each layer (and of the base layer with the tail).
const V: f64 = 9.912_563_035_262_17e-3;

/// The ziggurat's tables.
#[derive(Debug, Clone)]
pub(super) struct Ziggurat {
    /// Layer `i` spans `[0, x[i]]` (`x[0] = v / f(r)` for the base, `x[LAYERS] = 0`).
    x: [f64; LAYERS + 1],
    /// `f(x[i])`.
    f: [f64; LAYERS + 1],
}

fn density(x: f64) -> f64 {
    (-0.5 * x * x).exp()
}

impl Ziggurat {
    /// The tables: `x[1] = r`, `x[i + 1] = f^-1(f(x[i]) + v / x[i])`.
    pub(super) fn new() -> Self {
        let mut x = [0.0; LAYERS + 1];
        x[0] = V / density(R);
        x[1] = R;
        for i in 1..LAYERS - 1 {
            x[i + 1] = (-2.0 * (density(x[i]) + V / x[i]).ln()).sqrt();
        }
        let f = x.map(density);
        Self { x, f }
    }

    /// One standard normal value.
    pub(super) fn sample(&self, random: &mut SplitMix64) -> f64 {
        /// 2^-52: the top 53 bits of a `u64` as a fraction in [0, 2), minus 1, is in [-1, 1).
        const SCALE: f64 = 1.0 / (1u64 << 52) as f64;
        loop {
            let bits = random.next_u64();
            let layer = (bits & (LAYERS as u64 - 1)) as usize;
            let u = (bits >> 11) as f64 * SCALE - 1.0;
            let x = u * self.x[layer];
            if x.abs() < self.x[layer + 1] {
                return x;
            }
            if layer == 0 {
                // The tail beyond r: x = r + a with a exponential, accepted with probability
                // exp(-a^2 / 2).
                loop {
                    let a = -(1.0 - random.next_f64()).ln() / R;
                    let b = -(1.0 - random.next_f64()).ln();
                    if 2.0 * b > a * a {
                        return if u < 0.0 { -(R + a) } else { R + a };
                    }
                }
            }
            let y = self.f[layer] + random.next_f64() * (self.f[layer + 1] - self.f[layer]);
            if y < density(x) {
                return x;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use dspk_core::rng::SplitMix64;

    use super::{LAYERS, Ziggurat};

    #[test]
    fn tables_close_at_the_top() {
        let z = Ziggurat::new();
        // The top layer reaches f = 1 with the area of every other layer.
        let top = z.x[LAYERS - 1] * (1.0 - z.f[LAYERS - 1]);
        assert!(
            (top - super::V).abs() < 1e-6 * super::V,
            "top layer area {top}"
        );
        assert!(z.x.windows(2).all(|w| w[0] > w[1]));
    }

    #[test]
    fn values_follow_the_standard_normal() {
        let z = Ziggurat::new();
        let mut random = SplitMix64::new(11);
        let n = 400_000;
        let values: Vec<f64> = (0..n).map(|_| z.sample(&mut random)).collect();
        let mean = values.iter().sum::<f64>() / n as f64;
        let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.01, "mean {mean}");
        assert!((variance - 1.0).abs() < 0.01, "variance {variance}");
        // The cumulative distribution at a few points (Phi from tables), within 3 standard
        // errors of a proportion.
        for (at, phi) in [
            (-3.5, 2.326_29e-4),
            (-2.0, 0.022_750_1),
            (-1.0, 0.158_655),
            (-0.3, 0.382_089),
            (0.0, 0.5),
            (0.7, 0.758_036),
            (1.5, 0.933_193),
            (3.0, 0.998_650),
        ] {
            let below = values.iter().filter(|&&v| v < at).count() as f64 / n as f64;
            let error = 3.0 * (phi * (1.0 - phi) / n as f64).sqrt();
            assert!(
                (below - phi).abs() < error + 1e-5,
                "P(x < {at}) = {below}, not {phi}"
            );
        }
        // The tail beyond r is reached.
        assert!(values.iter().any(|v| v.abs() > super::R));
    }
}
