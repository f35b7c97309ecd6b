//! HDBSCAN labels as sklearn computes them (`sklearn.cluster.HDBSCAN`, sklearn 1.9): EMUsort's
//! outlier removal before k-means (KILOSORT4.md §10.1.6) drops the clips HDBSCAN labels `-1`.
//!
//! The settings are EMUsort's: euclidean distances, `min_samples` = `min_cluster_size` unless
//! given, `alpha` 1, excess-of-mass selection, no single cluster, `cluster_selection_epsilon`
//! 0. The steps:
//! 1. core distance of each point: the distance to its `min_samples`-th nearest point, the point
//!    itself counted first (sklearn's `kneighbors` on the fitted points);
//! 2. the minimum spanning tree of the mutual-reachability graph, `max(core_a, core_b, d(a, b))`;
//! 3. on the host, the single-linkage tree, the condensed tree with `min_cluster_size`,
//!    stabilities, excess-of-mass selection without the root, and labels (`-1` noise), clusters
//!    numbered as sklearn numbers them (module `tree`).
//!
//! [`hdbscan_labels`] runs steps 1 and 2 on the host for at most [`HOST_MAX_POINTS`] points and
//! on the device above. [`hdbscan_labels_host`] runs them in `f64` as sklearn does
//! (`O(n^2)`): the distances (kept as a matrix up to 4096 points, its rows spread over
//! threads; above, each row computed when needed), the core distances from them (spread over
//! threads), and the tree by Prim's algorithm. Below [`HOST_MAX_POINTS`] the host takes less
//! time than the device path's first call, which compiles its kernels (seconds), and it is
//! exact: EMUsort's clip counts (hundreds to a few thousand clips of 61 values) take
//! milliseconds.
//!
//! [`hdbscan_labels_device`] runs steps 1 and 2 on the device: one kernel finds each point's
//! `min_samples + 8` nearest points (tiled brute force, squared distances in `f32`), then
//! Borůvka rounds, each one kernel giving every point its cheapest edge to another component
//! (only the other end and the weight come back; the search starts from the point's nearest
//! points and skips pairs that cannot beat the best so far), the host joining components; the
//! number of components at least halves per round. Every round still visits all `n^2` pairs,
//! so the time grows with `n^2 log n`.
//!
//! # Equality with sklearn
//!
//! sklearn computes in `f64`: squared distances summed coordinate by coordinate, square roots,
//! maxima. The host path does exactly that. The device path computes the values the tree is
//! built from in the same `f64` arithmetic on the host: each core distance is the exact
//! `min_samples`-th smallest among the device's candidates (8 more than needed, so `f32`
//! rounding at the boundary does not change it unless 9 points lie within a few parts in 10^6
//! of it), and each tree edge's weight is recomputed exactly. Only the choice of edges is made
//! in `f32`, with the exact core distances rounded to `f32` (order-preserving) and squared
//! distances compared as squares, all edges totally ordered by (weight, smaller end, larger
//! end), which makes the tree unique and the result deterministic. The device's tree can
//! differ from the exact one only where two candidate edges' weights differ by less than the
//! `f32` rounding of a squared distance (a few parts in 10^6): a weight nearly equal to
//! another then merges a hair later, which changes labels only if it reorders merges.
//!
//! Exact ties are the other limit, for both paths: sklearn's tree depends on the order in
//! which it merges edges of equal weight (numpy's unstable `argsort`), and so do its labels
//! when one point joins two clusters of at least `min_cluster_size` points at one distance
//! (that point's cluster), or when duplicates make core distances 0. Here equal weights merge
//! in order of their ends.

mod exact;
mod kernel;
mod launch;
#[cfg(test)]
mod tests;
mod tree;

use cubecl::client::Client;

use crate::{Error, Result};

/// Most points [`hdbscan_labels`] labels on the host ([`hdbscan_labels_host`]); above, on the
/// device ([`hdbscan_labels_device`]). At this count the host path computes `n^2 / 2` distances
/// in Prim's steps on one thread (about 2 * 10^9 coordinate differences, a second or less).
pub const HOST_MAX_POINTS: usize = 8192;

