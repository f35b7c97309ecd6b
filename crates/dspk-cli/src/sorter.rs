//! The sorter run as the front-end runs it: Kilosort4 (or a preset such as EMUsort) on the
//! device with a progress bar per stage, and what a finished sort prints.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use dspk::cubecl::client::Client;
use dspk::io::Dtype;
use dspk::kilosort::Progress;
use dspk::kilosort::export::sorting::UnitLabel;
use dspk::kilosort::{Kilosort4, KilosortSettings, SortOutput, SortProbe};
use dspk::synapse::phy::PhyParams;
use dspk::{ComputeTarget, RecordingInfo, RecordingSource};

use crate::progress::StageBars;
use crate::recording::PhyDat;

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
    let sorted = sort_with_progress(client, settings, source, probe, &mut |p: Progress| {
        bars.update(p.stage, p.done, p.total);
    });
    bars.finish();
    sorted
}

/// Sorts `source` through `probe` with `settings` on `client`'s device, telling `progress`
/// after every window of every pass and at the end of each host stage (what
/// [`sort_with_bars`] draws; the Python package hands it to a callback).
///
/// # Errors
///
/// What the sort reports.
pub fn sort_with_progress(
    client: &Client,
    settings: KilosortSettings,
    source: Arc<dyn RecordingSource>,
    probe: &SortProbe,
    progress: &mut dyn FnMut(Progress),
) -> Result<Sorted, dspk::kilosort::Error> {
    let started = Instant::now();
    let output = Kilosort4::new(settings).run(client, source, probe, progress)?;
    Ok(Sorted {
        output,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The device a front-end sorts on: the runtime `DSPK_RUNTIME` picks
/// ([`ComputeTarget::from_env`]), its device `device` (`None`: the one `DSPK_DEVICE` names,
/// else the runtime's default), and a client on it.
///
/// # Errors
///
/// An unknown or unavailable runtime, a `DSPK_DEVICE` that is not a whole number, a device
/// index past the runtime's devices (naming how many there are).
pub fn sort_device(
    device: Option<usize>,
) -> Result<(ComputeTarget, Option<usize>, Client), dspk::Error> {
    let target = ComputeTarget::from_env()?;
    let device = match device {
        Some(index) => Some(index),
        None => ComputeTarget::device_index_from_env()?,
    };
    let client = target.client_at(device)?;
    Ok((target, device, client))
}

/// Phy's `params.py` values for a sort of the recording `info` describes: its channel count
/// and stored sample type, and `dat` as the raw file Phy shows traces from (its columns as
/// `n_channels_dat`); no `dat_path` without one. The sample rate is set when the folder is
/// written ([`SortOutput::write_phy`]).
#[must_use]
pub fn phy_params(info: &RecordingInfo, dat: Option<&PhyDat>) -> PhyParams {
    let mut params = PhyParams::new(
        PathBuf::new(),
        info.num_channels(),
        info.sample_rate.as_hz(),
    );
    params.dat_path = Vec::new();
    params.dtype = Dtype::from_format(info.stored_format);
    if let Some(dat) = dat {
        params.dat_path = vec![dat.path.clone()];
        params.n_channels_dat = dat.columns;
    }
    params
}

impl Sorted {
    /// What a finished sort of a recording of `recording_seconds` prints: a `stage` line per
    /// stage (its time and memory), the channel delays removed (EMUsort's preset), a
    /// `warning:` line per warning of the sort, and `sorted:` with the units (good and mua, and
    /// the shadow units removed), the spikes and the time against real time.
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
            "sorted:    {} units ({good} good, {} mua; {} shadow units removed), {} spikes, in \
             {wall:.1} s for {recording_seconds:.1} s of recording ({:.1}x real time)",
            sorting.num_units(),
            sorting.num_units() - good,
            sorting.shadow_units,
            sorting.num_spikes(),
            recording_seconds / wall.max(f64::MIN_POSITIVE)
        );
        text
    }
}
