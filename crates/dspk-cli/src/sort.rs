//! `dspk sort`: a recording sorted by Kilosort4 on the device into a Phy folder.

use std::error::Error;
use std::path::Path;

use dspk::kilosort::export::phy::check_phy_destination;
use dspk::kilosort::{Kilosort4, KilosortSettings};

use crate::args::{SortArgs, default_out_dir};
use dspk_cli::describe::describe;
use dspk_cli::recording::{open_with, require_samples, sort_channels};
use dspk_cli::sorter::{phy_params, sort_device, sort_with_bars};

/// Sorts `args.recording` with `settings` and writes the Phy folder; prints the recording, the
/// device, a progress bar per stage, each stage's time and memory, and what was found.
///
/// # Errors
///
/// The recording cannot be opened (or, as a plain binary file, its length is not a whole
/// number of samples) or holds no samples; no probe (or one that disagrees with
/// the recording); the Phy folder exists without `--overwrite`; no device; what the sort or
/// the Phy writer reports; a device index past the runtime's devices.
pub(crate) fn sort(args: &SortArgs, settings: KilosortSettings) -> Result<(), Box<dyn Error>> {
    let opened = open_with(&args.recording, args.plain.as_ref())?;
    let info = opened.source.info().clone();
    require_samples(&args.recording, &info)?;
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
    print!(
        "{}",
        describe(&args.recording, &opened.format, opened.source.as_ref())
    );
    println!("probe:     {probe_from}");
    // Checked now, so that a folder that cannot be written, a device that is not there or
    // settings the recording cannot meet fail before the sort, not after; nothing is left in
    // the folder (it is written beside it and renamed at the end).
    check_phy_destination(&out, args.overwrite)?;
    let (target, device, client) = sort_device(args.device)?;
    Kilosort4::new(settings.clone()).check(&info, &channels)?;
    let dat = opened.phy_dat(&args.recording);
    let on = device.map_or_else(String::new, |index| format!(" device {index}"));
    println!(
        "runtime:   {target}{on} on {}",
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

    let sorted = sort_with_bars(&client, settings, opened.source.clone(), &channels)?;
    print!("{}", sorted.report(info.duration().as_secs_f64()));
    let params = phy_params(&info, dat.as_ref());
    sorted.output.write_phy(&out, params, args.overwrite)?;
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
