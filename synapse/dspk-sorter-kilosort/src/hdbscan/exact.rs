//! The `f64` values HDBSCAN's tree is built from, computed as sklearn computes them: squared
//! distances summed coordinate by coordinate in `f64` (sklearn's euclidean `rdist` of its
//! KD-tree and of its Prim's step), distances their square roots, core distances from the
//! `min_samples` nearest points with the point itself counted, and the mutual reachability
//! `max(core_a, core_b, d(a, b))`. Also the whole minimum spanning tree by Prim's algorithm.

use std::cmp::Ordering;

/// One edge of the minimum spanning tree of the mutual-reachability graph.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Edge {
    /// One end (a point index).
    pub a: usize,
    /// The other end.
    pub b: usize,
    /// Mutual reachability distance of the two ends, in `f64`.
    pub weight: f64,
}

/// `sum_k (a_k - b_k)^2` in `f64`, `k` in increasing order.
pub(super) fn squared_distance(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).fold(0.0f64, |sum, (&x, &y)| {
        let t = f64::from(x) - f64::from(y);
        sum + t * t
    })
}

/// Row `i` of `points` (`dim` values per row).
fn row(points: &[f32], dim: usize, i: usize) -> &[f32] {
    &points[i * dim..(i + 1) * dim]
}

/// The `k`-th smallest of `values` (`1 <= k <= values.len()`), by `f64::total_cmp`.
fn kth_smallest(values: &mut [f64], k: usize) -> f64 {
    let (_, kth, _) = values.select_nth_unstable_by(k - 1, f64::total_cmp);
    *kth
}

/// The core distance of every point: the distance to its `k`-th nearest point, the point itself
/// being the first (sklearn: `NearestNeighbors(n_neighbors=k).fit(X).kneighbors(X)`, last
/// column). By brute force over all pairs.
pub(super) fn core_distances(points: &[f32], dim: usize, k: usize) -> Vec<f64> {
    let n = points.len() / dim;
    let mut squared = vec![0.0f64; n];
    (0..n)
        .map(|i| {
            let own = row(points, dim, i);
            for (j, s) in squared.iter_mut().enumerate() {
                *s = squared_distance(own, row(points, dim, j));
            }
            kth_smallest(&mut squared, k).sqrt()
        })
        .collect()
}

/// The core distance of every point from the candidates a device search found for it: the
/// `k`-th smallest exact distance among the `slots` candidates of point `i`
/// (`candidates[i * slots..(i + 1) * slots]`). Equal to [`core_distances`] whenever the
/// candidates hold the point's `k` nearest points (ties at the `k`-th distance need only one
/// of them). `None` when a candidate is not a point index.
pub(super) fn core_distances_among(
    points: &[f32],
    dim: usize,
    k: usize,
    candidates: &[u32],
    slots: usize,
) -> Option<Vec<f64>> {
    let n = points.len() / dim;
    let mut squared = vec![0.0f64; slots];
    let mut core = Vec::with_capacity(n);
    for (i, found) in candidates.chunks_exact(slots).enumerate().take(n) {
        let own = row(points, dim, i);
        for (s, &j) in squared.iter_mut().zip(found) {
            let j = j as usize;
            if j >= n {
                return None;
            }
            *s = squared_distance(own, row(points, dim, j));
        }
        core.push(kth_smallest(&mut squared, k).sqrt());
    }
    Some(core)
}

/// Mutual reachability distance of points `a` and `b` (sklearn, `alpha` 1).
pub(super) fn reachability(points: &[f32], dim: usize, core: &[f64], a: usize, b: usize) -> f64 {
    let d = squared_distance(row(points, dim, a), row(points, dim, b)).sqrt();
    core[a].max(core[b]).max(d)
}

/// The total order of edges that makes the minimum spanning tree unique: weight, then the
/// smaller end, then the larger.
pub(super) fn edge_order(wa: f64, a: (usize, usize), wb: f64, b: (usize, usize)) -> Ordering {
    let key = |(x, y): (usize, usize)| (x.min(y), x.max(y));
    wa.total_cmp(&wb).then(key(a).cmp(&key(b)))
}

/// The minimum spanning tree of the mutual-reachability graph by Prim's algorithm from point 0
/// (`O(n^2)` distances), edges compared by [`edge_order`]. Each edge's `a` is the end that was
/// in the tree first.
pub(super) fn prim_tree(points: &[f32], dim: usize, core: &[f64]) -> Vec<Edge> {
    let n = core.len();
    let mut in_tree = vec![false; n];
    // Per point outside the tree: its best edge into the tree (weight, tree end).
    let mut best = vec![(f64::INFINITY, usize::MAX); n];
    let mut edges = Vec::with_capacity(n.saturating_sub(1));
    let mut current = 0;
    for _ in 1..n {
        in_tree[current] = true;
        let mut next: Option<usize> = None;
        for j in 0..n {
            if in_tree[j] {
                continue;
            }
            let w = reachability(points, dim, core, current, j);
            if best[j].1 == usize::MAX
                || edge_order(w, (current, j), best[j].0, (best[j].1, j)).is_lt()
            {
                best[j] = (w, current);
            }
            let better = match next {
                None => true,
                Some(m) => edge_order(best[j].0, (best[j].1, j), best[m].0, (best[m].1, m)).is_lt(),
            };
            if better {
                next = Some(j);
            }
        }
        let Some(m) = next else { break };
        edges.push(Edge {
            a: best[m].1,
            b: m,
            weight: best[m].0,
        });
        current = m;
    }
    edges
}
