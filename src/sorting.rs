//! Sorting as the sort examples do it: on the device, with a progress bar per stage and a line
//! per stage printed, a recording file into a Phy folder, and a sorting scored against ground
//! truth with SpikeInterface's measures.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use dspk::ComputeTarget;
use dspk::io::Dtype;
use dspk::kilosort::runner::Progress;
use dspk::kilosort::export::sorting::{Sorting, UnitLabel};
use dspk::kilosort::{Kilosort4, KilosortSettings, SortOutput, SortProbe};
use dspk::synapse::groundtruth::{
    CompareOptions, GroundTruthComparison, MatchMode, SpikeTrains, compare_to_ground_truth,
};
use dspk::synapse::phy::PhyParams;
use dspk::{RecordingSource, SampleRate};
use dspk_cli::progress::StageBars;
use dspk_cli::recording::{open, phy_dat_file, sort_channels};

/// A true unit counts as found at this accuracy (SpikeInterface's well-detected score).
pub const WELL_DETECTED: f64 = 0.8;

/// Sorts `source` through `probe` on the device `DSPK_RUNTIME` names (or the best one) with a
/// progress bar per stage, then prints each stage's line and the totals.
///
/// # Errors
///
/// No device; what the sort reports.
pub fn sort(
    settings: KilosortSettings,
    source: Arc<dyn RecordingSource>,
    probe: &SortProbe,
) -> Result<SortOutput, Box<dyn Error>> {
    let target = ComputeTarget::from_env()?;
    let client = target.client()?;
    println!(
        "runtime:   {target} on {}",
        client.properties().identity.name
    );
    let seconds = source.info().duration().as_secs_f64();
    let mut bars = StageBars::new();
    let started = Instant::now();
    let sorted = Kilosort4::new(settings).run(&client, source, probe, &mut |p: Progress| {
        bars.update(p.stage, p.done, p.total);
    });
    bars.finish();
    let output = sorted?;
    let wall = started.elapsed().as_secs_f64();
    for stage in &output.stages {
        println!("stage      {stage}");
    }
    if let Some(delays) = &output.fit.delays {
        println!(
            "delays:    {:?} samples, removed from each channel (reference channel {})",
            delays.delays, delays.reference
        );
    }
    let sorting = &output.sorting;
    let good = sorting
        .labels
        .iter()
        .filter(|&&l| l == UnitLabel::Good)
        .count();
    println!(
        "sorted:    {} units ({good} good), {} spikes in {wall:.1} s for {seconds:.1} s of \
         recording ({:.1}x real time)",
        sorting.num_units(),
        sorting.num_spikes(),
        seconds / wall.max(f64::MIN_POSITIVE)
    );
    Ok(output)
}

/// The recording at `path` (any format `dspk::open` reads) sorted with its probe (or
/// `probe_file`) into a Phy folder at `out` (default `<stem>_dspk_sort/` beside it), which
/// must not hold one already.
///
/// # Errors
///
/// The recording or probe cannot be read, the folder holds a sort, the sort or the writer
/// fails.
pub fn sort_path(
    path: &Path,
    probe_file: Option<&Path>,
    out: Option<&Path>,
    settings: KilosortSettings,
) -> Result<(), Box<dyn Error>> {
    let opened = open(path)?;
    let info = opened.source.info().clone();
    crate::require_samples(&info)?;
    let (channels, from) = sort_channels(
        path,
        &opened.format,
        probe_file,
        info.num_channels(),
        settings.line_probe_pitch,
    )?;
    let out = out.map(Path::to_path_buf).unwrap_or_else(|| {
        let stem = path
            .file_stem()
            .map_or_else(|| "recording".into(), |s| s.to_os_string());
        let mut name = stem;
        name.push("_dspk_sort");
        path.with_file_name(name)
    });
    if out.join("params.py").exists() || out.join("spike_times.npy").exists() {
        return Err(format!(
            "{} already holds a Phy folder; give another --out",
            out.display()
        )
        .into());
    }
    std::fs::create_dir_all(&out)
        .map_err(|e| format!("{}: cannot create the Phy folder: {e}", out.display()))?;
    println!(
        "recording: {} ({}, {} channels x {:.1} s at {}), probe: {from}, {} channels sorted",
        path.display(),
        opened.format,
        info.num_channels(),
        info.duration().as_secs_f64(),
        info.sample_rate,
        channels.len()
    );
    let output = sort(settings, opened.source.clone(), &channels)?;
    let mut params = PhyParams::new(
        PathBuf::new(),
        info.num_channels(),
        info.sample_rate.as_hz(),
    );
    params.dat_path = Vec::new();
    params.dtype = Dtype::from_format(info.stored_format);
    if let Some(dat) = phy_dat_file(path, &opened.format) {
        params.dat_path = vec![dat.path];
        params.n_channels_dat = dat.columns;
    }
    output.write_phy(&out, params, false)?;
    println!(
        "phy:       {} (phy template-gui {})",
        out.display(),
        out.join("params.py").display()
    );
    Ok(())
}

