//! A whole Kilosort4 sort in one call ([`Kilosort4::run`]): the front half
//! ([`front`](crate::front)), then first clustering, learned templates, matching, final
//! clustering, merges and the export post-processing (`docs/KILOSORT4.md` §6-8), with a report
//! per stage. [`SortOutput::write_phy`] writes the Phy folder and the summary picture (§9).
//!
//! The stage functions are public ([`first_clustering`], [`matching_templates`],
//! [`match_spikes`], [`final_clustering`]) for those who re-run part of a sort.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use cubecl::client::Client;
use dspk_core::RecordingSource;
use dspk_synapse::phy::PhyParams;

use crate::drift::DriftEstimate;
use crate::preprocessing::PreprocessingFit;
use crate::front::{CorrectedWindows, FrontHalf, RunOptions, front_half, host_step};
use crate::clustering::{ClusterInput, Clusters, cluster_spikes};
use crate::templates::learned::{Alignment, align_templates, pcs_outer};
use crate::templates::matching::{MatchSettings, Matcher};
use crate::merging::{NEAR_DUPLICATE_SIMILARITY, WtW, merge_near_duplicates, merge_units};
use crate::export::phy::{PhyOutput, write_phy_folder};
use crate::export::postprocess::finish_sorting;
use crate::export::quality::{unit_peaks, unit_scores};
use crate::runner::{Progress, StageReport};
use crate::export::score::{ScoreSettings, UnitMetrics};
use crate::export::sorting::{LearnedChannels, MatchedSpikes, Sorting};
use crate::export::summary::{DriftTrace, SummaryInput, write_summary};
use crate::detection::universal::UniversalTemplates;
use crate::{KilosortSettings, Result, SortProbe};

/// The Kilosort4 sorter: settings and run options.
#[derive(Debug, Clone, Default)]
pub struct Kilosort4 {
    settings: KilosortSettings,
    options: RunOptions,
    threads: Option<usize>,
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
    /// Each unit's quality metrics and EMUsort score ([`unit_scores`], EMUsort's defaults).
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

    /// The same sorter with `options` (window length, page-locked reads for a device).
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
    /// every pass and at the start and end of each host stage. A recording without spikes gives
    /// an empty sorting.
    ///
    /// With `peak_spike_times` (EMUsort's preset), each unit's spike times are then moved to
    /// its unwhitened template's peak on its best channel ([`unit_peaks`]) and back by that
    /// channel's delay (when channel
    /// delays are removed): the times of the spike's peak in the recording, not of the
    /// template's trough index on the delay-aligned channels as EMUsort reports them
    /// (`docs/KILOSORT4.md` §10.1.1).
    ///
    /// # Errors
    ///
    /// As [`run_front`](crate::front::run_front); the errors of each later stage (device,
    /// inconsistent intermediate data).
    pub fn run(
        &self,
        client: &Client,
        source: Arc<dyn RecordingSource>,
        probe: &SortProbe,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<SortOutput> {
        let settings = &self.settings;
        let line;
        let probe = match settings.line_probe_pitch {
            Some(pitch) => {
                line = SortProbe::line(probe.channels().to_vec(), pitch)?;
                &line
            }
            None => probe,
        };
        let info = source.info().clone();
        let sample_rate = info.sample_rate.as_hz();
        let (front, mut windows) =
            front_half(client, source, probe, settings, &self.options, progress)?;
        let FrontHalf {
            spikes,
            templates,
            fit,
            centres,
            drift,
            mut stages,
            ..
        } = front;
        let threads = self.threads.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        });

        let host = |name: &'static str,
                    progress: &mut dyn FnMut(Progress),
                    stages: &mut Vec<StageReport>,
                    spikes: Option<usize>,
                    started: Instant| {
            progress(Progress {
                stage: name,
                done: 1,
                total: 1,
            });
            stages.push(StageReport::new(client, host_step(name, started), spikes));
        };

        // First clustering on the universal detection's spikes.
        let started = Instant::now();
        let input = ClusterInput {
            item_positions: centres.positions(),
            item_channels: centres.nearest_channels(),
            nc: spikes.nc(),
            p: spikes.p(),
            spike_item: &spikes.centre,
            features: &spikes.features,
            times: None,
        };
        let first = first_clustering(&input, probe, centres.dmin(), settings, threads)?;
        host("first clustering", progress, &mut stages, None, started);
        drop(spikes);

        // Learned templates, matching.
        let started = Instant::now();
        let (units, n_templates) =
            matching_templates(&first, probe.len(), &templates, settings.template_alignment)?;
        host("learned templates", progress, &mut stages, None, started);
        let (mut matched, channels) = if n_templates == 0 {
            let nc = settings.nearest_chans.min(probe.len());
            (
                MatchedSpikes::new(nc, templates.p()),
                LearnedChannels::default(),
            )
        } else {
            let (matched, report) = match_spikes(
                client,
                &mut windows,
                &units,
                n_templates,
                &templates,
                probe,
                settings,
                progress,
            )?;
            stages.push(report);
            matched
        };

