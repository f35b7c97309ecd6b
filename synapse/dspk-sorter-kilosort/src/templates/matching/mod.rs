//! Learned-template matching (Kilosort4 §7): matching pursuit of the learned templates on
//! whitened, drift-corrected windows, on the device, with each spike's template, score, scale
//! and PC features.

mod kernel;
mod launch;
#[cfg(test)]
mod reference;
mod setup;
#[cfg(test)]
mod tests;

pub use launch::Matcher;

use super::learned::LearnedTemplates;
use crate::detection::universal::UniversalTemplates;
use crate::runner::{CorrectedWindows, SortContext};
use crate::spikes::{LearnedChannels, MatchedSpikes};
use crate::{KilosortSettings, Result};

impl KilosortSettings {
    /// The settings of template matching (`Th_learned`, `max_peels`, `nearest_chans`).
    #[must_use]
    pub fn matching(&self) -> MatchSettings {
        MatchSettings {
            th_learned: self.th_learned,
            max_peels: self.max_peels,
            nearest_chans: self.nearest_chans,
        }
    }
}

/// The matching stage (`docs/KILOSORT4.md` §7): `learned` matched against every corrected
/// window on the device (one pass, recorded in `ctx` with its spike count); the spikes in time
/// order and the channels each template's features are on. No templates: no spikes, no pass.
///
/// # Errors
///
/// As [`Matcher::new`] and [`Matcher::match_window`]; read and device errors.
pub fn run(
    ctx: &mut SortContext,
    windows: &mut CorrectedWindows,
    learned: &LearnedTemplates,
    templates: &UniversalTemplates,
) -> Result<(MatchedSpikes, LearnedChannels)> {
    let (probe, settings) = (ctx.probe(), ctx.settings());
    if learned.count == 0 {
        let nc = settings.nearest_chans.min(probe.len());
        return Ok((
            MatchedSpikes::new(nc, templates.p()),
            LearnedChannels::default(),
        ));
    }
    let client = ctx.client().clone();
    let mut matcher = Matcher::new(
        &client,
        &learned.units,
        learned.count,
        templates.wpca(),
        templates.nt(),
        templates.nt0min(),
        probe.positions(),
        &settings.matching(),
    )?;
    let mut matched = matcher.new_spikes();
    let report = ctx.pass(windows, "matching", |w| {
        matcher.match_window(&client, w, &mut matched)
    })?;
    report.spikes = Some(matched.len());
    Ok((matched, matcher.channels().clone()))
}

/// Settings of learned-template matching.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatchSettings {
    /// `Th_learned`: a peak's score (projection on the unit-norm template) must exceed it (8).
    pub th_learned: f32,
    /// `max_peels`: matching-pursuit rounds per window at most (100).
    pub max_peels: usize,
    /// `nearest_chans`: feature channels per template, capped at the channel count (10).
    pub nearest_chans: usize,
}

impl Default for MatchSettings {
    /// Kilosort4's defaults: `Th_learned` 8, `max_peels` 100, `nearest_chans` 10.
    fn default() -> Self {
        Self {
            th_learned: 8.0,
            max_peels: 100,
            nearest_chans: 10,
        }
    }
}
