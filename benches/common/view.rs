//! The arithmetic of the view bench (`benches/view.rs`), tested apart from a device (in
//! `tests/bench_arithmetic.rs`): recording sizes, build rates as GB/s of stored samples and
//! multiples of real time, pyramid bytes per recording byte and latency medians.

/// Bytes of a recording of `channels` x `samples` stored samples of `sample_bytes` bytes.
#[must_use]
pub(crate) fn recording_bytes(channels: usize, samples: u64, sample_bytes: usize) -> u64 {
    channels as u64 * samples * sample_bytes as u64
}

/// A build (or read) of `bytes` of stored samples covering `samples` samples per channel at
/// `sample_rate` Hz that took `seconds`: (GB/s with 1 GB = 10^9 bytes, times real time: the
/// recording's duration over the seconds taken).
#[must_use]
pub(crate) fn build_rates(bytes: u64, samples: u64, sample_rate: f64, seconds: f64) -> (f64, f64) {
    let seconds = seconds.max(f64::MIN_POSITIVE);
    (
        bytes as f64 / seconds / 1e9,
        samples as f64 / sample_rate / seconds,
    )
}

/// Pyramid bytes per recording byte.
#[must_use]
pub(crate) fn bytes_per_recording_byte(pyramid_bytes: u64, recording_bytes: u64) -> f64 {
    pyramid_bytes as f64 / recording_bytes.max(1) as f64
}

/// The median of `seconds` in milliseconds (the upper middle value of an even count), and the
/// largest, in milliseconds; `(NaN, NaN)` for none.
#[must_use]
pub(crate) fn latency_ms(seconds: &[f64]) -> (f64, f64) {
    let mut sorted = seconds.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.last() {
        None => (f64::NAN, f64::NAN),
        Some(&max) => (sorted[sorted.len() / 2] * 1e3, max * 1e3),
    }
}
