//! The merge tree (`docs/KILOSORT4.md` §6.6) and its cut (§6.7, Kilosort's "swarmsplitter").

use super::GraphSettings;
use super::graph::Graph;
use super::iterate::Iterated;
use super::linalg::solve_spd;
use crate::{Error, Result};

/// Bins of the bimodality histogram over [-2, 2].
pub(super) const BINS: usize = 399;
/// Ridge added to the diagonal of the bimodality regression.
const RIDGE: f64 = 0.01;
/// Bins searched for the valley (inclusive).
const VALLEY: (usize, usize) = (175, 224);

/// One merge of the tree: node `clusters + index` joins `child0` (the side folded away, Kilosort's
/// "x") and `child1` (the side kept, "y"); node ids below `clusters` are the base clusters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Merge {
    pub(super) child0: usize,
    pub(super) child1: usize,
    /// `r = cc / ex` of the pair when it merged.
    pub(super) ratio: f64,
}

/// Builds the merge tree of the iterated labels: `cc[a, b]` counts the edges of `M` from points
/// labelled `a` to landmarks labelled `b`, `ex[a, b] = 0.001 + (sum of k_i over a)(sum of k_j
/// over b) / m`, both symmetrised; then `clusters - 1` times the pair of largest `r = cc / ex`
/// (first in row-major order, so `y < x`) merges, `x` folded into `y`.
pub(super) fn merge_tree(graph: &Graph, it: &Iterated) -> Vec<Merge> {
    let nc = it.clusters;
    let m = graph.edges as f64;
    let mut cc = vec![0.0f64; nc * nc];
    let mut point_degree = vec![0.0f64; nc];
    let mut land_degree = vec![0.0f64; nc];
    for (i, links) in graph.nbr.chunks_exact(graph.k).enumerate() {
        let a = it.labels[i] as usize;
        point_degree[a] += f64::from(graph.row_degree[i]);
        for (s, &l) in links.iter().enumerate() {
            if graph.in_m[i * graph.k + s] {
                cc[a * nc + it.landmarks[l as usize] as usize] += 1.0;
            }
        }
    }
    for (j, &b) in it.landmarks.iter().enumerate() {
        land_degree[b as usize] += f64::from(graph.col_degree[j]);
    }
    let mut ex = vec![0.0f64; nc * nc];
    for a in 0..nc {
        for b in 0..nc {
            ex[a * nc + b] = 0.001 + point_degree[a] * land_degree[b] / m;
        }
    }
    for a in 0..nc {
        for b in a + 1..nc {
            let c = cc[a * nc + b] + cc[b * nc + a];
            cc[a * nc + b] = c;
            cc[b * nc + a] = c;
            let e = ex[a * nc + b] + ex[b * nc + a];
            ex[a * nc + b] = e;
            ex[b * nc + a] = e;
        }
        cc[a * nc + a] *= 2.0;
        ex[a * nc + a] *= 2.0;
    }
    let mut alive = vec![true; nc];
    let mut node: Vec<usize> = (0..nc).collect();
    let mut merges = Vec::with_capacity(nc.saturating_sub(1));
    for step in 0..nc.saturating_sub(1) {
        // First maximum of r over live pairs y < x, row-major (dead rows and columns hold
        // negative values in Kilosort's matrix, below every live ratio, which is >= 0).
        let mut best: Option<(f64, usize, usize)> = None;
        for y in (0..nc).filter(|&y| alive[y]) {
            for x in (y + 1..nc).filter(|&x| alive[x]) {
                let r = cc[y * nc + x] / ex[y * nc + x];
                if best.is_none_or(|(b, _, _)| r > b) {
                    best = Some((r, y, x));
                }
            }
        }
        let Some((ratio, y, x)) = best else { break };
        merges.push(Merge {
            child0: node[x],
            child1: node[y],
            ratio,
        });
        node[y] = nc + step;
        alive[x] = false;
        for t in 0..nc {
            cc[y * nc + t] += cc[x * nc + t];
            ex[y * nc + t] += ex[x * nc + t];
        }
        for t in 0..nc {
            cc[t * nc + y] += cc[t * nc + x];
            ex[t * nc + y] += ex[t * nc + x];
        }
    }
    merges
}

/// The histogram of `z` in [`BINS`] equal bins over [-2, 2] as `numpy.histogram(z, 399,
/// range=(-2, 2))` counts it (edges `linspace(-2, 2, 400)`, the last bin closed, values outside
/// or not finite ignored).
pub(super) fn histogram(z: &[f64]) -> Vec<f64> {
    let edges: Vec<f64> = (0..=BINS)
        .map(|i| {
            if i == BINS {
                2.0
            } else {
                i as f64 * (4.0 / BINS as f64) - 2.0
            }
        })
        .collect();
    let mut h = vec![0.0f64; BINS];
    for &v in z {
        if !(-2.0..=2.0).contains(&v) {
            continue;
        }
        let mut b = (((v + 2.0) / 4.0 * BINS as f64) as usize).min(BINS - 1);
        if v < edges[b] {
            b -= 1;
        } else if b + 1 < BINS && v >= edges[b + 1] {
            b += 1;
        }
        h[b] += 1.0;
    }
    h
}

