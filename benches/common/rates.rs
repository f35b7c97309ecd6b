//! Bytes and rates as the benches count them: a window's bytes as it crosses to the device, and
//! GB/s of 10^9 bytes.

use dspk::SampleFormat;

/// The bytes of a window of `channels x samples` values stored as `format`: what crosses to
/// the device for a stored window (`2` per value for int16), and what benches count per window.
#[must_use]
pub(crate) fn window_bytes(channels: usize, samples: usize, format: SampleFormat) -> u64 {
    channels as u64 * samples as u64 * format.size() as u64
}

/// `bytes` moved in `seconds`, in GB/s (10^9 bytes per second).
#[must_use]
pub(crate) fn gb_per_s(bytes: u64, seconds: f64) -> f64 {
    bytes as f64 / seconds.max(f64::MIN_POSITIVE) / 1e9
}

/// `bytes` moved in `ms` milliseconds, in GB/s.
#[must_use]
pub(crate) fn gb_per_ms(bytes: u64, ms: f64) -> f64 {
    gb_per_s(bytes, ms * 1e-3)
}
