//! From the minimum spanning tree to labels, as sklearn's HDBSCAN does it (sklearn 1.9,
//! `cluster_selection_method="eom"`, `allow_single_cluster=False`, epsilon 0): the single-linkage
//! tree, the condensed tree with `min_cluster_size`, cluster stabilities, excess-of-mass
//! selection without the root, and labels numbered in the order sklearn numbers them.
//!
//! sklearn grows its tree by Prim's algorithm from point 0, so the first end of each edge (the
//! left child of each merge) is the end nearer point 0 along the tree; edges are then merged in
//! increasing weight. Here edges of equal weight are merged in the order of their smaller then
//! larger end (sklearn's order among them is numpy's unstable `argsort`; see the module doc of
//! [`super`]).

use std::collections::VecDeque;

use super::exact::{Edge, edge_order};

/// One merge of the single-linkage tree: node `n + m` for merge `m`, `n` points.
#[derive(Debug, Clone, Copy)]
struct Merge {
    left: usize,
    right: usize,
    distance: f64,
    size: usize,
}

/// One row of the condensed tree: `child` (a point below `n`, or a cluster) leaves or is born
/// from cluster `parent` at `lambda = 1 / distance`; `size` points.
#[derive(Debug, Clone, Copy)]
struct Row {
    parent: usize,
    child: usize,
    lambda: f64,
    size: usize,
}

/// Labels of `n` points (`-1`: noise) from the `n - 1` edges of their minimum spanning tree.
/// `None` when the edges do not span the `n` points.
pub(super) fn labels_from_tree(
    n: usize,
    edges: &[Edge],
    min_cluster_size: usize,
) -> Option<Vec<i32>> {
    let oriented = orient_from_first(n, edges)?;
    let merges = single_linkage(n, oriented);
    let (rows, clusters) = condense(n, &merges, min_cluster_size);
    let selected = select_clusters(n, &rows, clusters);
    Some(label_points(n, &rows, &selected))
}

/// The edges with `a` the end nearer point 0 along the tree (Prim's order of discovery), in
/// increasing [`edge_order`].
fn orient_from_first(n: usize, edges: &[Edge]) -> Option<Vec<Edge>> {
    if edges.len() + 1 != n {
        return None;
    }
    let mut neighbours = vec![Vec::new(); n];
    for (e, edge) in edges.iter().enumerate() {
        if edge.a >= n || edge.b >= n {
            return None;
        }
        neighbours[edge.a].push(e);
        neighbours[edge.b].push(e);
    }
    let mut depth = vec![usize::MAX; n];
    depth[0] = 0;
    let mut queue = VecDeque::from([0usize]);
    while let Some(p) = queue.pop_front() {
        for &e in &neighbours[p] {
            let q = edges[e].a + edges[e].b - p;
            if depth[q] == usize::MAX {
                depth[q] = depth[p] + 1;
                queue.push_back(q);
            }
        }
    }
    if depth.contains(&usize::MAX) {
        return None;
    }
    let mut oriented: Vec<Edge> = edges
        .iter()
        .map(|e| {
            if depth[e.a] <= depth[e.b] {
                *e
            } else {
                Edge {
                    a: e.b,
                    b: e.a,
                    weight: e.weight,
                }
            }
        })
        .collect();
    oriented.sort_by(|x, y| edge_order(x.weight, (x.a, x.b), y.weight, (y.a, y.b)));
    Some(oriented)
}

/// Root of `node` in the union-find `parent` (`usize::MAX`: a root), compressing the path.
fn find(parent: &mut [usize], node: usize) -> usize {
    let mut root = node;
    while parent[root] != usize::MAX {
        root = parent[root];
    }
    let mut p = node;
    while parent[p] != usize::MAX && parent[p] != root {
        let up = parent[p];
        parent[p] = root;
        p = up;
    }
    root
}

/// The single-linkage tree of sorted, oriented edges (scipy's linkage layout): merge `m` joins
/// the current clusters of the edge's `a` (left) and `b` (right) into node `n + m`.
fn single_linkage(n: usize, edges: Vec<Edge>) -> Vec<Merge> {
    let mut parent = vec![usize::MAX; 2 * n - 1];
    let mut size = vec![1usize; 2 * n - 1];
    edges
        .into_iter()
        .enumerate()
        .map(|(m, edge)| {
            let left = find(&mut parent, edge.a);
            let right = find(&mut parent, edge.b);
            let node = n + m;
            parent[left] = node;
            parent[right] = node;
            size[node] = size[left] + size[right];
            Merge {
                left,
                right,
                distance: edge.weight,
                size: size[node],
            }
        })
        .collect()
}

