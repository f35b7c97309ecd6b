//! k-means on the host in `f64`, seeded and in a fixed order: the deterministic counterpart of
//! the sklearn `KMeans` Kilosort4 learns its temporal templates with (§4).

use dspk_core::rng::SplitMix64;

use crate::algorithms::rows::{LANES, RowBlocks, map_in_parallel, squared_distance};

/// Most Lloyd iterations per run (sklearn's `max_iter`).
const MAX_ITERATIONS: usize = 300;
/// Convergence tolerance on the squared centre shift, relative to the data's mean per-column
/// variance (sklearn's `tol`).
const TOLERANCE: f64 = 1e-4;
/// Points per chunk when assigning points to centres: a chunk's rows stay in cache while their
/// distances to every centre are computed (a multiple of [`LANES`]).
const ASSIGN_CHUNK: usize = 32 * LANES;

/// A k-means solution.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct KMeansFit {
    /// The `k x d` centres, row-major.
    pub(super) centres: Vec<f64>,
    /// The cluster of each point.
    pub(super) labels: Vec<usize>,
    /// Sum over points of the squared distance to their centre.
    pub(super) inertia: f64,
}

/// k-means of the `n x d` row-major points `x` (`n >= k >= 1`) into `k` clusters, as sklearn's
/// `KMeans(k, n_init=runs, init="k-means++", algorithm="lloyd", max_iter=300, tol=1e-4)`
/// describes it: `runs` runs, each from a greedy k-means++ start and Lloyd iterations, keep
/// the one of least inertia (the first among equals; at least one run). All randomness comes
/// from `rng`, in a fixed order (the starts are drawn one run after another), and every sum is
/// taken in point order, so the result depends only on the points and the generator's state.
/// The runs' Lloyd iterations run side by side on up to `threads` threads (each run alone on
/// one, so the result does not depend on the count).
///
/// Lloyd iterations stop when the assignment no longer changes, when the summed squared
/// shift of the centres is at most `1e-4` times the mean over columns of the points' variance,
/// or after 300 iterations; the points are then assigned once more to the final centres.
/// A cluster left empty takes the point farthest from its centre (the second empty cluster
/// the second farthest, ...), which leaves its old cluster.
pub(super) fn kmeans(
    x: &[f64],
    d: usize,
    k: usize,
    runs: usize,
    rng: &mut SplitMix64,
    threads: usize,
) -> KMeansFit {
    let tolerance = TOLERANCE * mean_variance(x, d);
    let blocks = RowBlocks::gather(x, d, 0..x.len() / d);
    let starts: Vec<Vec<f64>> = (0..runs.max(1))
        .map(|_| plus_plus(x, &blocks, d, k, rng))
        .collect();
    let mut fits = map_in_parallel(
        starts.len(),
        threads,
        1,
        || (),
        |(), r| lloyd(x, &blocks, d, starts[r].clone(), tolerance),
    );
    let mut best = 0;
    for (r, fit) in fits.iter().enumerate() {
        if fit.inertia < fits[best].inertia {
            best = r;
        }
    }
    fits.swap_remove(best)
}

/// The mean over the `d` columns of each column's variance (`numpy.var`, divided by `n`).
fn mean_variance(x: &[f64], d: usize) -> f64 {
    let n = (x.len() / d) as f64;
    let mut mean = vec![0.0; d];
    for row in x.chunks_exact(d) {
        mean.iter_mut().zip(row).for_each(|(m, v)| *m += v);
    }
    mean.iter_mut().for_each(|m| *m /= n);
    let mut variance = 0.0;
    for row in x.chunks_exact(d) {
        variance += row
            .iter()
            .zip(&mean)
            .map(|(v, m)| (v - m) * (v - m))
            .sum::<f64>();
    }
    variance / n / d as f64
}

/// Greedy k-means++ starting centres, `k x d`: the first centre is a point drawn uniformly;
/// each next one is the best of `2 + floor(ln k)` candidates, each drawn with probability
/// proportional to its squared distance to the nearest centre so far, "best" meaning the
/// smallest total of squared distances to the nearest centre once it is added (the first
/// candidate among equals). `blocks` holds the rows of `x`.
fn plus_plus(
    x: &[f64],
    blocks: &RowBlocks<f64>,
    d: usize,
    k: usize,
    rng: &mut SplitMix64,
) -> Vec<f64> {
    let n = x.len() / d;
    let point = |i: usize| &x[i * d..(i + 1) * d];
    let trials = 2 + (k as f64).ln().floor() as usize;
    let first = rng.below(n as u64) as usize;
    let mut centres = point(first).to_vec();
    let mut closest = vec![0.0; n];
    blocks.squared_distances(point(first), 0, &mut closest);
    let mut potential: f64 = closest.iter().sum();
    let mut cumulative = vec![0.0; n];
    let mut distances = vec![0.0; n];
    let mut chosen_distances = vec![0.0; n];
    for _ in 1..k {
        let mut running = 0.0;
        for (c, v) in cumulative.iter_mut().zip(&closest) {
            running += v;
            *c = running;
        }
        let mut chosen: Option<(usize, f64)> = None;
        for _ in 0..trials {
            let target = rng.next_f64() * potential;
            let candidate = cumulative.partition_point(|&c| c < target).min(n - 1);
            blocks.squared_distances(point(candidate), 0, &mut distances);
            for (e, &c) in distances.iter_mut().zip(&closest) {
                *e = c.min(*e);
            }
            let total: f64 = distances.iter().sum();
            if chosen.is_none_or(|(_, best)| total < best) {
                chosen = Some((candidate, total));
                std::mem::swap(&mut distances, &mut chosen_distances);
            }
        }
        if let Some((candidate, total)) = chosen {
            centres.extend_from_slice(point(candidate));
            std::mem::swap(&mut closest, &mut chosen_distances);
            potential = total;
        }
    }
    centres
}

