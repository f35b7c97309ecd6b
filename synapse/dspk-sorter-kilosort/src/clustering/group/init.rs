//! Initial labels: the greedy k-means++ variant of `docs/KILOSORT4.md` §6.4.
//!
//! With `v_i = ||x_i||^2` and `e_i` (0 at the start) the score of point `i`'s current centre,
//! every step `j` draws `candidates` distinct points with probability proportional to
//! `max(v_i - e_i, 0)`, and for each candidate `c` sums the gains
//! `gain_i(c) = max(2 x_i . x_c - ||x_c||^2 - e_i, 0)` over the points; the first candidate of
//! largest sum wins, and every point of positive gain takes label `j` and
//! `e_i = 2 x_i . x_c - ||x_c||^2`. Points never improved keep label 0.
//!
//! The draws and the sums run on the "pool": all points when there are at most
//! [`POOL`], else `POOL` evenly spaced ones (`floor(t n / POOL)`). The pool's Gram matrix is
//! computed once, so a step costs `candidates x pool` lookups instead of
//! `candidates x n x d` multiply-adds. Points outside the pool never influence the choice of
//! centres, so their labels are settled at the end, exactly by the same rule, from their
//! products with the chosen centres. Departure: Kilosort draws from and sums over all points
//! (it subsamples only the draws, above 2^24 points); this caps the cost at about
//! `POOL^2 d / 2 + n x steps x d` multiply-adds per group. Every product is the same sequential
//! f32 sum ([`dot_seq`]); the sums of gains are accumulated in f64 in a fixed order ([`gain_sum`]).

use super::linalg::{dot_seq, gain_sum, gather_rows, products, transpose};
use super::rng::{CounterRng, weighted_sample};

/// Largest pool of the initialisation (its Gram matrix is `POOL^2` f32: 64 MiB).
pub(super) const POOL: usize = 4096;

/// The initialisation's result.
#[derive(Debug, Clone)]
pub(super) struct Init {
    /// Label of each point, in `0..columns`.
    pub(super) labels: Vec<u32>,
    /// Number of label columns of the graph iterations (the number of steps asked for).
    pub(super) columns: usize,
}

/// Runs the k-means++ variant on `x` ([n, d] row-major, `n >= 1`) for `steps` steps of
/// `candidates` draws each (both at least 1 and at most `n`), drawing step `j` from stream `j`
/// of `seed`, with a pool of at most `pool` points (at least 1). Stops early when no pool point
/// has a positive weight left.
pub(super) fn seed_clusters(
    x: &[f32],
    n: usize,
    d: usize,
    steps: usize,
    candidates: usize,
    seed: u64,
    pool: usize,
) -> Init {
    let s = pool.min(n);
    let members: Vec<usize> = (0..s)
        .map(|t| (t as u128 * n as u128 / s as u128) as usize)
        .collect();
    let xs = gather_rows(x, d, &members);
    let xst = transpose(&xs, s, d);
    // Gram matrix of the pool: the upper blocks, mirrored (products commute exactly).
    let mut gram = vec![0.0f32; s * s];
    const BLOCK: usize = 64;
    for r in (0..s).step_by(BLOCK) {
        let rows = (s - r).min(BLOCK);
        products(
            &xs[r * d..(r + rows) * d],
            d,
            &xst,
            s,
            r..s,
            &mut gram[r * s + r..],
            s,
        );
    }
    for a in 0..s {
        for b in 0..a {
            gram[a * s + b] = gram[b * s + a];
        }
    }
    let norm: Vec<f32> = (0..s).map(|t| gram[t * s + t]).collect();

    let mut e = vec![0.0f32; s];
    let mut pool_labels = vec![0u32; s];
    let mut weights = vec![0.0f64; s];
    let mut scratch = Vec::new();
    let mut centres: Vec<usize> = Vec::with_capacity(steps);
    for step in 0..steps {
        for ((w, &v), &ei) in weights.iter_mut().zip(&norm).zip(&e) {
            *w = f64::from((v - ei).max(0.0));
        }
        let drawn = weighted_sample(
            &weights,
            candidates,
            CounterRng::new(seed, step as u64),
            &mut scratch,
        );
        let mut best: Option<(f64, usize)> = None;
        for &c in &drawn {
            let sum = gain_sum(&gram[c * s..(c + 1) * s], &e, norm[c]);
            if best.is_none_or(|(b, _)| sum > b) {
                best = Some((sum, c));
            }
        }
        let Some((_, c)) = best else { break };
        let (gc, vc) = (&gram[c * s..(c + 1) * s], norm[c]);
        for ((&g, ei), label) in gc.iter().zip(&mut e).zip(&mut pool_labels) {
            let score = 2.0 * g - vc;
            if score - *ei > 0.0 {
                *ei = score;
                *label = step as u32;
            }
        }
        centres.push(members[c]);
    }
    let mut labels = vec![0u32; n];
    for (&i, &l) in members.iter().zip(&pool_labels) {
        labels[i] = l;
    }
    if s < n && !centres.is_empty() {
        settle_outside(x, d, &members, &centres, &mut labels);
    }
    Init {
        labels,
        columns: steps,
    }
}

/// Labels of the points outside the pool: each follows the chosen centres in order, taking
/// step `j`'s label when `2 x_i . x_c - ||x_c||^2` beats its score so far (0 at the start).
fn settle_outside(x: &[f32], d: usize, members: &[usize], centres: &[usize], labels: &mut [u32]) {
    let row = |i: usize| &x[i * d..(i + 1) * d];
    let nc = centres.len();
    let xc: Vec<f32> = centres
        .iter()
        .flat_map(|&c| row(c).iter().copied())
        .collect();
    let xct = transpose(&xc, nc, d);
    let vc: Vec<f32> = centres.iter().map(|&c| dot_seq(row(c), row(c))).collect();
    let mut in_pool = vec![false; labels.len()];
    for &i in members {
        in_pool[i] = true;
    }
    let outside: Vec<usize> = (0..labels.len()).filter(|&i| !in_pool[i]).collect();
    const BLOCK: usize = 64;
    let mut block = Vec::with_capacity(BLOCK * d);
    let mut prod = vec![0.0f32; BLOCK * nc];
    for chunk in outside.chunks(BLOCK) {
        block.clear();
        for &i in chunk {
            block.extend_from_slice(row(i));
        }
        products(&block, d, &xct, nc, 0..nc, &mut prod, nc);
        for (q, &i) in chunk.iter().enumerate() {
            let mut e = 0.0f32;
            for (j, (&p, &v)) in prod[q * nc..(q + 1) * nc].iter().zip(&vc).enumerate() {
                let score = 2.0 * p - v;
                if score - e > 0.0 {
                    e = score;
                    labels[i] = j as u32;
                }
            }
        }
    }
}
