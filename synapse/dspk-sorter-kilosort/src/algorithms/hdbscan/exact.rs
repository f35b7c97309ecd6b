//! The `f64` values HDBSCAN's tree is built from, computed as sklearn computes them: squared
//! distances summed coordinate by coordinate in `f64` (sklearn's euclidean `rdist` of its
//! KD-tree and of its Prim's step), distances their square roots, core distances from the
//! `min_samples` nearest points with the point itself counted, and the mutual reachability
//! `max(core_a, core_b, d(a, b))`. Also the whole minimum spanning tree by Prim's algorithm.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::algorithms::rows::{RowBlocks, fill_in_parallel, map_in_parallel, squared_distance};

/// Most points whose distances [`Distances`] keeps as a whole matrix (`n^2` values in `f64`:
/// 128 MiB at this count).
pub(super) const MATRIX_MAX_POINTS: usize = 4096;

/// Fewest rows of distances per thread.
const MIN_ROWS_PER_THREAD: usize = 32;

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

/// Row `i` of `points` (`dim` values per row).
fn row<T>(points: &[T], dim: usize, i: usize) -> &[T] {
    &points[i * dim..(i + 1) * dim]
}

/// The `k`-th smallest of `values` (`1 <= k <= values.len()`, every value `+0.0` or more, so
/// that their order is the order of their bits), kept in `heap` (its contents are replaced).
fn kth_smallest(values: &[f64], k: usize, heap: &mut BinaryHeap<u64>) -> f64 {
    heap.clear();
    heap.extend(values[..k].iter().map(|v| v.to_bits()));
    for v in &values[k..] {
        let bits = v.to_bits();
        if let Some(mut largest) = heap.peek_mut()
            && bits < *largest
        {
            *largest = bits;
        }
    }
    heap.peek().map_or(f64::NAN, |&bits| f64::from_bits(bits))
}

/// The points, also in blocks, to compute the distances from one point to many.
pub(super) struct PointRows<'a> {
    dim: usize,
    points: &'a [f32],
    blocks: RowBlocks<f32>,
}

impl<'a> PointRows<'a> {
    /// The `n` points of `points` (`dim` values per point).
    fn new(points: &'a [f32], dim: usize) -> Self {
        Self {
            dim,
            points,
            blocks: RowBlocks::gather(points, dim, 0..points.len() / dim),
        }
    }

    /// Writes the distances from point `i` to the points of `blocks` into `out` (one value
    /// per point of `blocks`), `sqrt` of [`squared_distance`].
    fn distances_into(&self, i: usize, blocks: &RowBlocks<f32>, out: &mut [f64]) {
        let own: Vec<f64> = row(self.points, self.dim, i)
            .iter()
            .map(|&v| f64::from(v))
            .collect();
        blocks.squared_distances(&own, 0, out);
        out.iter_mut().for_each(|v| *v = v.sqrt());
    }
}

/// The distances between all pairs of points, `sqrt` of [`squared_distance`]: for at most
/// [`MATRIX_MAX_POINTS`] points a matrix computed once (rows spread over threads), above it
/// rows computed when asked for.
pub(super) enum Distances<'a> {
    /// Row-major `n x n`.
    Matrix { n: usize, values: Vec<f64> },
    /// Computed row by row.
    Rows(PointRows<'a>),
}

/// Some of the points, listed to ask [`Distances::distances_to`] for the distances to them.
pub(super) struct Listed {
    indices: Vec<usize>,
    /// Their rows, when the distances are computed row by row.
    blocks: Option<RowBlocks<f32>>,
}

impl<'a> Distances<'a> {
    /// The distances of `points` (`dim` values per point, finite), a matrix's rows computed on
    /// up to `threads` threads.
    pub(super) fn new(points: &'a [f32], dim: usize, threads: usize) -> Self {
        Self::with_matrix_up_to(points, dim, threads, MATRIX_MAX_POINTS)
    }

    /// [`new`](Self::new) with `max_points` in place of [`MATRIX_MAX_POINTS`].
    pub(super) fn with_matrix_up_to(
        points: &'a [f32],
        dim: usize,
        threads: usize,
        max_points: usize,
    ) -> Self {
        let n = points.len() / dim;
        let rows = PointRows::new(points, dim);
        if n > max_points {
            return Self::Rows(rows);
        }
        let mut values = vec![0.0f64; n * n];
        fill_in_parallel(
            &mut values,
            n,
            threads,
            MIN_ROWS_PER_THREAD,
            || (),
            |(), i, out| rows.distances_into(i, &rows.blocks, out),
        );
        Self::Matrix { n, values }
    }

    /// Number of points.
    fn len(&self) -> usize {
        match self {
            Self::Matrix { n, .. } => *n,
            Self::Rows(rows) => rows.blocks.rows(),
        }
    }