/// The nearest centre of each point of `blocks` (the first among equals) and its squared
/// distance.
fn assign(blocks: &RowBlocks<f64>, d: usize, centres: &[f64]) -> (Vec<usize>, Vec<f64>) {
    let n = blocks.rows();
    let mut labels = vec![0usize; n];
    let mut distances = vec![f64::INFINITY; n];
    let mut squared = vec![0.0f64; ASSIGN_CHUNK];
    for ((labels, distances), first) in labels
        .chunks_mut(ASSIGN_CHUNK)
        .zip(distances.chunks_mut(ASSIGN_CHUNK))
        .zip((0..n).step_by(ASSIGN_CHUNK))
    {
        let squared = &mut squared[..labels.len()];
        for (j, centre) in centres.chunks_exact(d).enumerate() {
            blocks.squared_distances(centre, first, squared);
            for ((label, best), &e) in labels.iter_mut().zip(distances.iter_mut()).zip(&*squared) {
                if e < *best {
                    (*label, *best) = (j, e);
                }
            }
        }
    }
    (labels, distances)
}

/// The means of the clusters `labels` gives, `k x d`; an empty cluster takes a far point (see
/// [`kmeans`]), `distances` being each point's squared distance to its centre.
fn update(x: &[f64], d: usize, k: usize, labels: &[usize], distances: &[f64]) -> Vec<f64> {
    let mut sums = vec![0.0; k * d];
    let mut counts = vec![0usize; k];
    for (row, &label) in x.chunks_exact(d).zip(labels) {
        counts[label] += 1;
        sums[label * d..(label + 1) * d]
            .iter_mut()
            .zip(row)
            .for_each(|(s, v)| *s += v);
    }
    let empty: Vec<usize> = (0..k).filter(|&j| counts[j] == 0).collect();
    let mut far: Vec<usize> = Vec::new();
    if !empty.is_empty() {
        far = (0..labels.len()).collect();
        far.sort_by(|&a, &b| distances[b].total_cmp(&distances[a]).then(a.cmp(&b)));
    }
    let mut far = far.into_iter();
    for &cluster in &empty {
        // n >= k, so while a cluster is empty another holds two points or more.
        for i in far.by_ref() {
            let old = labels[i];
            if counts[old] > 1 {
                counts[old] -= 1;
                let row = &x[i * d..(i + 1) * d];
                sums[old * d..(old + 1) * d]
                    .iter_mut()
                    .zip(row)
                    .for_each(|(s, v)| *s -= v);
                sums[cluster * d..(cluster + 1) * d].copy_from_slice(row);
                counts[cluster] = 1;
                break;
            }
        }
    }
    for (j, centre) in sums.chunks_exact_mut(d).enumerate() {
        let count = counts[j].max(1) as f64;
        centre.iter_mut().for_each(|v| *v /= count);
    }
    sums
}

/// Lloyd iterations from `centres` (see [`kmeans`] for when they stop); `blocks` holds the
/// rows of `x`.
fn lloyd(
    x: &[f64],
    blocks: &RowBlocks<f64>,
    d: usize,
    mut centres: Vec<f64>,
    tolerance: f64,
) -> KMeansFit {
    let k = centres.len() / d;
    let mut previous: Option<Vec<usize>> = None;
    for _ in 0..MAX_ITERATIONS {
        let (labels, distances) = assign(blocks, d, &centres);
        let next = update(x, d, k, &labels, &distances);
        if previous.as_ref() == Some(&labels) {
            centres = next;
            break;
        }
        let shift = squared_distance(&next, &centres);
        centres = next;
        previous = Some(labels);
        if shift <= tolerance {
            break;
        }
    }
    let (labels, distances) = assign(blocks, d, &centres);
    KMeansFit {
        centres,
        labels,
        inertia: distances.iter().sum(),
    }
}
