//! A whole Kilosort4 sort in one call ([`Kilosort4::run`]): the stages in the order of the paper
//! (`docs/KILOSORT4.md` §2-8), each a module with a `run(ctx, ..)` entry point, every report
//! recorded in one [`SortContext`]. [`SortOutput::write_phy`] writes the Phy folder and the
//! summary picture (§9).

use std::path::Path;
use std::sync::Arc;

use cubecl::client::Client;
use dspk_core::{ComputeTarget, RecordingInfo, RecordingSource};
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
use crate::{Error, KilosortSettings, Result, SortProbe, merging};

/// How the recording is cut and where it goes, beyond the settings.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Samples each device window owns (`None`: `batch_size`, or the largest divisor of it
    /// whose scratch fits the device's largest buffer: [`preprocessing::fitting_window`]).
    /// With drift correction on (`nblocks > 0`) it must divide `batch_size` (drift shifts are
    /// per batch: each window then lies in one batch); any length with `nblocks = 0`.
    /// Batches stay Kilosort's (`batch_size`) whatever the windows: the spikes found are the
    /// same (the values agree to float rounding: a window's filters settle within its halo).
    pub window: Option<u64>,
    /// The device the client belongs to, so the reader can page-lock its buffers for it.
    pub target: Option<ComputeTarget>,
    /// A preprocessing fit to reuse instead of fitting one (offsets, whitening, delays): from
    /// an earlier run on the same recording and probe with the same preprocessing settings,
    /// as a parameter sweep does. Checked against the run ([`PreprocessingFit::check`]).
    pub fit: Option<Arc<PreprocessingFit>>,
    /// Host threads the sort's host stages may use (clustering groups, drift registration,
    /// drift matrices, k-means restarts, HDBSCAN distances); `None`: the `DSPK_THREADS`
    /// environment variable when set, else the machine's parallelism ([`host_threads`]).
    /// Results do not depend on it: host work is split into items each computed by one
    /// thread alone and combined in a fixed order.
    pub threads: Option<usize>,
}

/// The environment variable that sets the host threads of a sort when
/// [`RunOptions::threads`] does not (a positive integer).
pub const THREADS_VAR: &str = "DSPK_THREADS";

/// The host threads a sort uses: `requested` (at least 1), else the positive integer in
/// [`THREADS_VAR`] (`DSPK_THREADS`) when it is set, else the machine's available parallelism.
///
/// # Errors
///
/// [`Error::Setting`] (`DSPK_THREADS`) when the variable is set but is not a positive integer.
pub fn host_threads(requested: Option<usize>) -> Result<usize> {
    if let Some(threads) = requested {
        return Ok(threads.max(1));
    }
    match std::env::var(THREADS_VAR) {
        Ok(value) => match value.trim().parse::<usize>() {
            Ok(threads) if threads > 0 => Ok(threads),
            _ => Err(Error::Setting {
                name: "DSPK_THREADS",
                reason: format!("{value:?} is not a positive number of threads"),
            }),
        },
        Err(_) => Ok(std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)),
    }
}

/// The Kilosort4 sorter: settings and run options.
#[derive(Debug, Clone, Default)]
pub struct Kilosort4 {
    settings: KilosortSettings,
    options: RunOptions,
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
    /// The drift estimate (`None` with `nblocks = 0`, or when the probe is too short for it).
    pub drift: Option<DriftEstimate>,
    /// One report per stage, in order.
    pub stages: Vec<StageReport>,
    /// What the sort changed or found that the user should know, in order (drift correction
    /// turned off, a setting capped, no spikes).
    pub warnings: Vec<String>,
}