/// Most values per point the device path takes (its kernels keep one point in registers or
/// local memory).
pub const MAX_DEVICE_DIM: usize = 1024;

/// Largest `min_samples` of the device path (its kernel keeps `min_samples + 8` neighbours per
/// point in local memory).
pub const MAX_DEVICE_MIN_SAMPLES: usize = 128;

/// HDBSCAN's settings (the others are sklearn's defaults; see the [module doc](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HdbscanSettings {
    /// Fewest points of a cluster (sklearn `min_cluster_size`, EMUsort's
    /// `hdbscan_min_cluster_size`, 20; at least 2).
    pub min_cluster_size: usize,
    /// Points within a core distance, the point itself counted (sklearn `min_samples`, at least
    /// 1); `None`: `min_cluster_size`, as EMUsort.
    pub min_samples: Option<usize>,
}

impl Default for HdbscanSettings {
    /// EMUsort's: `min_cluster_size` 20, `min_samples` the same.
    fn default() -> Self {
        Self {
            min_cluster_size: 20,
            min_samples: None,
        }
    }
}

/// The HDBSCAN label of each of the points (`-1`: noise; clusters `0, 1, ...` numbered as
/// sklearn numbers them) of `points`, `dim` values per point (row-major), as
/// `sklearn.cluster.HDBSCAN(min_cluster_size, min_samples).fit(points).labels_`: by
/// [`hdbscan_labels_host`] for at most [`HOST_MAX_POINTS`] points, by
/// [`hdbscan_labels_device`] above (see the [module doc](self), also for where they can differ
/// from sklearn); the host path on up to `threads` threads (its labels do not depend on the
/// count).
///
/// # Errors
///
/// As the function it calls.
pub fn hdbscan_labels(
    client: &Client,
    points: &[f32],
    dim: usize,
    settings: &HdbscanSettings,
    threads: usize,
) -> Result<Vec<i32>> {
    labels_on_host_up_to(client, points, dim, settings, threads, HOST_MAX_POINTS)
}

/// [`hdbscan_labels`] with `host_max_points` in place of [`HOST_MAX_POINTS`].
fn labels_on_host_up_to(
    client: &Client,
    points: &[f32],
    dim: usize,
    settings: &HdbscanSettings,
    threads: usize,
    host_max_points: usize,
) -> Result<Vec<i32>> {
    if points.len() <= host_max_points.saturating_mul(dim) {
        hdbscan_labels_host(points, dim, settings, threads)
    } else {
        hdbscan_labels_device(client, points, dim, settings)
    }
}

/// [`hdbscan_labels`] with core distances and the minimum spanning tree on the device, the rest
/// on the host (see the [module doc](self)). Waits for the device.
///
/// # Errors
///
/// As [`hdbscan_labels_host`], and [`Error::Input`] when `dim` exceeds [`MAX_DEVICE_DIM`] or a
/// value is so large that squared distances overflow `f32`; [`Error::Setting`] when
/// `min_samples` exceeds [`MAX_DEVICE_MIN_SAMPLES`]; [`Error::Ops`] when the points exceed
/// the device's buffer limits; [`Error::Device`] when the device fails.
pub fn hdbscan_labels_device(
    client: &Client,
    points: &[f32],
    dim: usize,
    settings: &HdbscanSettings,
) -> Result<Vec<i32>> {
    let (n, k) = validate(points, dim, settings)?;
    if dim > MAX_DEVICE_DIM {
        return Err(Error::Input {
            what: "hdbscan points",
            reason: format!(
                "{dim} values per point, the device path takes at most {MAX_DEVICE_DIM}"
            ),
        });
    }
    if k > MAX_DEVICE_MIN_SAMPLES {
        return Err(Error::Setting {
            name: "min_samples",
            reason: format!("{k}, the device path takes at most {MAX_DEVICE_MIN_SAMPLES}"),
        });
    }
    // Squared distances stay below f32::MAX when every |value| is below this.
    let limit = (f64::from(f32::MAX) / (8.0 * dim as f64)).sqrt();
    if let Some(e) = points.iter().position(|v| f64::from(v.abs()) >= limit) {
        return Err(Error::Input {
            what: "hdbscan points",
            reason: format!(
                "value {} of point {} is {}: squared distances would overflow f32 (limit {limit:e})",
                e % dim,
                e / dim,
                points[e]
            ),
        });
    }
    if n * dim >= u32::MAX as usize || n * (k + launch::MARGIN) >= u32::MAX as usize {
        return Err(Error::Input {
            what: "hdbscan points",
            reason: format!("{n} points x {dim} values do not fit 32-bit indices"),
        });
    }
    let edges = launch::device_tree(client, points, dim, k)?;
    labels(n, &edges, settings.min_cluster_size)
}

