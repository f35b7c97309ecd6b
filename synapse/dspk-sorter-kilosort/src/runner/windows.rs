//! `DeviceWindows`: the one path every pass of the sort takes through the recording.
//!
//! The streaming path of dspk-ops ([`WindowStream`]: a background reader, the source asked once
//! whether it can return stored integers, stored upload and device unpack if so, scaled `f32`
//! otherwise, halos) with a [`WindowChain`] (the sorter's preprocessing), plus **residency**: the
//! first pass keeps the recording's stored windows on the device, in order, while they fit a
//! device-memory budget, and every later pass reads those from there and streams only the rest
//! from the source. A recording that fits is read from disk once (Kilosort4 reads it once per
//! pass); one larger than the budget is read once in full and then only past the kept part.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cubecl::client::Client;
use dspk_core::{ChunkSchedule, ComputeTarget, HaloWindow, RecordingSource};
use dspk_ops::{DeviceWindow, Pipeline, ResidentWindows, StreamOptions, WindowStream};

use super::report::{PassReport, Progress, device_reserved_bytes};
use crate::{Error, Result};

/// Device memory kept free of resident windows by default, as a fraction of what the runtime
/// reports ([`default_resident_budget`]).
pub const SCRATCH_FRACTION: f64 = 0.125;

/// Device bytes kept free of resident windows by default at the least ([`default_resident_budget`]):
/// the passes' scratch (detection's score buffers are the largest) took 2.2 GB for 384
/// channels on the H200 (docs/PERFORMANCE.md, the sorter's stages).
pub const SCRATCH_BYTES: u64 = 8_000_000_000;

/// The residency budget when `resident_bytes` is not set, for a device of `total` bytes: all
/// of it but a reserve for the passes' scratch, the larger of [`SCRATCH_FRACTION`] of it and
/// [`SCRATCH_BYTES`], and never more than half of it (123 GB of an H200's 141 GB; 16 GB of a
/// 24 GB card; half of an 8 GB one).
#[must_use]
pub fn default_resident_budget(total: u64) -> u64 {
    let reserve = ((total as f64 * SCRATCH_FRACTION) as u64)
        .max(SCRATCH_BYTES)
        .min(total / 2);
    total - reserve
}

/// The device chain every pass runs on each window as it arrives: the sorter's preprocessing
/// ([`Preprocessing`](crate::preprocessing::Preprocessing)).
pub trait WindowChain: Send + Sync {
    /// A fresh pipeline for one pass.
    ///
    /// # Errors
    ///
    /// As the stages' constructors.
    fn pipeline(&self, client: &Client) -> Result<Pipeline>;

    /// Samples of halo the chain needs on each side of the samples it must get right.
    ///
    /// # Errors
    ///
    /// As the stages' constructors (filter designs).
    fn settling(&self) -> Result<usize>;
}

/// The recording as processed device windows, pass after pass (see the module doc).
pub struct DeviceWindows {
    client: Client,
    source: Arc<dyn RecordingSource>,
    options: StreamOptions,
    chain: Box<dyn WindowChain>,
    schedule: ChunkSchedule,
    budget: u64,
    resident: Option<ResidentWindows>,
    passes: usize,
}

