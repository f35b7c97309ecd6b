//! The arithmetic of the loader bench (`benches/loader.rs`), tested apart from a device (in
//! `tests/bench_arithmetic.rs`): the size of the recording it writes, the parts its plain
//! `pread` threads read, rates in GB/s and windows/s, page-cache residency, and the table it
//! prints.

/// The bench's recording: `samples` samples of `channels` int16 channels, cut into `windows`
/// windows of `window_samples` (the last one shorter when they do not divide evenly).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BenchRecording {
    /// Channels (interleaved int16).
    pub(crate) channels: usize,
    /// Samples per channel.
    pub(crate) samples: u64,
    /// Samples per window.
    pub(crate) window_samples: u64,
}

impl BenchRecording {
    /// The recording of whole windows nearest `bytes` (at least one window) of `channels`
    /// int16 channels in windows of `window_samples`: what the bench writes when given no file.
    #[must_use]
    pub(crate) fn of_bytes(bytes: u64, channels: usize, window_samples: u64) -> Self {
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
    pub(crate) fn of_file(file_bytes: u64, channels: usize, window_samples: u64) -> Option<Self> {
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
    pub(crate) fn bytes(&self) -> u64 {
        self.channels as u64 * self.samples * 2
    }

    /// The number of windows (`ceil(samples / window_samples)`).
    #[must_use]
    pub(crate) fn windows(&self) -> u64 {
        self.samples.div_ceil(self.window_samples)
    }

    /// Bytes of one sample of every channel (`channels * 2`).
    #[must_use]
    pub(crate) fn frame_bytes(&self) -> u64 {
        self.channels as u64 * 2
    }

    /// The samples of part `part` of `parts` of window `window`, cut by time as the loader
    /// cuts a window among its reader threads (part `p` starts `window_samples * p / parts`
    /// into the window), clipped to the recording (the last window may be short, and some of
    /// its parts empty). `parts` of 0 counts as 1.
    #[must_use]
    pub(crate) fn window_part(&self, window: u64, part: u64, parts: u64) -> std::ops::Range<u64> {
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
pub(crate) fn rates(bytes: u64, windows: u64, seconds: f64) -> (f64, f64) {
    let seconds = seconds.max(f64::MIN_POSITIVE);
    (bytes as f64 / seconds / 1e9, windows as f64 / seconds)
}

/// The percentage of `pages` that are `resident` (100 for an empty file, which has nothing to
/// read from the disk).
#[must_use]
pub(crate) fn resident_percent(resident: u64, pages: u64) -> f64 {
    if pages == 0 {
        100.0
    } else {
        100.0 * resident as f64 / pages as f64
    }
}

/// The header of the bench's table.
#[must_use]
pub(crate) fn table_header() -> String {
    format!(
        "{:<7} {:<24} {:>7} {:>8} {:>10} {:>8} {:>9}",
        "from", "what", "threads", "GB/s", "windows/s", "seconds", "resident%"
    )
}

/// One row of the bench's table: `what` (e.g. `loader`, `pipelined upload`) read `from`
/// (`cache`, `disk`, `direct`) with `threads` threads, `bytes` in `windows` windows in
/// `seconds`, with `resident` percent of the file in the page cache when it started.
#[must_use]
pub(crate) fn table_row(
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
pub(crate) fn parse_thread_list(list: &str) -> Option<Vec<usize>> {
    let threads: Option<Vec<usize>> = list
        .split(',')
        .map(|t| t.trim().parse().ok().filter(|n| (1..=1024).contains(n)))
        .collect();
    threads.filter(|t| !t.is_empty())
}
