//! A whole Kilosort4 sort in one call ([`Kilosort4::run`]): the stages in the order of the paper
//! (`docs/KILOSORT4.md` §2-8), each a module with a `run(ctx, ..)` entry point, every report
//! recorded in one [`SortContext`]. [`SortOutput::write_phy`] writes the Phy folder and the
//! summary picture (§9).

use std::path::Path;
use std::sync::Arc;

use cubecl::client::Client;
use dspk_core::{ComputeTarget, RecordingSource};
use dspk_synapse::phy::PhyParams;

use crate::clustering::{self, Input};
use crate::detection::centres::TemplateCentres;
use crate::detection::universal::{self, UniversalTemplates};
use crate::detection::{self, DetectedSpikes};
use crate::drift::{self, DriftEstimate};
use crate::export::phy::{PhyOutput, write_phy_folder};
use crate::export::score::UnitMetrics;
use crate::export::sorting::Sorting;
use crate::export::summary::{DriftTrace, SummaryInput, write_summary};
use crate::export::{self, Merged};
use crate::preprocessing::{self, PreprocessingFit, Reading};
use crate::runner::{CorrectedWindows, Progress, SortContext, StageReport};
use crate::templates::{learned, matching};
use crate::{KilosortSettings, Result, SortProbe, merging};

/// How the recording is cut and where it goes, beyond the settings.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Samples each window owns (`None`: `batch_size`). Another length is allowed only with
    /// drift correction off (`nblocks = 0`): drift shifts are per batch.
    pub window: Option<u64>,
    /// The device the client belongs to, so the reader can page-lock its buffers for it.
    pub target: Option<ComputeTarget>,
    /// A preprocessing fit to reuse instead of fitting one (offsets, whitening, delays): from
    /// an earlier run on the same recording and probe with the same preprocessing settings,
    /// as a parameter sweep does. Checked against the run ([`PreprocessingFit::check`]).
    pub fit: Option<Arc<PreprocessingFit>>,
}

/// The Kilosort4 sorter: settings and run options.
#[derive(Debug, Clone, Default)]
pub struct Kilosort4 {
    settings: KilosortSettings,
    options: RunOptions,
    threads: Option<usize>,
}

/// What the front half of a sort found (§2-5): spikes with their features on the
/// drift-corrected recording, and everything fitted on the way.
#[derive(Debug)]
pub struct FrontHalf {
    /// The detected spikes (time, centre, amplitude, position, features).
    pub spikes: DetectedSpikes,
    /// The universal templates detection used.
    pub templates: UniversalTemplates,
    /// The preprocessing fit: offsets, whitening, channel noise, channel delays (the one
    /// [`RunOptions::fit`] gave, when it gave one).
    pub fit: Arc<PreprocessingFit>,
    /// The template centres.
    pub centres: TemplateCentres,
    /// The drift estimate (`None` with `nblocks = 0`).
    pub drift: Option<DriftEstimate>,
    /// One report per stage, in order.
    pub stages: Vec<StageReport>,
}

/// A finished sort and everything fitted on the way.
#[derive(Debug)]
pub struct SortOutput {
    /// The units and their spikes.
    pub sorting: Sorting,
    /// One report per stage, in order.
    pub stages: Vec<StageReport>,
    /// The preprocessing fit (offsets, whitening, channel noise, channel delays): reusable by
    /// runs with other sorting settings ([`RunOptions::fit`]).
    pub fit: Arc<PreprocessingFit>,
    /// Each unit's quality metrics and EMUsort score (EMUsort's defaults).
    pub units: Vec<UnitMetrics>,
    /// The drift estimate (`None` with `nblocks = 0`).
    pub drift: Option<DriftEstimate>,
    /// The universal templates used.
    pub templates: UniversalTemplates,
    /// The settings of the run.
    pub settings: KilosortSettings,
    /// The probe sorted (EMUsort's line of channels when `line_probe_pitch` is set).
    pub probe: SortProbe,
}

impl Kilosort4 {
    /// A sorter with `settings` and the default options.
    #[must_use]
    pub fn new(settings: KilosortSettings) -> Self {
        Self {
            settings,
            ..Self::default()
        }
    }

    /// The same sorter with `options` (window length, page-locked reads for a device, a fit
    /// to reuse).
    #[must_use]
    pub fn with_options(mut self, options: RunOptions) -> Self {
        self.options = options;
        self
    }