/// A finished sort and everything fitted on the way.
#[derive(Debug)]
pub struct SortOutput {
    /// The units and their spikes.
    pub sorting: Sorting,
    /// One report per stage, in order.
    pub stages: Vec<StageReport>,
    /// What the sort changed or found that the user should know, in order (drift correction
    /// turned off, a setting capped, no spikes): shown by the front-ends and written into the
    /// Phy folder's `dspk_report.txt`.
    pub warnings: Vec<String>,
    /// The preprocessing fit (offsets, whitening, channel noise, channel delays): reusable by
    /// runs with other sorting settings ([`RunOptions::fit`]).
    pub fit: Arc<PreprocessingFit>,
    /// Each unit's quality metrics and EMUsort score (EMUsort's defaults).
    pub units: Vec<UnitMetrics>,
    /// The drift estimate (`None` with `nblocks = 0`, or when the probe is too short for it).
    pub drift: Option<DriftEstimate>,
    /// The universal templates used.
    pub templates: UniversalTemplates,
    /// The settings of the run.
    pub settings: KilosortSettings,
    /// The probe sorted, in the order the sort indexes its channels (geometric order,
    /// [`SortProbe::in_geometric_order`]; EMUsort's line of channels in the given order when
    /// `line_probe_pitch` is set).
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

