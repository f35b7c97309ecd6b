use super::graph::{Graph, landmarks, nearest_landmarks, stride};
use super::init::{POOL, seed_clusters};
use super::iterate::{Iterated, iterate};
use super::linalg::{dot_seq, gain_sum};
use super::rng::{CounterRng, weighted_sample};
use super::tree::{BINS, Cut, Merge, bimodality_score, histogram, merge_tree, smooth};
use super::{GraphSettings, cluster_group, majority};
use crate::Error;

/// Standard normal numbers from stream `stream` (Box-Muller on the counter RNG).
fn normals(len: usize, stream: u64) -> Vec<f32> {
    let rng = CounterRng::new(12_345, stream);
    (0..len)
        .map(|i| {
            let (u, v) = (rng.uniform(2 * i as u64), rng.uniform(2 * i as u64 + 1));
            ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
        })
        .collect()
}

/// `n` points in `d` dimensions from `k` unit Gaussian blobs whose centres are `spread` apart
/// on average (random directions), blob of each point drawn at random; returns (x, truth).
fn blobs(n: usize, d: usize, k: usize, spread: f32, stream: u64) -> (Vec<f32>, Vec<usize>) {
    let centres: Vec<f32> = normals(k * d, stream + 1)
        .iter()
        .map(|v| v * spread / (2.0 * d as f32).sqrt())
        .collect();
    let pick = CounterRng::new(99, stream);
    let truth: Vec<usize> = (0..n)
        .map(|i| (pick.bits(i as u64) % k as u64) as usize)
        .collect();
    let mut x = normals(n * d, stream + 2);
    for (i, &t) in truth.iter().enumerate() {
        for f in 0..d {
            x[i * d + f] += centres[t * d + f];
        }
    }
    (x, truth)
}

/// Fraction of points whose label's majority truth is their own truth.
fn purity(labels: &[u32], truth: &[usize], k: usize) -> f64 {
    let nl = labels.iter().max().map_or(0, |&m| m as usize + 1);
    let mut table = vec![0usize; nl * k];
    for (&l, &t) in labels.iter().zip(truth) {
        table[l as usize * k + t] += 1;
    }
    let agree: usize = table
        .chunks(k)
        .map(|row| row.iter().copied().max().unwrap_or(0))
        .sum();
    agree as f64 / labels.len() as f64
}

/// Number of distinct labels; also checks they are consecutive from 0.
fn count(labels: &[u32]) -> usize {
    let mut seen: Vec<u32> = labels.to_vec();
    seen.sort_unstable();
    seen.dedup();
    assert!(
        seen.iter().enumerate().all(|(i, &l)| l == i as u32),
        "labels not consecutive: {seen:?}"
    );
    seen.len()
}

fn spikes_mode(x: &[f32], n: usize, d: usize, s: &GraphSettings) -> Vec<u32> {
    cluster_group(x, n, d, s, &mut |_, _| false).expect("clustering")
}

#[test]
fn separated_blobs_are_recovered() {
    for (n, d, k, stream) in [(2500, 30, 4, 10), (3000, 90, 6, 20), (1500, 20, 3, 30)] {
        let (x, truth) = blobs(n, d, k, 12.0, stream);
        let labels = spikes_mode(&x, n, d, &GraphSettings::default());
        let p = purity(&labels, &truth, k);
        assert_eq!(count(&labels), k, "n {n} d {d}: {k} blobs, purity {p}");
        assert!(p >= 0.98, "n {n} d {d}: purity {p}");
    }
}

#[test]
fn landmark_stride_keeps_a_floor_of_landmarks() {
    // Kilosort's stride where it gives enough landmarks (or no floor is asked).
    assert_eq!(stride(5000, 20, 100), 20);
    assert_eq!(stride(2000, 20, 100), 20);
    assert_eq!(stride(300, 20, 0), 20);
    // Fewer: the longest stride that still gives the floor.
    for (n, floor) in [
        (1999, 100),
        (300, 100),
        (101, 100),
        (250, 30),
        (60, 100),
        (7, 100),
    ] {
        let s = stride(n, 20, floor);
        let count = landmarks(n, s, 25_000).len();
        assert!(
            count >= floor.min(n),
            "n {n} floor {floor}: stride {s}, {count}"
        );
        assert!(
            s == 20 || landmarks(n, s + 1, 25_000).len() < floor.min(n),
            "n {n} floor {floor}: stride {s} is not the longest"
        );
    }
    assert_eq!(stride(300, 20, 100), 3);
    assert_eq!(stride(60, 20, 100), 1);
    assert_eq!(stride(1, 20, 100), 20);
}

