//! The sorter run as the front-end runs it: Kilosort4 (or a preset such as EMUsort) on the
//! device with a progress bar per stage, and what a finished sort prints.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use dspk::RecordingSource;
use dspk::cubecl::client::Client;
use dspk::kilosort::Progress;
use dspk::kilosort::export::sorting::UnitLabel;
use dspk::kilosort::{Kilosort4, KilosortSettings, SortOutput, SortProbe};

use crate::progress::StageBars;

/// A finished sort and the seconds it took.
#[derive(Debug)]
pub struct Sorted {
    /// What the sorter returned.
    pub output: SortOutput,
    /// Seconds from the start of the sort to its end.
    pub seconds: f64,
}

/// Sorts `source` through `probe` with `settings` on `client`'s device, showing a progress bar
/// per stage ([`StageBars`]).
///
/// # Errors
///
/// What the sort reports.
pub fn sort_with_bars(
    client: &Client,
    settings: KilosortSettings,
    source: Arc<dyn RecordingSource>,
    probe: &SortProbe,
) -> Result<Sorted, dspk::kilosort::Error> {
    let mut bars = StageBars::new();
    let started = Instant::now();
    let sorted = Kilosort4::new(settings).run(client, source, probe, &mut |p: Progress| {
        bars.update(p.stage, p.done, p.total);
    });
    bars.finish();
    Ok(Sorted {
        output: sorted?,
        seconds: started.elapsed().as_secs_f64(),
    })
}

impl Sorted {
    /// What a finished sort of a recording of `recording_seconds` prints: a `stage` line per
    /// stage (its time and memory), the channel delays removed (EMUsort's preset), a
    /// `warning:` line per warning of the sort, and `sorted:` with the units (good and mua), the spikes and the time against real time.
    #[must_use]
    pub fn report(&self, recording_seconds: f64) -> String {
        let (output, wall) = (&self.output, self.seconds);
        let mut text = String::new();
        for stage in &output.stages {
            let _ = writeln!(text, "stage      {stage}");
        }
        if let Some(delays) = &output.fit.delays {
            let _ = writeln!(
                text,
                "delays:    {:?} samples, removed from each channel (reference channel {})",
                delays.delays, delays.reference
            );
        }
        for warning in &output.warnings {
            let _ = writeln!(text, "warning:   {warning}");
        }
        let sorting = &output.sorting;
        let good = (sorting.labels.iter())
            .filter(|&&l| l == UnitLabel::Good)
            .count();
        let _ = writeln!(
            text,
            "sorted:    {} units ({good} good, {} mua), {} spikes, in {wall:.1} s for \
             {recording_seconds:.1} s of recording ({:.1}x real time)",
            sorting.num_units(),
            sorting.num_units() - good,
            sorting.num_spikes(),
            recording_seconds / wall.max(f64::MIN_POSITIVE)
        );
        text
    }
}
