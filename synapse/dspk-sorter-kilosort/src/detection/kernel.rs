//! Universal-template detection kernels (Kilosort4 §5.2, §5.3). Layouts, with `n` the
//! window's samples per channel: data `x[c * n + t]`; projections `bt[(c * K + k) * n + t]`;
//! per-centre maps `amax`, `codes` at `g * n + t`; `codes` hold `combo * 2 + negative`.
//! Every sum runs over its index in increasing order, so results do not depend on scheduling.

use cubecl::prelude::*;
use dspk_ops::launch::unit_index;

pub(super) use crate::algorithms::projection::LANES;
pub(super) use crate::runner::buffers::FOUND;

/// Consecutive columns one unit of [`score_centres`] takes on the cpu runtime.
pub(super) const CPU_COLUMNS: usize = 16;

/// For each `(g, t)`: `A[s, k] = sum_i weights[s, g, i] * bt[iC[g, i], k, t]`, and
/// `amax[g, t] = max |A|` over the combos `s * K + k`, `codes[g, t]` the first combo reaching
/// it (lowest index) times 2, plus 1 when its `A` is negative.
///
/// Only scores above the threshold matter downstream (spikes need one, and a neighbour's
/// score only matters when larger than a spike's), so `(g, t)` whose scores cannot reach it
/// are skipped: by Cauchy-Schwarz `|A[s, k]| <= |w[s, g]| * |bt[iC[g, :], k, t]|`, and when
/// every template's `sum_i bt[iC[g, i], k, t]^2` is at most `skip_below` (the threshold over
/// the largest weight norm, squared, less a margin for rounding) the unit writes `amax = 0`,
/// `codes = 0`. It tests the sum over templates first, `sum_i energy[iC[g, i], t]` (`energy[c,
/// t] = sum_k bt[c, k, t]^2`, from the projection), which bounds each template's from above in
/// `nc` loads; only where that fails, each template's (`nc * K` products), and only where that
/// fails too, the scores (`nc * K * S`). Scores above the threshold are computed in full, so
/// the spikes are the same.
///
/// On a GPU one unit per `(g, t)`, numbered `((group * chunks + chunk) * block + member) *
/// LANES + lane` for centre `g = group * block + member` and column `t = chunk * LANES + lane`:
/// a cube of `block * LANES` units covers `block` consecutive centres (ordered by position, so
/// they share most of their channels) at the same `LANES` columns, and the projections one
/// centre's units load serve the others from the cache. On the cpu runtime (`blocked`) one
/// unit per centre and [`CPU_COLUMNS`] consecutive columns, `g * chunks + chunk`: it loads each
/// channel's index once for all of them and their energies as consecutive values (vector
/// loads).
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(super) fn score_centres(
    bt: &[f32],
    energy: &[f32],
    nearest_channels: &[u32],
    weights: &[f32],
    amax: &mut [f32],
    codes: &mut [u32],
    centres: u32,
    samples: u32,
    skip_below: f32,
    #[comptime] nc: usize,
    #[comptime] templates: usize,
    #[comptime] sizes: usize,
    #[comptime] block: usize,
    #[comptime] blocked: bool,
) {
    let lanes = comptime![if blocked { 1usize } else { LANES }];
    let group = comptime![if blocked { 1usize } else { block }];
    let columns = comptime![if blocked { CPU_COLUMNS } else { 1usize }];
    let unit = unit_index(blocked);
    let n = usize::cast_from(samples);
    let g_count = usize::cast_from(centres);
    let chunks = n.div_ceil(lanes * columns);
    let member = (unit / lanes) % group;
    let chunk = (unit / (lanes * group)) % chunks;
    let g = unit / (lanes * group * chunks) * group + member;
    let t0 = chunk * lanes * columns + unit % lanes;
    if g < g_count && t0 < n {
        let mut total = Array::<f32>::new(columns);
        #[unroll]
        for q in 0..columns {
            total[q] = 0.0f32;
        }
        // Columns past the row (the last unit of a row on the cpu runtime) read clamped and
        // are not written.
        let interior = t0 + columns <= n;
        #[unroll]
        for i in 0..nc {
            let row = usize::cast_from(nearest_channels[g * nc + i]) * n;
            if interior {
                #[unroll]
                for q in 0..columns {
                    total[q] += energy[row + t0 + q];
                }
            } else {
                #[unroll]
                for q in 0..columns {
                    total[q] += energy[row + min(t0 + q, n - 1)];
                }
            }
        }
        for q in 0..columns {
            let t = t0 + q;
            if t < n {
                if total[q] <= skip_below {
                    amax[g * n + t] = 0.0f32;
                    codes[g * n + t] = 0u32;
                } else {
                    score_bounded(
                        bt,
                        nearest_channels,
                        weights,
                        amax,
                        codes,
                        g,
                        t,
                        n,
                        g_count,
                        skip_below,
                        nc,
                        templates,
                        sizes,
                    );
                }
            }
        }
    }
}