/// The nodes below `start` (itself first), breadth first, left child before right.
fn breadth_first(n: usize, merges: &[Merge], start: usize) -> Vec<usize> {
    let mut order = vec![start];
    let mut i = 0;
    while i < order.len() {
        let node = order[i];
        if node >= n {
            let merge = merges[node - n];
            order.push(merge.left);
            order.push(merge.right);
        }
        i += 1;
    }
    order
}

/// The condensed tree (sklearn's rows, in its order) and the number of cluster ids used
/// (`n` is the root, clusters `n + 1 ..` in order of birth, breadth first).
fn condense(n: usize, merges: &[Merge], min_cluster_size: usize) -> (Vec<Row>, usize) {
    let root = 2 * n - 2;
    let mut relabel = vec![0usize; root + 1];
    relabel[root] = n;
    let mut next_label = n + 1;
    let mut ignore = vec![false; root + 1];
    let mut rows = Vec::with_capacity(2 * n);
    let count = |node: usize| {
        if node >= n { merges[node - n].size } else { 1 }
    };
    // The points below `node` leave cluster `parent` at `lambda`.
    let fall_out = |rows: &mut Vec<Row>, ignore: &mut [bool], parent, node, lambda| {
        for sub in breadth_first(n, merges, node) {
            if sub < n {
                rows.push(Row {
                    parent,
                    child: sub,
                    lambda,
                    size: 1,
                });
            }
            ignore[sub] = true;
        }
    };
    for node in breadth_first(n, merges, root) {
        if ignore[node] || node < n {
            continue;
        }
        let merge = merges[node - n];
        let lambda = if merge.distance > 0.0 {
            1.0 / merge.distance
        } else {
            f64::INFINITY
        };
        let parent = relabel[node];
        let (left, right) = (merge.left, merge.right);
        let big_left = count(left) >= min_cluster_size;
        let big_right = count(right) >= min_cluster_size;
        match (big_left, big_right) {
            (true, true) => {
                for child in [left, right] {
                    relabel[child] = next_label;
                    rows.push(Row {
                        parent,
                        child: next_label,
                        lambda,
                        size: count(child),
                    });
                    next_label += 1;
                }
            }
            (false, false) => {
                fall_out(&mut rows, &mut ignore, parent, left, lambda);
                fall_out(&mut rows, &mut ignore, parent, right, lambda);
            }
            (false, true) => {
                relabel[right] = parent;
                fall_out(&mut rows, &mut ignore, parent, left, lambda);
            }
            (true, false) => {
                relabel[left] = parent;
                fall_out(&mut rows, &mut ignore, parent, right, lambda);
            }
        }
    }
    (rows, next_label)
}

/// Excess-of-mass selection without the root: `selected[c]` for cluster ids `c < clusters`.
/// Stabilities are summed in row order and compared as sklearn compares them.
fn select_clusters(n: usize, rows: &[Row], clusters: usize) -> Vec<bool> {
    let mut birth = vec![f64::NAN; clusters];
    let mut children = vec![Vec::new(); clusters];
    for row in rows {
        if row.child >= n {
            birth[row.child] = row.lambda;
            children[row.parent].push(row.child);
        }
    }
    birth[n] = 0.0;
    let mut stability = vec![0.0f64; clusters];
    for row in rows {
        stability[row.parent] += (row.lambda - birth[row.parent]) * row.size as f64;
    }
    let mut selected = vec![false; clusters];
    selected[n + 1..].fill(true);
    for node in (n + 1..clusters).rev() {
        let subtree = children[node]
            .iter()
            .fold(0.0f64, |sum, &c| sum + stability[c]);
        if subtree > stability[node] {
            selected[node] = false;
            stability[node] = subtree;
        } else {
            let mut below = children[node].clone();
            while let Some(c) = below.pop() {
                selected[c] = false;
                below.extend_from_slice(&children[c]);
            }
        }
    }
    selected
}

/// Each point's label: the rank of its nearest selected ancestor among the selected clusters
/// (in id order), `-1` when it has none.
fn label_points(n: usize, rows: &[Row], selected: &[bool]) -> Vec<i32> {
    let clusters = selected.len();
    let mut parent = vec![n; clusters];
    let mut point_parent = vec![n; n];
    for row in rows {
        if row.child >= n {
            parent[row.child] = row.parent;
        } else {
            point_parent[row.child] = row.parent;
        }
    }
    let mut label = vec![-1i32; clusters];
    let mut next = 0i32;
    for c in n + 1..clusters {
        label[c] = if selected[c] {
            next += 1;
            next - 1
        } else {
            label[parent[c]]
        };
    }
    point_parent.iter().map(|&c| label[c]).collect()
}
