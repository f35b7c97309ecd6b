use super::*;
use crate::algorithms::ccg::tests::{Uniform, poisson};
use crate::drift::DriftEstimate;

const NT: usize = 21;
const C: usize = 4;
const FS: f64 = 30_000.0;

/// A trough with a rebound, centred at sample 9 and moved by `d` samples.
fn shape(t: usize, d: i64) -> f64 {
    let x = (t as f64 - 9.0 - d as f64) / 2.0;
    -(1.0 - x * x) * (-x * x / 2.0).exp()
}

/// Orthonormal components spanning the shape at shifts 0, 2 and -2 (Gram-Schmidt).
fn wpca() -> Vec<f32> {
    let mut rows: Vec<Vec<f64>> = Vec::new();
    for d in [0, 2, -2] {
        let mut v: Vec<f64> = (0..NT).map(|t| shape(t, d)).collect();
        for r in &rows {
            let dot: f64 = v.iter().zip(r).map(|(a, b)| a * b).sum();
            for (x, y) in v.iter_mut().zip(r) {
                *x -= dot * y;
            }
        }
        let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        rows.push(v.into_iter().map(|x| x / norm).collect());
    }
    rows.concat().into_iter().map(|x| x as f32).collect()
}

/// A `[C, P]` template: spatial `pattern` times the shape moved by `d`, projected on `wpca`.
fn template(wpca: &[f32], pattern: [f64; C], d: i64) -> Vec<f32> {
    let p = wpca.len() / NT;
    let mut w = vec![0.0f32; C * p];
    for c in 0..C {
        for q in 0..p {
            let coef: f64 = (0..NT)
                .map(|t| shape(t, d) * f64::from(wpca[q * NT + t]))
                .sum();
            w[c * p + q] = (pattern[c] * coef) as f32;
        }
    }
    w
}

fn samples(train: &[f64]) -> Vec<i64> {
    train.iter().map(|t| (t * FS).round() as i64).collect()
}

/// Matched spikes on all `C` channels, each carrying its unit's template as features, sorted by
/// sample (ties by unit); `scale` holds each spike's index in the input lists, to follow it.
fn spikes_of(units: &[(Vec<i64>, Vec<f32>)]) -> (MatchedSpikes, Vec<u32>) {
    let p = units[0].1.len() / C;
    let mut all: Vec<(i64, u32)> = Vec::new();
    for (u, (s, _)) in units.iter().enumerate() {
        all.extend(s.iter().map(|&t| (t, u as u32)));
    }
    all.sort();
    let mut spikes = MatchedSpikes::new(C, p);
    for (i, &(t, u)) in all.iter().enumerate() {
        spikes.sample.push(t);
        spikes.template.push(u);
        spikes.score.push(10.0);
        spikes.scale.push(i as f32);
        spikes.features.extend_from_slice(&units[u as usize].1);
    }
    let clusters = all.iter().map(|&(_, u)| u).collect();
    (spikes, clusters)
}

/// The rules of a sort at `FS` with `settings` and the drift-split test `drift`.
fn rules<'a>(settings: &'a KilosortSettings, drift: Option<DriftSplit<'a>>) -> MergeRules<'a> {
    MergeRules {
        sample_rate: FS,
        settings,
        drift,
    }
}

