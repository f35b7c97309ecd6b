//! `DeviceWindows`: the one path every pass of the sort takes through the recording.
//!
//! The streaming path of dspk-ops ([`WindowStream`]: a background reader, the source asked once
//! whether it can return stored integers, stored upload and device unpack if so, scaled `f32`
//! otherwise, halos) with a [`WindowChain`] (the sorter's preprocessing), plus **residency**: when the
//! recording's stored windows fit a device-memory budget, the first pass keeps them on the
//! device and every later pass reads them from there, so a sort reads the recording from disk
//! once (Kilosort4 reads it once per pass).

use std::sync::Arc;
use std::time::{Duration, Instant};

use cubecl::client::Client;
use dspk_core::{ChunkSchedule, ComputeTarget, HaloWindow, RecordingSource};
use dspk_ops::{DeviceWindow, Pipeline, ResidentWindows, StreamOptions, WindowStream};

use super::report::{PassReport, Progress, device_reserved_bytes};
use crate::{Error, Result};

/// Fraction of the device memory the runtime reports that resident windows may use by default
/// ([`KilosortSettings::resident_bytes`](crate::KilosortSettings::resident_bytes) `None`):
/// half, leaving the rest for the passes' scratch (detection's score buffers are the largest).
pub const DEFAULT_RESIDENT_FRACTION: f64 = 0.5;

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

    /// Device bytes the stored windows would take resident (whole words per window), or
    /// `None` when the source has no stored values (only stored windows are kept).
    #[must_use]
    pub fn resident_bytes_needed(&self) -> Option<u64> {
        if !self.source.can_read_stored() {
            return None;
        }
        let channels = self.options.channels.as_ref().map_or(0, Vec::len) as u64;
        let size = self.source.info().stored_format.size() as u64;
        Some(
            self.schedule
                .iter()
                .map(|w| (w.read_len() as u64 * channels * size).next_multiple_of(4))
                .sum(),
        )
    }

    /// Whether later passes read from device memory.
    #[must_use]
    pub fn is_resident(&self) -> bool {
        self.resident.is_some()
    }

    /// Runs `visit` on every processed window in order; `progress` hears after each window.
    /// The first pass keeps the stored windows on the device when they fit the budget; passes
    /// after that read nothing from the host then.
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
    /// Resident windows that are not picked are not processed at all; streamed ones are read
    /// and processed (the stream cannot skip) but not visited. The report counts the windows
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
        if let Some(resident) = &mut self.resident {
            let picked: Vec<usize> = resident
                .ranges()
                .enumerate()
                .filter(|(_, w)| select(w))
                .map(|(i, _)| i)
                .collect();
            let mut told = 0;
            for index in picked {
                if let Some(window) = resident.window(index) {
                    visit(window?)?;
                    report.windows += 1;
                    report.resident_windows += 1;
                }
                told = index + 1;
                tell(told);
            }
            // The end, once, also when the last windows were not picked.
            if told != total {
                tell(total);
            }
            return Ok(());
        }
        let pipeline = self.chain.pipeline(&self.client)?;
        let mut stream =
            WindowStream::new(&self.client, self.source.clone(), pipeline, &self.options)?;
        let keep = self.passes == 0
            && self
                .resident_bytes_needed()
                .is_some_and(|bytes| bytes <= self.budget)
            && stream.keep_resident();
        while let Some(window) = stream.next_window() {
            let window = window?;
            if select(window.window()) {
                visit(window)?;
            }
            report.windows += 1;
            tell(report.windows);
        }
        report.read_bytes = stream.uploaded_bytes();
        report.uploaded_bytes = stream.uploaded_bytes();
        if keep {
            self.resident = stream.into_resident();
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
/// [`DEFAULT_RESIDENT_FRACTION`] of the memory the runtime reports, minus what is already
/// reserved (0 when the runtime reports no figure).
#[must_use]
pub fn resident_budget(client: &Client, resident_bytes: Option<u64>) -> u64 {
    resident_bytes.unwrap_or_else(|| {
        let total = client.properties().memory.max_memory().unwrap_or(0);
        let share = (total as f64 * DEFAULT_RESIDENT_FRACTION) as u64;
        share.saturating_sub(device_reserved_bytes(client))
    })
}