    /// The same sorter using at most `threads` host threads ([`RunOptions::threads`]).
    /// Results do not depend on it.
    #[must_use]
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.options.threads = Some(threads.max(1));
        self
    }

    /// The settings.
    #[must_use]
    pub fn settings(&self) -> &KilosortSettings {
        &self.settings
    }

    /// Checks, before any data is read, what can be known about a sort of a recording
    /// described by `info` through `probe` with these settings, and returns the warnings it
    /// would start with.
    ///
    /// Errors: settings out of range ([`KilosortSettings::validate`]); a recording shorter
    /// than one template (`nt` samples); a probe with a channel the recording lacks; `nblocks`
    /// cutting the probe into blocks too short for the drift registration
    /// ([`drift::check_probe`]). Warnings: `nearest_chans` above the channel count (capped, as
    /// Kilosort4 does); every contact at one position (no spatial information: one template
    /// centre); a probe too short in depth for drift correction, which is then turned off.
    ///
    /// # Errors
    ///
    /// [`Error::Setting`] naming the setting, or [`Error::Input`] naming the recording or
    /// probe, for the errors above.
    pub fn check(&self, info: &RecordingInfo, probe: &SortProbe) -> Result<Vec<String>> {
        let settings = &self.settings;
        settings.validate()?;
        let probe = self.sorted_probe(probe)?;
        if info.num_samples < settings.nt as u64 {
            return Err(Error::Input {
                what: "recording",
                reason: format!(
                    "{} samples is shorter than one template ({} samples)",
                    info.num_samples, settings.nt
                ),
            });
        }
        if let Some(&c) = probe.channels().iter().find(|&&c| c >= info.num_channels()) {
            return Err(Error::Input {
                what: "probe",
                reason: format!(
                    "it names recording channel {c}, but the recording has {} channels",
                    info.num_channels()
                ),
            });
        }
        let mut warnings = Vec::new();
        if settings.nearest_chans > probe.len() {
            warnings.push(format!(
                "nearest_chans = {} is more than the probe's {} channels: every template \
                 centre uses all {} (as Kilosort4 caps it)",
                settings.nearest_chans,
                probe.len(),
                probe.len()
            ));
        }
        let positions = probe.positions();
        if positions.len() > 1 && positions.iter().all(|p| p == &positions[0]) {
            warnings.push(format!(
                "every one of the probe's {} contacts is at ({}, {}) um: the sort has no \
                 spatial information (one template centre, one clustering group) and separates \
                 units by waveform alone; give the contacts' real positions if they differ",
                positions.len(),
                positions[0][0],
                positions[0][1]
            ));
        }
        let channel_y: Vec<f32> = positions.iter().map(|p| p[1]).collect();
        if let Some(off) = drift::check_probe(&channel_y, &settings.drift())? {
            warnings.push(off);
        }
        Ok(warnings)
    }

    /// Sorts `source` read through `probe` on `client`. `progress` hears after every window of
    /// every pass and at the end of each host stage. [`check`](Self::check) runs first. A
    /// recording without spikes gives an empty sorting with a warning that says so; a stage
    /// that runs out of material on a recording with spikes (no spikes left after drift
    /// correction, none matched, every unit removed) is an error naming the stage, the counts
    /// and the setting to change.
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
        let mut ctx = self.context(client, source.as_ref(), &probe, progress)?;
        let (front, mut windows) = self.front(&mut ctx, source)?;
        let detected = front.spikes.len();
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
        if learned.count > 0 && matched.is_empty() {
            return Err(Error::Input {
                what: "template matching",
                reason: format!(
                    "0 spikes matched {} learned templates, after {detected} spikes were \
                     detected: no template reaches Th_learned = {} on the recording; lower \
                     Th_learned",
                    learned.count, self.settings.th_learned
                ),
            });
        }
        let clusters = clustering::run(
            &mut ctx,
            Input::Final {
                spikes: &matched,
                channels: &channels,
                dmin: centres.dmin(),
            },
        )?;
        let units = merging::run(&mut ctx, &mut matched, clusters, &templates, drift.as_ref())?;
        let merged = Merged {
            spikes: &matched,
            units: &units,
            channels: &channels,
        };
        let (sorting, units) = export::run(&mut ctx, merged, &templates, &fit, num_samples)?;
        if sorting.num_units() == 0 && !matched.is_empty() {
            return Err(Error::Input {
                what: "post-processing",
                reason: format!(
                    "every unit was removed: {} spikes matched, {} learned templates, 0 units \
                     kept",
                    matched.len(),
                    learned.count
                ),
            });
        }
        let (stages, warnings) = ctx.into_reports();
        Ok(SortOutput {
            sorting,
            stages,
            warnings,
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
        let mut ctx = self.context(client, source.as_ref(), &probe, progress)?;
        let (mut front, _) = self.front(&mut ctx, source)?;
        (front.stages, front.warnings) = ctx.into_reports();
        Ok(front)
    }

    /// The front half's stages, its result (reports still in `ctx`) and the corrected windows
    /// for the passes after it.
    fn front(
        &self,
        ctx: &mut SortContext,
        source: Arc<dyn RecordingSource>,
    ) -> Result<(FrontHalf, CorrectedWindows)> {
        for warning in self.check(source.info(), ctx.probe())? {
            if !warning.starts_with("drift correction is off") {
                ctx.warn(warning);
            }
        }
        let reading = Reading {
            window: self.options.window,
            target: self.options.target,
            reuse: self.options.fit.as_ref(),
        };
        let (fit, mut windows) = preprocessing::run(ctx, source, reading)?;
        let templates = universal::run(ctx, &mut windows)?;
        let (centres, mut detector) = detection::detector(ctx, &windows, &templates)?;
        let drift = drift::run(ctx, &mut windows, &mut detector, &fit.whitening)?;
        let spikes = detection::run(ctx, &mut windows, &mut detector, "detection")?;
        if spikes.is_empty() {
            no_spikes(ctx, drift.as_ref(), windows.num_samples())?;
        }
        let front = FrontHalf {
            spikes,
            templates,
            fit,
            centres,
            drift,
            stages: Vec::new(),
            warnings: Vec::new(),
        };
        Ok((front, windows))
    }

    /// The probe sorted: `probe`'s channels in geometric order (shank, depth, `x`), so the
    /// units do not depend on the order the probe lists its channels in (Kilosort breaks ties
    /// and sums over channels in the given order, so its units can); or EMUsort's line of its
    /// channels in the given order when `line_probe_pitch` is set (the order is its geometry).
    fn sorted_probe(&self, probe: &SortProbe) -> Result<SortProbe> {
        match self.settings.line_probe_pitch {
            Some(pitch) => SortProbe::line(probe.channels().to_vec(), pitch),
            None => Ok(probe.in_geometric_order()),
        }
    }

    /// The context of a sort of `source` through `probe`, with the host threads of
    /// [`host_threads`].
    fn context<'a>(
        &'a self,
        client: &Client,
        source: &dyn RecordingSource,
        probe: &'a SortProbe,
        progress: &'a mut dyn FnMut(Progress),
    ) -> Result<SortContext<'a>> {
        let threads = host_threads(self.options.threads)?;
        let sample_rate = source.info().sample_rate.as_hz();
        Ok(SortContext::new(
            client,
            probe,
            &self.settings,
            sample_rate,
            threads,
            progress,
        ))
    }
}