/// A small group of several units (4 blobs of 50 points): Kilosort's stride leaves 10
/// landmarks, every point's 10 nearest are all of them, and the graph cannot tell the blobs
/// apart (one cluster); with a floor of 100 landmarks each blob holds about 25 and is found.
#[test]
fn a_small_group_of_several_blobs_needs_the_landmark_floor() {
    let (n, d, k) = (200, 30, 4);
    let (x, truth) = blobs(n, d, k, 12.0, 70);
    let kilosort = spikes_mode(&x, n, d, &GraphSettings::default());
    assert_eq!(count(&kilosort), 1);
    let floor = GraphSettings {
        min_landmarks: 100,
        ..GraphSettings::default()
    };
    let labels = spikes_mode(&x, n, d, &floor);
    let p = purity(&labels, &truth, k);
    assert_eq!(count(&labels), k, "purity {p}");
    assert!(p >= 0.98, "purity {p}");
}

#[test]
fn one_blob_stays_one_cluster() {
    for (n, d, stream) in [(2000, 20, 40), (3000, 60, 50)] {
        let (x, _) = blobs(n, d, 1, 0.0, stream);
        let labels = spikes_mode(&x, n, d, &GraphSettings::default());
        assert_eq!(count(&labels), 1, "n {n} d {d}");
    }
    // A small one with the landmark floor (every point a landmark): still one.
    let floor = GraphSettings {
        min_landmarks: 100,
        ..GraphSettings::default()
    };
    for (n, d, stream) in [(100, 20, 41), (300, 30, 51)] {
        let (x, _) = blobs(n, d, 1, 0.0, stream);
        assert_eq!(count(&spikes_mode(&x, n, d, &floor)), 1, "n {n} d {d}");
    }
}

#[test]
fn same_labels_twice_and_other_seeds_recover_the_blobs() {
    let (n, d, k) = (2000, 40, 5);
    let (x, truth) = blobs(n, d, k, 12.0, 60);
    let first = spikes_mode(&x, n, d, &GraphSettings::default());
    assert_eq!(first, spikes_mode(&x, n, d, &GraphSettings::default()));
    for seed in [1, 77, 123_456_789] {
        let s = GraphSettings {
            seed,
            ..GraphSettings::default()
        };
        let labels = spikes_mode(&x, n, d, &s);
        assert_eq!(count(&labels), k, "seed {seed}");
        assert!(purity(&labels, &truth, k) >= 0.98, "seed {seed}");
    }
}

#[test]
fn refractory_pairs_merge() {
    // Two touching blobs: the graph links them (r >= 0.2 at the root) but the bimodality test
    // splits them.
    let (n, d) = (2000, 20);
    let (x, truth) = blobs(n, d, 2, 3.0, 320);
    let frac = |s: &[usize]| s.iter().filter(|&&i| truth[i] == 0).count() as f64 / s.len() as f64;
    let mut asked = 0;
    let apart = cluster_group(&x, n, d, &GraphSettings::default(), &mut |_, _| {
        asked += 1;
        false
    })
    .expect("clustering");
    assert!(asked > 0);
    assert_eq!(count(&apart), 2);
    assert!(purity(&apart, &truth, 2) >= 0.9);
    // Now the two blobs are cross-refractory: a node with mostly blob 0 on one side and mostly
    // blob 1 on the other merges.
    let mut refractory = |a: &[usize], b: &[usize]| {
        let (fa, fb) = (frac(a), frac(b));
        (fa > 0.8 && fb < 0.2) || (fa < 0.2 && fb > 0.8)
    };
    let merged =
        cluster_group(&x, n, d, &GraphSettings::default(), &mut refractory).expect("clustering");
    assert_eq!(merged, vec![0; n]);
}

#[test]
fn tiny_inputs() {
    let s = GraphSettings::default();
    assert!(spikes_mode(&[], 0, 3, &s).is_empty());
    assert_eq!(spikes_mode(&[1.0, 2.0, 3.0], 1, 3, &s), vec![0]);
    let x: Vec<f32> = normals(15, 3);
    let labels = spikes_mode(&x, 5, 3, &s);
    assert_eq!(labels.len(), 5);
    count(&labels);
    // Identical points: no weight after the first centre, and every link may be a tie.
    let same = vec![0.5f32; 40 * 4];
    assert_eq!(spikes_mode(&same, 40, 4, &s), vec![0; 40]);
    // Every point a landmark with one neighbour: M is empty, one cluster.
    let one = GraphSettings {
        neighbors: 1,
        downsampling: 1,
        ..GraphSettings::default()
    };
    let x: Vec<f32> = normals(60 * 2, 4);
    assert_eq!(spikes_mode(&x, 60, 2, &one), vec![0; 60]);
}

