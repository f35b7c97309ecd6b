//! [`SortContext`]: what every stage of a sort reads (the device, the probe, the settings)
//! and the one place where every stage's report is recorded and progress is told.

use std::time::Instant;

use cubecl::client::Client;
use dspk_core::HaloWindow;
use dspk_ops::DeviceWindow;

use super::corrected::WindowPasses;
use super::report::{PassReport, Progress, StageReport};
use crate::{KilosortSettings, Result, SortProbe};

/// The device, probe and settings of a sort, its host threads, the listener to its progress and
/// the reports of the stages run so far.
pub struct SortContext<'a> {
    client: Client,
    probe: &'a SortProbe,
    settings: &'a KilosortSettings,
    sample_rate: f64,
    threads: usize,
    progress: &'a mut dyn FnMut(Progress),
    stages: Vec<StageReport>,
    warnings: Vec<String>,
}

impl<'a> SortContext<'a> {
    /// A sort on `client` of a recording at `sample_rate` Hz read through `probe` with
    /// `settings`, using up to `threads` host threads (at least 1); `progress` hears after every
    /// window of every pass and at the end of each host stage.
    pub fn new(
        client: &Client,
        probe: &'a SortProbe,
        settings: &'a KilosortSettings,
        sample_rate: f64,
        threads: usize,
        progress: &'a mut dyn FnMut(Progress),
    ) -> Self {
        Self {
            client: client.clone(),
            probe,
            settings,
            sample_rate,
            threads: threads.max(1),
            progress,
            stages: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// The device's client.
    #[must_use]
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The probe sorted.
    #[must_use]
    pub fn probe(&self) -> &'a SortProbe {
        self.probe
    }

    /// The sort's settings.
    #[must_use]
    pub fn settings(&self) -> &'a KilosortSettings {
        self.settings
    }

    /// The recording's samples per second.
    #[must_use]
    pub fn sample_rate(&self) -> f64 {
        self.sample_rate
    }

    /// Host threads the stages may use.
    #[must_use]
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs the pass `name` over every window of `windows`, `visit` on each, and records its
    /// report; returns it, so a stage can add the spikes it found
    /// ([`StageReport::spikes`]).
    ///
    /// # Errors
    ///
    /// As [`WindowPasses::pass_selected`].
    pub fn pass(
        &mut self,
        windows: &mut impl WindowPasses,
        name: &'static str,
        visit: impl FnMut(&DeviceWindow) -> Result<()>,
    ) -> Result<&mut StageReport> {
        self.pass_selected(windows, name, |_| true, visit)
    }

    /// As [`pass`](Self::pass), visiting only the windows `select` picks.
    ///
    /// # Errors
    ///
    /// As [`WindowPasses::pass_selected`].
    pub fn pass_selected(
        &mut self,
        windows: &mut impl WindowPasses,
        name: &'static str,
        select: impl Fn(&HaloWindow) -> bool,
        visit: impl FnMut(&DeviceWindow) -> Result<()>,
    ) -> Result<&mut StageReport> {
        let pass = windows.pass_selected(name, &mut *self.progress, select, visit)?;
        Ok(self.record(pass))
    }

    /// Runs the host stage `name` (`body`, which reads the context), records its report and
    /// tells progress it is done.
    ///
    /// # Errors
    ///
    /// `body`'s.
    pub fn host<T>(
        &mut self,
        name: &'static str,
        body: impl FnOnce(&Self) -> Result<T>,
    ) -> Result<T> {
        let started = Instant::now();
        let out = body(self)?;
        self.record(PassReport::host(name, started));
        (self.progress)(Progress {
            stage: name,
            done: 1,
            total: 1,
        });
        Ok(out)
    }

    /// Records `pass` as the next stage's report (memory figures read now); returns it.
    pub fn record(&mut self, pass: PassReport) -> &mut StageReport {
        let index = self.stages.len();
        self.stages.push(StageReport::new(&self.client, pass, None));
        &mut self.stages[index]
    }

    /// Notes that the stage recorded last produced `spikes` spikes.
    pub fn found(&mut self, spikes: usize) {
        if let Some(stage) = self.stages.last_mut() {
            stage.spikes = Some(spikes);
        }
    }

    /// Records a warning: something the sort changed or found that the user should know
    /// (drift correction turned off, a setting capped, no spikes), shown with the reports.
    pub fn warn(&mut self, warning: String) {
        self.warnings.push(warning);
    }

    /// The warnings recorded so far, in order.
    #[must_use]
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The reports recorded, in order.
    #[must_use]
    pub fn into_stages(self) -> Vec<StageReport> {
        self.stages
    }

    /// The reports and the warnings recorded, each in order.
    #[must_use]
    pub fn into_reports(self) -> (Vec<StageReport>, Vec<String>) {
        (self.stages, self.warnings)
    }
}
