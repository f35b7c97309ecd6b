//! Learning universal templates from clips (Kilosort4 §4, `templates_from_data = True`).

use dspk_core::rng::SplitMix64;

use super::UniversalTemplates;
use super::kmeans::kmeans;
use super::pca::principal_components;
use crate::{ClipScaling, Error, Result};

/// k-means restarts (sklearn's `n_init`, as Kilosort4 sets it).
const KMEANS_RUNS: usize = 10;

/// Universal templates learned from `clips` (`n x nt` row-major, e.g.
/// [`ClipHarvester::clips`](super::ClipHarvester::clips)), on the host in `f64`, as Kilosort4
/// learns them: [`scale_clips`] with [`ClipScaling::UnitNorm`], then
/// [`learn_templates_scaled`] on every clip (on up to `threads` threads).
///
/// # Errors
///
/// As [`scale_clips`] and [`learn_templates_scaled`].
pub fn learn_templates(
    clips: &[f32],
    nt: usize,
    nt0min: usize,
    k: usize,
    p: usize,
    seed: u64,
    threads: usize,
) -> Result<UniversalTemplates> {
    check_shape(nt, nt0min, k, p)?;
    let x = scale_clips(clips, nt, ClipScaling::UnitNorm)?;
    learn_templates_scaled(&x, None, nt, nt0min, k, p, seed, threads)
}

/// Universal templates from clips already scaled by [`scale_clips`] (`n x nt` row-major):
///
/// 1. `wPCA` (`p x nt`): the top `p` principal directions of **all** the clips without
///    centring, i.e. the eigenvectors of their `nt x nt` Gram matrix with the largest
///    eigenvalues, largest first, each signed so that its largest-magnitude entry is positive
///    (sklearn's `svd_flip`). This is the exact, deterministic counterpart of the randomized
///    `TruncatedSVD` Kilosort4 uses, which approximates the same vectors;
/// 2. `wTEMP` (`k x nt`): k-means of the clips `keep` marks (all when `None`; EMUsort drops
///    HDBSCAN's outliers here) into `k` clusters (greedy k-means++ starts with
///    `2 + floor(ln k)` candidates per centre, Lloyd iterations up to 300 with tolerance
///    `1e-4` times the mean per-column variance of the clips, 10 restarts keeping the least
///    inertia), every random draw from a [`SplitMix64`] seeded with `seed`; the centroids are
///    then scaled to unit L2 norm (an all-zero centroid stays zero). The restarts run on up
///    to `threads` threads.
///
/// The same clips and seed give the same templates, bit for bit, on any machine and for any
/// `threads`. They differ
/// from Kilosort's own (whose draws come from numpy's global generator) by the choice of
/// random numbers, and by the SVD's random error.
///
/// # Errors
///
/// [`Error::Setting`] when `k` or `p` is 0, `p > nt`, `nt` is even or 0, or `nt0min >= nt`;
/// [`Error::Input`] when `scaled` is not a whole number of rows of `nt`, `keep` has another
/// length, or fewer than `k` clips are kept; [`Error::Ops`] when the eigensolver fails.
#[allow(clippy::too_many_arguments)]
pub fn learn_templates_scaled(
    scaled: &[f64],
    keep: Option<&[bool]>,
    nt: usize,
    nt0min: usize,
    k: usize,
    p: usize,
    seed: u64,
    threads: usize,
) -> Result<UniversalTemplates> {
    check_shape(nt, nt0min, k, p)?;
    let input = |reason: String| Error::Input {
        what: "universal templates: clips",
        reason,
    };
    if !scaled.len().is_multiple_of(nt) {
        return Err(input(format!(
            "{} values are not whole clips of {nt}",
            scaled.len()
        )));
    }
    let n = scaled.len() / nt;
    let kept: Vec<f64> = match keep {
        None => scaled.to_vec(),
        Some(keep) if keep.len() == n => scaled
            .chunks_exact(nt)
            .zip(keep)
            .filter(|(_, kept)| **kept)
            .flat_map(|(clip, _)| clip.iter().copied())
            .collect(),
        Some(keep) => {
            return Err(input(format!("{} keep marks for {n} clips", keep.len())));
        }
    };
    if kept.len() / nt < k {
        return Err(input(format!(
            "{} clips to cluster, fewer than the {k} templates to learn",
            kept.len() / nt
        )));
    }
    let wpca = principal_components(scaled, nt, p)?;
    let mut rng = SplitMix64::new(seed);
    let mut wtemp = kmeans(&kept, nt, k, KMEANS_RUNS, &mut rng, threads).centres;
    for centre in wtemp.chunks_exact_mut(nt) {
        let norm = centre.iter().map(|v| v * v).sum::<f64>().sqrt();
        if norm > 0.0 {
            centre.iter_mut().for_each(|v| *v /= norm);
        }
    }
    let single = |values: Vec<f64>| values.into_iter().map(|v| v as f32).collect();
    UniversalTemplates::new(nt, nt0min, single(wtemp), single(wpca))
}

