//! Spike detection with universal templates (Kilosort4 §5.2-5.3): template projections scored
//! at every template centre, spatial and temporal max-pools, and each spike's position and PC
//! features, on the device.

pub mod centres;
mod kernel;
mod launch;
#[cfg(test)]
mod reference;
#[cfg(test)]
mod tests;
pub mod universal;

pub use crate::spikes::DetectedSpikes;
pub use launch::UniversalDetector;

use centres::{TemplateCentres, template_centres};
use universal::UniversalTemplates;

use crate::Result;
use crate::runner::{CorrectedWindows, SortContext};

/// The template centres of the context's probe and a detector of `templates` at them
/// (threshold `Th_universal`), checked against the halo `windows` carry.
///
/// # Errors
///
/// As [`template_centres`] and [`UniversalDetector::new`]; [`Error::Setting`](crate::Error)
/// when the windows' halo is too short for detection.
pub fn detector(
    ctx: &SortContext,
    windows: &CorrectedWindows,
    templates: &UniversalTemplates,
) -> Result<(TemplateCentres, UniversalDetector)> {
    let (probe, settings) = (ctx.probe(), ctx.settings());
    let centres = template_centres(probe.positions(), probe.shanks(), &settings.centres())?;
    let detector = UniversalDetector::new(
        ctx.client(),
        probe.len(),
        probe.positions(),
        &centres,
        templates,
        settings.th_universal,
    )?;
    windows.check_halo("detection", detector.halo())?;
    Ok((centres, detector))
}

/// A detection pass `name` over every window (`docs/KILOSORT4.md` §5): the spikes `detector`
/// finds, in time order; the pass and its spike count recorded in `ctx`.
///
/// # Errors
///
/// Device and read errors of the pass.
pub fn run(
    ctx: &mut SortContext,
    windows: &mut CorrectedWindows,
    detector: &mut UniversalDetector,
    name: &'static str,
) -> Result<DetectedSpikes> {
    let client = ctx.client().clone();
    let mut spikes = DetectedSpikes::default();
    let report = ctx.pass(windows, name, |w| detector.detect(&client, w, &mut spikes))?;
    report.spikes = Some(spikes.len());
    Ok(spikes)
}