    /// The distances from point `i` to every point: a row of the matrix, or computed into
    /// `buffer` (`n` values).
    fn row<'b>(&'b self, i: usize, buffer: &'b mut [f64]) -> &'b [f64] {
        match self {
            Self::Matrix { n, values } => &values[i * n..(i + 1) * n],
            Self::Rows(rows) => {
                rows.distances_into(i, &rows.blocks, buffer);
                buffer
            }
        }
    }

    /// The points `indices` (each below `n`), listed.
    fn list(&self, indices: Vec<usize>) -> Listed {
        let blocks = match self {
            Self::Matrix { .. } => None,
            Self::Rows(rows) => Some(RowBlocks::gather(
                rows.points,
                rows.dim,
                indices.iter().copied(),
            )),
        };
        Listed { indices, blocks }
    }

    /// Writes the distances from point `i` to the listed points into `out` (one value per
    /// listed point, in their order).
    fn distances_to(&self, i: usize, listed: &Listed, out: &mut [f64]) {
        if let (Self::Rows(rows), Some(blocks)) = (self, &listed.blocks) {
            rows.distances_into(i, blocks, out);
            return;
        }
        let mut buffer = Vec::new();
        if let Self::Rows(_) = self {
            buffer.resize(self.len(), 0.0);
        }
        let from = self.row(i, &mut buffer);
        for (o, &j) in out.iter_mut().zip(&listed.indices) {
            *o = from[j];
        }
    }
}

/// The core distance of every point: the distance to its `k`-th nearest point, the point itself
/// being the first (sklearn: `NearestNeighbors(n_neighbors=k).fit(X).kneighbors(X)`, last
/// column). By brute force over all pairs, points spread over up to `threads` threads (each
/// point's value computed alone, so it does not depend on the count). (The `k`-th smallest
/// distance is the square root of the `k`-th smallest squared distance: `sqrt` is correctly
/// rounded, hence monotone.)
pub(super) fn core_distances(distances: &Distances, k: usize, threads: usize) -> Vec<f64> {
    let n = distances.len();
    map_in_parallel(
        n,
        threads,
        MIN_ROWS_PER_THREAD,
        || (vec![0.0f64; n], BinaryHeap::with_capacity(k)),
        |(buffer, heap), i| kth_smallest(distances.row(i, buffer), k, heap),
    )
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
    let mut heap = BinaryHeap::with_capacity(k);
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
        core.push(kth_smallest(&squared, k, &mut heap).sqrt());
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
    wa.total_cmp(&wb).then_with(|| key(a).cmp(&key(b)))
}

/// The minimum spanning tree of the mutual-reachability graph by Prim's algorithm from point 0
/// (`O(n^2)` distances), edges compared by [`edge_order`] (a total order: the tree is unique,
/// and does not depend on the order in which points are visited). Each edge's `a` is the end
/// that was in the tree first.
///
/// Each step takes the distances from the point that joined last to a list of points: those
/// outside the tree and some that have joined since the list was last shortened, which it is
/// whenever they have become half of it.
pub(super) fn prim_tree(distances: &Distances, core: &[f64]) -> Vec<Edge> {
    let n = core.len();
    let mut joined = vec![false; n];
    // Per point outside the tree: its best edge into the tree (weight, tree end).
    let mut best = vec![(f64::INFINITY, usize::MAX); n];
    let mut edges = Vec::with_capacity(n.saturating_sub(1));
    let mut listed = distances.list((0..n).collect());
    let mut from = vec![0.0f64; n];
    let mut current = 0;
    for outside in (1..n).rev() {
        joined[current] = true;
        if 2 * outside < listed.indices.len() {
            let indices = listed.indices.iter().copied().filter(|&j| !joined[j]);
            listed = distances.list(indices.collect());
        }
        let from = &mut from[..listed.indices.len()];
        distances.distances_to(current, &listed, from);
        // The next point to join: its best edge (weight, tree end) and itself.
        let mut next: Option<(f64, usize, usize)> = None;
        for (&j, &d) in listed.indices.iter().zip(from.iter()) {
            if joined[j] {
                continue;
            }
            let w = core[current].max(core[j]).max(d);
            let edge = &mut best[j];
            // Every weight is finite: the first edge always replaces the initial infinity.
            if edge_order(w, (current, j), edge.0, (edge.1, j)).is_lt() {
                *edge = (w, current);
            }
            if next.is_none_or(|(w, a, b)| edge_order(edge.0, (edge.1, j), w, (a, b)).is_lt()) {
                next = Some((edge.0, edge.1, j));
            }
        }
        let Some((weight, a, b)) = next else { break };
        edges.push(Edge { a, b, weight });
        current = b;
    }
    edges
}
