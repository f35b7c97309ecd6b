//! The arithmetic of the view bench (`benches/view.rs`): recording sizes, build rates as GB/s
//! of stored samples and multiples of real time, pyramid bytes per recording byte, latency
//! medians and the resident memory read from `/proc/self/status`.

/// Bytes of a recording of `channels` x `samples` stored samples of `sample_bytes` bytes.
#[must_use]
pub fn recording_bytes(channels: usize, samples: u64, sample_bytes: usize) -> u64 {
    channels as u64 * samples * sample_bytes as u64
}

/// A build (or read) of `bytes` of stored samples covering `samples` samples per channel at
/// `sample_rate` Hz that took `seconds`: (GB/s with 1 GB = 10^9 bytes, times real time: the
/// recording's duration over the seconds taken).
#[must_use]
pub fn build_rates(bytes: u64, samples: u64, sample_rate: f64, seconds: f64) -> (f64, f64) {
    let seconds = seconds.max(f64::MIN_POSITIVE);
    (
        bytes as f64 / seconds / 1e9,
        samples as f64 / sample_rate / seconds,
    )
}

/// Pyramid bytes per recording byte.
#[must_use]
pub fn bytes_per_recording_byte(pyramid_bytes: u64, recording_bytes: u64) -> f64 {
    pyramid_bytes as f64 / recording_bytes.max(1) as f64
}

/// The median of `seconds` in milliseconds (the upper middle value of an even count), and the
/// largest, in milliseconds; `(NaN, NaN)` for none.
#[must_use]
pub fn latency_ms(seconds: &[f64]) -> (f64, f64) {
    let mut sorted = seconds.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.last() {
        None => (f64::NAN, f64::NAN),
        Some(&max) => (sorted[sorted.len() / 2] * 1e3, max * 1e3),
    }
}

/// The resident set size in bytes from the text of `/proc/self/status` (its `VmRSS:` line, in
/// kB of 1024 bytes); `None` when the line is missing or malformed.
#[must_use]
pub fn resident_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let mut words = line["VmRSS:".len()..].split_whitespace();
    let kib: u64 = words.next()?.parse().ok()?;
    (words.next()? == "kB").then_some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_rates() {
        // 384 channels x 10 min at 30 kHz of int16: 13.824 GB.
        let bytes = recording_bytes(384, 600 * 30_000, 2);
        assert_eq!(bytes, 13_824_000_000);
        let (gbps, realtime) = build_rates(bytes, 600 * 30_000, 30_000.0, 4.0);
        assert!((gbps - 3.456).abs() < 1e-12);
        assert!((realtime - 150.0).abs() < 1e-12);
        assert!((bytes_per_recording_byte(1_000, 16_000) - 0.0625).abs() < 1e-15);
        assert!(build_rates(1, 1, 1.0, 0.0).0.is_finite());
    }

    #[test]
    fn medians_and_memory() {
        assert_eq!(latency_ms(&[0.003, 0.001, 0.002]), (2.0, 3.0));
        assert_eq!(latency_ms(&[0.004, 0.001]), (4.0, 4.0));
        assert!(latency_ms(&[]).0.is_nan());
        let status = "Name:\tbench\nVmPeak:\t  100 kB\nVmRSS:\t   2048 kB\nThreads:\t4\n";
        assert_eq!(resident_bytes(status), Some(2 * 1024 * 1024));
        assert_eq!(resident_bytes("VmRSS: lots"), None);
        assert_eq!(resident_bytes("VmRSS: 12 MB"), None);
        assert_eq!(resident_bytes("Name: x"), None);
    }
}