impl DeviceWindows {
    /// Windows of `window` owned samples of `channels` of `source`, with `extra_halo` samples
    /// on each side beyond the chain's settling, processed by `chain`
    /// on `client`; stored windows stay resident after the first pass when they take at most
    /// `resident_budget` device bytes (0: never).
    ///
    /// # Errors
    ///
    /// [`Error::Input`] for an empty recording; the pipeline's and the schedule's errors.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: &Client,
        source: Arc<dyn RecordingSource>,
        channels: Vec<usize>,
        window: u64,
        extra_halo: u64,
        target: Option<ComputeTarget>,
        chain: Box<dyn WindowChain>,
        resident_budget: u64,
    ) -> Result<Self> {
        let num_samples = source.info().num_samples;
        if num_samples == 0 {
            return Err(Error::Input {
                what: "recording",
                reason: "it holds no samples".to_string(),
            });
        }
        let settling = chain.settling()? as u64;
        let schedule = ChunkSchedule::symmetric(num_samples, window, settling + extra_halo)?;
        Ok(Self {
            client: client.clone(),
            source,
            options: StreamOptions {
                window,
                extra_halo,
                channels: Some(channels),
                target,
            },
            chain,
            schedule,
            budget: resident_budget,
            resident: None,
            passes: 0,
        })
    }

    /// Channels of every window.
    #[must_use]
    pub fn channels(&self) -> usize {
        self.options.channels.as_ref().map_or(0, Vec::len)
    }

    /// Samples in the recording.
    #[must_use]
    pub fn num_samples(&self) -> u64 {
        self.schedule.num_samples()
    }

    /// How the recording is cut into windows.
    #[must_use]
    pub fn schedule(&self) -> &ChunkSchedule {
        &self.schedule
    }

    /// The longest window's samples (owned plus halos).
    #[must_use]
    pub fn max_read_len(&self) -> usize {
        usize::try_from(self.schedule.max_read_len()).unwrap_or(usize::MAX)
    }

    /// Windows kept on the device after the first pass (the first ones of the schedule, as
    /// many as fitted the budget; 0 before the first pass or when none are kept), which later
    /// passes read from device memory; the rest they stream from the source.
    #[must_use]
    pub fn resident_windows(&self) -> usize {
        self.resident.as_ref().map_or(0, ResidentWindows::len)
    }

    /// Runs `visit` on every processed window in order; `progress` hears after each window.
    /// The first pass keeps the stored windows on the device, in order, while they fit the
    /// budget; passes after that read those from device memory and only the rest from the
    /// source (nothing at all when every window fitted).
    ///
    /// # Errors
    ///
    /// The first error of a read, the device, or `visit`; the pass stops there.
    pub fn pass(
        &mut self,
        name: &'static str,
        progress: &mut dyn FnMut(Progress),
        visit: impl FnMut(&DeviceWindow) -> Result<()>,
    ) -> Result<PassReport> {
        self.pass_selected(name, progress, |_| true, visit)
    }

    /// As [`pass`](Self::pass), visiting only the windows `select` picks (by their ranges).
    /// Windows that are not picked are neither read nor processed, except in the first pass,
    /// which reads every window to keep them on the device. The report counts the windows
    /// processed.
    ///
    /// # Errors
    ///
    /// As [`pass`](Self::pass).
    pub fn pass_selected(
        &mut self,
        name: &'static str,
        progress: &mut dyn FnMut(Progress),
        select: impl Fn(&HaloWindow) -> bool,
        mut visit: impl FnMut(&DeviceWindow) -> Result<()>,
    ) -> Result<PassReport> {
        let started = Instant::now();
        let mut report = PassReport {
            name,
            windows: 0,
            resident_windows: 0,
            read_bytes: 0,
            uploaded_bytes: 0,
            wall: Duration::ZERO,
            device: None,
        };
        let profile = self.client.profile_start().ok();
        let visited = self.visit_windows(&mut report, progress, select, &mut visit);
        let synced = visited.and_then(|()| Ok(cubecl::future::block_on(self.client.sync())?));
        if let Err(error) = synced {
            // A pass that failed leaves no profiling window open behind it.
            if let Some(window) = profile {
                self.client.profile_abandon(window);
            }
            return Err(error);
        }
        self.passes += 1;
        report.wall = started.elapsed();
        report.device = profile.and_then(|window| device_time(&self.client, window));
        Ok(report)
    }

    /// The body of [`pass_selected`](Self::pass_selected): serves the windows (resident or
    /// streamed), visits the selected ones and fills `report`'s counts.
    fn visit_windows(
        &mut self,
        report: &mut PassReport,
        progress: &mut dyn FnMut(Progress),
        select: impl Fn(&HaloWindow) -> bool,
        visit: &mut impl FnMut(&DeviceWindow) -> Result<()>,
    ) -> Result<()> {
        let total = self.schedule.len();
        let name = report.name;
        let mut tell = |done: usize| {
            progress(Progress {
                stage: name,
                done,
                total,
            });
        };
        // Windows kept on the device first (all of them when they fitted the budget), then
        // the rest streamed from the source.
        let mut first = 0;
        let mut told = 0;
        if let Some(resident) = &mut self.resident {
            first = resident.len();
            let picked: Vec<usize> = resident
                .ranges()
                .enumerate()
                .filter(|(_, w)| select(w))
                .map(|(i, _)| i)
                .collect();
            for index in picked {
                if let Some(window) = resident.window(index) {
                    visit(window?)?;
                    report.windows += 1;
                    report.resident_windows += 1;
                }
                told = index + 1;
                tell(told);
            }
            if first == total {
                // The end, once, also when the last windows were not picked.
                if told != total {
                    tell(total);
                }
                return Ok(());
            }
        }
        let pipeline = self.chain.pipeline(&self.client)?;
        // The first pass reads every window (it keeps them on the device); later ones read
        // only the windows they visit.
        let keeping = self.passes == 0;
        let picked = (first..total)
            .filter(|&index| keeping || self.schedule.window(index).is_some_and(|w| select(&w)))
            .collect();
        let mut stream = WindowStream::of_windows(
            &self.client,
            self.source.clone(),
            pipeline,
            &self.options,
            Some(picked),
        )?;
        let keep = keeping && stream.keep_resident(self.budget);
        while let Some(window) = stream.next_window() {
            let window = window?;
            if select(window.window()) {
                visit(window)?;
            }
            report.windows += 1;
            told = window.window().index() + 1;
            tell(told);
        }
        // The end, once, also when the last windows were not picked.
        if told != total {
            tell(total);
        }
        report.read_bytes = stream.uploaded_bytes();
        report.uploaded_bytes = stream.uploaded_bytes();
        if keep {
            self.resident = stream.into_resident().filter(|kept| !kept.is_empty());
        }
        Ok(())
    }
}

