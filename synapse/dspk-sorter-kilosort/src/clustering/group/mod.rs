//! Graph clustering of one group of spikes (`docs/KILOSORT4.md` §6.3-6.7), on the host.
//!
//! [`cluster_group`] runs, in order: the greedy k-means++ initialisation (`init.rs`, §6.4); the
//! graph of every point's nearest landmarks (`graph.rs`, §6.3); the label iterations on it
//! (`iterate.rs`, §6.5); the merge tree and its cut with the bimodality test (`tree.rs`,
//! §6.6-6.7). Everything is single-threaded and deterministic (the caller runs groups in
//! parallel); the random draws come from the module's own counter-based generator (`rng.rs`).
//!
//! Where this departs from Kilosort 4.1.7 (each also documented where it happens):
//! * random draws: our `SplitMix64` stream with exponential-key sampling instead of torch's
//!   `multinomial` (which differs between devices anyway);
//! * the initialisation draws from and scores on a pool of at most 4096 evenly spaced points
//!   (all points when there are no more; the others follow the chosen centres exactly), so its
//!   cost is bounded (Kilosort scores every point on the GPU);
//! * the nearest-landmark search is exact in f64 with ties to the lower landmark (faiss
//!   computes in f32, where near-ties may reorder);
//! * the iteration scores are compared exactly as integers (Kilosort: f32), and the rounds stop
//!   at a fixed point (the same result as running them all);
//! * the tree cut evaluates the cross-refractoriness test (dead code in 4.1.7, the intended
//!   rule), and a one-sided bimodality histogram scores 0 instead of dividing by zero;
//! * inputs too small for Kilosort's defaults are accepted: the number of steps and candidates
//!   of the initialisation is capped at `n`, the neighbours at the number of landmarks; features
//!   beyond `+-1e15` are refused (their squares would overflow f32).
//!
//! Cost per group of `n` points, `d` features, `L` landmarks: about `min(n, 4096)^2 d / 2 +
//! 200 n d` multiply-adds for the initialisation, `n L d` for the neighbours (blocked f32
//! products, about 7 GMAC/s on one core with SSE2), `O(n k)` per iteration round. Measured
//! (ignored test `timing`, release, `d` = 90, Gaussian blobs, CPU time of one thread on a shared
//! 2-core Xeon under load, so upper bounds): `n` = 2 000 in 88-138 ms, `n` = 20 000 in
//! 0.73-1.2 s.

mod graph;
mod init;
mod iterate;
mod linalg;
mod rng;
mod tree;

#[cfg(test)]
mod tests;

use crate::{Error, KilosortSettings, Result};

/// Probes whose channels fall in at most this many clustering groups are small: their
/// groups hold several units each and get the landmark floor and the split guard by default.
pub(crate) const SMALL_PROBE_GROUPS: usize = 4;

/// The default landmark floor of a small probe ([`KilosortSettings::min_cluster_landmarks`]).
pub(crate) const SMALL_PROBE_LANDMARKS: usize = 100;

/// The default split guard where the landmark floor is on
/// ([`KilosortSettings::min_split_points_per_feature`]).
pub(crate) const SMALL_PROBE_SPLIT_POINTS: f64 = 4.0;

impl KilosortSettings {
    /// The settings of the graph clustering of one group (`cluster_neighbors`,
    /// `cluster_downsampling`, `max_cluster_subset`, `cluster_init_seed`; the rest Kilosort4's
    /// fixed values) on a probe whose channels fall in `probe_groups` clustering groups (the
    /// landmark floor and split guard when not set).
    #[must_use]
    pub(crate) fn graph(&self, probe_groups: usize) -> GraphSettings {
        let small = probe_groups <= SMALL_PROBE_GROUPS;
        let min_landmarks =
            self.min_cluster_landmarks
                .unwrap_or(if small { SMALL_PROBE_LANDMARKS } else { 0 });
        let split_points_per_feature =
            self.min_split_points_per_feature
                .unwrap_or(if min_landmarks > 0 {
                    SMALL_PROBE_SPLIT_POINTS
                } else {
                    0.0
                });
        GraphSettings {
            neighbors: self.cluster_neighbors,
            downsampling: self.cluster_downsampling,
            max_landmarks: self.max_cluster_subset,
            seed: self.cluster_init_seed,
            min_landmarks,
            split_points_per_feature,
            max_points: self.max_cluster_spikes,
            ..GraphSettings::default()
        }
    }
}

