//! Clip harvesting kernels (Kilosort4 §4). Layout: `[channels, samples]`, channel-major, as a
//! [`DeviceArray`](dspk_ops::DeviceArray) holds a window.
//!
//! [`mark_peaks`] writes a `0`/`1` mark per value (single-channel peak or not) and counts
//! non-finite values; [`select_isolated`] appends the owned, isolated peaks whose clip fits in
//! the array to a list through a `u32` atomic counter (in no set order: the host sorts it);
//! [`gather_clips`] copies the clips of a sorted list.

use cubecl::prelude::*;

/// Channels each side of a peak in its max-pool neighbourhood.
pub(super) const POOL_CHANNELS: u32 = 4;
/// Samples each side of a peak in its max-pool neighbourhood.
pub(super) const POOL_SAMPLES: u32 = 5;
/// Channels each side of a peak in its isolation neighbourhood.
pub(super) const ISOLATION_CHANNELS: u32 = 6;
/// Samples each side of a peak in its isolation neighbourhood.
pub(super) const ISOLATION_SAMPLES: u32 = 30;

/// Unit `(c, s)` (index `c * samples + s`, below `channels * samples`) sets `marks[c, s]` to 1
/// when `a = |x[c, s]|` exceeds `threshold` and no value of `|x|` in channels `c - 4 ..= c + 4`
/// and samples `s - 5 ..= s + 5` of the array is larger (so `a` equals the neighbourhood's
/// maximum; positions outside the array are left out, i.e. read as minus infinity), else to 0.
/// Each non-finite value adds one to `counters[1]`.
#[cube(launch)]
pub(super) fn mark_peaks(
    input: &[f32],
    marks: &mut [u32],
    counters: &[Atomic<u32>],
    channels: u32,
    samples: u32,
    threshold: f32,
) {
    let index = ABSOLUTE_POS;
    let n = usize::cast_from(samples);
    let count = usize::cast_from(channels);
    if index < count * n {
        let c = index / n;
        let s = index % n;
        let x = input[index];
        let a = x.abs();
        if x.is_nan() || a > f32::MAX {
            counters[1].fetch_add(1);
        }
        let mut peak = a > threshold;
        if peak {
            let pool_c = usize::cast_from(POOL_CHANNELS);
            let pool_s = usize::cast_from(POOL_SAMPLES);
            let c_last = min(c + pool_c, count - 1);
            let s_first = s - min(s, pool_s);
            let s_last = min(s + pool_s, n - 1);
            let mut other = c - min(c, pool_c);
            while peak && other <= c_last {
                let row = other * n;
                let mut t = s_first;
                while peak && t <= s_last {
                    if input[row + t].abs() > a {
                        peak = false;
                    }
                    t += 1;
                }
                other += 1;
            }
        }
        marks[index] = select(peak, 1u32, 0u32);
    }
}

/// Unit `(c, j)` (index `c * (owned_end - owned_start) + j`) looks at sample
/// `s = owned_start + j` of channel `c`: when it is marked, no other mark lies in channels `c - 6 ..= c + 6` and
/// samples `s - 30 ..= s + 30` of the array, and the clip `s - nt0min .. s - nt0min + nt` lies
/// inside the row, it takes slot `i = counters[0]++` and writes `list[i] = c * samples + s`
/// when `i < capacity`.
#[cube(launch)]
pub(super) fn select_isolated(
    marks: &[u32],
    counters: &[Atomic<u32>],
    list: &mut [u32],
    capacity: u32,
    channels: u32,
    samples: u32,
    owned_start: u32,
    owned_end: u32,
    nt: u32,
    nt0min: u32,
) {
    let owned = usize::cast_from(owned_end - owned_start);
    let unit = ABSOLUTE_POS;
    let n = usize::cast_from(samples);
    let count = usize::cast_from(channels);
    if unit < count * owned {
        let c = unit / owned;
        let s = usize::cast_from(owned_start) + unit % owned;
        let before = usize::cast_from(nt0min);
        let fits = s >= before && s - before + usize::cast_from(nt) <= n;
        if fits && marks[c * n + s] == 1 {
            let reach_c = usize::cast_from(ISOLATION_CHANNELS);
            let reach_s = usize::cast_from(ISOLATION_SAMPLES);
            let c_last = min(c + reach_c, count - 1);
            let s_first = s - min(s, reach_s);
            let s_last = min(s + reach_s, n - 1);
            let mut found = 0u32;
            let mut other = c - min(c, reach_c);
            while other <= c_last {
                let row = other * n;
                for t in s_first..s_last + 1 {
                    found += marks[row + t];
                }
                other += 1;
            }
            if found == 1 {
                let slot = counters[0].fetch_add(1);
                if slot < capacity {
                    list[usize::cast_from(slot)] = u32::cast_from(c * n + s);
                }
            }
        }
    }
}

/// Unit `(i, j)` (index `i * nt + j`, below `clips * nt`) writes
/// `out[i, j] = input[list[i] - nt0min + j]`: sample `j` of the clip of the peak at flat index
/// `list[i]` of the input (whose clip lies inside its row).
#[cube(launch)]
pub(super) fn gather_clips(
    input: &[f32],
    list: &[u32],
    out: &mut [f32],
    clips: u32,
    nt: u32,
    nt0min: u32,
) {
    let index = ABSOLUTE_POS;
    let len = usize::cast_from(nt);
    if index < usize::cast_from(clips) * len {
        let i = index / len;
        let j = index % len;
        let peak = usize::cast_from(list[i]);
        out[index] = input[peak - usize::cast_from(nt0min) + j];
    }
}