/// `sorting` compared with the true trains `truth` as SpikeInterface's
/// `compare_sorter_to_ground_truth` does (spikes within 0.4 ms, Hungarian matching).
///
/// # Errors
///
/// Spike trains the comparison refuses.
pub fn compare(
    truth: &SpikeTrains,
    sorting: &Sorting,
    rate: SampleRate,
) -> Result<GroundTruthComparison, Box<dyn Error>> {
    let tested = sorted_trains(sorting)?;
    Ok(compare_to_ground_truth(
        truth,
        &tested,
        rate,
        &CompareOptions::default(),
    )?)
}

/// The sorting's units as spike trains.
///
/// # Errors
///
/// Spike trains the ground-truth tools refuse.
pub fn sorted_trains(sorting: &Sorting) -> Result<SpikeTrains, Box<dyn Error>> {
    let labels: Vec<i64> = sorting
        .spike_clusters
        .iter()
        .map(|&c| i64::from(c))
        .collect();
    Ok(SpikeTrains::from_labels(&sorting.spike_times, &labels)?)
}

/// Prints how many true units reach [`WELL_DETECTED`], the mean accuracy, and the sorted
/// units' categories; returns (units found, mean accuracy).
#[must_use]
pub fn print_summary(comparison: &GroundTruthComparison) -> (usize, f64) {
    let performance = comparison.performance(MatchMode::Hungarian);
    let well = performance
        .iter()
        .filter(|p| p.accuracy >= WELL_DETECTED)
        .count();
    let mean = comparison.mean_performance(MatchMode::Hungarian);
    let categories = comparison.unit_categories();
    println!(
        "found:     {well} of {} units with accuracy >= {WELL_DETECTED}; mean accuracy {:.3} \
         (recall {:.3}, precision {:.3})",
        performance.len(),
        mean.accuracy,
        mean.recall,
        mean.precision
    );
    println!(
        "units:     {} sorted: {} well detected, {} redundant, {} overmerged, {} false \
         positive, {} bad",
        categories.num_tested,
        categories.well_detected,
        categories.redundant,
        categories.overmerged,
        categories.false_positive,
        categories.bad
    );
    (well, mean.accuracy)
}

/// An error naming each bound a result misses: fewer than `min_units` units found, a mean
/// accuracy below `min_accuracy` (a NaN mean misses any bound above 0).
///
/// # Errors
///
/// When a bound is missed.
pub fn check_bounds(
    well: usize,
    mean: f64,
    min_units: u64,
    min_accuracy: f64,
) -> Result<(), Box<dyn Error>> {
    let mut short = Vec::new();
    if (well as u64) < min_units {
        short.push(format!(
            "{well} units at accuracy >= {WELL_DETECTED}, --min-units {min_units}"
        ));
    }
    if min_accuracy > 0.0 && (mean.is_nan() || mean < min_accuracy) {
        short.push(format!(
            "mean accuracy {mean:.3}, --min-accuracy {min_accuracy}"
        ));
    }
    if short.is_empty() {
        Ok(())
    } else {
        Err(format!("below the bounds asked for: {}", short.join("; ")).into())
    }
}