/// Settings of the graph clustering (Kilosort4's defaults in [`Default`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GraphSettings {
    /// `cluster_neighbors`: nearest landmarks of every point (10).
    pub neighbors: usize,
    /// `cluster_downsampling`: every `downsampling`-th point is a landmark (20).
    pub downsampling: usize,
    /// `max_cluster_subset`: at most this many landmarks (25 000).
    pub max_landmarks: usize,
    /// Ours: a group whose stride leaves fewer landmarks than this takes a shorter one
    /// (0: never).
    pub min_landmarks: usize,
    /// Ours: a tree node whose children hold fewer points than this times the features merges
    /// without the bimodality test (0: never).
    pub split_points_per_feature: f64,
    /// Ours: a group of more points clusters this many, evenly spaced, and assigns the rest
    /// to the clusters of their nearest landmarks (`None`: every point).
    pub max_points: Option<usize>,
    /// `cluster_init_seed`: seed of the initialisation's draws (5).
    pub seed: u64,
    /// Steps of the k-means++ initialisation, and label columns of the iterations (200).
    pub initial_clusters: usize,
    /// Candidates drawn per initialisation step (100).
    pub candidates: usize,
    /// Rounds of graph iterations (200).
    pub iterations: usize,
    /// A tree node whose merge ratio `r` is below this splits (0.2).
    pub split_ratio: f64,
    /// A tree node whose bimodality score is below this merges (0.6).
    pub bimodality: f64,
}

impl Default for GraphSettings {
    fn default() -> Self {
        Self {
            neighbors: 10,
            downsampling: 20,
            max_landmarks: 25_000,
            min_landmarks: 0,
            split_points_per_feature: 0.0,
            max_points: None,
            seed: 5,
            initial_clusters: 200,
            candidates: 100,
            iterations: 200,
            split_ratio: 0.2,
            bimodality: 0.6,
        }
    }
}

impl GraphSettings {
    /// Checks that every count is at least 1 and the thresholds are finite.
    fn check(&self) -> Result<()> {
        for (name, value) in [
            ("cluster_neighbors", self.neighbors),
            ("cluster_downsampling", self.downsampling),
            ("max_cluster_subset", self.max_landmarks),
            ("initial_clusters", self.initial_clusters),
            ("candidates", self.candidates),
        ] {
            if value == 0 {
                return Err(Error::Setting {
                    name,
                    reason: "must be at least 1".into(),
                });
            }
        }
        if let Some(points) = self.max_points
            && points < 2
        {
            return Err(Error::Setting {
                name: "max_cluster_spikes",
                reason: format!("must be at least 2, got {points}"),
            });
        }
        for (name, value) in [
            ("split_ratio", self.split_ratio),
            ("bimodality", self.bimodality),
        ] {
            if !value.is_finite() {
                return Err(Error::Setting {
                    name,
                    reason: format!("must be finite, not {value}"),
                });
            }
        }
        Ok(())
    }
}

/// Clusters `n` points of `d` features (`x` row-major [n, d], f32) into labels `0..k`
/// (consecutive, numbered as §6.7 says: by increasing id of the tree node each cluster is).
///
/// `refractory(a, b)` is asked, for a tree node whose children hold the points `a` and `b`
/// (increasing indices into `x`), whether the two are cross-refractory (then the node merges);
/// pass `|_, _| false` for the "spikes" mode. With `n < 2` every point gets label 0.
///
/// With [`GraphSettings::max_points`] below `n`, the points `floor(t n / max)` for
/// `t = 0..max` are clustered as above, and every other point takes the label most of its
/// `neighbors` nearest landmarks of that clustering carry (ties: the label met first, nearest
/// first).
///
/// # Errors
///
/// [`Error::Setting`] when a count of `settings` is 0 or a threshold is not finite;
/// [`Error::Input`] when `x` does not hold `n * d` values, `d` is 0 while `n` is not, or a value
/// is not finite or beyond `+-1e15` (naming the point and feature).
pub(crate) fn cluster_group(
    x: &[f32],
    n: usize,
    d: usize,
    settings: &GraphSettings,
    refractory: &mut dyn FnMut(&[usize], &[usize]) -> bool,
) -> Result<Vec<u32>> {
    settings.check()?;
    check_features(x, n, d)?;
    if n < 2 {
        return Ok(vec![0; n]);
    }
    let cap = settings.max_points.unwrap_or(n);
    if cap >= n {
        return Ok(cluster_points(x, n, d, settings, refractory)?.labels);
    }
    let kept: Vec<usize> = (0..cap)
        .map(|t| (t as u128 * n as u128 / cap as u128) as usize)
        .collect();
    let xs = linalg::gather_rows(x, d, &kept);
    let mut in_x = |a: &[usize], b: &[usize]| {
        let of = |rows: &[usize]| rows.iter().map(|&r| kept[r]).collect::<Vec<_>>();
        refractory(&of(a), &of(b))
    };
    let clustered = cluster_points(&xs, cap, d, settings, &mut in_x)?;
    let mut labels = vec![0u32; n];
    for (&i, &l) in kept.iter().zip(&clustered.labels) {
        labels[i] = l;
    }
    // `kept` is increasing: the rest are the indices it does not hold.
    let rest: Vec<usize> = (0..n).filter(|i| kept.binary_search(i).is_err()).collect();
    let xr = linalg::gather_rows(x, d, &rest);
    let xl = linalg::gather_rows(&xs, d, &clustered.landmarks);
    let land_labels: Vec<u32> = clustered
        .landmarks
        .iter()
        .map(|&p| clustered.labels[p])
        .collect();
    let k = settings.neighbors.min(land_labels.len());
    let nbr = graph::nearest_rows(&xr, &xl, d, k);
    for (&i, near) in rest.iter().zip(nbr.chunks_exact(k)) {
        labels[i] = majority(near.iter().map(|&l| land_labels[l as usize]));
    }
    Ok(labels)
}

