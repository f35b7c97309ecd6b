//! The arithmetic of the loader bench (`benches/loader.rs`): the size of the recording it
//! writes, rates in GB/s and windows/s, page-cache residency, and the table it prints.

/// The bench's recording: `samples` samples of `channels` int16 channels, cut into `windows`
/// windows of `window_samples` (the last one shorter when they do not divide evenly).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BenchRecording {
    /// Channels (interleaved int16).
    pub channels: usize,
    /// Samples per channel.
    pub samples: u64,
    /// Samples per window.
    pub window_samples: u64,
}

impl BenchRecording {
    /// The recording of whole windows nearest `bytes` (at least one window) of `channels`
    /// int16 channels in windows of `window_samples`: what the bench writes when given no file.
    #[must_use]
    pub fn of_bytes(bytes: u64, channels: usize, window_samples: u64) -> Self {
        let window_bytes = window_samples.max(1) * channels.max(1) as u64 * 2;
        let windows = (bytes + window_bytes / 2) / window_bytes;
        Self {
            channels: channels.max(1),
            samples: windows.max(1) * window_samples.max(1),
            window_samples: window_samples.max(1),
        }
    }

    /// A recording of a file of `file_bytes` (no header) of `channels` int16 channels; `None`
    /// if the file holds no whole sample.
    #[must_use]
    pub fn of_file(file_bytes: u64, channels: usize, window_samples: u64) -> Option<Self> {
        let frame = channels.max(1) as u64 * 2;
        let samples = file_bytes / frame;
        (samples > 0).then_some(Self {
            channels: channels.max(1),
            samples,
            window_samples: window_samples.max(1),
        })
    }

    /// The recording's bytes (`channels * samples * 2`).
    #[must_use]
    pub fn bytes(&self) -> u64 {
        self.channels as u64 * self.samples * 2
    }

    /// The number of windows (`ceil(samples / window_samples)`).
    #[must_use]
    pub fn windows(&self) -> u64 {
        self.samples.div_ceil(self.window_samples)
    }
}

/// `bytes` read as `windows` windows in `seconds`: (GB/s with 1 GB = 10^9 bytes, windows/s).
#[must_use]
pub fn rates(bytes: u64, windows: u64, seconds: f64) -> (f64, f64) {
    let seconds = seconds.max(f64::MIN_POSITIVE);
    (bytes as f64 / seconds / 1e9, windows as f64 / seconds)
}

/// The percentage of `pages` that are `resident` (100 for an empty file, which has nothing to
/// read from the disk).
#[must_use]
pub fn resident_percent(resident: u64, pages: u64) -> f64 {
    if pages == 0 {
        100.0
    } else {
        100.0 * resident as f64 / pages as f64
    }
}

/// The header of the bench's table.
#[must_use]
pub fn table_header() -> String {
    format!(
        "{:<7} {:<24} {:>7} {:>8} {:>10} {:>8} {:>9}",
        "from", "what", "threads", "GB/s", "windows/s", "seconds", "resident%"
    )
}

/// One row of the bench's table: `what` (e.g. `loader`, `pipelined upload`) read `from`
/// (`cache`, `disk`, `direct`) with `threads` threads, `bytes` in `windows` windows in
/// `seconds`, with `resident` percent of the file in the page cache when it started.
#[must_use]
pub fn table_row(
    from: &str,
    what: &str,
    threads: usize,
    (bytes, windows): (u64, u64),
    seconds: f64,
    resident: f64,
) -> String {
    let (gbps, per_s) = rates(bytes, windows, seconds);
    format!(
        "{from:<7} {what:<24} {threads:>7} {gbps:>8.2} {per_s:>10.1} {seconds:>8.3} {resident:>9.1}"
    )
}

/// Parses a comma-separated list of thread counts (`"1,2,4,8,16"`); `None` if an entry is not
/// a whole number from 1 to 1024 or the list is empty.
#[must_use]
pub fn parse_thread_list(list: &str) -> Option<Vec<usize>> {
    let threads: Option<Vec<usize>> = list
        .split(',')
        .map(|t| t.trim().parse().ok().filter(|n| (1..=1024).contains(n)))
        .collect();
    threads.filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recordings_are_whole_windows_of_int16() {
        // 4 GB of 384 channels in windows of 60 000: 46.08 MB a window, 86.8 -> 87 windows.
        let r = BenchRecording::of_bytes(4_000_000_000, 384, 60_000);
        assert_eq!(r.windows(), 87);
        assert_eq!(r.samples, 87 * 60_000);
        assert_eq!(r.bytes(), 87 * 46_080_000);
        assert_eq!(BenchRecording::of_bytes(1, 384, 60_000).windows(), 1);
        // A file: trailing bytes of a partial sample are left out, the last window is short.
        let f = BenchRecording::of_file(768 * 100_001 + 5, 384, 60_000).unwrap();
        assert_eq!(
            (f.samples, f.windows(), f.bytes()),
            (100_001, 2, 768 * 100_001)
        );
        assert_eq!(BenchRecording::of_file(767, 384, 60_000), None);
    }

    #[test]
    fn rates_and_rows() {
        let (gbps, per_s) = rates(46_080_000 * 117, 117, 1.0);
        assert!((gbps - 5.391_36).abs() < 1e-9 && (per_s - 117.0).abs() < 1e-12);
        let (gbps, per_s) = rates(2_000_000_000, 40, 0.5);
        assert!((gbps - 4.0).abs() < 1e-12 && (per_s - 80.0).abs() < 1e-12);
        assert!(rates(1, 1, 0.0).0.is_finite());
        assert_eq!(resident_percent(0, 0), 100.0);
        assert_eq!(resident_percent(25, 100), 25.0);
        let row = table_row("cache", "loader", 8, (2_000_000_000, 40), 0.5, 99.96);
        assert_eq!(
            row,
            "cache   loader                         8     4.00       80.0    0.500     100.0"
        );
        assert_eq!(table_header().len(), row.len());
    }

    #[test]
    fn thread_lists() {
        assert_eq!(parse_thread_list("1,2, 4,8,16"), Some(vec![1, 2, 4, 8, 16]));
        assert_eq!(parse_thread_list("3"), Some(vec![3]));
        assert_eq!(parse_thread_list("1,0"), None);
        assert_eq!(parse_thread_list(""), None);
        assert_eq!(parse_thread_list("two"), None);
    }
}
