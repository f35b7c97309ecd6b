//! `dspk_ops::linalg` against numpy 2.4 (reference files from `tests/reference/cases_design.py`),
//! plus properties (residuals, orthogonality, `W C W = I`) and bad input.

mod common;

use common::{Reference, invalid, noise};
use dspk_core::test_util::assert_close_to_peak;
use dspk_ops::Error;
use dspk_ops::linalg::{covariance, local_zca, second_moment, symmetric_eigen, zca};

fn max_abs(v: &[f64]) -> f64 {
    v.iter().fold(0.0_f64, |m, x| m.max(x.abs()))
}

fn frobenius(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

fn matmul(a: &[f64], b: &[f64], n: usize) -> Vec<f64> {
    let mut c = vec![0.0; n * n];
    for i in 0..n {
        for k in 0..n {
            let aik = a[i * n + k];
            for j in 0..n {
                c[i * n + j] += aik * b[k * n + j];
            }
        }
    }
    c
}

fn transpose(a: &[f64], n: usize) -> Vec<f64> {
    (0..n * n).map(|idx| a[(idx % n) * n + idx / n]).collect()
}

fn identity(n: usize) -> Vec<f64> {
    (0..n * n)
        .map(|i| if i % (n + 1) == 0 { 1.0 } else { 0.0 })
        .collect()
}

fn random_symmetric(n: usize, seed: u64) -> Vec<f64> {
    let m = noise(n * n, seed);
    (0..n * n)
        .map(|idx| (m[idx] + m[(idx % n) * n + idx / n]) / 2.0)
        .collect()
}

/// Residual `max_i ||A v_i - l_i v_i||`, orthogonality `max |V^T V - I|`, ascending order, all
/// relative to `||A||_F`.
fn check_decomposition(what: &str, a: &[f64], n: usize, tol: f64) {
    let eigen = symmetric_eigen(a, n).unwrap();
    let norm = frobenius(a).max(f64::MIN_POSITIVE);
    assert!(
        eigen.values.windows(2).all(|w| w[0] <= w[1]),
        "{what}: not ascending"
    );
    let av = matmul(a, &eigen.vectors, n);
    for i in 0..n {
        let residual = (0..n)
            .map(|r| (av[r * n + i] - eigen.values[i] * eigen.vectors[r * n + i]).powi(2))
            .sum::<f64>()
            .sqrt();
        assert!(
            residual <= tol * norm,
            "{what}: residual {residual:e} of vector {i}"
        );
    }
    let vtv = matmul(&transpose(&eigen.vectors, n), &eigen.vectors, n);
    let id = identity(n);
    for (i, (g, e)) in vtv.iter().zip(&id).enumerate() {
        assert!((g - e).abs() <= tol * n as f64, "{what}: V^T V [{i}] = {g}");
    }
}

#[test]
fn symmetric_eigen_matches_numpy_eigh() {
    for n in [1, 2, 7, 33] {
        let r = Reference::load(&format!("linalg_eigh_{n}"));
        let a = r.values("a");
        let eigen = symmetric_eigen(a, n).unwrap();
        let norm = frobenius(a);
        for (i, (got, want)) in eigen.values.iter().zip(r.values("w")).enumerate() {
            assert!(
                (got - want).abs() <= 1e-13 * norm,
                "n {n}: eigenvalue {i}: {got} vs {want}"
            );
        }
        // Columns agree up to sign.
        let v = r.values("v");
        for i in 0..n {
            let dot: f64 = (0..n)
                .map(|row| eigen.vectors[row * n + i] * v[row * n + i])
                .sum();
            let sign = dot.signum();
            for row in 0..n {
                let (got, want) = (eigen.vectors[row * n + i] * sign, v[row * n + i]);
                assert!(
                    (got - want).abs() <= 1e-11,
                    "n {n}: vector {i} row {row}: {got} vs {want}"
                );
            }
        }
        check_decomposition(&format!("numpy case n {n}"), a, n, 1e-13);
    }
}

#[test]
fn symmetric_eigen_residuals_and_orthogonality() {
    for (n, seed) in [(1, 1), (2, 2), (7, 3), (33, 4), (100, 5)] {
        check_decomposition(
            &format!("random n {n}"),
            &random_symmetric(n, seed),
            n,
            1e-13,
        );
    }
    // Repeated and zero eigenvalues, a diagonal matrix, a rank-one matrix, a graded matrix.
    check_decomposition("identity", &identity(9), 9, 1e-15);
    check_decomposition("zero", &[0.0; 16], 4, 1e-15);
    let diagonal: Vec<f64> = (0..25)
        .map(|i| {
            if i % 6 == 0 {
                (i / 6) as f64 - 2.0
            } else {
                0.0
            }
        })
        .collect();
    check_decomposition("diagonal", &diagonal, 5, 1e-15);
    let u = noise(12, 6);
    let rank_one: Vec<f64> = (0..144).map(|idx| u[idx / 12] * u[idx % 12]).collect();
    check_decomposition("rank one", &rank_one, 12, 1e-13);
    let graded: Vec<f64> = (0..36)
        .map(|idx| 10f64.powi(-(idx / 6 + idx % 6)) * if idx / 6 == idx % 6 { 2.0 } else { 1.0 })
        .collect();
    check_decomposition("graded", &graded, 6, 1e-13);
    // Entries whose products overflow f64 still converge.
    let plain = random_symmetric(5, 8);
    let huge: Vec<f64> = plain.iter().map(|v| v * 1e200).collect();
    let (e, h) = (
        symmetric_eigen(&plain, 5).unwrap(),
        symmetric_eigen(&huge, 5).unwrap(),
    );
    let scaled: Vec<f64> = h.values.iter().map(|v| v / 1e200).collect();
    assert_close_to_peak("huge values", &scaled, &e.values, 1e-14);
    let e = symmetric_eigen(&[4.0, 1.0, 1.0, 4.0], 2).unwrap();
    assert_close_to_peak("2x2 values", &e.values, &[3.0, 5.0], 1e-15);
}

/// A Neuropixels-sized case (n = 384): about 10 s in a debug build on 2 cores (1 s in release),
/// so it runs in CI's debug builds like every other test (it was once ignored under debug).
#[test]
fn symmetric_eigen_384_channels() {
    let n = 384;
    let start = std::time::Instant::now();
    check_decomposition("random n 384", &random_symmetric(n, 7), n, 1e-12);
    eprintln!("symmetric_eigen + checks, n = {n}: {:?}", start.elapsed());
}

#[test]
fn moments_match_numpy() {
    let r = Reference::load("linalg_whiten");
    let x = r.values("x");
    let channels = r.shape("x")[0];
    let samples = r.shape("x")[1];
    assert_close_to_peak(
        "covariance",
        &covariance(x, channels, samples).unwrap(),
        r.values("cov"),
        1e-14,
    );
    let second = second_moment(x, channels, samples).unwrap();
    assert_close_to_peak("second moment", &second, r.values("second"), 1e-14);
}

#[test]
fn zca_matches_numpy_and_whitens() {
    let r = Reference::load("linalg_whiten");
    let c = r.values("second");
    let n = r.shape("second")[0];
    let eps = r.scalar("eps");
    let w = zca(c, n, eps).unwrap();
    assert_eq!((w.n(), w.k()), (n, n));
    let dense = w.dense();
    assert_close_to_peak("zca", &dense, r.values("zca"), 1e-12);
    // W C W = I (up to eps relative to the smallest eigenvalue), and W is symmetric.
    let wcw = matmul(&matmul(&dense, c, n), &dense, n);
    assert_close_to_peak("W C W", &wcw, &identity(n), 1e-5);
    assert_close_to_peak("W symmetric", &dense, &transpose(&dense, n), 1e-15);
    let exact = zca(c, n, 0.0).unwrap().dense();
    assert_close_to_peak(
        "W C W, eps 0",
        &matmul(&matmul(&exact, c, n), &exact, n),
        &identity(n),
        1e-12,
    );
    // The sparse form applied to a signal equals the dense product.
    let samples = 5;
    let x = noise(n * samples, 9);
    let y = w.apply(&x, samples).unwrap();
    for ch in 0..n {
        for t in 0..samples {
            let want: f64 = (0..n).map(|j| dense[ch * n + j] * x[j * samples + t]).sum();
            assert!((y[ch * samples + t] - want).abs() <= 1e-12 * max_abs(&dense));
        }
    }
}

/// Kilosort4's SVD form: eigenvalue magnitudes, so an indefinite or singular covariance (a
/// common reference makes the channels sum to zero) is whitened rather than refused.
#[test]
fn zca_uses_eigenvalue_magnitudes_as_the_svd_does() {
    // [[1, 2], [2, 1]]: eigenvalues 3 and -1 along (1, 1) / sqrt 2 and (1, -1) / sqrt 2.
    let eps = 1e-6;
    let w = zca(&[1.0, 2.0, 2.0, 1.0], 2, eps).unwrap().dense();
    let (a, b) = (1.0 / (3.0 + eps).sqrt(), 1.0 / (1.0 + eps).sqrt());
    let expected = [(a + b) / 2.0, (a - b) / 2.0, (a - b) / 2.0, (a + b) / 2.0];
    assert_close_to_peak("zca of an indefinite matrix", &w, &expected, 1e-14);
    // A referenced covariance: I - 11^T / n is singular (the all-ones direction has 0).
    let n = 6;
    let referenced: Vec<f64> = (0..n * n)
        .map(|i| f64::from(u8::from(i / n == i % n)) - 1.0 / n as f64)
        .collect();
    let w = zca(&referenced, n, 1e-6).unwrap().dense();
    assert!(w.iter().all(|v| v.is_finite()));
    // Whitened, it is the identity on the other directions: W C W = C (projector).
    let wcw: Vec<f64> = (0..n * n)
        .map(|i| {
            let (r, c) = (i / n, i % n);
            (0..n)
                .flat_map(|p| (0..n).map(move |q| (p, q)))
                .map(|(p, q)| w[r * n + p] * referenced[p * n + q] * w[q * n + c])
                .sum()
        })
        .collect();
    assert_close_to_peak("W C W of a referenced covariance", &wcw, &referenced, 1e-5);
}

#[test]
fn local_zca_matches_numpy_rows() {
    let r = Reference::load("linalg_whiten");
    let c = r.values("second");
    let n = r.shape("second")[0];
    let positions: Vec<(f64, f64)> = r
        .values("positions")
        .chunks(2)
        .map(|p| (p[0], p[1]))
        .collect();
    let k = r.scalar("k") as usize;
    let w = local_zca(c, &positions, k, r.scalar("eps")).unwrap();
    assert_eq!((w.n(), w.k()), (n, k));
    assert_close_to_peak("local zca", &w.dense(), r.values("local"), 1e-12);
    for ch in 0..n {
        let row = &w.indices()[ch * k..(ch + 1) * k];
        assert_eq!(row[0] as usize, ch, "channel {ch}: itself first");
        let nonzero = w.dense()[ch * n..(ch + 1) * n]
            .iter()
            .filter(|v| **v != 0.0)
            .count();
        assert_eq!(nonzero, k, "channel {ch}: {k} nonzeros");
    }
    // A neighbourhood as large as the probe is full ZCA.
    let full = local_zca(c, &positions, 32, 1e-6).unwrap();
    assert_eq!(full.k(), n);
    assert_close_to_peak(
        "local zca, all channels",
        &full.dense(),
        &zca(c, n, 1e-6).unwrap().dense(),
        1e-12,
    );
    // Ties (a 4-channel square) go by channel index, the channel itself first.
    let square = [(0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (1.0, 1.0)];
    let w = local_zca(&identity(4), &square, 3, 0.0).unwrap();
    assert_eq!(w.indices(), &[0, 1, 2, 1, 0, 3, 2, 0, 3, 3, 1, 2]);
    assert_close_to_peak("local zca of identity", &w.dense(), &identity(4), 1e-15);
}

#[test]
fn bad_input_is_an_error() {
    assert!(matches!(
        symmetric_eigen(&[1.0, 2.0, 3.0], 2),
        Err(Error::Shape {
            expected: 4,
            actual: 3,
            ..
        })
    ));
    invalid(
        symmetric_eigen(&[1.0, f64::NAN, f64::NAN, 1.0], 2),
        "symmetric_eigen: matrix",
    );
    let reason = invalid(
        symmetric_eigen(&[1.0, 2.0, 0.5, 1.0], 2),
        "symmetric_eigen: matrix",
    );
    assert!(reason.contains("symmetric"), "{reason}");
    let reason = invalid(zca(&[1.0, 1.0, 1.0, 1.0], 2, 0.0), "zca: cov");
    assert!(reason.contains("eps is 0"), "{reason}");
    invalid(zca(&identity(2), 2, -1.0), "zca: eps");
    invalid(zca(&[], 0, 1e-6), "zca: n");
    invalid(
        local_zca(&identity(2), &[(0.0, 0.0), (1.0, 0.0)], 0, 1e-6),
        "local_zca: n_nearest",
    );
    invalid(
        local_zca(&identity(2), &[(0.0, f64::NAN), (1.0, 0.0)], 2, 1e-6),
        "local_zca: positions",
    );
    assert!(matches!(
        local_zca(&identity(3), &[(0.0, 0.0), (1.0, 0.0)], 2, 1e-6),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        second_moment(&[1.0; 5], 2, 3),
        Err(Error::Shape { .. })
    ));
    invalid(covariance(&[1.0; 2], 2, 1), "covariance: samples");
    invalid(second_moment(&[], 2, 0), "second_moment: samples");
    let w = zca(&identity(2), 2, 0.0).unwrap();
    assert!(matches!(
        w.apply(&[1.0; 5], 3),
        Err(Error::Shape {
            expected: 6,
            actual: 5,
            ..
        })
    ));
}
