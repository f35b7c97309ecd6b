//! The arithmetic behind the preprocess bench's printed figures (`benches/preprocess.rs`): each
//! function takes what was measured and returns the `key=value` fields the bench prints, tested
//! apart from a device (in `tests/bench_arithmetic.rs`). Rates are in GB/s of 10^9 bytes.

use crate::rates::{gb_per_ms, gb_per_s};

/// Milliseconds that `passes` passes over `bytes` take at `bandwidth_gbps` (GB/s, reads and
/// writes together): the device-memory floor of a kernel.
#[must_use]
pub(crate) fn floor_ms(passes: f64, bytes: u64, bandwidth_gbps: f64) -> f64 {
    passes * bytes as f64 / (bandwidth_gbps * 1e9) * 1e3
}

/// The preprocess bench's fields for a stage that took `ms` on a window of `f32_bytes`
/// (`int16_bytes` as int16) and must make `passes` passes over it at `bandwidth_gbps`:
/// `ms=.. passes=.. floor_ms=.. floor_ratio=.. int16_gbps=..`.
#[must_use]
pub(crate) fn stage_fields(
    ms: f64,
    passes: f64,
    (f32_bytes, int16_bytes): (u64, u64),
    bandwidth_gbps: f64,
) -> String {
    let floor = floor_ms(passes, f32_bytes, bandwidth_gbps);
    format!(
        "ms={ms:.4} passes={passes} floor_ms={floor:.4} floor_ratio={:.2} int16_gbps={:.1}",
        ms / floor,
        gb_per_ms(int16_bytes, ms)
    )
}

/// The preprocess bench's fields for the whole chain taking `ms` per window of
/// `int16_bytes`: `device_windows_per_s=.. device_int16_gbps=..`.
#[must_use]
pub(crate) fn device_chain_fields(ms: f64, int16_bytes: u64) -> String {
    format!(
        "device_windows_per_s={:.1} device_int16_gbps={:.1}",
        1e3 / ms,
        gb_per_ms(int16_bytes, ms)
    )
}

/// The preprocess bench's fields for `windows` windows streamed in `seconds`, `bytes`
/// uploaded in all: `streamed_windows_per_s=.. streamed_int16_gbps=..`.
#[must_use]
pub(crate) fn streamed_fields(windows: u64, bytes: u64, seconds: f64) -> String {
    format!(
        "streamed_windows_per_s={:.1} streamed_int16_gbps={:.2}",
        windows as f64 / seconds.max(f64::MIN_POSITIVE),
        gb_per_s(bytes, seconds)
    )
}