/// `scipy.ndimage.gaussian_filter1d(h.astype(float32), 4)`: a Gaussian of sigma 4 bins truncated
/// at radius 16, mode "reflect" (`d c b a | a b c d | d c b a`), summed in f64, stored as f32.
pub(super) fn smooth(h: &[f64]) -> Vec<f32> {
    const SIGMA: f64 = 4.0;
    const RADIUS: isize = 16;
    let w: Vec<f64> = (-RADIUS..=RADIUS)
        .map(|t| (-0.5 * (t * t) as f64 / (SIGMA * SIGMA)).exp())
        .collect();
    let total: f64 = w.iter().sum();
    let w: Vec<f64> = w.iter().map(|v| v / total).collect();
    let len = h.len() as isize;
    let at = |mut i: isize| {
        // One reflection suffices while the radius is below the length; fold further otherwise.
        loop {
            if i < 0 {
                i = -i - 1;
            } else if i >= len {
                i = 2 * len - i - 1;
            } else {
                return f64::from(h[i as usize] as f32);
            }
        }
    };
    (0..len)
        .map(|i| {
            let s: f64 = (-RADIUS..=RADIUS)
                .zip(&w)
                .map(|(t, &wt)| wt * at(i + t))
                .sum();
            s as f32
        })
        .collect()
}

/// The bimodality score of a smoothed histogram ([`BINS`] bins): `v` = first minimum over bins
/// 175..=224, `p1` = largest value before `v`, `p2` = largest from `v` on,
/// `1 - max(h_v / p1, h_v / p2)`. Departure: when a side has no mass (`p1` or `p2` is 0, where
/// Kilosort divides by zero) the histogram is one-sided and the score is 0 (unimodal).
pub(super) fn bimodality_score(h: &[f32]) -> f64 {
    let mut v = VALLEY.0;
    for b in VALLEY.0..=VALLEY.1 {
        if h[b] < h[v] {
            v = b;
        }
    }
    let peak = |s: &[f32]| s.iter().fold(0.0f64, |m, &x| m.max(f64::from(x)));
    let (p1, p2) = (peak(&h[..v]), peak(&h[v..]));
    if p1 <= 0.0 || p2 <= 0.0 {
        return 0.0;
    }
    let hv = f64::from(h[v]);
    1.0 - (hv / p1).max(hv / p2)
}

/// Sums of one base cluster for the bimodality regression: `G = sum x~ x~^T` (upper triangle)
/// and `s = sum x~`, with `x~` the point's features with the last one replaced by 1.
struct Moments {
    gram: Vec<f64>,
    sum: Vec<f64>,
}

impl Moments {
    /// The moments of the points `members` of `x` ([n, d] row-major).
    fn of(x: &[f32], d: usize, members: &[usize]) -> Self {
        let mut gram = vec![0.0f64; d * d];
        let mut sum = vec![0.0f64; d];
        let mut t = vec![0.0f64; d];
        for &i in members {
            tilde(&x[i * d..(i + 1) * d], &mut t);
            for a in 0..d {
                let ta = t[a];
                sum[a] += ta;
                for (g, &tb) in gram[a * d + a..(a + 1) * d].iter_mut().zip(&t[a..]) {
                    *g += ta * tb;
                }
            }
        }
        Self { gram, sum }
    }
}

/// A point's features (`row`) widened to f64 with the last one replaced by 1 (Kilosort's
/// intercept column).
fn tilde(row: &[f32], out: &mut [f64]) {
    for (o, &v) in out.iter_mut().zip(row) {
        *o = f64::from(v);
    }
    if let Some(last) = out.last_mut() {
        *last = 1.0;
    }
}

/// The cut of the tree and what it needs.
pub(super) struct Cut<'a> {
    x: &'a [f32],
    d: usize,
    /// Points of each base cluster, increasing.
    members: Vec<Vec<usize>>,
    moments: Vec<Option<Moments>>,
}

impl<'a> Cut<'a> {
    /// The cut over the iterated point labels.
    pub(super) fn new(x: &'a [f32], d: usize, it: &Iterated) -> Self {
        let mut members = vec![Vec::new(); it.clusters];
        for (i, &c) in it.labels.iter().enumerate() {
            members[c as usize].push(i);
        }
        Self {
            x,
            d,
            moments: (0..it.clusters).map(|_| None).collect(),
            members,
        }
    }

    /// The moments of base cluster `c`, computed on first use.
    fn moments(&mut self, c: usize) -> &Moments {
        let (x, d, members) = (self.x, self.d, &self.members);
        self.moments[c].get_or_insert_with(|| Moments::of(x, d, &members[c]))
    }