#[test]
fn bad_inputs_are_errors() {
    let s = GraphSettings::default();
    let mut x: Vec<f32> = normals(50 * 4, 5);
    x[4 * 17 + 2] = f32::NAN;
    let err = cluster_group(&x, 50, 4, &s, &mut |_, _| false).expect_err("NaN");
    assert!(
        matches!(&err, Error::Input { reason, .. } if reason.contains("point 17 feature 2")),
        "{err}"
    );
    x[4 * 17 + 2] = f32::INFINITY;
    assert!(matches!(
        cluster_group(&x, 50, 4, &s, &mut |_, _| false),
        Err(Error::Input { .. })
    ));
    x[4 * 17 + 2] = -2e15;
    assert!(matches!(
        cluster_group(&x, 50, 4, &s, &mut |_, _| false),
        Err(Error::Input { .. })
    ));
    assert!(matches!(
        cluster_group(&x, 49, 4, &s, &mut |_, _| false),
        Err(Error::Input { .. })
    ));
    assert!(matches!(
        cluster_group(&[], 3, 0, &s, &mut |_, _| false),
        Err(Error::Input { .. })
    ));
    let zero = GraphSettings {
        neighbors: 0,
        ..GraphSettings::default()
    };
    assert!(matches!(
        cluster_group(&[], 0, 1, &zero, &mut |_, _| false),
        Err(Error::Setting {
            name: "cluster_neighbors",
            ..
        })
    ));
    let nan = GraphSettings {
        bimodality: f64::NAN,
        ..GraphSettings::default()
    };
    assert!(matches!(
        cluster_group(&[], 0, 1, &nan, &mut |_, _| false),
        Err(Error::Setting { .. })
    ));
}

#[test]
fn histogram_bins_like_numpy() {
    let step = 4.0 / 399.0;
    let z = [
        -2.0,
        2.0,
        0.0,
        -3.0,
        2.5,
        f64::NAN,
        1.0,
        -2.0 + step,
        -2.0 + step * 0.999,
        1.999_999,
    ];
    let h = histogram(&z);
    assert_eq!(h.len(), BINS);
    assert_eq!(h.iter().sum::<f64>(), 7.0);
    assert_eq!(h[0], 2.0); // -2 and just below the first inner edge
    assert_eq!(h[1], 1.0); // the first inner edge itself
    assert_eq!(h[199], 1.0); // 0 lies in [-0.005, 0.005)
    assert_eq!(h[299], 1.0); // (1 + 2) / 4 * 399 = 299.25
    assert_eq!(h[398], 2.0); // the last bin is closed
}

#[test]
fn smoothing_is_a_reflected_gaussian() {
    let w = |t: f64| (-t * t / 32.0).exp();
    let total: f64 = (-16..=16).map(|t| w(f64::from(t))).sum();
    let mut h = vec![0.0; BINS];
    h[199] = 10.0;
    let s = smooth(&h);
    assert!((f64::from(s[199]) - 10.0 * w(0.0) / total).abs() < 1e-6);
    assert!((f64::from(s[203]) - 10.0 * w(4.0) / total).abs() < 1e-6);
    assert_eq!(s[199 + 17], 0.0);
    assert!((s.iter().map(|&v| f64::from(v)).sum::<f64>() - 10.0).abs() < 1e-5);
    // Reflection at the left edge: bin -1 is bin 0, so a mass at 0 counts twice there.
    let mut e = vec![0.0; BINS];
    e[0] = 1.0;
    let s = smooth(&e);
    assert!((f64::from(s[0]) - (w(0.0) + w(1.0)) / total).abs() < 1e-7);
    assert!((f64::from(s[3]) - (w(3.0) + w(4.0)) / total).abs() < 1e-7);
}