/// What an empty detection on the drift-corrected recording of `num_samples` samples means:
/// an error when the drift pass (`drift`) found spikes before the correction (the correction
/// lost them), else a warning in `ctx` that the recording has no spikes above the threshold.
fn no_spikes(ctx: &mut SortContext, drift: Option<&DriftEstimate>, num_samples: u64) -> Result<()> {
    let th = ctx.settings().th_universal;
    if let Some(drift) = drift {
        let before: usize = drift.spike_counts().iter().sum();
        if before > 0 {
            let (low, high) = drift
                .dshift()
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &d| {
                    (l.min(d), h.max(d))
                });
            return Err(Error::Input {
                what: "detection",
                reason: format!(
                    "0 spikes on the drift-corrected recording, {before} before the \
                     correction: the drift estimate (shifts {low:.1} to {high:.1} um) moved the \
                     channels off the spikes; sort with nblocks = 0 (no drift correction)"
                ),
            });
        }
    }
    let seconds = num_samples as f64 / ctx.sample_rate();
    ctx.warn(format!(
        "no spikes: universal-template detection found none above Th_universal = {th} in \
         {seconds:.1} s of recording (flat, or its spikes are smaller than the threshold); the \
         sorting is empty; lower Th_universal to look for smaller spikes"
    ));
    Ok(())
}

impl SortOutput {
    /// The per-stage report, one line per stage, then one `warning: ...` line per warning.
    #[must_use]
    pub fn report(&self) -> String {
        let stages = self.stages.iter().map(|s| format!("{s}\n"));
        let warnings = self.warnings.iter().map(|w| format!("warning: {w}\n"));
        stages.chain(warnings).collect()
    }

    /// Writes the Phy folder into `dir` (§9; `params` says where the raw recording is, its
    /// channel count and dtype, for `params.py`), the settings and report (with the warnings)
    /// beside it and `summary.png` (drift map, units on the probe, templates).
    /// `params.sample_rate` is set to the sorting's.
    ///
    /// Every file is written first into a fresh folder beside `dir`
    /// ([`staging_folder`](crate::export::phy::staging_folder)), and moved into place only
    /// when all are written: a `dir` that did not exist is the renamed folder; in one that did
    /// (with `overwrite`), the sort's files are renamed over the old ones and the old Phy
    /// files this sort does not write are removed. A failed write leaves `dir` as it was.
    ///
    /// # Errors
    ///
    /// As [`write_phy_folder`] and [`write_summary`]; [`Error::Input`] when `dir` already
    /// holds a Phy folder and `overwrite` is off, or its parent cannot be written
    /// ([`check_phy_destination`](crate::export::phy::check_phy_destination)).
    pub fn write_phy(&self, dir: &Path, params: PhyParams, overwrite: bool) -> Result<()> {
        crate::export::phy::check_phy_destination(dir, overwrite)?;
        let staging = crate::export::phy::staging_folder(dir)?;
        match self.write_phy_files(&staging, params) {
            Ok(()) => crate::export::phy::move_into_place(&staging, dir),
            Err(e) => {
                // The staging folder is ours; what it holds is incomplete.
                let _ = std::fs::remove_dir_all(&staging);
                Err(e)
            }
        }
    }

    /// Writes every file of [`write_phy`](Self::write_phy) into the empty folder `dir`.
    fn write_phy_files(&self, dir: &Path, mut params: PhyParams) -> Result<()> {
        let overwrite = false;
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
