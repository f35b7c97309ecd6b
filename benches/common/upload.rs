//! The arithmetic behind the upload bench's printed figures (`benches/upload.rs`): each
//! function takes what was measured and returns the `key=value` fields the bench prints, so
//! the figures and the names they print under are tested apart from a device (in
//! `tests/bench_arithmetic.rs`). Rates are in GB/s of 10^9 bytes.

use crate::rates::{gb_per_ms, gb_per_s};

/// The median of `seconds`, in milliseconds (the upper of the two middle values of an even
/// count); NaN when there are none.
#[must_use]
pub(crate) fn median_ms(seconds: &[f64]) -> f64 {
    let mut sorted = seconds.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).map_or(f64::NAN, |s| s * 1e3)
}

/// How many times the upload bench repeats its `distinct` windows end to end, so that its
/// source holds every window it reads: `windows` for the loader-only and pipelined runs, and
/// `reps` plus two warm-ups for the sequential run from the loader's buffers. (Sized from
/// `windows` alone, `--windows 20` with the default `--reps 30` read past the end.)
///
/// # Panics
///
/// When `distinct` is zero.
#[must_use]
pub(crate) fn upload_source_repeats(windows: u64, reps: u64, distinct: u64) -> u64 {
    windows.max(reps.saturating_add(2)).div_ceil(distinct)
}

/// The upload bench's sequential fields for a window of `bytes`, from the median
/// milliseconds of each step: `bytes=.. read_ms=.. upload_ms=.. unpack_ms=.. total_ms=..
/// upload_gbps=..`, where `upload_gbps` is `bytes` over the upload alone.
#[must_use]
pub(crate) fn upload_sequential_fields(
    bytes: u64,
    read_ms: f64,
    upload_ms: f64,
    unpack_ms: f64,
    total_ms: f64,
) -> String {
    format!(
        "bytes={bytes} read_ms={read_ms:.3} upload_ms={upload_ms:.3} unpack_ms={unpack_ms:.3} \
         total_ms={total_ms:.3} upload_gbps={:.2}",
        gb_per_ms(bytes, upload_ms)
    )
}

/// `stored_over_f32_upload=..`: the stored window's upload time over the f32 window's.
#[must_use]
pub(crate) fn stored_over_f32_upload(stored_ms: f64, f32_ms: f64) -> String {
    format!("stored_over_f32_upload={:.3}", stored_ms / f32_ms)
}

/// The upload bench's fields for a window of `bytes` uploaded from the loader's buffers and
/// unpacked in `ms` (median): `upload_and_unpack_ms=.. upload_and_unpack_gbps=..`, the rate
/// counting both steps (it was printed as `upload_gbps`).
#[must_use]
pub(crate) fn upload_and_unpack_fields(bytes: u64, ms: f64) -> String {
    format!(
        "upload_and_unpack_ms={ms:.3} upload_and_unpack_gbps={:.2}",
        gb_per_ms(bytes, ms)
    )
}

/// The upload bench's fields for the loader alone reading `windows` windows of
/// `window_bytes` in `seconds`: `windows=.. windows_per_s=.. read_gbps=..`.
#[must_use]
pub(crate) fn loader_only_fields(windows: u64, window_bytes: u64, seconds: f64) -> String {
    format!(
        "windows={windows} windows_per_s={:.1} read_gbps={:.2}",
        windows as f64 / seconds.max(f64::MIN_POSITIVE),
        gb_per_s(window_bytes.saturating_mul(windows), seconds)
    )
}

/// The upload bench's fields for `windows` windows pipelined in `seconds`, each of
/// `input_bytes` as uploaded and `int16_bytes` as int16, with the seconds each window waited
/// for the reader (`waiting`) and spent in the upload call (`uploading`):
/// `pipelined_windows=.. seconds=.. windows_per_s=.. input_gbps=.. int16_equiv_gbps=..
/// waiting_for_reader_s=.. in_upload_calls_s=..`.
#[must_use]
pub(crate) fn upload_pipelined_fields(
    windows: u64,
    seconds: f64,
    (input_bytes, int16_bytes): (u64, u64),
    waiting: &[f64],
    uploading: &[f64],
) -> String {
    format!(
        "pipelined_windows={windows} seconds={seconds:.3} windows_per_s={:.1} \
         input_gbps={:.2} int16_equiv_gbps={:.2} waiting_for_reader_s={:.3} \
         in_upload_calls_s={:.3}",
        windows as f64 / seconds.max(f64::MIN_POSITIVE),
        gb_per_s(input_bytes.saturating_mul(windows), seconds),
        gb_per_s(int16_bytes.saturating_mul(windows), seconds),
        total(waiting),
        total(uploading),
    )
}

/// The sum of `seconds`: 0 (not `Iterator::sum`'s -0) when there are none.
fn total(seconds: &[f64]) -> f64 {
    seconds.iter().fold(0.0, |sum, s| sum + s)
}