#[test]
fn bimodality_scores_by_hand() {
    // Peaks 10 (bin 100) and 8 (bin 300), valley floor 2 with its minimum 1 at bin 210.
    let mut h = vec![0.0f32; BINS];
    h[100] = 10.0;
    h[300] = 8.0;
    for v in &mut h[175..=224] {
        *v = 2.0;
    }
    h[210] = 1.0;
    assert!((bimodality_score(&h) - (1.0 - 1.0 / 8.0)).abs() < 1e-12);
    // Two minima: the first one is the valley (bin 180: p1 = 10, p2 = 8).
    h[180] = 1.0;
    h[299] = 9.0;
    assert!((bimodality_score(&h) - (1.0 - 1.0 / 9.0)).abs() < 1e-12);
    // A Gaussian bump centred in the window: the valley is an end of it, below the peak on one
    // side but above the other side's maximum: score < 0.
    let z: Vec<f64> = normals(20_000, 6)
        .iter()
        .map(|&v| 0.5 * f64::from(v))
        .collect();
    let unimodal = bimodality_score(&smooth(&histogram(&z)));
    assert!(unimodal < 0.1, "{unimodal}");
    // Two well-separated modes at -1 and 1: the valley is empty, score 1.
    let z: Vec<f64> = normals(20_000, 7)
        .iter()
        .enumerate()
        .map(|(i, &v)| if i % 2 == 0 { 1.0 } else { -1.0 } + 0.1 * f64::from(v))
        .collect();
    assert!((bimodality_score(&smooth(&histogram(&z))) - 1.0).abs() < 1e-9);
    // One-sided: everything at -1.5, nothing from the valley on.
    let z = vec![-1.5; 100];
    assert_eq!(bimodality_score(&smooth(&histogram(&z))), 0.0);
}

#[test]
fn landmark_thinning() {
    assert_eq!(landmarks(45, 20, 25_000), vec![0, 20, 40]);
    // 100 landmarks, 3 removed at round_half_even(linspace(0, 99, 3)) = 0, 50 (49.5), 99.
    let l = landmarks(100, 1, 97);
    assert_eq!(l.len(), 97);
    assert!(!l.contains(&0) && !l.contains(&50) && !l.contains(&99) && l.contains(&49));
    // One removed: position 0 (linspace(0, 9, 1) = [0]).
    assert_eq!(landmarks(30, 3, 9), vec![3, 6, 9, 12, 15, 18, 21, 24, 27]);
    // 10 removed of 30: positions round(t * 29 / 9), e.g. 3.22 -> 3, 6.44 -> 6, 9.67 -> 10.
    let l = landmarks(30, 1, 20);
    let gone: Vec<usize> = (0..30).filter(|p| !l.contains(p)).collect();
    assert_eq!(gone, vec![0, 3, 6, 10, 13, 16, 19, 23, 26, 29]);
}

/// Brute-force nearest landmarks in f64, plain sums, ties to the lower landmark index.
fn brute_knn(x: &[f32], d: usize, land: &[usize], k: usize) -> Vec<u32> {
    let n = x.len() / d;
    let mut out = Vec::new();
    for i in 0..n {
        let mut dist: Vec<(f64, u32)> = land
            .iter()
            .enumerate()
            .map(|(l, &p)| {
                let s: f64 = (0..d)
                    .map(|f| (f64::from(x[i * d + f]) - f64::from(x[p * d + f])).powi(2))
                    .sum();
                (s, l as u32)
            })
            .collect();
        dist.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        out.extend(dist[..k].iter().map(|p| p.1));
    }
    out
}

#[test]
fn nearest_landmarks_are_exact() {
    for (n, d, k_blobs, spread, stride, k) in [
        (900, 13, 1, 0.0, 7, 10),
        (1200, 24, 5, 10.0, 5, 10),
        (300, 3, 3, 6.0, 2, 7),
        (130, 90, 2, 3.0, 1, 10),
    ] {
        let (mut x, _) = blobs(n, d, k_blobs, spread, 80 + d as u64);
        // Some duplicated points, so that exact ties occur.
        for i in (0..n).step_by(37).skip(1) {
            let (src, dst) = (i - 2, i);
            for f in 0..d {
                x[dst * d + f] = x[src * d + f];
            }
        }
        let land = landmarks(n, stride, 25_000);
        assert_eq!(
            nearest_landmarks(&x, d, &land, k),
            brute_knn(&x, d, &land, k),
            "n {n} d {d}"
        );
    }
}