/// The device time of a profiling window, when the runtime measured it on the device.
fn device_time(client: &Client, window: cubecl::client::ProfileWindow) -> Option<Duration> {
    let duration = client.profile_end(window).ok()?;
    if duration.timing_method() != cubecl::benchmark::TimingMethod::Device {
        return None;
    }
    cubecl::future::block_on(duration.resolve()).map(|ticks| ticks.duration())
}

/// The residency budget `resident_bytes` asks for on `client`: its value, or
/// [`default_resident_budget`] of the memory the runtime reports, minus what is already
/// reserved (0 when the runtime reports no figure).
#[must_use]
pub fn resident_budget(client: &Client, resident_bytes: Option<u64>) -> u64 {
    resident_bytes.unwrap_or_else(|| {
        let total = client.properties().memory.max_memory().unwrap_or(0);
        default_resident_budget(total).saturating_sub(device_reserved_bytes(client))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dspk_core::test_util::for_each_runtime;
    use dspk_core::{SampleRate, SyntheticRecording};

    /// A chain that leaves the windows as read.
    struct AsRead;

    impl WindowChain for AsRead {
        fn pipeline(&self, _client: &Client) -> Result<Pipeline> {
            Ok(Pipeline::new())
        }

        fn settling(&self) -> Result<usize> {
            Ok(0)
        }
    }

    /// A selective pass visits, reads and processes only the windows it picks, resident or
    /// streamed, and tells progress its end once; the first pass reads every window to keep
    /// the first ones that fit.
    #[test]
    fn a_selective_pass_reads_only_its_windows() {
        for_each_runtime(|target, client| {
            let rate = SampleRate::from_hz(30_000).unwrap();
            let (channels, window) = (3usize, 1_000u64);
            let source = Arc::new(SyntheticRecording::new(channels, 10_000, rate, 9).unwrap());
            let bytes = |w: u64| channels as u64 * w * 2;
            let windows = |budget| {
                DeviceWindows::new(
                    client,
                    source.clone(),
                    (0..channels).collect(),
                    window,
                    0,
                    None,
                    Box::new(AsRead),
                    budget,
                )
                .unwrap()
            };
            let picked = |w: &HaloWindow| [1, 2, 7].contains(&w.index());
            let run = |windows: &mut DeviceWindows, select: &dyn Fn(&HaloWindow) -> bool| {
                let mut told = Vec::new();
                let mut seen = Vec::new();
                let report = windows
                    .pass_selected("test", &mut |p| told.push(p.done), select, |w| {
                        seen.push(w.window().index());
                        Ok(())
                    })
                    .unwrap();
                (report, seen, told)
            };
            // Streamed: the first pass reads all, a later one only windows 1, 2 and 7.
            let mut streamed = windows(0);
            let (first, _, told) = run(&mut streamed, &|_| true);
            assert_eq!(first.read_bytes, bytes(10_000), "{target}");
            assert_eq!(told.last(), Some(&10));
            let (report, seen, told) = run(&mut streamed, &picked);
            assert_eq!(seen, vec![1, 2, 7], "{target}");
            assert_eq!((report.windows, report.resident_windows), (3, 0));
            assert_eq!(report.read_bytes, bytes(3 * window), "{target}");
            assert_eq!(told, vec![2, 3, 8, 10], "{target}: the end once");
            // Four windows kept: 1 and 2 from the device, 7 read.
            let mut part = windows(bytes(4 * window));
            run(&mut part, &|_| true);
            assert_eq!(part.resident_windows(), 4, "{target}");
            let (report, seen, told) = run(&mut part, &picked);
            assert_eq!(seen, vec![1, 2, 7], "{target}");
            assert_eq!((report.windows, report.resident_windows), (3, 2));
            assert_eq!(report.read_bytes, bytes(window), "{target}");
            assert_eq!(told, vec![2, 3, 8, 10], "{target}");
            // Nothing picked past the kept windows: nothing read, the end told once.
            let (report, seen, told) = run(&mut part, &|w| w.index() == 0);
            assert_eq!((seen, report.read_bytes), (vec![0], 0), "{target}");
            assert_eq!(told, vec![1, 10], "{target}");
        });
    }

    #[test]
    fn the_default_budget_leaves_the_scratch_free() {
        // An H200 (141 GB): an eighth kept free.
        let h200 = 141_000_000_000;
        assert_eq!(default_resident_budget(h200), h200 - h200 / 8);
        // 24 GB: the 8 GB floor kept free.
        assert_eq!(default_resident_budget(24_000_000_000), 16_000_000_000);
        // 8 GB and less: never more than half.
        assert_eq!(default_resident_budget(8_000_000_000), 4_000_000_000);
        assert_eq!(default_resident_budget(1), 1);
        assert_eq!(default_resident_budget(0), 0);
    }
}
