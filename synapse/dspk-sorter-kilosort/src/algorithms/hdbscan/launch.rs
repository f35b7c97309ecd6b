//! Host side of HDBSCAN's device path: the nearest-point search, the Borůvka rounds and the
//! `f64` values the tree is built from.

use cubecl::CubeElement;
use cubecl::bytes::Bytes;
use cubecl::prelude::*;
use dspk_ops::DeviceLimits;
use dspk_ops::launch::{CUBE_DIM, cube_count_for, cube_units};

use super::exact::{self, Edge};
use super::kernel;
use crate::runner::buffers::{alloc, prefix, upload};
use crate::{Error, Result};

/// Candidates kept per point beyond `min_samples`: the `f32` search ranks points whose exact
/// distances differ by less than its rounding (a few parts in 10^6) in either order, and the
/// exact core distance is the `min_samples`-th smallest of the candidates' `f64` distances.
pub(super) const MARGIN: usize = 8;

/// Bytes of shared memory a cube's tile of rows may take (WebGPU guarantees 16 KiB).
const TILE_BYTES: usize = 16_000;

/// Rows per tile for points of `dim` values: at most 64, at least 1.
fn tile_rows(dim: usize) -> usize {
    (TILE_BYTES / (4 * dim)).clamp(1, 64)
}

/// The minimum spanning tree of the mutual-reachability graph of `points` (`dim` values per
/// point, validated: finite, at least `k` points) with core distances to the `k`-th nearest
/// point, on the device; edge weights in `f64` as [`exact`] computes them.
pub(super) fn device_tree(
    client: &Client,
    points: &[f32],
    dim: usize,
    k: usize,
) -> Result<Vec<Edge>> {
    device_tree_in_cubes(client, points, dim, k, cube_units(client, CUBE_DIM))
}

/// [`device_tree`] with cubes of `units` units (at least 1, within the device's limit): the
/// kernels' results do not depend on it.
pub(super) fn device_tree_in_cubes(
    client: &Client,
    points: &[f32],
    dim: usize,
    k: usize,
    units: u32,
) -> Result<Vec<Edge>> {
    let n = points.len() / dim;
    let slots = (k + MARGIN).min(n);
    let limits = DeviceLimits::of(client);
    limits.check("hdbscan: points", points.len() as u64, 4)?;
    limits.check("hdbscan: nearest points", (n * slots) as u64, 4)?;
    let tile = tile_rows(dim);
    let x = upload(client, points)?;

    let nearest = alloc::<u32>(client, n * slots)?;
    kernel::nearest_points::launch(
        client,
        cube_count_for(n, units),
        CubeDim::new_1d(units),
        x.arg(points.len()),
        nearest.arg(n * slots),
        n as u32,
        dim,
        slots,
        tile,
    );
    let candidates = u32::from_bytes(&client.read_one(prefix(&nearest, n * slots))?).to_vec();
    let core =
        exact::core_distances_among(points, dim, k, &candidates, slots).ok_or_else(|| {
            Error::Input {
                what: "hdbscan points",
                reason: "the device's nearest-point search returned an index out of range".into(),
            }
        })?;
    // The exact squared core distances rounded to f32: order-preserving, so edges whose weight
    // is a core distance compare on the device as they do in f64.
    let core_sq: Vec<f32> = core.iter().map(|&c| (c * c) as f32).collect();
    let core_sq = upload(client, &core_sq)?;

    let mut component: Vec<u32> = (0..n as u32).collect();
    let labels = upload(client, &component)?;
    let best = alloc::<u32>(client, n)?;
    let best_sq = alloc::<f32>(client, n)?;
    let mut parent: Vec<usize> = (0..n).collect();
    let mut edges: Vec<Edge> = Vec::with_capacity(n - 1);
    while edges.len() + 1 < n {
        kernel::cheapest_edges::launch(
            client,
            cube_count_for(n, units),
            CubeDim::new_1d(units),
            x.arg(points.len()),
            core_sq.arg(n),
            labels.arg(n),
            nearest.arg(n * slots),
            best.arg(n),
            best_sq.arg(n),
            n as u32,
            dim,
            slots,
            tile,
        );
        let bytes = client.read(vec![prefix(&best, n), prefix(&best_sq, n)])?;
        let (to, weight) = (u32::from_bytes(&bytes[0]), f32::from_bytes(&bytes[1]));
        // Each component's cheapest edge, in the kernel's total order.
        let mut chosen: Vec<Option<(f32, usize, usize)>> = vec![None; n];
        for i in 0..n {
            let j = to[i] as usize;
            if j >= n {
                continue;
            }
            let c = component[i] as usize;
            let candidate = (weight[i], i, j);
            let better = chosen[c].is_none_or(|(w, a, b)| {
                exact::edge_order(f64::from(weight[i]), (i, j), f64::from(w), (a, b)).is_lt()
            });
            if better {
                chosen[c] = Some(candidate);
            }
        }
        let before = edges.len();
        for (_, a, b) in chosen.into_iter().flatten() {
            let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
            if ra != rb {
                parent[ra.max(rb)] = ra.min(rb);
                edges.push(Edge {
                    a,
                    b,
                    weight: exact::reachability(points, dim, &core, a, b),
                });
            }
        }
        if edges.len() == before {
            return Err(Error::Input {
                what: "hdbscan points",
                reason: "a Borůvka round of the device found no edge between components".into(),
            });
        }
        for (i, c) in component.iter_mut().enumerate() {
            *c = root(&mut parent, i) as u32;
        }
        client.write(labels.handle(), Bytes::from_elems(component.clone()));
    }
    Ok(edges)
}

/// Root of `i` in the union-find `parent` (a root is its own parent), halving the path.
fn root(parent: &mut [usize], mut i: usize) -> usize {
    while parent[i] != i {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    i
}