#[test]
fn graph_degrees() {
    // Points 0..6 on a line, landmarks 0, 2, 4 (points), two neighbours each.
    let land = [0usize, 2, 4];
    let nbr = vec![0, 1, 0, 1, 1, 0, 1, 2, 2, 1, 2, 1];
    let g = Graph::new(nbr, 6, 2, &land);
    assert_eq!(g.row_degree, vec![1, 2, 1, 2, 1, 2]);
    assert_eq!(g.col_degree, vec![2, 5, 2]);
    assert_eq!(g.edges, 9);
    assert_eq!(g.linked, vec![0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5]);
    assert_eq!(g.linked_start, vec![0, 3, 9, 12]);
}

/// The merge tree done literally as §6.6 states it: dense `r` with -1 on the diagonal and on
/// folded rows and columns, first maximum over the whole matrix in row-major order.
fn literal_tree(g: &Graph, it: &Iterated) -> Vec<(usize, usize, f64)> {
    let nc = it.clusters;
    let m = g.edges as f64;
    let mut cc = vec![vec![0.0f64; nc]; nc];
    let (mut kp, mut kl) = (vec![0.0f64; nc], vec![0.0f64; nc]);
    for i in 0..it.labels.len() {
        kp[it.labels[i] as usize] += f64::from(g.row_degree[i]);
        for s in 0..g.k {
            if g.in_m[i * g.k + s] {
                cc[it.labels[i] as usize][it.landmarks[g.nbr[i * g.k + s] as usize] as usize] +=
                    1.0;
            }
        }
    }
    for (j, &b) in it.landmarks.iter().enumerate() {
        kl[b as usize] += f64::from(g.col_degree[j]);
    }
    let ex0: Vec<Vec<f64>> = (0..nc)
        .map(|a| (0..nc).map(|b| 0.001 + kp[a] * kl[b] / m).collect())
        .collect();
    let mut ex = vec![vec![0.0f64; nc]; nc];
    let mut c2 = vec![vec![0.0f64; nc]; nc];
    for a in 0..nc {
        for b in 0..nc {
            c2[a][b] = cc[a][b] + cc[b][a];
            ex[a][b] = ex0[a][b] + ex0[b][a];
        }
    }
    let mut cc = c2;
    let mut r: Vec<Vec<f64>> = (0..nc)
        .map(|a| {
            (0..nc)
                .map(|b| if a == b { -1.0 } else { cc[a][b] / ex[a][b] })
                .collect()
        })
        .collect();
    let mut node: Vec<usize> = (0..nc).collect();
    let mut out = Vec::new();
    for step in 0..nc - 1 {
        let (mut y, mut x) = (0, 0);
        for a in 0..nc {
            for b in 0..nc {
                if r[a][b] > r[y][x] {
                    (y, x) = (a, b);
                }
            }
        }
        out.push((node[x], node[y], r[y][x]));
        for t in 0..nc {
            cc[y][t] += cc[x][t];
            ex[y][t] += ex[x][t];
        }
        for t in 0..nc {
            cc[t][y] += cc[t][x];
            ex[t][y] += ex[t][x];
        }
        for t in 0..nc {
            cc[x][t] = -1.0;
            cc[t][x] = -1.0;
            r[x][t] = -1.0;
            r[t][x] = -1.0;
        }
        for t in 0..nc {
            r[y][t] = cc[y][t] / ex[y][t];
            r[t][y] = cc[t][y] / ex[t][y];
        }
        r[y][y] = -1.0;
        node[y] = nc + step;
    }
    out
}

#[test]
fn merge_tree_follows_the_literal_procedure() {
    for (n, d, k, rounds) in [(1500, 10, 4, 1), (1200, 30, 6, 2), (900, 5, 1, 0)] {
        let (x, _) = blobs(n, d, k, 8.0, 400 + d as u64);
        let init = seed_clusters(&x, n, d, 200, 100, 5, POOL);
        let land = landmarks(n, 20, 25_000);
        let nbr = nearest_landmarks(&x, d, &land, 10);
        let g = Graph::new(nbr, n, 10, &land);
        let it = iterate(&g, init.labels, 200, rounds);
        assert!(it.clusters > 5, "n {n} d {d}: {} clusters", it.clusters);
        let tree: Vec<(usize, usize, f64)> = merge_tree(&g, &it)
            .iter()
            .map(|m| (m.child0, m.child1, m.ratio))
            .collect();
        assert_eq!(tree, literal_tree(&g, &it), "n {n} d {d}");
    }
}

