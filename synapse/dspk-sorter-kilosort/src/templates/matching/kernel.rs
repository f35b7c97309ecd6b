//! Learned-template matching kernels (Kilosort4 §7). Layouts, with `n` the window's samples
//! per channel, `N` templates, `S` slots (nonzero channels) per template: data and residual
//! `x[c * n + t]`; PC projections `bp[(c * P + p) * n + t]`; scores `b[m * n + t]`; per-column
//! `best[t]`, `arg[t]`. Peak records (index `r`): column `col[r]`, template `tmpl[r]`, scale
//! `amp[r]`, score squared `cf[r]`; one peel's records are contiguous and sorted by column.
//! Every sum runs over its index in increasing order and every value has one writer, so results
//! do not depend on scheduling.

use cubecl::prelude::*;
use dspk_ops::launch::unit_index;

pub(super) use crate::runner::buffers::FOUND;
/// `slot_of` entry of a channel where the template is zero.
pub(super) const NO_SLOT: u32 = u32::MAX;
/// Consecutive columns one unit of [`template_scores`] computes on the cpu runtime.
pub(super) const CPU_COLUMNS: usize = 8;

/// `b[m, t] = sum_s sum_p slot_weights[m, s, p] * bp[slot_channel[m, s], p, t]`: the score
/// `sum_{c, p} U[m, p, c] * bp[c, p, t]` over the template's nonzero channels only (padding
/// slots weigh zero). On a GPU one unit per `(m, t)`, `t` fastest; on the cpu runtime
/// (`blocked`) one unit per `m` and [`CPU_COLUMNS`] consecutive columns, so each weight it
/// loads serves all of them and its loads of `bp` are consecutive (vector loads).
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(super) fn template_scores(
    bp: &[f32],
    slot_channel: &[u32],
    slot_weights: &[f32],
    b: &mut [f32],
    templates: u32,
    slots: u32,
    samples: u32,
    #[comptime] pcs: usize,
    #[comptime] blocked: bool,
) {
    let columns = comptime![if blocked { CPU_COLUMNS } else { 1usize }];
    let unit = unit_index(blocked);
    let n = usize::cast_from(samples);
    let chunks = n.div_ceil(columns);
    if unit < usize::cast_from(templates) * chunks {
        let m = unit / chunks;
        let t0 = (unit % chunks) * columns;
        let slots = usize::cast_from(slots);
        let mut acc = Array::<f32>::new(columns);
        #[unroll]
        for q in 0..columns {
            acc[q] = 0.0f32;
        }
        // Whether every column lies in the row: then no clamping.
        let interior = t0 + columns <= n;
        for s in 0..slots {
            let c = usize::cast_from(slot_channel[m * slots + s]);
            #[unroll]
            for p in 0..pcs {
                let w = slot_weights[(m * slots + s) * pcs + p];
                let row = (c * pcs + p) * n;
                if interior {
                    #[unroll]
                    for q in 0..columns {
                        acc[q] += w * bp[row + t0 + q];
                    }
                } else {
                    #[unroll]
                    for q in 0..columns {
                        acc[q] += w * bp[row + min(t0 + q, n - 1)];
                    }
                }
            }
        }
        #[unroll]
        for q in 0..columns {
            if t0 + q < n {
                b[m * n + t0 + q] = acc[q];
            }
        }
    }
}

/// Per column `t`: `best[t] = max_m max(b[m, t], 0)^2 / norms[m]` and `arg[t]` the first `m`
/// reaching it, where a whole template fits around `t` (`nt / 2 <= t < n - nt / 2`); 0 and 0
/// elsewhere.
#[cube(launch)]
pub(super) fn best_templates(
    b: &[f32],
    norms: &[f32],
    best: &mut [f32],
    arg: &mut [u32],
    templates: u32,
    samples: u32,
    nt: u32,
    #[comptime] blocked: bool,
) {
    let t = unit_index(blocked);
    let n = usize::cast_from(samples);
    if t < n {
        let half = usize::cast_from(nt) / 2;
        let mut top = 0.0f32;
        let mut which = 0u32;
        if t >= half && t + half < n {
            let v = max(b[t], 0.0f32);
            top = v * v / norms[0];
            for m in 1..usize::cast_from(templates) {
                let v = max(b[m * n + t], 0.0f32);
                let cf = v * v / norms[m];
                if cf > top {
                    top = cf;
                    which = u32::cast_from(m);
                }
            }
        }
        best[t] = top;
        arg[t] = which;
    }
}