    /// The same sorter using at most `threads` host threads for the clustering (default: the
    /// machine's parallelism). Results do not depend on it.
    #[must_use]
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = Some(threads.max(1));
        self
    }

    /// The settings.
    #[must_use]
    pub fn settings(&self) -> &KilosortSettings {
        &self.settings
    }

    /// Sorts `source` read through `probe` on `client`. `progress` hears after every window of
    /// every pass and at the end of each host stage. A recording without spikes gives an empty
    /// sorting.
    ///
    /// # Errors
    ///
    /// The errors of each stage: settings out of range or inconsistent with the recording
    /// ([`Error::Setting`](crate::Error::Setting)), a recording or probe that cannot be sorted
    /// ([`Error::Input`](crate::Error::Input)), read and device errors.
    pub fn run(
        &self,
        client: &Client,
        source: Arc<dyn RecordingSource>,
        probe: &SortProbe,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<SortOutput> {
        let probe = self.sorted_probe(probe)?;
        let num_samples = source.info().num_samples;
        let mut ctx = self.context(client, source.as_ref(), &probe, progress);
        let (front, mut windows) = self.front(&mut ctx, source)?;
        let FrontHalf {
            spikes,
            templates,
            fit,
            centres,
            drift,
            ..
        } = front;

        let first = clustering::run(
            &mut ctx,
            Input::First {
                spikes: &spikes,
                centres: &centres,
            },
        )?;
        drop(spikes);
        let learned = learned::run(&mut ctx, &first, &templates)?;
        let (mut matched, channels) = matching::run(&mut ctx, &mut windows, &learned, &templates)?;
        let clusters = clustering::run(
            &mut ctx,
            Input::Final {
                spikes: &matched,
                channels: &channels,
                dmin: centres.dmin(),
            },
        )?;
        let units = merging::run(&mut ctx, &mut matched, clusters, &templates)?;
        let merged = Merged {
            spikes: &matched,
            units: &units,
            channels: &channels,
        };
        let (sorting, units) = export::run(&mut ctx, merged, &templates, &fit, num_samples)?;
        Ok(SortOutput {
            sorting,
            stages: ctx.into_stages(),
            fit,
            units,
            drift,
            templates,
            settings: self.settings.clone(),
            probe,
        })
    }

    /// Runs the front half of the sort (§2-5) on `source` read through `probe`, on `client`:
    /// preprocessing, universal templates, drift, detection on the drift-corrected recording.
    /// `progress` hears after every window of every pass.
    ///
    /// # Errors
    ///
    /// As [`run`](Self::run).
    pub fn run_front(
        &self,
        client: &Client,
        source: Arc<dyn RecordingSource>,
        probe: &SortProbe,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<FrontHalf> {
        let probe = self.sorted_probe(probe)?;
        let mut ctx = self.context(client, source.as_ref(), &probe, progress);
        let (mut front, _) = self.front(&mut ctx, source)?;
        front.stages = ctx.into_stages();
        Ok(front)
    }

    /// The front half's stages, its result (reports still in `ctx`) and the corrected windows
    /// for the passes after it.
    fn front(
        &self,
        ctx: &mut SortContext,
        source: Arc<dyn RecordingSource>,
    ) -> Result<(FrontHalf, CorrectedWindows)> {
        let reading = Reading {
            window: self.options.window.unwrap_or(self.settings.batch_size),
            target: self.options.target,
            reuse: self.options.fit.as_ref(),
        };
        let (fit, mut windows) = preprocessing::run(ctx, source, reading)?;
        let templates = universal::run(ctx, &mut windows)?;
        let (centres, mut detector) = detection::detector(ctx, &windows, &templates)?;
        let drift = drift::run(ctx, &mut windows, &mut detector, &fit.whitening)?;
        let spikes = detection::run(ctx, &mut windows, &mut detector, "detection")?;
        let front = FrontHalf {
            spikes,
            templates,
            fit,
            centres,
            drift,
            stages: Vec::new(),
        };
        Ok((front, windows))
    }

    /// The probe sorted: `probe`, or EMUsort's line of its channels when `line_probe_pitch`
    /// is set.
    fn sorted_probe(&self, probe: &SortProbe) -> Result<SortProbe> {
        match self.settings.line_probe_pitch {
            Some(pitch) => SortProbe::line(probe.channels().to_vec(), pitch),
            None => Ok(probe.clone()),
        }
    }

    /// The context of a sort of `source` through `probe`.
    fn context<'a>(
        &'a self,
        client: &Client,
        source: &dyn RecordingSource,
        probe: &'a SortProbe,
        progress: &'a mut dyn FnMut(Progress),
    ) -> SortContext<'a> {
        let threads = self.threads.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        });
        let sample_rate = source.info().sample_rate.as_hz();
        SortContext::new(
            client,
            probe,
            &self.settings,
            sample_rate,
            threads,
            progress,
        )
    }
}

impl SortOutput {
    /// The per-stage report, one line per stage.
    #[must_use]
    pub fn report(&self) -> String {
        self.stages
            .iter()
            .map(|s| format!("{s}\n"))
            .collect::<String>()
    }

    /// Writes the Phy folder into `dir` (§9; `params` says where the raw recording is, its
    /// channel count and dtype, for `params.py`), the settings and report beside it and
    /// `summary.png` (drift map, units on the probe, templates). `params.sample_rate` is set
    /// to the sorting's.
    ///
    /// # Errors
    ///
    /// As [`write_phy_folder`] and [`write_summary`].
    pub fn write_phy(&self, dir: &Path, mut params: PhyParams, overwrite: bool) -> Result<()> {
        params.sample_rate = self.sorting.sample_rate;
        let channel_map: Vec<u32> = self.probe.channels().iter().map(|&c| c as u32).collect();
        write_phy_folder(
            dir,
            &PhyOutput {
                sorting: &self.sorting,
                channel_map: &channel_map,
                channel_positions: self.probe.positions(),
                channel_shanks: self.probe.shanks(),
                whitening: &self.fit.whitening.dense(),
                params,
                settings_json: self.settings.to_json(),
                report: self.report(),
            },
            overwrite,
        )?;
        let drift = self.drift.as_ref().map(|d| DriftTrace {
            dshift: d.dshift(),
            blocks: d.n_blocks(),
            batch_seconds: self.settings.batch_size as f64 / self.sorting.sample_rate,
        });
        write_summary(
            &dir.join("summary.png"),
            &SummaryInput {
                sorting: &self.sorting,
                channel_positions: self.probe.positions(),
                drift,
                title: "dspk Kilosort4".to_string(),
            },
        )
    }
}