#[test]
fn tree_cut_by_hand() {
    // Base clusters 0 and 1: the two halves (sign of feature 0) of one blob; 2 and 3: two far
    // blobs. Tree: node 4 = {1, 0} (r 0.9), node 5 = {3, 2} (r 0.5), root 6 = {5, 4} (r 0.1).
    let (n, d) = (1800, 12);
    let (x, truth) = blobs(n, d, 3, 40.0, 500);
    let labels: Vec<u32> = (0..n)
        .map(|i| match truth[i] {
            0 => u32::from(x[i * d] > blob_mean(&x, &truth, d, 0)),
            t => t as u32 + 1,
        })
        .collect();
    let it = Iterated {
        labels: labels.clone(),
        landmarks: Vec::new(),
        clusters: 4,
    };
    let merge = |child0, child1, ratio| Merge {
        child0,
        child1,
        ratio,
    };
    let merges = [merge(1, 0, 0.9), merge(3, 2, 0.5), merge(5, 4, 0.1)];
    let s = GraphSettings::default();
    let points = |c: u32| (0..n).filter(|&i| labels[i] == c).collect::<Vec<_>>();
    // Root splits by its ratio (not asked); node 5 is asked, then splits by bimodality; node 4
    // is asked, then merges by bimodality. Leaves 2, 3, 4 are numbered 0, 1, 2.
    let mut asked = Vec::new();
    let cut = Cut::new(&x, d, &it).cut(&merges, &s, &mut |a, b| {
        asked.push((a.to_vec(), b.to_vec()));
        false
    });
    assert_eq!(cut.expect("cut"), vec![2, 2, 0, 1]);
    assert_eq!(asked, vec![(points(3), points(2)), (points(1), points(0))]);
    // Node 5 cross-refractory: it merges, leaves 4 and 5.
    let cut = Cut::new(&x, d, &it).cut(&merges, &s, &mut |a, _| a == points(3).as_slice());
    assert_eq!(cut.expect("cut"), vec![0, 0, 1, 1]);
    // A root above the split ratio that merges: one cluster, nothing below it asked.
    let mut calls = 0;
    let root_merges = [merge(1, 0, 0.9), merge(3, 2, 0.5), merge(5, 4, 0.3)];
    let cut = Cut::new(&x, d, &it).cut(&root_merges, &s, &mut |_, _| {
        calls += 1;
        true
    });
    assert_eq!(cut.expect("cut"), vec![0, 0, 0, 0]);
    assert_eq!(calls, 1);
}

/// Mean of feature 0 over the points of blob `t`.
fn blob_mean(x: &[f32], truth: &[usize], d: usize, t: usize) -> f32 {
    let v: Vec<f32> = (0..truth.len())
        .filter(|&i| truth[i] == t)
        .map(|i| x[i * d])
        .collect();
    v.iter().sum::<f32>() / v.len() as f32
}

/// The k-means++ variant written plainly: draws and sums over the evenly spaced pool, every
/// product by `dot_seq`, then the other points follow the chosen centres.
fn plain_seed(x: &[f32], n: usize, d: usize, steps: usize, cands: usize, pool: usize) -> Vec<u32> {
    let row = |i: usize| &x[i * d..(i + 1) * d];
    let s = pool.min(n);
    let members: Vec<usize> = (0..s).map(|t| t * n / s).collect();
    let v: Vec<f32> = (0..n).map(|i| dot_seq(row(i), row(i))).collect();
    let mut e = vec![0.0f32; n];
    let mut labels = vec![0u32; n];
    let mut scratch = Vec::new();
    let mut centres = Vec::new();
    for j in 0..steps {
        let w: Vec<f64> = members
            .iter()
            .map(|&i| f64::from((v[i] - e[i]).max(0.0)))
            .collect();
        let drawn = weighted_sample(&w, cands, CounterRng::new(5, j as u64), &mut scratch);
        if drawn.is_empty() {
            break;
        }
        let sums: Vec<f64> = drawn
            .iter()
            .map(|&c| {
                let c = members[c];
                let g: Vec<f32> = members.iter().map(|&i| dot_seq(row(i), row(c))).collect();
                let ep: Vec<f32> = members.iter().map(|&i| e[i]).collect();
                gain_sum(&g, &ep, v[c])
            })
            .collect();
        let best = (0..drawn.len()).fold(0, |b, c| if sums[c] > sums[b] { c } else { b });
        let c = members[drawn[best]];
        centres.push(c);
        for &i in &members {
            let score = 2.0 * dot_seq(row(i), row(c)) - v[c];
            if score - e[i] > 0.0 {
                e[i] = score;
                labels[i] = j as u32;
            }
        }
    }
    for i in (0..n).filter(|i| !members.contains(i)) {
        for (j, &c) in centres.iter().enumerate() {
            let score = 2.0 * dot_seq(row(i), row(c)) - v[c];
            if score - e[i] > 0.0 {
                e[i] = score;
                labels[i] = j as u32;
            }
        }
    }
    labels
}

