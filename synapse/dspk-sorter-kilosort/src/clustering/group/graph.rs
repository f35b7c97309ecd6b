//! The clustering graph of `docs/KILOSORT4.md` §6.3: landmarks, every point's nearest landmarks
//! (exact), and the degrees of the adjacency `M`.

use super::linalg::{dot_seq, gather_rows, products, sq_dist_f32, transpose};

/// The landmark stride of a group of `n` points: `downsampling` (Kilosort's), or the longest
/// stride that still gives at least `min_landmarks` landmarks (at most `n`) when
/// `downsampling` gives fewer.
pub(super) fn stride(n: usize, downsampling: usize, min_landmarks: usize) -> usize {
    let downsampling = downsampling.max(1);
    if n.div_ceil(downsampling) >= min_landmarks.min(n) {
        return downsampling;
    }
    // `ceil(n / s) >= m` holds for `s = floor((n - 1) / (m - 1))` (m >= 2), and that is the
    // longest such stride.
    let m = min_landmarks.min(n);
    if m <= 1 {
        return downsampling;
    }
    ((n - 1) / (m - 1)).clamp(1, downsampling)
}

/// Landmark points: every `stride`-th point (0, stride, 2 stride, ...); when there are `n1` more
/// than `max`, the `n1 - max` at positions `round_half_even(linspace(0, n1 - 1, n1 - max))` of
/// that list are removed (numpy's `linspace` and `np.round`, as Kilosort does).
pub(super) fn landmarks(n: usize, stride: usize, max: usize) -> Vec<usize> {
    let all: Vec<usize> = (0..n).step_by(stride).collect();
    let n1 = all.len();
    if n1 <= max {
        return all;
    }
    let remove = n1 - max;
    let mut drop = vec![false; n1];
    let step = if remove > 1 {
        (n1 - 1) as f64 / (remove - 1) as f64
    } else {
        0.0
    };
    for t in 0..remove {
        // numpy's linspace: t * step, the last one exactly the stop.
        let at = if remove > 1 && t == remove - 1 {
            (n1 - 1) as f64
        } else {
            t as f64 * step
        };
        drop[at.round_ties_even() as usize] = true;
    }
    all.into_iter()
        .zip(drop)
        .filter_map(|(p, gone)| (!gone).then_some(p))
        .collect()
}

/// Every point's `k` nearest landmarks by Euclidean distance, exactly: the squared distances are
/// summed in f64 ([`sq_dist_f32`]) and ties go to the lower landmark index; row `i` of the
/// result ([n, k] row-major, landmark indices) is nearest first. `1 <= k <=` number of landmarks.
///
/// Kilosort uses faiss `IndexFlatL2` (`||a||^2 + ||b||^2 - 2 a.b` in f32, where near-ties may
/// reorder); here that f32 form ([`products`], blocks of 64 points) only screens: every landmark
/// within twice its rounding bound (`(4 d + 8) 2^-24 (||a||^2 + max ||b||^2)`) of the `k`-th
/// screened distance (every landmark, if that is not finite) is measured again in f64, and
/// those decide.
pub(super) fn nearest_landmarks(x: &[f32], d: usize, landmarks: &[usize], k: usize) -> Vec<u32> {
    nearest_rows(x, &gather_rows(x, d, landmarks), d, k)
}

