//! What a sort hands out (`docs/KILOSORT4.md` §8.4, §9): the export post-processing
//! ([`run`]), the sorting, the Phy folder, the summary picture, quality metrics and EMUsort's
//! unit score.

pub mod phy;
pub(crate) mod postprocess;
pub(crate) mod quality;
pub mod score;
pub(crate) mod shadows;
pub mod sorting;
pub mod summary;

use crate::Result;
use crate::detection::universal::UniversalTemplates;
use crate::merging::MergedUnits;
use crate::preprocessing::PreprocessingFit;
use crate::runner::SortContext;
use crate::spikes::{LearnedChannels, MatchedSpikes};
use postprocess::finish_sorting;
use quality::{unit_peaks, unit_scores};
use score::{ScoreSettings, UnitMetrics};
use sorting::Sorting;

/// What the export stage starts from: the merged spikes and units.
#[derive(Debug, Clone, Copy)]
pub struct Merged<'a> {
    /// The matched spikes after the merges, in time order.
    pub spikes: &'a MatchedSpikes,
    /// Each spike's unit and each unit's mean features.
    pub units: &'a MergedUnits,
    /// The channels each learned template's features are on.
    pub channels: &'a LearnedChannels,
}

/// The post-processing stage on the host (recorded in `ctx` with its spike count): the finished
/// sorting (`finish_sorting`); with `peak_spike_times` (EMUsort's preset) each unit's spike
/// times moved to its unwhitened template's peak on its best channel (`unit_peaks`) and back
/// by that channel's delay (when channel delays are removed), so times are those of the spike's
/// peak in the recording, not of the template's trough index on the delay-aligned channels as
/// EMUsort reports them (`docs/KILOSORT4.md` §10.1.1); and each unit's quality metrics and
/// EMUsort score (`unit_scores`, EMUsort's defaults).
///
/// # Errors
///
/// As `finish_sorting`, `unit_peaks` and `unit_scores`.
pub fn run(
    ctx: &mut SortContext,
    merged: Merged,
    templates: &UniversalTemplates,
    fit: &PreprocessingFit,
    num_samples: u64,
) -> Result<(Sorting, Vec<UnitMetrics>)> {
    let (sorting, units) = ctx.host("post-processing", |ctx| {
        let settings = ctx.settings();
        let mut sorting = finish_sorting(
            merged.spikes,
            &merged.units.labels,
            merged.channels,
            &merged.units.features,
            templates.wpca(),
            settings.nt,
            settings.trough(),
            ctx.probe().positions(),
            ctx.sample_rate(),
            num_samples,
            settings,
        )?;
        if settings.peak_spike_times {
            let trough = sorting.nt0min as i64;
            let shifts: Vec<i64> = unit_peaks(&sorting, fit)?
                .iter()
                .map(|peak| peak.sample as i64 - trough + fit.delay(peak.channel))
                .collect();
            sorting.shift_unit_times(&shifts)?;
        }
        let units = unit_scores(&sorting, fit, &ScoreSettings::default())?;
        Ok((sorting, units))
    })?;
    ctx.found(sorting.num_spikes());
    Ok((sorting, units))
}