/// Peaks: each column `t` where a template fits with `best[t] > threshold2` and no larger
/// `best[t']` for `|t' - t| <= nt` (within the row): Kilosort's `pool > Th^2` and `|pool -
/// best| < 1e-9`, `pool` being the max-pool of `best` over `t +- nt` (at least `best[t]`; in
/// `f32` above `Th^2` a nonzero difference is far above `1e-9`, so the test is equality). Each
/// peak takes slot `counters[FOUND]++` and writes `t` there. One unit per column where a
/// template fits.
#[cube(launch)]
pub(super) fn find_peaks(
    best: &[f32],
    counters: &[Atomic<u32>],
    found: &mut [u32],
    capacity: u32,
    samples: u32,
    nt: u32,
    threshold2: f32,
    #[comptime] blocked: bool,
) {
    let n = usize::cast_from(samples);
    let len = usize::cast_from(nt);
    let half = len / 2;
    let t = unit_index(blocked) + half;
    if t + half < n {
        let v = best[t];
        if v > threshold2 {
            let first = t - min(t, len);
            let last = min(t + len + 1, n);
            let mut peak = true;
            let mut s = first;
            while peak && s < last {
                peak = best[s] <= v;
                s += 1;
            }
            if peak {
                let slot = counters[FOUND].fetch_add(1);
                if slot < capacity {
                    found[usize::cast_from(slot)] = u32::cast_from(t);
                }
            }
        }
    }
}

/// For the `count` records from `first` on (columns written by the host): `tmpl[r] =
/// arg[col[r]]`, `amp[r] = b[tmpl[r], col[r]] / norms[tmpl[r]]` and `cf[r] = best[col[r]]`.
#[cube(launch)]
pub(super) fn peak_params(
    col: &[u32],
    arg: &[u32],
    best: &[f32],
    b: &[f32],
    norms: &[f32],
    tmpl: &mut [u32],
    amp: &mut [f32],
    cf: &mut [f32],
    first: u32,
    count: u32,
    samples: u32,
    #[comptime] blocked: bool,
) {
    let i = unit_index(blocked);
    if i < usize::cast_from(count) {
        let n = usize::cast_from(samples);
        let r = usize::cast_from(first) + i;
        let t = usize::cast_from(col[r]);
        let m = arg[t];
        let mi = usize::cast_from(m);
        tmpl[r] = m;
        amp[r] = b[mi * n + t] / norms[mi];
        cf[r] = best[t];
    }
}

/// Subtracts one peel's peaks from the scores: `b[m, u] -= amp[r] * ctc[tmpl[r], m, u -
/// col[r] + nt - 1]` for every record `r` of `first..first + count` with `|u - col[r]| < nt`.
/// Each `(m, u)` is written by one unit only, that of the first record covering `u` (records
/// are sorted by column), which subtracts every covering record in column order: no races
/// even when peaks are close (ties), and the order of the subtractions is fixed. One unit per
/// `(record, m, lag)`.
#[cube(launch)]
pub(super) fn subtract_scores(
    col: &[u32],
    tmpl: &[u32],
    amp: &[f32],
    ctc: &[f32],
    b: &mut [f32],
    first: u32,
    count: u32,
    templates: u32,
    samples: u32,
    nt: u32,
    #[comptime] blocked: bool,
) {
    let unit = unit_index(blocked);
    let len = usize::cast_from(nt);
    let lags = 2 * len - 1;
    let templates = usize::cast_from(templates);
    if unit < usize::cast_from(count) * templates * lags {
        let n = usize::cast_from(samples);
        let first = usize::cast_from(first);
        let end = first + usize::cast_from(count);
        let lag = unit % lags;
        let m = (unit / lags) % templates;
        let r = first + unit / (lags * templates);
        let t = usize::cast_from(col[r]);
        // Column u = t + lag - (nt - 1).
        if t + lag >= len - 1 && t + lag - (len - 1) < n {
            let u = t + lag - (len - 1);
            let mut owner = true;
            if r > first {
                owner = usize::cast_from(col[r - 1]) + len - 1 < u;
            }
            if owner {
                let mut v = b[m * n + u];
                let mut k = r;
                while k < end && usize::cast_from(col[k]) < u + len {
                    let tk = usize::cast_from(col[k]);
                    let nk = usize::cast_from(tmpl[k]);
                    v -= amp[k] * ctc[(nk * templates + m) * lags + u + len - 1 - tk];
                    k += 1;
                }
                b[m * n + u] = v;
            }
        }
    }
}