/// The labels of a clustering and the points that were its landmarks.
struct Clustered {
    labels: Vec<u32>,
    landmarks: Vec<usize>,
}

/// [`cluster_group`] of every point (no cap), with the landmarks of its graph.
fn cluster_points(
    x: &[f32],
    n: usize,
    d: usize,
    settings: &GraphSettings,
    refractory: &mut dyn FnMut(&[usize], &[usize]) -> bool,
) -> Result<Clustered> {
    let steps = settings.initial_clusters.min(n);
    let candidates = settings.candidates.min(n);
    let init = init::seed_clusters(x, n, d, steps, candidates, settings.seed, init::POOL);

    let stride = graph::stride(n, settings.downsampling, settings.min_landmarks);
    let landmarks = graph::landmarks(n, stride, settings.max_landmarks);
    let k = settings.neighbors.min(landmarks.len());
    let nbr = graph::nearest_landmarks(x, d, &landmarks, k);
    let graph = graph::Graph::new(nbr, n, k, &landmarks);
    if graph.edges == 0 {
        // Every link is a landmark's link to itself (one neighbour, every point a landmark):
        // `M` is empty and the iterations' penalty undefined; one cluster.
        return Ok(Clustered {
            labels: vec![0; n],
            landmarks,
        });
    }
    let it = iterate::iterate(&graph, init.labels, init.columns, settings.iterations);
    let merges = tree::merge_tree(&graph, &it);
    let mut cut = tree::Cut::new(x, d, &it);
    let final_label = cut.cut(&merges, settings, refractory)?;
    Ok(Clustered {
        labels: it.labels.iter().map(|&c| final_label[c as usize]).collect(),
        landmarks,
    })
}

/// The most frequent of `labels` (the first met on a tie).
fn majority(labels: impl Iterator<Item = u32>) -> u32 {
    let mut counts: Vec<(u32, usize)> = Vec::new();
    for label in labels {
        match counts.iter_mut().find(|(l, _)| *l == label) {
            Some((_, c)) => *c += 1,
            None => counts.push((label, 1)),
        }
    }
    // `max_by_key` keeps the last of equal maxima: search from the back for the first.
    counts
        .iter()
        .rev()
        .max_by_key(|(_, c)| *c)
        .map_or(0, |&(l, _)| l)
}

/// Largest feature magnitude accepted: squared norms of rows stay finite in f32 (`d * 1e30`).
const LARGEST: f32 = 1e15;

/// Checks the shape of `x` and that every value is finite and at most [`LARGEST`] in magnitude.
fn check_features(x: &[f32], n: usize, d: usize) -> Result<()> {
    let what = "clustering features";
    if n.checked_mul(d) != Some(x.len()) {
        return Err(Error::Input {
            what,
            reason: format!("{} values for {n} points of {d} features", x.len()),
        });
    }
    if d == 0 && n > 0 {
        return Err(Error::Input {
            what,
            reason: format!("{n} points without features"),
        });
    }
    if let Some(at) = x.iter().position(|v| !v.is_finite() || v.abs() > LARGEST) {
        return Err(Error::Input {
            what,
            reason: format!(
                "point {} feature {} is {} (features must be finite and within +-{LARGEST:e})",
                at / d,
                at % d,
                x[at]
            ),
        });
    }
    Ok(())
}