/// Checks the template shape and counts.
fn check_shape(nt: usize, nt0min: usize, k: usize, p: usize) -> Result<()> {
    let setting = |name, reason: String| Err(Error::Setting { name, reason });
    if nt == 0 || nt.is_multiple_of(2) {
        return setting("nt", format!("the template length must be odd, got {nt}"));
    }
    if nt0min >= nt {
        return setting(
            "nt0min",
            format!("the trough index {nt0min} must lie inside the {nt} samples"),
        );
    }
    if k == 0 {
        return setting("n_templates", "must be at least 1".into());
    }
    if p == 0 || p > nt {
        return setting("n_pcs", format!("must be within 1..={nt}, got {p}"));
    }
    Ok(())
}

/// The clips (`n x nt` row-major) in `f64`, scaled as `scaling` says:
/// [`ClipScaling::UnitNorm`] divides each clip by its L2 norm and leaves all-zero clips out
/// (Kilosort4); [`ClipScaling::Global`] divides every clip by `sqrt(std(‖clip‖²))`, the
/// population standard deviation over clips of their squared norms (numpy's `std`,
/// `ddof = 0`), keeping every clip and their relative sizes (EMUsort).
///
/// # Errors
///
/// [`Error::Input`] when `clips` is not a whole number of rows of `nt`, holds a non-finite
/// value, or, with [`ClipScaling::Global`], its squared norms do not vary (fewer than two
/// clips, or all of one size: the scale would be 0).
pub fn scale_clips(clips: &[f32], nt: usize, scaling: ClipScaling) -> Result<Vec<f64>> {
    let input = |reason: String| Error::Input {
        what: "universal templates: clips",
        reason,
    };
    if nt == 0 || !clips.len().is_multiple_of(nt) {
        return Err(input(format!(
            "{} values are not whole clips of {nt}",
            clips.len()
        )));
    }
    if let Some(i) = clips.iter().position(|v| !v.is_finite()) {
        return Err(input(format!(
            "sample {} of clip {} is {}",
            i % nt,
            i / nt,
            clips[i]
        )));
    }
    let squared: Vec<f64> = clips
        .chunks_exact(nt)
        .map(|clip| clip.iter().map(|&v| f64::from(v) * f64::from(v)).sum())
        .collect();
    match scaling {
        ClipScaling::UnitNorm => {
            let mut out = Vec::with_capacity(clips.len());
            for (clip, &sq) in clips.chunks_exact(nt).zip(&squared) {
                if sq > 0.0 {
                    let norm = sq.sqrt();
                    out.extend(clip.iter().map(|&v| f64::from(v) / norm));
                }
            }
            Ok(out)
        }
        ClipScaling::Global => {
            let n = squared.len() as f64;
            let mean = squared.iter().sum::<f64>() / n;
            let variance = squared.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / n;
            let scale = variance.sqrt().sqrt();
            if !(scale.is_finite() && scale > 0.0) {
                return Err(input(format!(
                    "{} clips whose squared norms do not vary: no global scale",
                    squared.len()
                )));
            }
            Ok(clips.iter().map(|&v| f64::from(v) / scale).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use dspk_core::test_util::Rng;

    use super::*;

    const NT: usize = 61;

    /// Three distinct unit-norm shapes with their trough or peak near sample 20.
    fn shapes() -> Vec<Vec<f64>> {
        let gauss = |j: f64, centre: f64, width: f64| (-(j - centre).powi(2) / width).exp();
        let shapes: Vec<Vec<f64>> = vec![
            (0..NT).map(|j| -gauss(j as f64, 20.0, 8.0)).collect(),
            (0..NT)
                .map(|j| -gauss(j as f64, 20.0, 30.0) + 0.8 * gauss(j as f64, 34.0, 60.0))
                .collect(),
            (0..NT)
                .map(|j| gauss(j as f64, 20.0, 6.0) - 0.9 * gauss(j as f64, 27.0, 12.0))
                .collect(),
        ];
        shapes
            .into_iter()
            .map(|s| {
                let norm = s.iter().map(|v| v * v).sum::<f64>().sqrt();
                s.into_iter().map(|v| v / norm).collect()
            })
            .collect()
    }

    /// `per_shape` noisy, randomly scaled copies of each shape, interleaved, and some all-zero
    /// clips (which are left out).
    fn clips(per_shape: usize, seed: u64) -> Vec<f32> {
        let mut rng = Rng::new(seed);
        let shapes = shapes();
        let mut out = Vec::new();
        for i in 0..per_shape * shapes.len() {
            let amplitude = rng.uniform(5.0, 15.0);
            for &v in &shapes[i % shapes.len()] {
                out.push((amplitude * v + 0.15 * rng.normal()) as f32);
            }
            if i % 17 == 0 {
                out.extend([0.0f32; NT]);
            }
        }
        out
    }

    fn dot(a: &[f32], b: &[f64]) -> f64 {
        a.iter().zip(b).map(|(&p, q)| f64::from(p) * q).sum()
    }

    #[test]
    fn universal_learn_recovers_known_shapes() {
        let data = clips(40, 3);
        let templates = learn_templates(&data, NT, 20, 3, 4, 1, 2).unwrap();
        assert_eq!(
            (templates.k(), templates.p(), templates.nt0min()),
            (3, 4, 20)
        );
        // Each shape is one template (up to order), each template one shape.
        let mut matched = [false; 3];
        for template in templates.wtemp().chunks_exact(NT) {
            let norm = dot(
                template,
                &template.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(),
            );
            assert!((norm - 1.0).abs() < 1e-6, "norm^2 {norm}");
            let (best, similarity) = shapes()
                .iter()
                .map(|s| dot(template, s))
                .enumerate()
                .fold((0, f64::MIN), |b, (i, v)| if v > b.1 { (i, v) } else { b });
            assert!(similarity > 0.995, "shape {best}: {similarity}");
            assert!(!matched[best], "shape {best} twice");
            matched[best] = true;
        }
        // Principal components: orthonormal, signed by their largest entry, spanning the
        // shapes.
        let pcs: Vec<Vec<f64>> = templates
            .wpca()
            .chunks_exact(NT)
            .map(|v| v.iter().map(|&x| f64::from(x)).collect())
            .collect();
        for (i, a) in pcs.iter().enumerate() {
            for (j, b) in pcs.iter().enumerate() {
                let product: f64 = a.iter().zip(b).map(|(p, q)| p * q).sum();
                let expected = if i == j { 1.0 } else { 0.0 };
                assert!(
                    (product - expected).abs() < 1e-5,
                    "pc {i} . pc {j} = {product}"
                );
            }
            let largest = a
                .iter()
                .fold(0.0f64, |m, v| if v.abs() > m.abs() { *v } else { m });
            assert!(largest > 0.0, "pc {i}");
        }
        for shape in shapes() {
            let projected: f64 = pcs
                .iter()
                .map(|pc| {
                    pc.iter()
                        .zip(&shape)
                        .map(|(p, q)| p * q)
                        .sum::<f64>()
                        .powi(2)
                })
                .sum();
            assert!(projected > 0.99, "{projected}");
        }
        // The components are ordered by variance explained (Rayleigh quotients descending).
        let normalised = scale_clips(&data, NT, ClipScaling::UnitNorm).unwrap();
        let explained: Vec<f64> = pcs
            .iter()
            .map(|pc| {
                normalised
                    .chunks_exact(NT)
                    .map(|row| row.iter().zip(pc).map(|(p, q)| p * q).sum::<f64>().powi(2))
                    .sum()
            })
            .collect();
        assert!(explained.windows(2).all(|w| w[0] >= w[1]), "{explained:?}");
    }

    #[test]
    fn global_scaling_keeps_relative_sizes_and_outliers_leave_kmeans() {
        // Squared norms 1, 4, 9 and 0 (an all-zero clip, kept).
        let mut data = vec![0f32; 4 * NT];
        data[0] = 1.0;
        data[NT + 3] = -2.0;
        data[2 * NT + 5] = 3.0;
        let squared = [1.0f64, 4.0, 9.0, 0.0];
        let mean = squared.iter().sum::<f64>() / 4.0;
        let std = (squared.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / 4.0).sqrt();
        let x = scale_clips(&data, NT, ClipScaling::Global).unwrap();
        assert_eq!(x.len(), 4 * NT);
        assert!((x[2 * NT + 5] / x[0] - 3.0).abs() < 1e-12);
        assert!((x[0] - 1.0 / std.sqrt()).abs() < 1e-12);
        // Clips all of one size have no global scale.
        let same = vec![1f32; 3 * NT];
        assert!(scale_clips(&same, NT, ClipScaling::Global).is_err());
        assert!(scale_clips(&data[..NT], NT, ClipScaling::Global).is_err());
        // Clips left out of k-means change the templates, not wPCA (learned on all).
        let data = clips(30, 8);
        let x = scale_clips(&data, NT, ClipScaling::Global).unwrap();
        let n = x.len() / NT;
        let all = learn_templates_scaled(&x, None, NT, 20, 3, 3, 42, 2).unwrap();
        let keep: Vec<bool> = (0..n).map(|i| i % 3 != 2).collect();
        let some = learn_templates_scaled(&x, Some(&keep), NT, 20, 3, 3, 42, 2).unwrap();
        assert_eq!(all.wpca(), some.wpca());
        assert_ne!(all.wtemp(), some.wtemp());
        assert!(learn_templates_scaled(&x, Some(&keep[1..]), NT, 20, 3, 3, 42, 2).is_err());
        let none = vec![false; n];
        assert!(learn_templates_scaled(&x, Some(&none), NT, 20, 3, 3, 42, 2).is_err());
    }

    #[test]
    fn universal_learn_is_deterministic() {
        let data = clips(30, 8);
        let first = learn_templates(&data, NT, 20, 4, 3, 42, 2).unwrap();
        assert_eq!(first, learn_templates(&data, NT, 20, 4, 3, 42, 1).unwrap());
        // Another seed: possibly other centres, but as good a clustering.
        let x = scale_clips(&data, NT, ClipScaling::UnitNorm).unwrap();
        let a = kmeans(&x, NT, 4, KMEANS_RUNS, &mut SplitMix64::new(42), 2);
        let b = kmeans(&x, NT, 4, KMEANS_RUNS, &mut SplitMix64::new(7), 2);
        assert!(
            (a.inertia - b.inertia).abs() <= 0.01 * a.inertia,
            "{} {}",
            a.inertia,
            b.inertia
        );
        assert_eq!(a.labels.len(), x.len() / NT);
        // Inertia is the sum of squared distances to the assigned centres.
        let inertia: f64 = x
            .chunks_exact(NT)
            .zip(&a.labels)
            .map(|(row, &l)| {
                row.iter()
                    .zip(&a.centres[l * NT..(l + 1) * NT])
                    .map(|(p, q)| (p - q) * (p - q))
                    .sum::<f64>()
            })
            .sum();
        assert!((inertia - a.inertia).abs() < 1e-9 * inertia.max(1.0));
    }

    #[test]
    fn universal_learn_handles_duplicate_clips() {
        // Five copies of one clip and one other: more clusters than distinct points leaves
        // clusters to be refilled; the result is still finite.
        let mut data: Vec<f32> = Vec::new();
        for _ in 0..5 {
            data.extend((0..NT).map(|j| (j as f32 * 0.1).sin()));
        }
        data.extend((0..NT).map(|j| (j as f32 * 0.3).cos()));
        let templates = learn_templates(&data, NT, 20, 3, 2, 9, 2).unwrap();
        assert!(templates.wtemp().iter().all(|v| v.is_finite()));
        assert_eq!(templates.k(), 3);
    }

    #[test]
    fn universal_learn_refuses_bad_arguments() {
        let data = clips(3, 1);
        let setting = |result: Result<UniversalTemplates>, name: &str| match result {
            Err(Error::Setting { name: n, .. }) => assert_eq!(n, name),
            other => panic!("{name}: {other:?}"),
        };
        setting(learn_templates(&data, NT, 20, 0, 3, 1, 2), "n_templates");
        setting(learn_templates(&data, NT, 20, 3, 0, 1, 2), "n_pcs");
        setting(learn_templates(&data, NT, 20, 3, NT + 1, 1, 2), "n_pcs");
        setting(learn_templates(&data, 60, 20, 3, 3, 1, 2), "nt");
        setting(learn_templates(&data, NT, NT, 3, 3, 1, 2), "nt0min");
        let input = |result: Result<UniversalTemplates>, needle: &str| match result {
            Err(error @ Error::Input { .. }) => {
                assert!(error.to_string().contains(needle), "{error}");
            }
            other => panic!("{needle}: {other:?}"),
        };
        // 9 shaped clips and one zero clip: the zero one does not count.
        input(
            learn_templates(&data, NT, 20, 10, 3, 1, 2),
            "9 clips to cluster",
        );
        input(
            learn_templates(&data[..NT * 2 + 5], NT, 20, 1, 3, 1, 2),
            "whole clips",
        );
        let mut bad = data.clone();
        bad[NT + 7] = f32::NAN;
        input(
            learn_templates(&bad, NT, 20, 3, 3, 1, 2),
            "sample 7 of clip 1 is NaN",
        );
        assert!(learn_templates(&data, NT, 20, 9, NT, 1, 2).is_ok());
    }
}
