//! Per-stage reports and progress: what each stage of a sort took (time, bytes, memory) and
//! how far a long pass has come.

use std::fmt;
use std::time::{Duration, Instant};

use cubecl::client::Client;
use dspk_core::format_bytes;

/// How far a pass has come: `done` of `total` windows of `stage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// The stage's name.
    pub stage: &'static str,
    /// Windows processed so far.
    pub done: usize,
    /// Windows in the pass.
    pub total: usize,
}

/// What one pass over the recording did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassReport {
    /// The pass's name (`"whitening fit"`, `"detection"`, ...).
    pub name: &'static str,
    /// Windows processed.
    pub windows: usize,
    /// Of those, windows served from device memory (residency): nothing read or uploaded.
    pub resident_windows: usize,
    /// Bytes read from the host (the recording source) in this pass.
    pub read_bytes: u64,
    /// Bytes uploaded to the device in this pass (stored integers, or `f32`).
    pub uploaded_bytes: u64,
    /// Wall time from the first read to the device finishing the last window.
    pub wall: Duration,
    /// The pass on the device's clock, from its first to its last device operation, as the
    /// runtime's profiler measures it (CUDA events, GPU timestamps; CUDA's includes the
    /// device's idle gaps between windows, so it is not busy time); `None` where the runtime
    /// times on the host only or could not profile (then [`wall`](Self::wall) is the figure).
    pub device: Option<Duration>,
}

impl PassReport {
    /// The report of a host step `name` begun at `started`: no windows, no bytes.
    #[must_use]
    pub fn host(name: &'static str, started: Instant) -> Self {
        Self {
            name,
            windows: 0,
            resident_windows: 0,
            read_bytes: 0,
            uploaded_bytes: 0,
            wall: started.elapsed(),
            device: None,
        }
    }
}

/// What one stage of the sort took.
#[derive(Debug, Clone, PartialEq)]
pub struct StageReport {
    /// The stage: its pass over the recording (name, windows, bytes, wall time), or a host
    /// step with no windows.
    pub pass: PassReport,
    /// Spikes the stage produced, where it produces spikes.
    pub spikes: Option<usize>,
    /// Peak resident memory of the process at the end of the stage (Linux `VmHWM`), if known.
    pub peak_host_bytes: Option<u64>,
    /// Device memory the runtime has reserved at the end of the stage.
    pub device_reserved_bytes: u64,
}

impl StageReport {
    /// The report of `pass`, with the memory figures read now.
    #[must_use]
    pub fn new(client: &Client, pass: PassReport, spikes: Option<usize>) -> Self {
        Self {
            pass,
            spikes,
            peak_host_bytes: peak_host_bytes(),
            device_reserved_bytes: device_reserved_bytes(client),
        }
    }
}

impl fmt::Display for StageReport {
    /// One line: `stage: 1.234 s (device 1.100 s), 5 windows (5 resident), read 1.2 MB,
    /// uploaded 1.2 MB, 123 spikes, host peak 1.0 GB, device 2.0 GB` (the device time where
    /// the runtime measures one, the spikes where the stage finds spikes).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.pass;
        write!(f, "{}: {:.3} s", p.name, p.wall.as_secs_f64())?;
        if let Some(device) = p.device {
            write!(f, " (device {:.3} s)", device.as_secs_f64())?;
        }
        write!(
            f,
            ", {} windows ({} resident), read {}, uploaded {}",
            p.windows,
            p.resident_windows,
            format_bytes(p.read_bytes),
            format_bytes(p.uploaded_bytes)
        )?;
        if let Some(spikes) = self.spikes {
            write!(f, ", {spikes} spikes")?;
        }
        if let Some(host) = self.peak_host_bytes {
            write!(f, ", host peak {}", format_bytes(host))?;
        }
        write!(f, ", device {}", format_bytes(self.device_reserved_bytes))
    }
}

/// Device bytes the runtime has reserved (all streams).
#[must_use]
pub fn device_reserved_bytes(client: &Client) -> u64 {
    client
        .memory_report(cubecl::MemoryScope::Device)
        .usage()
        .bytes_reserved
}

/// The process's peak resident set (`VmHWM` of `/proc/self/status`), where there is one.
#[must_use]
pub fn peak_host_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stage_line_names_every_figure() {
        let report = StageReport {
            pass: PassReport {
                name: "detection",
                windows: 5,
                resident_windows: 5,
                read_bytes: 0,
                uploaded_bytes: 1_500_000,
                wall: Duration::from_millis(1234),
                device: Some(Duration::from_millis(1100)),
            },
            spikes: Some(42),
            peak_host_bytes: Some(2_000_000_000),
            device_reserved_bytes: 3_000_000,
        };
        assert_eq!(
            report.to_string(),
            "detection: 1.234 s (device 1.100 s), 5 windows (5 resident), read 0 bytes, uploaded \
             1.50 MB, 42 spikes, host peak 2.00 GB, device 3.00 MB"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn peak_host_bytes_reads_this_process() {
        let peak = peak_host_bytes().unwrap();
        assert!(peak > 1_000_000, "{peak}");
    }
}