        // Final clustering, merges, export post-processing.
        let started = Instant::now();
        let times: Vec<f64> = matched
            .sample
            .iter()
            .map(|&s| s as f64 / sample_rate)
            .collect();
        let item_positions: Vec<[f32; 2]> = (0..channels.len())
            .map(|n| probe.positions()[channels.of(n)[0] as usize])
            .collect();
        let input = ClusterInput {
            item_positions: &item_positions,
            item_channels: &channels.channels,
            nc: channels.nc,
            p: matched.p,
            spike_item: &matched.template,
            features: &matched.features,
            times: Some(&times),
        };
        let Clusters {
            labels: mut clusters,
            features: mut units,
            ..
        } = final_clustering(&input, probe, centres.dmin(), settings, threads)?;
        host("final clustering", progress, &mut stages, None, started);
        let started = Instant::now();
        let wtw = WtW::new(templates.wpca(), templates.nt())?;
        merge_units(
            &mut matched,
            &mut clusters,
            &mut units,
            probe.len(),
            &wtw,
            sample_rate,
            settings,
        )?;
        host("merges", progress, &mut stages, None, started);
        let started = Instant::now();
        let mut sorting = finish_sorting(
            &matched,
            &clusters,
            &channels,
            &units,
            templates.wpca(),
            settings.nt,
            settings.trough(),
            probe.positions(),
            sample_rate,
            info.num_samples,
            settings,
        )?;
        if settings.peak_spike_times {
            let trough = sorting.nt0min as i64;
            let shifts: Vec<i64> = unit_peaks(&sorting, &fit)?
                .iter()
                .map(|peak| peak.sample as i64 - trough + fit.delay(peak.channel))
                .collect();
            sorting.shift_unit_times(&shifts)?;
        }
        let units = unit_scores(&sorting, &fit, &ScoreSettings::default())?;
        host(
            "post-processing",
            progress,
            &mut stages,
            Some(sorting.num_spikes()),
            started,
        );
        Ok(SortOutput {
            sorting,
            stages,
            fit,
            units,
            drift,
            templates,
            settings: settings.clone(),
            probe: probe.clone(),
        })
    }
}

/// First clustering (§6): the universal detection's spikes grouped by probe section and
/// clustered group by group; returns each cluster's mean features.
///
/// # Errors
///
/// As [`cluster_spikes`].
pub fn first_clustering(
    input: &ClusterInput,
    probe: &SortProbe,
    dmin: f32,
    settings: &KilosortSettings,
    threads: usize,
) -> Result<Clusters> {
    let channel_x: Vec<f32> = probe.positions().iter().map(|p| p[0]).collect();
    cluster_spikes(input, probe.len(), &channel_x, dmin, settings, threads)
}

/// Final clustering (§8.1): the matched spikes grouped by their template's place on the
/// probe and clustered, the merge tree asking whether two branches are cross-refractory.
///
/// # Errors
///
/// As [`cluster_spikes`].
pub fn final_clustering(
    input: &ClusterInput,
    probe: &SortProbe,
    dmin: f32,
    settings: &KilosortSettings,
    threads: usize,
) -> Result<Clusters> {
    first_clustering(input, probe, dmin, settings, threads)
}

/// The templates matching uses (§6.9): each cluster's mean features aligned to the universal
/// shapes, near-duplicates (similarity at least [`NEAR_DUPLICATE_SIMILARITY`], norms within
/// 20 %) merged; `[n, p, channels]` and `n`.
///
/// # Errors
///
/// As [`align_templates`] and [`merge_near_duplicates`].
pub fn matching_templates(
    clusters: &Clusters,
    channels: usize,
    templates: &UniversalTemplates,
    alignment: Alignment,
) -> Result<(Vec<f32>, usize)> {
    let p = templates.p();
    let mut units = clusters.features.clone();
    align_templates(
        &mut units,
        channels,
        p,
        templates.wpca(),
        templates.wtemp(),
        templates.nt(),
        alignment,
    )?;
    let counts: Vec<u64> = clusters.sizes.iter().map(|&n| n as u64).collect();
    let wtw = WtW::new(templates.wpca(), templates.nt())?;
    let merged = merge_near_duplicates(&units, &counts, channels, &wtw, NEAR_DUPLICATE_SIMILARITY)?;
    let n = merged.counts.len();
    Ok((pcs_outer(&merged.units, channels, p), n))
}

/// Learned-template matching (§7) over every corrected window: the spikes in time order, the
/// channels each template's features are on, and the pass's report.
///
/// # Errors
///
/// As [`Matcher::new`] and [`Matcher::match_window`]; read and device errors.
#[allow(clippy::too_many_arguments)]
pub fn match_spikes(
    client: &Client,
    windows: &mut CorrectedWindows,
    units: &[f32],
    n_templates: usize,
    templates: &UniversalTemplates,
    probe: &SortProbe,
    settings: &KilosortSettings,
    progress: &mut dyn FnMut(Progress),
) -> Result<((MatchedSpikes, LearnedChannels), StageReport)> {
    let mut matcher = Matcher::new(
        client,
        units,
        n_templates,
        templates.wpca(),
        templates.nt(),
        templates.nt0min(),
        probe.positions(),
        &MatchSettings {
            th_learned: settings.th_learned,
            max_peels: settings.max_peels,
            nearest_chans: settings.nearest_chans,
        },
    )?;
    let mut matched = matcher.new_spikes();
    let pass = windows.pass(client, "matching", progress, |w| {
        matcher.match_window(client, w, &mut matched)
    })?;
    let report = StageReport::new(client, pass, Some(matched.len()));
    Ok(((matched, matcher.channels().clone()), report))
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