#[test]
fn initialisation_equals_the_plain_computation() {
    for (n, d, k, spread, pool) in [
        (1500, 20, 6, 12.0, POOL),
        (800, 9, 1, 0.0, POOL),
        (1000, 40, 3, 5.0, 333),
        (701, 5, 4, 8.0, 64),
    ] {
        let (x, _) = blobs(n, d, k, spread, 90 + d as u64);
        let fast = seed_clusters(&x, n, d, 120, 40, 5, pool);
        assert_eq!(fast.columns, 120);
        let plain = plain_seed(&x, n, d, 120, 40, pool);
        assert_eq!(fast.labels, plain, "n {n} d {d} pool {pool}");
        // Many labels in use (the blobs are split into many pieces).
        assert!(count_distinct(&plain) > 20, "n {n} d {d}");
    }
}

fn count_distinct(labels: &[u32]) -> usize {
    let mut l = labels.to_vec();
    l.sort_unstable();
    l.dedup();
    l.len()
}

#[test]
fn weighted_draws_are_distinct_and_proportional() {
    let mut scratch = Vec::new();
    let w = [1.0, 0.0, 3.0, 0.0, 4.0];
    let d = weighted_sample(&w, 5, CounterRng::new(1, 0), &mut scratch);
    let mut sorted = d.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, vec![0, 2, 4]);
    let mut first = [0usize; 5];
    let mut second_given_4 = [0usize; 5];
    let trials = 20_000;
    for s in 0..trials {
        let d = weighted_sample(&w, 2, CounterRng::new(7, s), &mut scratch);
        assert_eq!(d.len(), 2);
        assert_ne!(d[0], d[1]);
        first[d[0]] += 1;
        if d[0] == 4 {
            second_given_4[d[1]] += 1;
        }
    }
    let f = |c: usize| c as f64 / trials as f64;
    assert!((f(first[4]) - 0.5).abs() < 0.015, "{first:?}");
    assert!((f(first[2]) - 0.375).abs() < 0.015, "{first:?}");
    // After drawing index 4, index 2 has probability 3 / 4.
    let after = second_given_4[2] as f64 / first[4] as f64;
    assert!((after - 0.75).abs() < 0.02, "{second_given_4:?}");
}

/// CPU seconds this thread has run (`/proc/thread-self/schedstat`), so that timings on a busy
/// machine count only this thread; wall-clock seconds where that file is missing.
fn cpu_seconds(wall: std::time::Instant) -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .next()
                .and_then(|v| v.parse::<f64>().ok())
        })
        .map_or_else(|| wall.elapsed().as_secs_f64(), |ns| ns * 1e-9)
}

/// Release timing: `cargo test --release -p dspk-sorter-kilosort --lib cluster::tests::timing -- --ignored --nocapture`.
#[test]
#[ignore = "timing, run in release"]
fn timing() {
    for (n, d, k) in [(2000, 90, 5), (20_000, 90, 12), (20_000, 90, 1)] {
        let (x, truth) = blobs(n, d, k, 12.0, 200 + n as u64);
        let wall = std::time::Instant::now();
        let t0 = cpu_seconds(wall);
        let labels = spikes_mode(&x, n, d, &GraphSettings::default());
        println!(
            "n {n} d {d} blobs {k}: {:.1} ms CPU ({:.1} ms wall), {} clusters, purity {:.4}",
            (cpu_seconds(wall) - t0) * 1e3,
            wall.elapsed().as_secs_f64() * 1e3,
            count(&labels),
            purity(&labels, &truth, k)
        );
        assert_eq!(count(&labels), k);
        assert!(purity(&labels, &truth, k) >= 0.98);
    }
}

