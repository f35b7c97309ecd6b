//! The arithmetic of the loader bench (`benches/loader.rs`): the size of the recording it
//! writes, the parts its plain `pread` threads read, rates in GB/s and windows/s, page-cache
//! residency, and the table it prints.

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

    /// Bytes of one sample of every channel (`channels * 2`).
    #[must_use]
    pub fn frame_bytes(&self) -> u64 {
        self.channels as u64 * 2
    }

    /// The samples of part `part` of `parts` of window `window`, cut by time as the loader
    /// cuts a window among its reader threads (part `p` starts `window_samples * p / parts`
    /// into the window), clipped to the recording (the last window may be short, and some of
    /// its parts empty). `parts` of 0 counts as 1.
    #[must_use]
    pub fn window_part(&self, window: u64, part: u64, parts: u64) -> std::ops::Range<u64> {
        let parts = parts.max(1);
        let start = window * self.window_samples;
        let cut = |p: u64| {
            let into = u128::from(self.window_samples) * u128::from(p) / u128::from(parts);
            (start + into as u64).min(self.samples)
        };
        cut(part)..cut(part + 1)
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
    fn window_parts_cover_each_window_once() {
        let r = BenchRecording::of_file(768 * 100_001, 384, 60_000).unwrap();
        assert_eq!(r.frame_bytes(), 768);
        assert_eq!(r.window_part(0, 0, 1), 0..60_000);
        assert_eq!(r.window_part(0, 0, 0), 0..60_000);
        assert_eq!(r.window_part(0, 1, 8), 7_500..15_000);
        assert_eq!(r.window_part(1, 0, 3), 60_000..80_000);
        // The last window holds 40 001 samples: its parts are clipped, the last one empty.
        assert_eq!(r.window_part(1, 1, 3), 80_000..100_000);
        assert_eq!(r.window_part(1, 2, 3), 100_000..100_001);
        assert_eq!(r.window_part(1, 6, 7), 100_001..100_001);
        for parts in 1..=16 {
            for window in 0..r.windows() {
                let pieces: Vec<_> = (0..parts)
                    .map(|p| r.window_part(window, p, parts))
                    .collect();
                assert_eq!(pieces[0].start, window * 60_000);
                assert_eq!(
                    pieces[parts as usize - 1].end,
                    ((window + 1) * 60_000).min(r.samples)
                );
                assert!(pieces.windows(2).all(|pair| pair[0].end == pair[1].start));
            }
        }
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