/// As [`nearest_landmarks`], for points `x` and landmarks `xl` given as rows of `d` features
/// (`[n, d]` and `[nl, d]` row-major); the result holds indices of `xl`'s rows.
pub(super) fn nearest_rows(x: &[f32], xl: &[f32], d: usize, k: usize) -> Vec<u32> {
    let row = |i: usize| &x[i * d..(i + 1) * d];
    let n = x.len() / d;
    let nl = xl.len() / d;
    let landmark = |l: usize| &xl[l * d..(l + 1) * d];
    let xlt = transpose(xl, nl, d);
    let vl: Vec<f32> = (0..nl).map(|l| dot_seq(landmark(l), landmark(l))).collect();
    let vmax = vl.iter().fold(0.0f32, |m, &v| m.max(v));
    let rel = (4 * d + 8) as f32 * f32::EPSILON / 2.0;

    const BLOCK: usize = 64;
    let mut prod = vec![0.0f32; BLOCK * nl];
    let mut screen = vec![0.0f32; nl];
    let mut kth = vec![0.0f32; nl];
    let mut near: Vec<(f64, u32)> = Vec::new();
    let mut out = Vec::with_capacity(n * k);
    for start in (0..n).step_by(BLOCK) {
        let rows = (n - start).min(BLOCK);
        products(
            &x[start * d..(start + rows) * d],
            d,
            &xlt,
            nl,
            0..nl,
            &mut prod,
            nl,
        );
        for q in 0..rows {
            let i = start + q;
            let vi = dot_seq(row(i), row(i));
            for ((s, &p), &v) in screen.iter_mut().zip(&prod[q * nl..(q + 1) * nl]).zip(&vl) {
                *s = vi + v - 2.0 * p;
            }
            kth.copy_from_slice(&screen);
            let (_, &mut bound, _) = kth.select_nth_unstable_by(k - 1, f32::total_cmp);
            let cut = bound + 2.0 * rel * (vi + vmax);
            near.clear();
            for (l, &s) in screen.iter().enumerate() {
                if s <= cut || !cut.is_finite() {
                    near.push((sq_dist_f32(row(i), landmark(l)), l as u32));
                }
            }
            near.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            out.extend(near[..k].iter().map(|p| p.1));
        }
    }
    out
}

/// The kNN graph and the degrees of `M` (§6.3).
#[derive(Debug, Clone)]
pub(super) struct Graph {
    /// Number of landmarks.
    pub(super) landmarks: usize,
    /// Neighbours per point.
    pub(super) k: usize,
    /// `[n, k]` nearest landmarks of every point (landmarks find themselves).
    pub(super) nbr: Vec<u32>,
    /// `[n, k]`: whether the link is an edge of `M` (false for a landmark's link to itself).
    pub(super) in_m: Vec<bool>,
    /// `k_i`: edges of `M` from each point (row sums).
    pub(super) row_degree: Vec<u32>,
    /// `k_j`: edges of `M` into each landmark (column sums).
    pub(super) col_degree: Vec<u32>,
    /// `m`: all edges of `M`.
    pub(super) edges: u64,
    /// Points linking to each landmark (self-links included): those of landmark `j` are
    /// `linked[linked_start[j]..linked_start[j + 1]]`, in increasing point order.
    pub(super) linked_start: Vec<usize>,
    /// See `linked_start`.
    pub(super) linked: Vec<u32>,
}

impl Graph {
    /// The graph of the neighbour lists `nbr` ([n, k], `k >= 1`) of `n` points to the landmarks
    /// at points `landmarks`.
    pub(super) fn new(nbr: Vec<u32>, n: usize, k: usize, landmarks: &[usize]) -> Self {
        let mut landmark_of = vec![u32::MAX; n];
        for (l, &p) in landmarks.iter().enumerate() {
            landmark_of[p] = l as u32;
        }
        let in_m: Vec<bool> = nbr
            .iter()
            .enumerate()
            .map(|(s, &l)| landmark_of[s / k] != l)
            .collect();
        let mut row_degree = vec![0u32; n];
        let mut col_degree = vec![0u32; landmarks.len()];
        let mut linked_start = vec![0usize; landmarks.len() + 1];
        for (s, (&l, &edge)) in nbr.iter().zip(&in_m).enumerate() {
            linked_start[l as usize + 1] += 1;
            if edge {
                row_degree[s / k] += 1;
                col_degree[l as usize] += 1;
            }
        }
        for j in 0..landmarks.len() {
            linked_start[j + 1] += linked_start[j];
        }
        let mut fill = linked_start.clone();
        let mut linked = vec![0u32; nbr.len()];
        for (s, &l) in nbr.iter().enumerate() {
            linked[fill[l as usize]] = (s / k) as u32;
            fill[l as usize] += 1;
        }
        let edges = row_degree.iter().map(|&r| u64::from(r)).sum();
        Self {
            landmarks: landmarks.len(),
            k,
            nbr,
            in_m,
            row_degree,
            col_degree,
            edges,
            linked_start,
            linked,
        }
    }
}
