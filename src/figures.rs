//! The arithmetic behind the benchmarks' printed figures (`benches/upload.rs`,
//! `benches/preprocess.rs`): each function takes what was measured and returns the
//! `key=value` fields a bench prints, so the figures and the names they print under are
//! tested apart from a device. Rates are in GB/s of 10^9 bytes ([`gb_per_s`]).

use crate::gb_per_s;

/// The median of `seconds`, in milliseconds (the upper of the two middle values of an even
/// count); NaN when there are none.
#[must_use]
pub fn median_ms(seconds: &[f64]) -> f64 {
    let mut sorted = seconds.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).map_or(f64::NAN, |s| s * 1e3)
}

/// `bytes` moved in `ms` milliseconds, in GB/s.
fn gbps(bytes: u64, ms: f64) -> f64 {
    gb_per_s(bytes, ms * 1e-3)
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
pub fn upload_source_repeats(windows: u64, reps: u64, distinct: u64) -> u64 {
    windows.max(reps.saturating_add(2)).div_ceil(distinct)
}

/// The upload bench's sequential fields for a window of `bytes`, from the median
/// milliseconds of each step: `bytes=.. read_ms=.. upload_ms=.. unpack_ms=.. total_ms=..
/// upload_gbps=..`, where `upload_gbps` is `bytes` over the upload alone.
#[must_use]
pub fn upload_sequential_fields(
    bytes: u64,
    read_ms: f64,
    upload_ms: f64,
    unpack_ms: f64,
    total_ms: f64,
) -> String {
    format!(
        "bytes={bytes} read_ms={read_ms:.3} upload_ms={upload_ms:.3} unpack_ms={unpack_ms:.3} \
         total_ms={total_ms:.3} upload_gbps={:.2}",
        gbps(bytes, upload_ms)
    )
}

/// `stored_over_f32_upload=..`: the stored window's upload time over the f32 window's.
#[must_use]
pub fn stored_over_f32_upload(stored_ms: f64, f32_ms: f64) -> String {
    format!("stored_over_f32_upload={:.3}", stored_ms / f32_ms)
}

/// The upload bench's fields for a window of `bytes` uploaded from the loader's buffers and
/// unpacked in `ms` (median): `upload_and_unpack_ms=.. upload_and_unpack_gbps=..`, the rate
/// counting both steps (it was printed as `upload_gbps`).
#[must_use]
pub fn upload_and_unpack_fields(bytes: u64, ms: f64) -> String {
    format!(
        "upload_and_unpack_ms={ms:.3} upload_and_unpack_gbps={:.2}",
        gbps(bytes, ms)
    )
}

/// The upload bench's fields for the loader alone reading `windows` windows of
/// `window_bytes` in `seconds`: `windows=.. windows_per_s=.. read_gbps=..`.
#[must_use]
pub fn loader_only_fields(windows: u64, window_bytes: u64, seconds: f64) -> String {
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
pub fn upload_pipelined_fields(
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

/// Milliseconds that `passes` passes over `bytes` take at `bandwidth_gbps` (GB/s, reads and
/// writes together): the device-memory floor of a kernel.
#[must_use]
pub fn floor_ms(passes: f64, bytes: u64, bandwidth_gbps: f64) -> f64 {
    passes * bytes as f64 / (bandwidth_gbps * 1e9) * 1e3
}

/// The preprocess bench's fields for a stage that took `ms` on a window of `f32_bytes`
/// (`int16_bytes` as int16) and must make `passes` passes over it at `bandwidth_gbps`:
/// `ms=.. passes=.. floor_ms=.. floor_ratio=.. int16_gbps=..`.
#[must_use]
pub fn stage_fields(
    ms: f64,
    passes: f64,
    (f32_bytes, int16_bytes): (u64, u64),
    bandwidth_gbps: f64,
) -> String {
    let floor = floor_ms(passes, f32_bytes, bandwidth_gbps);
    format!(
        "ms={ms:.4} passes={passes} floor_ms={floor:.4} floor_ratio={:.2} int16_gbps={:.1}",
        ms / floor,
        gbps(int16_bytes, ms)
    )
}

/// The preprocess bench's fields for the whole chain taking `ms` per window of
/// `int16_bytes`: `device_windows_per_s=.. device_int16_gbps=..`.
#[must_use]
pub fn device_chain_fields(ms: f64, int16_bytes: u64) -> String {
    format!(
        "device_windows_per_s={:.1} device_int16_gbps={:.1}",
        1e3 / ms,
        gbps(int16_bytes, ms)
    )
}

/// The preprocess bench's fields for `windows` windows streamed in `seconds`, `bytes`
/// uploaded in all: `streamed_windows_per_s=.. streamed_int16_gbps=..`.
#[must_use]
pub fn streamed_fields(windows: u64, bytes: u64, seconds: f64) -> String {
    format!(
        "streamed_windows_per_s={:.1} streamed_int16_gbps={:.2}",
        windows as f64 / seconds.max(f64::MIN_POSITIVE),
        gb_per_s(bytes, seconds)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 384 x 60 000 window: 46.08 MB of int16, 92.16 MB of f32.
    const INT16: u64 = 384 * 60_000 * 2;
    const F32: u64 = 384 * 60_000 * 4;

    #[test]
    fn the_median_is_the_middle_value_in_milliseconds() {
        assert_eq!(median_ms(&[0.003, 0.001, 0.002]), 2.0);
        assert_eq!(median_ms(&[0.004, 0.001, 0.002, 0.003]), 3.0);
        assert!(median_ms(&[]).is_nan());
    }

    // Guards `upload --windows 20`, whose source held 20 windows while the sequential run
    // from the loader's buffers reads the default 30 reps + 2 warm-ups.
    #[test]
    fn the_upload_source_holds_every_window_read() {
        for (windows, reps) in [(20, 30), (200, 30), (1, 1), (33, 30), (4, 2)] {
            let repeats = upload_source_repeats(windows, reps, 4);
            assert!(repeats * 4 >= windows.max(reps + 2), "{windows} {reps}");
            assert!(
                (repeats - 1) * 4 < windows.max(reps + 2),
                "{windows} {reps}"
            );
        }
        assert_eq!(upload_source_repeats(20, 30, 4), 8);
        assert_eq!(upload_source_repeats(200, 30, 4), 50);
        assert_eq!(upload_source_repeats(1, u64::MAX, 4), u64::MAX / 4 + 1);
    }

    // The H200 figures of docs/PERFORMANCE.md (2026-12-01), recomputed from their times.
    #[test]
    fn upload_fields_are_bytes_over_the_times_they_name() {
        assert_eq!(
            upload_sequential_fields(INT16, 8.234, 40.925, 0.179, 49.5),
            "bytes=46080000 read_ms=8.234 upload_ms=40.925 unpack_ms=0.179 total_ms=49.500 \
             upload_gbps=1.13"
        );
        assert_eq!(
            stored_over_f32_upload(40.925, 21.294),
            "stored_over_f32_upload=1.922"
        );
        // Upload and unpack together: 46.08 MB in 0.991 ms.
        assert_eq!(
            upload_and_unpack_fields(INT16, 0.991),
            "upload_and_unpack_ms=0.991 upload_and_unpack_gbps=46.50"
        );
        assert_eq!(
            loader_only_fields(200, INT16, 200.0 / 117.9),
            "windows=200 windows_per_s=117.9 read_gbps=5.43"
        );
        assert_eq!(
            upload_pipelined_fields(200, 1.531, (INT16, INT16), &[1.0, 0.317], &[0.1, 0.05]),
            "pipelined_windows=200 seconds=1.531 windows_per_s=130.6 input_gbps=6.02 \
             int16_equiv_gbps=6.02 waiting_for_reader_s=1.317 in_upload_calls_s=0.150"
        );
        // The f32 path uploads twice the bytes; its int16 equivalent is half its input.
        assert_eq!(
            upload_pipelined_fields(100, 2.0, (F32, INT16), &[], &[]),
            "pipelined_windows=100 seconds=2.000 windows_per_s=50.0 input_gbps=4.61 \
             int16_equiv_gbps=2.30 waiting_for_reader_s=0.000 in_upload_calls_s=0.000"
        );
    }

    // The floor of docs/PERFORMANCE.md: one pass over 92.16 MB at 4.26 TB/s is 0.0216 ms;
    // the chain's 11.5 passes 0.2488 ms, and its 1.8433 ms 7.41 times that.
    #[test]
    fn preprocess_fields_compare_stages_with_the_memory_floor() {
        assert!((floor_ms(1.0, F32, 4260.0) - 0.021_634).abs() < 1e-6);
        assert_eq!(
            stage_fields(1.8433, 11.5, (F32, INT16), 4260.0),
            "ms=1.8433 passes=11.5 floor_ms=0.2488 floor_ratio=7.41 int16_gbps=25.0"
        );
        assert_eq!(
            stage_fields(0.0616, 1.5, (F32, INT16), 4260.0),
            "ms=0.0616 passes=1.5 floor_ms=0.0325 floor_ratio=1.90 int16_gbps=748.1"
        );
        assert_eq!(
            device_chain_fields(1.8433, INT16),
            "device_windows_per_s=542.5 device_int16_gbps=25.0"
        );
        // 100 windows of 384 x (60 000 + 2 x 503 halo) int16 in 100 / 53.3 s.
        let bytes = 100 * 384 * (60_000 + 2 * 503) * 2;
        assert_eq!(
            streamed_fields(100, bytes, 100.0 / 53.3),
            "streamed_windows_per_s=53.3 streamed_int16_gbps=2.50"
        );
    }
}
