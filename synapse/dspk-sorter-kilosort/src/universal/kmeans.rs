//! k-means on the host in `f64`, seeded and in a fixed order: the deterministic counterpart of
//! the sklearn `KMeans` Kilosort4 learns its temporal templates with (§4).

use dspk_core::rng::SplitMix64;

/// Most Lloyd iterations per run (sklearn's `max_iter`).
const MAX_ITERATIONS: usize = 300;
/// Convergence tolerance on the squared centre shift, relative to the data's mean per-column
/// variance (sklearn's `tol`).
const TOLERANCE: f64 = 1e-4;
/// Fewest points per thread when assigning points to centres.
const MIN_POINTS_PER_THREAD: usize = 4096;

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
/// the one of least inertia (the first among equals; at least one run). All randomness comes from `rng`, in a
/// fixed order, and every sum is taken in point order, so the result depends only on the
/// points and the generator's state.
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
) -> KMeansFit {
    let tolerance = TOLERANCE * mean_variance(x, d);
    let mut best = lloyd(x, d, plus_plus(x, d, k, rng), tolerance);
    for _ in 1..runs {
        let fit = lloyd(x, d, plus_plus(x, d, k, rng), tolerance);
        if fit.inertia < best.inertia {
            best = fit;
        }
    }
    best
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

/// Squared Euclidean distance.
fn distance2(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(p, q)| (p - q) * (p - q)).sum()
}

/// Greedy k-means++ starting centres, `k x d`: the first centre is a point drawn uniformly;
/// each next one is the best of `2 + floor(ln k)` candidates, each drawn with probability
/// proportional to its squared distance to the nearest centre so far, "best" meaning the
/// smallest total of squared distances to the nearest centre once it is added (the first
/// candidate among equals).
fn plus_plus(x: &[f64], d: usize, k: usize, rng: &mut SplitMix64) -> Vec<f64> {
    let n = x.len() / d;
    let point = |i: usize| &x[i * d..(i + 1) * d];
    let trials = 2 + (k as f64).ln().floor() as usize;
    let first = rng.below(n as u64) as usize;
    let mut centres = point(first).to_vec();
    let mut closest: Vec<f64> = (0..n).map(|i| distance2(point(i), point(first))).collect();
    let mut potential: f64 = closest.iter().sum();
    let mut cumulative = vec![0.0; n];
    for _ in 1..k {
        let mut running = 0.0;
        for (c, v) in cumulative.iter_mut().zip(&closest) {
            running += v;
            *c = running;
        }
        let mut chosen: Option<(usize, f64, Vec<f64>)> = None;
        for _ in 0..trials {
            let target = rng.next_f64() * potential;
            let candidate = cumulative.partition_point(|&c| c < target).min(n - 1);
            let distances: Vec<f64> = closest
                .iter()
                .enumerate()
                .map(|(i, &c)| c.min(distance2(point(i), point(candidate))))
                .collect();
            let total: f64 = distances.iter().sum();
            if chosen.as_ref().is_none_or(|(_, best, _)| total < *best) {
                chosen = Some((candidate, total, distances));
            }
        }
        if let Some((candidate, total, distances)) = chosen {
            centres.extend_from_slice(point(candidate));
            closest = distances;
            potential = total;
        }
    }
    centres
}

/// The nearest centre of each point (the first among equals) and its squared distance.
///
/// Points are split over threads in contiguous blocks; each point's result is computed by one
/// thread in a fixed order, so it does not depend on the number of threads.
fn assign(x: &[f64], d: usize, centres: &[f64]) -> (Vec<usize>, Vec<f64>) {
    let n = x.len() / d;
    let mut labels = vec![0usize; n];
    let mut distances = vec![0.0f64; n];
    let threads = std::thread::available_parallelism()
        .map_or(1, |t| t.get())
        .min(n.div_ceil(MIN_POINTS_PER_THREAD))
        .max(1);
    let block = n.div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        for ((rows, labels), distances) in x
            .chunks(block * d)
            .zip(labels.chunks_mut(block))
            .zip(distances.chunks_mut(block))
        {
            scope.spawn(move || {
                for ((row, label), distance) in rows.chunks_exact(d).zip(labels).zip(distances) {
                    (*label, *distance) = centres
                        .chunks_exact(d)
                        .enumerate()
                        .map(|(j, centre)| (j, distance2(row, centre)))
                        .fold(
                            (0, f64::INFINITY),
                            |best, (j, e)| {
                                if e < best.1 { (j, e) } else { best }
                            },
                        );
                }
            });
        }
    });
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

/// Lloyd iterations from `centres` (see [`kmeans`] for when they stop).
fn lloyd(x: &[f64], d: usize, mut centres: Vec<f64>, tolerance: f64) -> KMeansFit {
    let k = centres.len() / d;
    let mut previous: Option<Vec<usize>> = None;
    for _ in 0..MAX_ITERATIONS {
        let (labels, distances) = assign(x, d, &centres);
        let next = update(x, d, k, &labels, &distances);
        if previous.as_ref() == Some(&labels) {
            centres = next;
            break;
        }
        let shift = distance2(&next, &centres);
        centres = next;
        previous = Some(labels);
        if shift <= tolerance {
            break;
        }
    }
    let (labels, distances) = assign(x, d, &centres);
    KMeansFit {
        centres,
        labels,
        inertia: distances.iter().sum(),
    }
}
