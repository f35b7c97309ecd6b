//! Separable Gaussian smoothing with `scipy.ndimage.gaussian_filter` semantics (order 0,
//! `mode='reflect'`, `truncate=4.0`), for the registration scores of Kilosort4 §3.3 step 5.

/// Standard deviations at or below this leave their axis untouched, as in scipy.
const SKIP_SIGMA: f64 = 1e-15;

/// scipy's default `truncate`: the kernel reaches `floor(4 sigma + 0.5)` samples each side.
const TRUNCATE: f64 = 4.0;

/// The right half (centre first) of `scipy.ndimage.gaussian_filter1d`'s normalised kernel:
/// `exp(-x^2 / (2 sigma^2))` for `x = 0..=radius`, `radius = floor(4 sigma + 0.5)`, divided by the
/// sum over `x = -radius..=radius`.
fn half_kernel(sigma: f64) -> Vec<f64> {
    // Truncation is floor here: the argument is positive.
    let radius = (TRUNCATE * sigma + 0.5) as usize;
    let mut half: Vec<f64> = (0..=radius)
        .map(|x| (-0.5 / (sigma * sigma) * (x * x) as f64).exp())
        .collect();
    let total = half[0] + 2.0 * half[1..].iter().sum::<f64>();
    half.iter_mut().for_each(|w| *w /= total);
    half
}

/// Index into a line of `n` values extended by scipy's `'reflect'` mode
/// (`d c b a | a b c d | d c b a`, repeated as far as needed: period `2 n`).
fn reflect(i: isize, n: usize) -> usize {
    let n = n as isize;
    let m = i.rem_euclid(2 * n);
    (if m < n { m } else { 2 * n - 1 - m }) as usize
}