/// Subtracts one peel's peaks from the residual: `xres[c, u] -= amp[r] * waveforms[tmpl[r], s,
/// u - col[r] + nt / 2]` for every record `r` of `first..first + count` whose template has
/// channel `c` (at slot `s`) and `|u - col[r]| <= nt / 2`. As in [`subtract_scores`], each
/// `(c, u)` is written only by the unit of the first record covering it, which subtracts all
/// covering records in column order. One unit per `(record, slot, j)`.
#[cube(launch)]
pub(super) fn subtract_waveforms(
    col: &[u32],
    tmpl: &[u32],
    amp: &[f32],
    slot_channel: &[u32],
    slot_of: &[u32],
    waveforms: &[f32],
    xres: &mut [f32],
    first: u32,
    count: u32,
    slots: u32,
    channels: u32,
    samples: u32,
    nt: u32,
    #[comptime] blocked: bool,
) {
    let unit = unit_index(blocked);
    let len = usize::cast_from(nt);
    let half = len / 2;
    let slots = usize::cast_from(slots);
    if unit < usize::cast_from(count) * slots * len {
        let n = usize::cast_from(samples);
        let channels = usize::cast_from(channels);
        let first = usize::cast_from(first);
        let end = first + usize::cast_from(count);
        let j = unit % len;
        let s = (unit / len) % slots;
        let r = first + unit / (len * slots);
        let t = usize::cast_from(col[r]);
        let m = usize::cast_from(tmpl[r]);
        let c = usize::cast_from(slot_channel[m * slots + s]);
        // Padding slots repeat channel 0 under another slot (or none).
        if slot_of[m * channels + c] == u32::cast_from(s) {
            let u = t + j - half;
            let mut owner = true;
            let mut k = r;
            let mut scanning = true;
            while scanning && k > first {
                k -= 1;
                if usize::cast_from(col[k]) + half < u {
                    scanning = false;
                } else if slot_of[usize::cast_from(tmpl[k]) * channels + c] != NO_SLOT {
                    owner = false;
                    scanning = false;
                }
            }
            if owner {
                let mut v = xres[c * n + u];
                let mut k = r;
                while k < end && usize::cast_from(col[k]) <= u + half {
                    let tk = usize::cast_from(col[k]);
                    let nk = usize::cast_from(tmpl[k]);
                    let sk = slot_of[nk * channels + c];
                    if sk != NO_SLOT {
                        let w =
                            waveforms[(nk * slots + usize::cast_from(sk)) * len + u + half - tk];
                        v -= amp[k] * w;
                    }
                    k += 1;
                }
                xres[c * n + u] = v;
            }
        }
    }
}

/// Per chosen spike `m` (record `chosen[m]`) and feature channel `i` of its template:
/// `features[m, i, p] = sum_j xres[c, t - nt / 2 + j] * wpca[p, j] + amp * ucc[tmpl, i, p]`
/// with `c = feature_channels[tmpl, i]`. One unit per `(m, i)`.
#[cube(launch)]
pub(super) fn spike_features(
    xres: &[f32],
    col: &[u32],
    tmpl: &[u32],
    amp: &[f32],
    chosen: &[u32],
    feature_channels: &[u32],
    ucc: &[f32],
    wpca: &[f32],
    features: &mut [f32],
    spikes: u32,
    samples: u32,
    nc: u32,
    nt: u32,
    #[comptime] pcs: usize,
    #[comptime] blocked: bool,
) {
    let unit = unit_index(blocked);
    let nc = usize::cast_from(nc);
    if unit < usize::cast_from(spikes) * nc {
        let n = usize::cast_from(samples);
        let len = usize::cast_from(nt);
        let half = len / 2;
        let r = usize::cast_from(chosen[unit / nc]);
        let i = unit % nc;
        let t = usize::cast_from(col[r]);
        let m = usize::cast_from(tmpl[r]);
        let c = usize::cast_from(feature_channels[m * nc + i]);
        let mut acc = Array::<f32>::new(pcs);
        #[unroll]
        for p in 0..pcs {
            acc[p] = 0.0f32;
        }
        let base = c * n + t - half;
        for j in 0..len {
            let v = xres[base + j];
            #[unroll]
            for p in 0..pcs {
                acc[p] += v * wpca[p * len + j];
            }
        }
        let a = amp[r];
        #[unroll]
        for p in 0..pcs {
            features[unit * pcs + p] = acc[p] + a * ucc[(m * nc + i) * pcs + p];
        }
    }
}