fn split(train: &[f64], seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut u = Uniform(seed);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for &t in train {
        if u.next() < 0.5 {
            a.push(t);
        } else {
            b.push(t);
        }
    }
    (a, b)
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn wtw_equals_lagged_products_with_zero_padding() {
    let w = wpca();
    let wtw = WtW::new(&w, NT).unwrap();
    assert_eq!((wtw.p(), wtw.nt(), wtw.lags()), (3, NT, 2 * NT + 1));
    for p in 0..3 {
        for q in 0..3 {
            for li in 0..wtw.lags() {
                let lag = li as i64 - NT as i64;
                let mut want = 0.0f64;
                for j in 0..NT as i64 {
                    if (0..NT as i64).contains(&(j + lag)) {
                        want += f64::from(w[p * NT + j as usize])
                            * f64::from(w[q * NT + (j + lag) as usize]);
                    }
                }
                assert!((wtw.at(p, q, li) - want).abs() < 1e-12, "{p} {q} {li}");
            }
            // Orthonormal rows: the identity at zero lag.
            let identity = if p == q { 1.0 } else { 0.0 };
            assert!((wtw.at(p, q, NT) - identity).abs() < 1e-6);
        }
    }
    assert!(WtW::new(&w[..NT * 2 + 1], NT).is_err());
    assert!(WtW::new(&[f32::NAN; NT], NT).is_err());
}

#[test]
fn similarity_of_a_template_with_itself_is_one_at_zero_lag() {
    let w = wpca();
    let wtw = WtW::new(&w, NT).unwrap();
    let t = template(&w, [1.0, -0.5, 0.25, 0.0], 0);
    let (sim, lag) = similarity(&t, &t, &wtw).unwrap();
    assert!((sim - 1.0).abs() < 1e-5, "{sim}");
    assert_eq!(lag, NT);
    // Scale does not matter; the sign does.
    let scaled: Vec<f32> = t.iter().map(|v| 3.0 * v).collect();
    assert!((similarity(&t, &scaled, &wtw).unwrap().0 - 1.0).abs() < 1e-5);
    let negated: Vec<f32> = t.iter().map(|v| -v).collect();
    assert!(similarity(&t, &negated, &wtw).unwrap().0 < 0.9);
    assert!(similarity(&t, &t[..6], &wtw).is_err());
}

#[test]
fn similarity_finds_the_lag_of_a_delayed_copy() {
    let w = wpca();
    let wtw = WtW::new(&w, NT).unwrap();
    let pattern = [1.0, 0.5, 0.0, 0.0];
    let k = template(&w, pattern, 0);
    let later = template(&w, pattern, 2);
    let (sim, lag) = similarity(&k, &later, &wtw).unwrap();
    assert_eq!(lag, NT + 2);
    assert!(sim > 0.99, "{sim}");
    let (_, lag) = similarity(&later, &k, &wtw).unwrap();
    assert_eq!(lag, NT - 2);
}

#[test]
fn similarity_matrix_is_symmetric_with_unit_diagonal_and_zero_for_disjoint_units() {
    let w = wpca();
    let wtw = WtW::new(&w, NT).unwrap();
    let units = [
        template(&w, [1.0, 0.5, 0.0, 0.0], 0),
        template(&w, [0.8, 0.6, 0.1, 0.0], 2),
        template(&w, [0.0, 0.0, 1.0, 0.7], -2),
    ]
    .concat();
    let m = similarity_matrix(&units, C, &wtw).unwrap();
    assert_eq!(m.len(), 9);
    for k in 0..3 {
        assert!((m[k * 3 + k] - 1.0).abs() < 1e-5, "{m:?}");
        for j in 0..3 {
            assert!((m[k * 3 + j] - m[j * 3 + k]).abs() < 1e-6, "{m:?}");
        }
    }
    assert_eq!(m[2], 0.0);
    assert!(m[1] > 0.9 && m[5] > 0.0 && m[5] < 0.2, "{m:?}");
}

#[test]
fn halves_of_a_refractory_unit_merge_and_other_units_do_not() {
    let w = wpca();
    let wtw = WtW::new(&w, NT).unwrap();
    let a = template(&w, [1.0, 0.5, 0.0, 0.0], 0);
    let b = template(&w, [0.0, 0.0, 1.0, 0.7], 0);
    let (half0, half1) = split(&poisson(21, 20.0, 200.0, 0.002), 22);
    // Unit 2: another neuron with the same template (its own refractory train); unit 3: a
    // refractory neuron elsewhere on the probe.
    let same_shape_stranger = poisson(23, 20.0, 200.0, 0.002);
    let elsewhere = poisson(24, 15.0, 200.0, 0.002);
    let (mut spikes, mut clusters) = spikes_of(&[
        (samples(&half0), a.clone()),
        (samples(&half1), a.clone()),
        (samples(&same_shape_stranger), a.clone()),
        (samples(&elsewhere), b.clone()),
    ]);
    let before = spikes.clone();
    let mut units = [a.clone(), a.clone(), a.clone(), b.clone()].concat();
    let settings = KilosortSettings::default();
    let report = merge_units(
        &mut spikes,
        &mut clusters,
        &mut units,
        C,
        &wtw,
        &rules(&settings, None),
    )
    .unwrap();
    assert_eq!(report.merges, 1, "{report:?}");
    assert_eq!((report.units_before, report.units_after), (4, 3));
    assert_eq!(report.shifted_spikes, 0);
    // No time moved, so the spikes are untouched and only relabelled: units 0 and 1 become 0,
    // 2 becomes 1, 3 becomes 2.
    assert_eq!(spikes, before);
    for (&c, &t) in clusters.iter().zip(&spikes.template) {
        assert_eq!(c, [0, 0, 1, 2][t as usize]);
    }
    assert_eq!(units.len(), 3 * C * 3);
    assert!(max_abs_diff(&units[..C * 3], &a) < 1e-6);
    assert_eq!(&units[2 * C * 3..], &b[..]);
}

#[test]
fn plain_poisson_halves_are_not_merged() {
    let w = wpca();
    let wtw = WtW::new(&w, NT).unwrap();
    let a = template(&w, [1.0, 0.5, 0.0, 0.0], 0);
    let (half0, half1) = split(&poisson(31, 20.0, 200.0, 0.0), 32);
    let (mut spikes, mut clusters) =
        spikes_of(&[(samples(&half0), a.clone()), (samples(&half1), a.clone())]);
    let mut units = [a.clone(), a].concat();
    let report = merge_units(
        &mut spikes,
        &mut clusters,
        &mut units,
        C,
        &wtw,
        &rules(&KilosortSettings::default(), None),
    )
    .unwrap();
    assert_eq!(report.merges, 0);
    assert_eq!(units.len(), 2 * C * 3);
}

#[test]
fn a_delayed_copy_merges_moved_back_by_its_lag() {
    let w = wpca();
    let wtw = WtW::new(&w, NT).unwrap();
    let p = 3;
    let pattern = [1.0, 0.5, 0.0, 0.0];
    let a = template(&w, pattern, 0);
    // Unit 1 is the same neuron matched by a template whose trough is 2 samples later, so its
    // spike samples are 2 earlier than the truth.
    let later = template(&w, pattern, 2);
    let b = template(&w, [0.0, 0.0, 1.0, 0.7], 0);
    let (half0, half1) = split(&poisson(41, 20.0, 200.0, 0.002), 42);
    let elsewhere = poisson(43, 30.0, 200.0, 0.002);
    let early: Vec<i64> = samples(&half1).iter().map(|s| s - 2).collect();
    let (mut spikes, mut clusters) = spikes_of(&[
        (samples(&half0), a.clone()),
        (early.clone(), later.clone()),
        (samples(&elsewhere), b.clone()),
    ]);
    let before = spikes.clone();
    let mut units = [a.clone(), later, b].concat();
    let report = merge_units(
        &mut spikes,
        &mut clusters,
        &mut units,
        C,
        &wtw,
        &rules(&KilosortSettings::default(), None),
    )
    .unwrap();
    assert_eq!(report.merges, 1, "{report:?}");
    assert_eq!(report.shifted_spikes, early.len());
    assert!(spikes.sample.is_sorted());
    // Every field moved with its spike: `scale` holds the input index.
    for (m, &cluster) in clusters.iter().enumerate() {
        let i = spikes.scale[m] as usize;
        let unit = before.template[i];
        assert_eq!(spikes.template[m], unit);
        assert_eq!(cluster, [0, 0, 1][unit as usize]);
        let want = before.sample[i] + if unit == 1 { 2 } else { 0 };
        assert_eq!(spikes.sample[m], want);
        // Unit 1's features now hold the unshifted shape: unit 0's template.
        let expect = if unit == 2 {
            before.features_of(i)
        } else {
            &a[..]
        };
        assert!(
            max_abs_diff(spikes.features_of(m), expect) < 2e-3,
            "spike {m}"
        );
    }
    // The merged unit's samples are the neuron's train again.
    let mut merged: Vec<i64> = (0..spikes.len())
        .filter(|&m| clusters[m] == 0)
        .map(|m| spikes.sample[m])
        .collect();
    merged.sort_unstable();
    let mut truth = [samples(&half0), samples(&half1)].concat();
    truth.sort_unstable();
    assert_eq!(merged, truth);
    assert!(max_abs_diff(&units[..C * p], &a) < 2e-3);
}

/// One neuron's train cut by drift phase: the spikes of batches (2 s) `25i..25i + 25` go to unit
/// 0 for even `i` and to unit 1 (a smaller copy of the waveform) for odd `i`, as the final
/// clustering cuts a unit whose corrected waveform changes with the shift; unit 2 is another
/// neuron elsewhere, firing throughout.
fn drift_phases() -> (MatchedSpikes, Vec<u32>, Vec<f32>) {
    let w = wpca();
    let a = template(&w, [1.0, 0.5, 0.0, 0.0], 0);
    let smaller = template(&w, [0.8, 0.5, 0.0, 0.0], 0);
    let b = template(&w, [0.0, 0.0, 1.0, 0.7], 0);
    let train = poisson(51, 10.0, 200.0, 0.002);
    let phase = |t: &f64| (*t / 50.0) as u64 % 2;
    let even: Vec<f64> = train.iter().copied().filter(|t| phase(t) == 0).collect();
    let odd: Vec<f64> = train.iter().copied().filter(|t| phase(t) == 1).collect();
    let elsewhere = poisson(52, 10.0, 200.0, 0.002);
    let (spikes, clusters) = spikes_of(&[
        (samples(&even), a.clone()),
        (samples(&odd), smaller.clone()),
        (samples(&elsewhere), b.clone()),
    ]);
    (spikes, clusters, [a, smaller, b].concat())
}

#[test]
fn parts_of_a_unit_cut_by_drift_merge_only_with_the_drift_split_test() {
    let w = wpca();
    let wtw = WtW::new(&w, NT).unwrap();
    let settings = KilosortSettings::default();
    let y = [0.0f32, 20.0, 40.0, 60.0];
    // 100 batches of 2 s, shifted 0 um in even phases and 20 um in odd ones. The parts meet 3
    // times, too few coincidences for the cross-correlogram test.
    let moving: Vec<f64> = (0..100).map(|b| 20.0 * ((b / 25) % 2) as f64).collect();
    let still = vec![3.0; 100];
    for (shifts, merges) in [(moving, 1), (still, 0)] {
        let estimate = DriftEstimate::from_shifts(shifts, vec![1000.0]);
        let test = DriftSplit::new(&estimate, &y, 60_000, 5.0, 0.5);
        for drift in [None, Some(test)] {
            let (mut spikes, mut clusters, mut units) = drift_phases();
            let truth: Vec<bool> = clusters.iter().map(|&c| c < 2).collect();
            let report = merge_units(
                &mut spikes,
                &mut clusters,
                &mut units,
                C,
                &wtw,
                &rules(&settings, drift),
            )
            .unwrap();
            let want = if drift.is_some() { merges } else { 0 };
            assert_eq!(
                (report.merges, report.drift_merges),
                (want, want),
                "{report:?}"
            );
            assert_eq!(report.units_after, 3 - want);
            if want == 1 {
                // The neuron's spikes are one unit, the other neuron's another.
                for (&c, &neuron) in clusters.iter().zip(&truth) {
                    assert_eq!(c == 0, neuron);
                }
            }
        }
    }
}

#[test]
fn merge_units_refuses_inconsistent_input() {
    let w = wpca();
    let wtw = WtW::new(&w, NT).unwrap();
    let a = template(&w, [1.0, 0.5, 0.0, 0.0], 0);
    let (mut spikes, mut clusters) = spikes_of(&[(vec![10, 20, 30], a.clone())]);
    let mut units = a.clone();
    let settings = KilosortSettings::default();
    let mut bad = clusters.clone();
    bad[1] = 1;
    let r = merge_units(
        &mut spikes,
        &mut bad,
        &mut units,
        C,
        &wtw,
        &rules(&settings, None),
    );
    assert!(matches!(r, Err(Error::Input { .. })), "{r:?}");
    let r = merge_units(
        &mut spikes,
        &mut clusters,
        &mut units,
        C,
        &wtw,
        &MergeRules {
            sample_rate: 0.0,
            ..rules(&settings, None)
        },
    );
    assert!(matches!(r, Err(Error::Setting { .. })), "{r:?}");
    spikes.score.pop();
    let r = merge_units(
        &mut spikes,
        &mut clusters,
        &mut units,
        C,
        &wtw,
        &rules(&settings, None),
    );
    assert!(matches!(r, Err(Error::Input { .. })), "{r:?}");
    // No spikes: nothing to do.
    let mut empty = MatchedSpikes::new(C, 3);
    let report = merge_units(
        &mut empty,
        &mut Vec::new(),
        &mut units,
        C,
        &wtw,
        &rules(&settings, None),
    )
    .unwrap();
    assert_eq!((report.merges, report.units_after), (0, 1));
}

#[test]
fn near_duplicates_merge_by_similarity_and_norm() {
    let w = wpca();
    let wtw = WtW::new(&w, NT).unwrap();
    let pattern = [1.0, 0.5, 0.0, 0.0];
    let a = template(&w, pattern, 0);
    let scaled = |s: f32| a.iter().map(|v| v * s).collect::<Vec<f32>>();
    // 0 and 1 (norms 1 : 1.1) merge; 2 (1.5) is too large; 3 is elsewhere; 4 is delayed by 2
    // samples (similar at a lag, but this merge does not move units in time) and joins too.
    let units = [
        a.clone(),
        scaled(1.1),
        scaled(1.5),
        template(&w, [0.0, 0.0, 1.0, 0.7], 0),
        template(&w, pattern, 2),
    ]
    .concat();
    let counts = [100, 300, 50, 80, 20];
    let out = merge_near_duplicates(&units, &counts, C, &wtw, NEAR_DUPLICATE_SIMILARITY).unwrap();
    // Seed order by size: 1 (300) first; it absorbs 0, then 4 (both similar, close in norm).
    assert_eq!(out.unit_of, vec![0, 0, 1, 2, 0]);
    assert_eq!(out.counts, vec![420, 50, 80]);
    assert_eq!(out.units.len(), 3 * C * 3);
    // 1 absorbs 0 (sim 1) before 4 (sim < 1): (300 * 1.1 a + 100 a) / 400 = 1.075 a, then the
    // size-weighted mean with 4's template.
    let first: Vec<f32> = a.iter().map(|v| v * 1.075).collect();
    let four = template(&w, pattern, 2);
    let want: Vec<f32> = first
        .iter()
        .zip(&four)
        .map(|(x, y)| ((f64::from(*x) * 400.0 + f64::from(*y) * 20.0) / 420.0) as f32)
        .collect();
    assert!(max_abs_diff(&out.units[..C * 3], &want) < 1e-5);
    assert_eq!(&out.units[C * 3..2 * C * 3], &scaled(1.5)[..]);
    assert!(merge_near_duplicates(&units, &counts[..4], C, &wtw, 0.9).is_err());
}