/// `score_centres` at one `(g, t)` whose bound over all templates failed: each template's
/// bound, then the scores (`score_one`) if one of those fails too. Nested rather than one
/// `bound` variable and a single zero-writing branch: that flatter form made both detection
/// passes of the README's sort 25 % slower on lavapipe (46 s against 37 s, 2026-12-04).
#[cube]
#[allow(clippy::too_many_arguments)]
fn score_bounded(
    bt: &[f32],
    nearest_channels: &[u32],
    weights: &[f32],
    amax: &mut [f32],
    codes: &mut [u32],
    g: usize,
    t: usize,
    n: usize,
    g_count: usize,
    skip_below: f32,
    #[comptime] nc: usize,
    #[comptime] templates: usize,
    #[comptime] sizes: usize,
) {
    let mut per_template = Array::<f32>::new(templates);
    #[unroll]
    for k in 0..templates {
        per_template[k] = 0.0f32;
    }
    #[unroll]
    for i in 0..nc {
        let c = usize::cast_from(nearest_channels[g * nc + i]);
        #[unroll]
        for k in 0..templates {
            let b = bt[(c * templates + k) * n + t];
            per_template[k] += b * b;
        }
    }
    let mut most = per_template[0];
    #[unroll]
    for k in 1..templates {
        most = max(most, per_template[k]);
    }
    if most <= skip_below {
        amax[g * n + t] = 0.0f32;
        codes[g * n + t] = 0u32;
    } else {
        score_one(
            bt,
            nearest_channels,
            weights,
            amax,
            codes,
            g,
            t,
            n,
            g_count,
            nc,
            templates,
            sizes,
        );
    }
}

/// `score_centres`' scores and best combo at one `(g, t)` (no skipping).
#[cube]
#[allow(clippy::too_many_arguments)]
fn score_one(
    bt: &[f32],
    nearest_channels: &[u32],
    weights: &[f32],
    amax: &mut [f32],
    codes: &mut [u32],
    g: usize,
    t: usize,
    n: usize,
    g_count: usize,
    #[comptime] nc: usize,
    #[comptime] templates: usize,
    #[comptime] sizes: usize,
) {
    let mut acc = Array::<f32>::new(sizes * templates);
    #[unroll]
    for combo in 0..sizes * templates {
        acc[combo] = 0.0f32;
    }
    // Per channel: its weights at every size first, then each template's projection used
    // for all sizes. Every accumulator still sums over the channels in order.
    let mut w = Array::<f32>::new(sizes);
    #[unroll]
    for i in 0..nc {
        let c = usize::cast_from(nearest_channels[g * nc + i]);
        #[unroll]
        for s in 0..sizes {
            w[s] = weights[(s * g_count + g) * nc + i];
        }
        #[unroll]
        for k in 0..templates {
            let b = bt[(c * templates + k) * n + t];
            #[unroll]
            for s in 0..sizes {
                acc[s * templates + k] += w[s] * b;
            }
        }
    }
    let mut best = acc[0].abs();
    let mut code = select(acc[0] < 0.0f32, 1u32, 0u32);
    #[unroll]
    for combo in 1..sizes * templates {
        let a = acc[combo];
        let magnitude = a.abs();
        if magnitude > best {
            best = magnitude;
            code = u32::cast_from(combo) * 2 + select(a < 0.0f32, 1u32, 0u32);
        }
    }
    amax[g * n + t] = best;
    codes[g * n + t] = code;
}