/// [`hdbscan_labels`] computed on the host in `f64`, the way sklearn computes it: core
/// distances by brute force, the minimum spanning tree by Prim's algorithm from point 0, in
/// `O(n^2)` distance evaluations, spread over up to `threads` threads where they are kept as a
/// matrix (up to 4096 points; milliseconds for 10^3 points of 61 values, seconds for 10^4) and
/// for the core distances; every value is computed by one thread alone, so the labels do not
/// depend on `threads`.
///
/// # Errors
///
/// [`Error::Input`] when `dim` is 0, `points` is not a whole number of points, a value is NaN
/// or infinite, or there are fewer points than `min_cluster_size` or `min_samples` (sklearn
/// fails or labels everything noise then; EMUsort skips its outlier removal below
/// `max(20, hdbscan_min_cluster_size)` clips, which is the caller's test to make);
/// [`Error::Setting`] when `min_cluster_size` is below 2 or `min_samples` is 0.
pub fn hdbscan_labels_host(
    points: &[f32],
    dim: usize,
    settings: &HdbscanSettings,
    threads: usize,
) -> Result<Vec<i32>> {
    let (n, k) = validate(points, dim, settings)?;
    let distances = exact::Distances::new(points, dim, threads);
    let core = exact::core_distances(&distances, k, threads);
    let edges = exact::prim_tree(&distances, &core);
    labels(n, &edges, settings.min_cluster_size)
}

/// Labels from the tree's edges.
fn labels(n: usize, edges: &[exact::Edge], min_cluster_size: usize) -> Result<Vec<i32>> {
    tree::labels_from_tree(n, edges, min_cluster_size).ok_or_else(|| Error::Input {
        what: "hdbscan points",
        reason: format!("{} tree edges do not span the {n} points", edges.len()),
    })
}

/// The number of points and `min_samples`, after checking the input and settings.
fn validate(points: &[f32], dim: usize, settings: &HdbscanSettings) -> Result<(usize, usize)> {
    let input = |reason: String| Error::Input {
        what: "hdbscan points",
        reason,
    };
    if dim == 0 {
        return Err(input("0 values per point".into()));
    }
    if !points.len().is_multiple_of(dim) {
        return Err(input(format!(
            "{} values are not a whole number of points of {dim} values",
            points.len()
        )));
    }
    if settings.min_cluster_size < 2 {
        return Err(Error::Setting {
            name: "hdbscan_min_cluster_size",
            reason: format!("must be at least 2, got {}", settings.min_cluster_size),
        });
    }
    if settings.min_samples == Some(0) {
        return Err(Error::Setting {
            name: "min_samples",
            reason: "must be at least 1, got 0".into(),
        });
    }
    let n = points.len() / dim;
    let k = settings.min_samples.unwrap_or(settings.min_cluster_size);
    if n < settings.min_cluster_size.max(k) {
        return Err(input(format!(
            "{n} points, fewer than min_cluster_size {} or min_samples {k} (EMUsort skips the \
             outlier removal then)",
            settings.min_cluster_size
        )));
    }
    if let Some(e) = points.iter().position(|v| !v.is_finite()) {
        return Err(input(format!(
            "value {} of point {} is {}",
            e % dim,
            e / dim,
            points[e]
        )));
    }
    Ok((n, k))
}
