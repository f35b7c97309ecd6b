//! The graph iterations of `docs/KILOSORT4.md` §6.5 (λ = 1, a fixed number of rounds, no
//! convergence test).
//!
//! Each round relabels the landmarks, then the points, each to the first label `c` maximising
//! `S[c] = count(c) - k * size(c) / m`: `count(c)` the links to items labelled `c` (self-links
//! included), `k` the item's degree in `M`, `size(c)` the number of items of the other kind
//! labelled `c`, `m` the number of edges of `M`. The scores are compared exactly, as the
//! integers `count(c) m - k size(c)` (Kilosort compares them in f32, where near-ties can round
//! either way). Labels absent from an item's links all score `-k size(c)`, so the best of them
//! is the smallest cluster (first index on ties; any label when `k = 0`), found by walking the
//! clusters in that order past the ones the item links to: a round costs `O(n k)`, not
//! `O(n columns)`. Rounds stop early, with the same result, once a round leaves every point
//! label as it was (a round depends on nothing else, so all later rounds would too).

use super::graph::Graph;

/// Scratch of one relabelling pass: per-label link counts and the labels touched.
struct Tally {
    count: Vec<u32>,
    touched: Vec<u32>,
}

impl Tally {
    fn new(columns: usize) -> Self {
        Self {
            count: vec![0; columns],
            touched: Vec::new(),
        }
    }

    /// The first label maximising `count(c) m - k size(c)` over `0..columns`, for the links
    /// `labels` of one item; `walk` lists every label in the order in which absent labels are
    /// preferred. Leaves the counts at zero.
    fn best(
        &mut self,
        labels: impl Iterator<Item = u32>,
        k: i64,
        m: i64,
        size: &[u32],
        walk: &[u32],
    ) -> u32 {
        for c in labels {
            if self.count[c as usize] == 0 {
                self.touched.push(c);
            }
            self.count[c as usize] += 1;
        }
        let mut best: Option<(i64, u32)> = walk
            .iter()
            .find(|&&c| self.count[c as usize] == 0)
            .map(|&c| (-k * i64::from(size[c as usize]), c));
        for &c in &self.touched {
            let score = i64::from(self.count[c as usize]) * m - k * i64::from(size[c as usize]);
            if best.is_none_or(|(s, b)| score > s || (score == s && c < b)) {
                best = Some((score, c));
            }
            self.count[c as usize] = 0;
        }
        self.touched.clear();
        best.map_or(0, |(_, c)| c)
    }
}

/// Cluster sizes (`size[c]` = number of `labels` equal to `c`) and the order in which absent
/// labels are preferred: by increasing size, then index.
fn sizes(labels: &[u32], columns: usize) -> (Vec<u32>, Vec<u32>) {
    let mut size = vec![0u32; columns];
    for &c in labels {
        size[c as usize] += 1;
    }
    let mut walk: Vec<u32> = (0..columns as u32).collect();
    walk.sort_by_key(|&c| (size[c as usize], c));
    (size, walk)
}

/// Landmark step: every landmark's label from the points linking to it.
fn landmark_step(graph: &Graph, labels: &[u32], columns: usize, tally: &mut Tally) -> Vec<u32> {
    let (size, by_size) = sizes(labels, columns);
    let by_index: Vec<u32> = (0..columns as u32).collect();
    let m = graph.edges as i64;
    (0..graph.landmarks)
        .map(|j| {
            let links = &graph.linked[graph.linked_start[j]..graph.linked_start[j + 1]];
            let k = i64::from(graph.col_degree[j]);
            let walk = if k == 0 { &by_index } else { &by_size };
            tally.best(links.iter().map(|&i| labels[i as usize]), k, m, &size, walk)
        })
        .collect()
}

/// Point step: every point's label from its landmarks' labels.
fn point_step(graph: &Graph, land: &[u32], columns: usize, tally: &mut Tally, labels: &mut [u32]) {
    let (size, by_size) = sizes(land, columns);
    let by_index: Vec<u32> = (0..columns as u32).collect();
    let m = graph.edges as i64;
    for (i, (label, links)) in labels
        .iter_mut()
        .zip(graph.nbr.chunks_exact(graph.k))
        .enumerate()
    {
        let k = i64::from(graph.row_degree[i]);
        let walk = if k == 0 { &by_index } else { &by_size };
        *label = tally.best(links.iter().map(|&l| land[l as usize]), k, m, &size, walk);
    }
}

/// The labels after the iterations.
#[derive(Debug, Clone)]
pub(super) struct Iterated {
    /// Label of each point, consecutive from 0 (the sorted distinct labels renumbered).
    pub(super) labels: Vec<u32>,
    /// Label of each landmark, recomputed once from the renumbered point labels.
    pub(super) landmarks: Vec<u32>,
    /// Number of labels.
    pub(super) clusters: usize,
}

/// Runs `rounds` rounds (landmark step, then point step) from the point labels `labels`
/// (in `0..columns`), then renumbers the point labels and recomputes the landmark labels once.
/// The graph must have at least one edge.
pub(super) fn iterate(
    graph: &Graph,
    mut labels: Vec<u32>,
    columns: usize,
    rounds: usize,
) -> Iterated {
    let mut tally = Tally::new(columns);
    let mut before = labels.clone();
    for _ in 0..rounds {
        let land = landmark_step(graph, &labels, columns, &mut tally);
        point_step(graph, &land, columns, &mut tally, &mut labels);
        if labels == before {
            // A round is a function of the point labels alone: a fixed point stays one, and
            // the remaining rounds would change nothing.
            break;
        }
        before.copy_from_slice(&labels);
    }
    let mut present = vec![false; columns];
    for &c in &labels {
        present[c as usize] = true;
    }
    let mut renumber = vec![0u32; columns];
    let mut clusters = 0usize;
    for (c, &p) in present.iter().enumerate() {
        if p {
            renumber[c] = clusters as u32;
            clusters += 1;
        }
    }
    for c in &mut labels {
        *c = renumber[*c as usize];
    }
    let mut tally = Tally::new(clusters);
    let landmarks = landmark_step(graph, &labels, clusters, &mut tally);
    Iterated {
        labels,
        landmarks,
        clusters,
    }
}