/// Spikes: each `(g, t)` with `t` in `owned_start..owned_start + owned_len`, `amax[g, t] >
/// threshold` and no larger `amax[h, t']` among the `nn` centres `h` of `nearest_centres[g]`
/// and the columns `t'` within `reach` of `t` (and within the row). That is Kilosort's
/// `Amax == Np`, `Np` being the time max-pool of the neighbour max-pool, which is at least
/// `amax[g, t]` (`g` is its own first neighbour); the scan stops at the first larger value.
/// Each spike takes slot `counters[FOUND]++` and writes `g * n + t` there when the slot is
/// below `capacity`. One unit per centre and owned sample.
#[cube(launch)]
pub(super) fn select_spikes(
    amax: &[f32],
    nearest_centres: &[u32],
    counters: &[Atomic<u32>],
    found: &mut [u32],
    capacity: u32,
    centres: u32,
    samples: u32,
    nn: u32,
    owned_start: u32,
    owned_len: u32,
    reach: u32,
    threshold: f32,
    #[comptime] blocked: bool,
) {
    let unit = unit_index(blocked);
    let owned = usize::cast_from(owned_len);
    if unit < usize::cast_from(centres) * owned {
        let n = usize::cast_from(samples);
        let g = unit / owned;
        let t = usize::cast_from(owned_start) + unit % owned;
        let index = g * n + t;
        let a = amax[index];
        if a > threshold {
            let reach = usize::cast_from(reach);
            let first = t - min(t, reach);
            let last = min(t + reach + 1, n);
            let nn = usize::cast_from(nn);
            let mut peak = true;
            let mut j = 0;
            while peak && j < nn {
                let row = usize::cast_from(nearest_centres[g * nn + j]) * n;
                let mut s = first;
                while peak && s < last {
                    peak = amax[row + s] <= a;
                    s += 1;
                }
                j += 1;
            }
            if peak {
                let slot = counters[FOUND].fetch_add(1);
                if slot < capacity {
                    found[usize::cast_from(slot)] = u32::cast_from(index);
                }
            }
        }
    }
}

/// Per spike `m` (found at `found[m] = g * n + t`) and nearest channel `i` of its centre:
/// `features[m, i, p] = sum_j x[iC[g, i], t - nt / 2 + j] * wpca[p, j]` (samples outside the
/// row read as zero). Unit `i = 0` also writes `props[m] = [amax, x, y]` with `x`, `y` the
/// means of the channels' positions weighted by `relu(sign * bt[iC[g, i], k, t])` (sign and
/// `k` from the spike's combo), and `spike_codes[m] = codes[g, t]`. One unit per `(m, i)`.
#[cube(launch)]
pub(super) fn spike_features(
    x: &[f32],
    bt: &[f32],
    amax: &[f32],
    codes: &[u32],
    found: &[u32],
    nearest_channels: &[u32],
    wpca: &[f32],
    positions: &[f32],
    features: &mut [f32],
    props: &mut [f32],
    spike_codes: &mut [u32],
    spikes: u32,
    samples: u32,
    nc: u32,
    nt: u32,
    #[comptime] templates: usize,
    #[comptime] pcs: usize,
) {
    let unit = ABSOLUTE_POS;
    let nc = usize::cast_from(nc);
    if unit < usize::cast_from(spikes) * nc {
        let n = usize::cast_from(samples);
        let m = unit / nc;
        let i = unit % nc;
        let index = usize::cast_from(found[m]);
        let g = index / n;
        let t = index % n;
        let c = usize::cast_from(nearest_channels[g * nc + i]);

        let len = usize::cast_from(nt);
        let half = len / 2;
        let mut acc = Array::<f32>::new(pcs);
        #[unroll]
        for p in 0..pcs {
            acc[p] = 0.0f32;
        }
        let first = half - min(t, half);
        let last = min(len, n + half - t);
        let base = c * n + t;
        for j in first..last {
            let v = x[base + j - half];
            #[unroll]
            for p in 0..pcs {
                acc[p] += v * wpca[p * len + j];
            }
        }
        #[unroll]
        for p in 0..pcs {
            features[unit * pcs + p] = acc[p];
        }

        if i == 0 {
            let code = codes[index];
            let k = usize::cast_from(code / 2) % templates;
            let sign = select(code % 2 == 1, -1.0f32, 1.0f32);
            let mut total = 0.0f32;
            let mut sum_x = 0.0f32;
            let mut sum_y = 0.0f32;
            for q in 0..nc {
                let channel = usize::cast_from(nearest_channels[g * nc + q]);
                let r = max(sign * bt[(channel * templates + k) * n + t], 0.0f32);
                total += r;
                sum_x += r * positions[2 * channel];
                sum_y += r * positions[2 * channel + 1];
            }
            props[3 * m] = amax[index];
            props[3 * m + 1] = sum_x / total;
            props[3 * m + 2] = sum_y / total;
            spike_codes[m] = code;
        }
    }
}