/// Smooths `values` (row-major array of `shape`, last axis fastest) in place with
/// `scipy.ndimage.gaussian_filter(values, sigmas, mode='reflect')`: one 1-D Gaussian along each
/// axis in turn (axis 0 first), each with [`half_kernel`]'s weights, summed as scipy's symmetric
/// correlation does (`w0 x[i] + sum_j wj (x[i + j] + x[i - j])`). Axes with `sigma <= 1e-15` are
/// skipped, as scipy skips them. `shape` and `sigmas` have one entry per axis and `values`
/// holds their product; callers guarantee both.
pub(super) fn gaussian_filter(values: &mut [f64], shape: &[usize], sigmas: &[f64]) {
    let mut line = Vec::new();
    for (axis, (&len, &sigma)) in shape.iter().zip(sigmas).enumerate() {
        if sigma <= SKIP_SIGMA || len == 0 {
            continue;
        }
        let half = half_kernel(sigma);
        let inner: usize = shape[axis + 1..].iter().product();
        let outer: usize = shape[..axis].iter().product();
        for o in 0..outer {
            for k in 0..inner {
                let at = |i: usize| (o * len + i) * inner + k;
                line.clear();
                line.extend((0..len).map(|i| values[at(i)]));
                for i in 0..len {
                    let mut sum = half[0] * line[i];
                    for (j, w) in half.iter().enumerate().skip(1) {
                        let (up, down) = (i as isize + j as isize, i as isize - j as isize);
                        sum += w * (line[reflect(up, len)] + line[reflect(down, len)]);
                    }
                    values[at(i)] = sum;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{gaussian_filter, half_kernel, reflect};

    /// Values of scipy 1.18.1 (`scipy.ndimage.gaussian_filter1d` / `gaussian_filter`, mode
    /// 'reflect'), printed with 17 significant digits on the H200 machine.
    fn assert_close(got: &[f64], want: &[f64]) {
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!((g - w).abs() < 1e-13, "index {i}: got {g}, scipy {w}");
        }
    }

    #[test]
    fn drift_reflect_extends_as_scipy() {
        // d c b a | a b c d | d c b a | a b c d
        let got: Vec<usize> = (-8..12).map(|i| reflect(i, 4)).collect();
        let want = [0, 1, 2, 3, 3, 2, 1, 0, 0, 1, 2, 3, 3, 2, 1, 0, 0, 1, 2, 3];
        assert_eq!(got, want);
        assert_eq!(reflect(-3, 1), 0);
    }

    #[test]
    fn drift_kernel_is_scipys() {
        // sigma 0.5: radius floor(2.5) = 2, weights exp(-2 x^2) normalised.
        let half = half_kernel(0.5);
        let raw = [1.0, (-2.0f64).exp(), (-8.0f64).exp()];
        let total = raw[0] + 2.0 * (raw[1] + raw[2]);
        assert_close(&half, &raw.map(|w| w / total));
        assert_eq!(half_kernel(1.0).len(), 5);
        assert_eq!(half_kernel(0.37).len(), 2); // floor(1.48 + 0.5) = 1
    }

    #[test]
    fn drift_smoothing_matches_scipy_1d() {
        let a = [1.0, 2.0, 0.0, 5.0, 3.0];
        let mut x = a;
        gaussian_filter(&mut x, &[5], &[0.5]);
        assert_close(
            &x,
            &[
                1.1064507719735914,
                1.6811754142447,
                0.74621086414609,
                4.253525270771172,
                3.2126376788644455,
            ],
        );
        let mut x = a;
        gaussian_filter(&mut x, &[5], &[1.0]);
        assert_close(
            &x,
            &[
                1.256070014264383,
                1.386365948867023,
                1.928428890131451,
                3.0173123211986153,
                3.411822825538528,
            ],
        );
        // The radius (4) is longer than the line (2): reflected more than once.
        let mut x = [1.0, 4.0];
        gaussian_filter(&mut x, &[2], &[1.0]);
        assert_close(&x, &[2.063156686354122, 2.936843313645878]);
    }

    /// `x[i, j, k] = ((7 i + 3 j + 5 k) mod 11) - 3` of shape (3, 4, 2).
    fn cube() -> Vec<f64> {
        let mut x = Vec::new();
        for i in 0..3 {
            for j in 0..4 {
                for k in 0..2 {
                    x.push(((i * 7 + j * 3 + k * 5) % 11) as f64 - 3.0);
                }
            }
        }
        x
    }

    #[test]
    fn drift_smoothing_matches_scipy_3d() {
        let mut x = cube();
        gaussian_filter(&mut x, &[3, 4, 2], &[0.5, 0.5, 0.5]);
        assert_close(
            &x,
            &[
                -1.521751337426796,
                1.4837203855810197,
                0.9336113034721483,
                3.2135541811511525,
                2.2805827175508973,
                -0.7871965147534877,
                4.734151999546326,
                0.9444306397201583,
                2.741644796914348,
                -0.22636126087634184,
                4.485812050856935,
                1.418275686233763,
                1.1829219320179885,
                2.7391293232716944,
                2.2018032083129766,
                5.109052248029398,
                1.0444109390357337,
                3.2261305314145496,
                2.783226792031459,
                -1.0064939657859164,
                3.911159448832113,
                0.845417045121249,
                -0.4194448639785336,
                2.6822127137271554,
            ],
        );
        // sigma 0 on the last axis: skipped, as scipy does.
        let mut x = cube();
        gaussian_filter(&mut x, &[3, 4, 2], &[1.0, 0.5, 0.0]);
        assert_close(
            &x,
            &[
                -0.41749145308767655,
                1.2503244824441477,
                1.9146736165661278,
                2.634091459104521,
                2.277424899720045,
                0.013377128106207614,
                4.064960040298405,
                1.941774033842025,
                1.063482994079524,
                1.2294926705391058,
                3.2641627679889664,
                1.000791595248212,
                2.3874017846862823,
                1.0905834113554216,
                2.0278920125241093,
                3.4220718821361427,
                1.3162872480942736,
                2.3056981125731397,
                3.646774877659814,
                -0.6325082686080964,
                3.332798529849037,
                1.0704281983234631,
                0.12163268162109303,
                3.6738752949357116,
            ],
        );
    }
}
