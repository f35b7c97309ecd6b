//! `dspk sort`: a recording sorted by Kilosort4 on the device into a Phy folder.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::time::Instant;

use dspk::ComputeTarget;
use dspk::io::Dtype;
use dspk::kilosort::runner::Progress;
use dspk::kilosort::export::sorting::UnitLabel;
use dspk::kilosort::{Kilosort4, KilosortSettings};
use dspk::synapse::phy::PhyParams;

use crate::args::{SortArgs, default_out_dir};
use crate::describe::describe;
use dspk_cli::progress::StageBars;
use dspk_cli::recording::{open, phy_dat_file, sort_channels};

/// Sorts `args.recording` with `settings` and writes the Phy folder; prints the recording, the
/// device, a progress bar per stage, each stage's time and memory, and what was found.
///
/// # Errors
///
/// The recording cannot be opened or holds no samples; no probe (or one that disagrees with
/// the recording); the Phy folder exists without `--overwrite`; no device; what the sort or
/// the Phy writer reports.
pub(crate) fn sort(args: &SortArgs, settings: KilosortSettings) -> Result<(), Box<dyn Error>> {
    let opened = open(&args.recording)?;
    let info = opened.source.info().clone();
    if info.num_samples == 0 {
        return Err(format!(
            "{}: the recording holds no samples",
            args.recording.display()
        )
        .into());
    }
    let (channels, probe_from) = sort_channels(
        &args.recording,
        &opened.format,
        args.probe.as_deref(),
        info.num_channels(),
        settings.line_probe_pitch,
    )?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| default_out_dir(&args.recording));
    refuse_existing_sort(&out, args.overwrite)?;
    // Made now, so that a folder that cannot be written fails before the sort, not after.
    std::fs::create_dir_all(&out)
        .map_err(|e| format!("{}: cannot create the Phy folder: {e}", out.display()))?;
    let dat = phy_dat_file(&args.recording, &opened.format);

    print!(
        "{}",
        describe(&args.recording, &opened.format, opened.source.as_ref())
    );
    println!("probe:     {probe_from}");
    let target = ComputeTarget::from_env()?;
    let client = target.client()?;
    println!(
        "runtime:   {target} on {}",
        client.properties().identity.name
    );
    println!(
        "sorting:   {} channels into {}",
        channels.len(),
        out.display()
    );
    let others = match args.preset.as_deref() {
        Some(preset) => format!("the {preset} preset's"),
        None => "Kilosort4's defaults".to_string(),
    };
    if !args.sets.is_empty() {
        let sets: Vec<String> = args.sets.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("settings:  {} (the others {others})", sets.join(", "));
    } else if args.preset.is_some() {
        println!("settings:  {others}");
    }

    let mut bars = StageBars::new();
    let started = Instant::now();
    let sorted = Kilosort4::new(settings).run(
        &client,
        opened.source.clone(),
        &channels,
        &mut |p: Progress| bars.update(p.stage, p.done, p.total),
    );
    bars.finish();
    let result = sorted?;
    let wall = started.elapsed().as_secs_f64();
    for stage in &result.stages {
        println!("stage      {stage}");
    }
    let sorting = &result.sorting;
    let good = sorting
        .labels
        .iter()
        .filter(|&&l| l == UnitLabel::Good)
        .count();
    let seconds = info.duration().as_secs_f64();
    println!(
        "sorted:    {} units ({good} good, {} mua), {} spikes, in {wall:.1} s for {seconds:.1} s \
         of recording ({:.1}x real time)",
        sorting.num_units(),
        sorting.num_units() - good,
        sorting.num_spikes(),
        seconds / wall.max(f64::MIN_POSITIVE)
    );
    let mut params = PhyParams::new(PathBuf::new(), info.num_channels(), sorting.sample_rate);
    params.dat_path = Vec::new();
    params.dtype = Dtype::from_format(info.stored_format);
    if let Some(dat) = &dat {
        params.dat_path = vec![dat.path.clone()];
        params.n_channels_dat = dat.columns;
    }
    result.write_phy(&out, params, args.overwrite)?;
    println!("phy:       {}", out.display());
    match &dat {
        Some(dat) => println!(
            "           raw data: {} ({} columns; params.py dat_path)",
            dat.path.display(),
            dat.columns
        ),
        None => println!(
            "           no raw file for Phy to show traces from ({} keeps none in Phy's layout; \
             sort the file `dspk convert REC --to raw FILE` writes to have one)",
            opened.format
        ),
    }
    println!(
        "           open with: phy template-gui {}",
        out.join("params.py").display()
    );
    Ok(())
}

/// Refuses, before sorting, a folder that already holds a Phy folder unless `overwrite`.
fn refuse_existing_sort(out: &Path, overwrite: bool) -> Result<(), Box<dyn Error>> {
    let existing = ["params.py", "spike_times.npy"]
        .iter()
        .find(|name| out.join(name).exists());
    match existing {
        Some(name) if !overwrite => Err(format!(
            "{} already holds a Phy folder ({name}); give --overwrite to replace it, or --out DIR",
            out.display()
        )
        .into()),
        _ => Ok(()),
    }
}
