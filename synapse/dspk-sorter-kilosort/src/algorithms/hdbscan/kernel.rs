//! HDBSCAN's distance kernels. Layout: points `x[i * dim + k]`, row-major. One unit per point
//! `i`; the cube's units (any number: each point's result does not depend on it) walk over all
//! points in tiles of `tile` rows that they load together into shared memory. Every squared distance is `sum_k (x[i, k] - x[j, k])^2` in `f32` over
//! `k` in increasing order, so it is the same number for `(i, j)` and `(j, i)`, in every
//! launch; no atomics. Loops over coordinates and neighbour slots are unrolled: llvmpipe
//! (lavapipe) stops a shader after 65 535 loop iterations, so only the loops over points and
//! tiles iterate (one per point of `n`, which bounds `n` to about 60 000 on lavapipe).

use cubecl::prelude::*;

/// Whether `(d, j)` comes before `(best_d, best_j)`: smaller value first, then smaller index.
#[cube]
fn before(d: f32, j: u32, best_d: f32, best_j: u32) -> bool {
    d < best_d || (d == best_d && j < best_j)
}

/// For each point `i`: the `slots` points nearest to it (itself included, at distance 0), as
/// `nearest[i * slots + s]` in increasing order of `(squared distance, index)`. `n >= slots`.
#[cube(launch)]
pub(super) fn nearest_points(
    x: &[f32],
    nearest: &mut [u32],
    n: u32,
    #[comptime] dim: usize,
    #[comptime] slots: usize,
    #[comptime] tile: usize,
) {
    let count = usize::cast_from(n);
    let i = ABSOLUTE_POS;
    let active = i < count;
    let mut own = Array::<f32>::new(dim);
    let row = min(i, count - 1) * dim;
    #[unroll]
    for k in 0..dim {
        own[k] = x[row + k];
    }
    let mut best_sq = Array::<f32>::new(slots);
    let mut best = Array::<u32>::new(slots);
    #[unroll]
    for s in 0..slots {
        best_sq[s] = f32::MAX;
        best[s] = u32::MAX;
    }
    let mut rows: Shared<[f32]> = Shared::new_slice(tile * dim);
    for t in 0..count.div_ceil(tile) {
        let first = t * tile;
        // Rows `first .. first + tile` (those below `n`) into shared memory.
        let values = min(tile, count - first) * dim;
        let mut e = UNIT_POS as usize;
        while e < values {
            rows[e] = x[first * dim + e];
            e += CUBE_DIM as usize;
        }
        sync_cube();
        if active {
            let len = min(tile, count - first);
            for r in 0..len {
                let mut d = 0.0f32;
                #[unroll]
                for k in 0..dim {
                    let t = own[k] - rows[r * dim + k];
                    d += t * t;
                }
                let j = u32::cast_from(first + r);
                if before(d, j, best_sq[slots - 1], best[slots - 1]) {
                    // Insertion into the sorted list, from its end: entries after `(d, j)`
                    // move one place down until its place is found.
                    let mut moving = true;
                    #[unroll]
                    for step in 1..slots {
                        let pos = slots - step;
                        if moving {
                            if before(d, j, best_sq[pos - 1], best[pos - 1]) {
                                best_sq[pos] = best_sq[pos - 1];
                                best[pos] = best[pos - 1];
                            } else {
                                best_sq[pos] = d;
                                best[pos] = j;
                                moving = false;
                            }
                        }
                    }
                    if moving {
                        best_sq[0] = d;
                        best[0] = j;
                    }
                }
            }
        }
        sync_cube();
    }
    if active {
        #[unroll]
        for s in 0..slots {
            nearest[i * slots + s] = best[s];
        }
    }
}

/// Whether edge `(i, j)` of squared weight `w` comes before edge `(i, best_j)` of squared
/// weight `best_w` in the total order of edges: weight, then smaller endpoint, then larger.
#[cube]
fn edge_before(w: f32, i: u32, j: u32, best_w: f32, best_j: u32) -> bool {
    let low = min(i, j);
    let best_low = min(i, best_j);
    w < best_w
        || (w == best_w && (low < best_low || (low == best_low && max(i, j) < max(i, best_j))))
}

/// One Borůvka step: for each point `i`, its cheapest edge to a point of another component
/// (`component[j] != component[i]`) in the mutual-reachability graph, whose squared weight is
/// `max(core_sq[i], core_sq[j], |x_i - x_j|^2)`: the other end in `best[i]` and the squared
/// weight in `best_sq[i]`, the first in the total order of `edge_before` (`u32::MAX` and
/// `f32::MAX` when every point shares `i`'s component). The best weight starts from `i`'s
/// `slots` nearest points (`nearest`, as [`nearest_points`] gives them); a squared distance is
/// only computed where `max(core_sq[i], core_sq[j])` does not exceed the best weight so far.
/// Neither changes the result.
#[cube(launch)]
pub(super) fn cheapest_edges(
    x: &[f32],
    core_sq: &[f32],
    component: &[u32],
    nearest: &[u32],
    best: &mut [u32],
    best_sq: &mut [f32],
    n: u32,
    #[comptime] dim: usize,
    #[comptime] slots: usize,
    #[comptime] tile: usize,
) {
    let count = usize::cast_from(n);
    let i = ABSOLUTE_POS;
    let active = i < count;
    let me = min(i, count - 1);
    let mut own = Array::<f32>::new(dim);
    #[unroll]
    for k in 0..dim {
        own[k] = x[me * dim + k];
    }
    let own_core = core_sq[me];
    let own_component = component[me];
    let own_index = u32::cast_from(me);
    let mut best_w = 3.402_823_5e38f32; // f32::MAX
    let mut best_j = 0xFFFF_FFFFu32; // u32::MAX
    if active {
        #[unroll]
        for s in 0..slots {
            let j = nearest[i * slots + s];
            let row = usize::cast_from(j) * dim;
            if component[usize::cast_from(j)] != own_component {
                let mut d = 0.0f32;
                #[unroll]
                for k in 0..dim {
                    let t = own[k] - x[row + k];
                    d += t * t;
                }
                let w = max(max(own_core, core_sq[usize::cast_from(j)]), d);
                if edge_before(w, own_index, j, best_w, best_j) {
                    best_w = w;
                    best_j = j;
                }
            }
        }
    }
    let mut rows: Shared<[f32]> = Shared::new_slice(tile * dim);
    for t in 0..count.div_ceil(tile) {
        let first = t * tile;
        // Rows `first .. first + tile` (those below `n`) into shared memory.
        let values = min(tile, count - first) * dim;
        let mut e = UNIT_POS as usize;
        while e < values {
            rows[e] = x[first * dim + e];
            e += CUBE_DIM as usize;
        }
        sync_cube();
        if active {
            let len = min(tile, count - first);
            for r in 0..len {
                let j = first + r;
                if component[j] != own_component {
                    let bound = max(own_core, core_sq[j]);
                    if bound <= best_w {
                        let mut d = 0.0f32;
                        #[unroll]
                        for k in 0..dim {
                            let t = own[k] - rows[r * dim + k];
                            d += t * t;
                        }
                        let w = max(bound, d);
                        let jj = u32::cast_from(j);
                        if edge_before(w, own_index, jj, best_w, best_j) {
                            best_w = w;
                            best_j = jj;
                        }
                    }
                }
            }
        }
        sync_cube();
    }
    if active {
        best[i] = best_j;
        best_sq[i] = best_w;
    }
}