    /// The bimodality score of splitting the base clusters `a` from `b` (§6.7 step 3): the ridge
    /// regression of +1 (points of `a`) / -1 (points of `b`) on the features with the last one
    /// replaced by 1, weights `|B| / (|A| + |B|)` on `a`'s points and `|A| / (|A| + |B|)` on `b`'s,
    /// `(X^T W X + 0.01 I) beta = X^T W y` in f64; the score of the smoothed histogram of
    /// `z = X beta` ([`histogram`], [`smooth`], [`bimodality_score`]).
    fn score(&mut self, a: &[usize], b: &[usize]) -> Result<f64> {
        let d = self.d;
        let size =
            |s: &[usize], me: &Self| s.iter().map(|&c| me.members[c].len()).sum::<usize>() as f64;
        let (na, nb) = (size(a, self), size(b, self));
        let (wa, wb) = (nb / (na + nb), na / (na + nb));
        let mut h = vec![0.0f64; d * d];
        let mut rhs = vec![0.0f64; d];
        for (side, w, y) in [(a, wa, 1.0), (b, wb, -1.0)] {
            for &c in side {
                let mo = self.moments(c);
                for (hv, &g) in h.iter_mut().zip(&mo.gram) {
                    *hv += w * g;
                }
                for (r, &s) in rhs.iter_mut().zip(&mo.sum) {
                    *r += w * y * s;
                }
            }
        }
        for t in 0..d {
            h[t * d + t] += RIDGE;
        }
        let beta = solve_spd(&h, &rhs, d).ok_or_else(|| Error::Input {
            what: "clustering features",
            reason: "the bimodality regression is singular (features too large)".into(),
        })?;
        let mut z = Vec::new();
        let mut t = vec![0.0f64; d];
        for &c in a.iter().chain(b) {
            for &i in &self.members[c] {
                tilde(&self.x[i * d..(i + 1) * d], &mut t);
                z.push(t.iter().zip(&beta).map(|(u, v)| u * v).sum());
            }
        }
        Ok(bimodality_score(&smooth(&histogram(&z))))
    }

    /// Cuts the tree `merges` (§6.7) and returns the final label of every base cluster.
    ///
    /// Nodes are visited from the root down, skipping those inside a merged subtree. A node of
    /// ratio below `split_ratio` splits; otherwise it merges when `refractory(points of child0,
    /// points of child1)` says so (Kilosort 4.1.7's test is dead code; this is the intended
    /// rule, as in 4.0.18 and upstream commit 0e07514), else when the bimodality score is below
    /// `bimodality`; else it splits. Final clusters are the children of split nodes that are not
    /// split nodes themselves, numbered by increasing node id; no split node: one cluster.
    pub(super) fn cut(
        &mut self,
        merges: &[Merge],
        settings: &GraphSettings,
        refractory: &mut dyn FnMut(&[usize], &[usize]) -> bool,
    ) -> Result<Vec<u32>> {
        let nc = self.members.len();
        let total = nc + merges.len();
        let children = |id: usize| merges[id - nc];
        // Base clusters under every node, increasing.
        let mut under: Vec<Vec<usize>> = (0..nc).map(|c| vec![c]).collect();
        for mg in merges {
            let mut u = [under[mg.child0].as_slice(), under[mg.child1].as_slice()].concat();
            u.sort_unstable();
            under.push(u);
        }
        let mut visit = vec![true; total];
        let mut split = vec![false; total];
        for id in (nc..total).rev() {
            if !visit[id] {
                continue;
            }
            let mg = children(id);
            let keep_apart = if mg.ratio < settings.split_ratio {
                true
            } else {
                let points = |s: &[usize]| {
                    let mut p: Vec<usize> = s
                        .iter()
                        .flat_map(|&c| self.members[c].iter().copied())
                        .collect();
                    p.sort_unstable();
                    p
                };
                let (pa, pb) = (points(&under[mg.child0]), points(&under[mg.child1]));
                if refractory(&pa, &pb) {
                    false
                } else if ((pa.len() + pb.len()) as f64)
                    < settings.split_points_per_feature * self.d as f64
                {
                    // Too few points for the regression to say anything: a least-squares
                    // discriminant separates almost any labelling of fewer than about 2 d
                    // points in d dimensions (Cover), so its histogram looks bimodal.
                    false
                } else {
                    let (a, b) = (under[mg.child0].clone(), under[mg.child1].clone());
                    self.score(&a, &b)? >= settings.bimodality
                }
            };
            if keep_apart {
                split[id] = true;
            } else {
                // The whole subtree becomes one cluster: none of its nodes is visited.
                let mut stack = vec![id];
                while let Some(t) = stack.pop() {
                    if t >= nc {
                        visit[t] = false;
                        let c = children(t);
                        stack.extend([c.child0, c.child1]);
                    }
                }
            }
        }
        let mut leaves: Vec<usize> = (nc..total)
            .filter(|&id| split[id])
            .flat_map(|id| {
                let c = children(id);
                [c.child0, c.child1]
            })
            .filter(|&c| !split[c])
            .collect();
        leaves.sort_unstable();
        let mut label = vec![0u32; nc];
        for (k, &leaf) in leaves.iter().enumerate() {
            for &c in &under[leaf] {
                label[c] = k as u32;
            }
        }
        Ok(label)
    }
}