#[test]
fn small_probes_get_the_landmark_floor_and_split_guard_by_default() {
    use crate::KilosortSettings;
    let ks = KilosortSettings::default();
    for groups in [1, 4] {
        let g = ks.graph(groups);
        assert_eq!((g.min_landmarks, g.split_points_per_feature), (100, 4.0));
    }
    // Larger probes: Kilosort's stride and test.
    let g = ks.graph(5);
    assert_eq!((g.min_landmarks, g.split_points_per_feature), (0, 0.0));
    assert_eq!(g.downsampling, 20);
    // Set explicitly: as set, whatever the probe; EMUsort's preset keeps Kilosort's.
    let set = KilosortSettings {
        min_cluster_landmarks: Some(50),
        ..KilosortSettings::default()
    };
    assert_eq!(set.graph(96).min_landmarks, 50);
    assert_eq!(set.graph(96).split_points_per_feature, 4.0);
    let off = KilosortSettings {
        min_cluster_landmarks: Some(0),
        ..KilosortSettings::default()
    };
    assert_eq!(
        (
            off.graph(1).min_landmarks,
            off.graph(1).split_points_per_feature
        ),
        (0, 0.0)
    );
    let emu = KilosortSettings::emusort().graph(1);
    assert_eq!((emu.min_landmarks, emu.split_points_per_feature), (0, 0.0));
}

/// A group over the cap clusters an evenly spaced subset and gives every other point the
/// majority label of its nearest landmarks: separated blobs come back whole; a cap at or
/// above the group's size changes nothing; the refractory question is asked in the group's
/// own point indices.
#[test]
fn a_capped_group_clusters_a_subset_and_assigns_the_rest() {
    let (n, d, k) = (6_000, 8, 4);
    let (x, truth) = blobs(n, d, k, 14.0, 31);
    let whole = spikes_mode(&x, n, d, &GraphSettings::default());
    let same = spikes_mode(
        &x,
        n,
        d,
        &GraphSettings {
            max_points: Some(n),
            ..GraphSettings::default()
        },
    );
    assert_eq!(same, whole, "a cap at the group's size changes nothing");
    let capped_settings = GraphSettings {
        max_points: Some(1_500),
        ..GraphSettings::default()
    };
    let capped = spikes_mode(&x, n, d, &capped_settings);
    assert_eq!(count(&capped), k);
    assert!(
        purity(&capped, &truth, k) > 0.995,
        "{}",
        purity(&capped, &truth, k)
    );
    // Every point outside the subset is labelled like the clustered points of its blob.
    assert!(purity(&whole, &truth, k) > 0.995);
    // Two touching blobs (as `refractory_pairs_merge`): the tree asks whether branches are
    // cross-refractory, in the group's own indices; answering yes merges them under the cap too.
    let (n2, d2) = (2_000, 20);
    let (x2, truth2) = blobs(n2, d2, 2, 3.0, 320);
    let cap2 = GraphSettings {
        max_points: Some(800),
        ..GraphSettings::default()
    };
    let mut asked = Vec::new();
    let apart = cluster_group(&x2, n2, d2, &cap2, &mut |a, b| {
        asked.push((a.to_vec(), b.to_vec()));
        false
    })
    .unwrap();
    assert_eq!(count(&apart), 2);
    assert!(purity(&apart, &truth2, 2) >= 0.9);
    assert!(!asked.is_empty());
    let subset: Vec<usize> = (0..800).map(|t| t * n2 / 800).collect();
    for (a, b) in &asked {
        for side in [a, b] {
            assert!(side.windows(2).all(|w| w[0] < w[1]), "increasing indices");
            assert!(side.iter().all(|i| subset.binary_search(i).is_ok()));
        }
    }
    let frac = |s: &[usize]| s.iter().filter(|&&i| truth2[i] == 0).count() as f64 / s.len() as f64;
    let merged = cluster_group(&x2, n2, d2, &cap2, &mut |a, b| {
        let (fa, fb) = (frac(a), frac(b));
        (fa > 0.8 && fb < 0.2) || (fa < 0.2 && fb > 0.8)
    })
    .unwrap();
    assert_eq!(merged, vec![0; n2]);
    let bad = GraphSettings {
        max_points: Some(1),
        ..GraphSettings::default()
    };
    assert!(matches!(
        cluster_group(&x, n, d, &bad, &mut |_, _| false),
        Err(Error::Setting {
            name: "max_cluster_spikes",
            ..
        })
    ));
}

#[test]
fn majority_takes_the_first_of_equal_counts() {
    assert_eq!(majority([3, 1, 1, 3].into_iter()), 3);
    assert_eq!(majority([2, 5, 5].into_iter()), 5);
    assert_eq!(majority([7].into_iter()), 7);
    assert_eq!(majority(std::iter::empty()), 0);
}
