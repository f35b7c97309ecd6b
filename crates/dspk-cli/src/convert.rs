//! `dspk convert`: a recording's stored values written as a raw binary file with its sidecar,
//! or as a Zarr store.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::time::Instant;

use dspk::io::{RawRecording, RawWriteOptions, sidecar_path, write_raw};

use crate::args::{ConvertArgs, OutputFormat};
use dspk_cli::recording::open_with;

/// Converts `args.recording` into `args.out`; prints what was written.
///
/// # Errors
///
/// `OUT` exists without `--overwrite`, or is the recording itself; the recording cannot be
/// opened or read; the output cannot be written; `--to zarr` in a build without `formats`.
pub(crate) fn convert(args: &ConvertArgs) -> Result<(), Box<dyn Error>> {
    if args.to == OutputFormat::Sidecar {
        return write_sidecar(args);
    }
    let opened = open_with(&args.recording, args.plain.as_ref())?;
    refuse_to_replace(args, opened.data_file(&args.recording))?;
    let info = opened.source.info();
    let started = Instant::now();
    let written = match args.to {
        OutputFormat::Raw => {
            let sidecar = write_raw(
                opened.source.as_ref(),
                &args.out,
                RawWriteOptions::default(),
            )?;
            format!(
                "{} (interleaved little-endian {:?}) and its sidecar {}",
                args.out.display(),
                info.stored_format,
                sidecar.display()
            )
        }
        OutputFormat::Zarr => write_zarr(opened.source.as_ref(), &args.out)?,
        // Handled above, before the recording is opened through the registry.
        OutputFormat::Sidecar => return write_sidecar(args),
    };
    println!(
        "converted {} ({}, {} channels x {} samples) in {:.2} s",
        args.recording.display(),
        opened.format,
        info.num_channels(),
        info.num_samples,
        started.elapsed().as_secs_f64()
    );
    println!("wrote     {written}");
    Ok(())
}

/// Refuses an output that exists unless `--overwrite` is given, and an output that is the
/// recording, holds it, or is the file its samples are read from, whatever the flags say: it
/// would be truncated or removed before it is read.
fn refuse_to_replace(args: &ConvertArgs, data: Option<PathBuf>) -> Result<(), Box<dyn Error>> {
    let outputs = match args.to {
        OutputFormat::Raw => vec![args.out.clone(), sidecar_path(&args.out)],
        OutputFormat::Zarr | OutputFormat::Sidecar => vec![args.out.clone()],
    };
    let canonical = |p: &Path| p.canonicalize().ok();
    let source = canonical(&args.recording);
    let data = data.and_then(|d| canonical(&d));
    for out in outputs.iter().filter(|p| p.exists()) {
        let out_canonical = canonical(out);
        let clash = out_canonical.as_ref().is_some_and(|o| {
            source.as_ref().is_some_and(|s| s.starts_with(o)) || data.as_ref() == Some(o)
        });
        if clash {
            return Err(format!(
                "{}: the output would overwrite the recording being converted",
                out.display()
            )
            .into());
        }
        if !args.overwrite {
            return Err(format!(
                "{} already exists; give --overwrite to replace it, or another OUT",
                out.display()
            )
            .into());
        }
    }
    Ok(())
}

/// Writes the sidecar of a plain binary file beside it (`args.out`, `REC.json`), leaving the
/// file as it is; prints what was written.
fn write_sidecar(args: &ConvertArgs) -> Result<(), Box<dyn Error>> {
    let plain = args
        .plain
        .as_ref()
        .ok_or("convert --to sidecar needs --n-chan-bin and --fs")?;
    refuse_to_replace(args, Some(args.recording.clone()))?;
    let raw = RawRecording::open_plain(&args.recording, plain)?;
    let sidecar = raw.write_sidecar()?;
    let info = dspk::RecordingSource::info(&raw);
    println!(
        "described {} (plain binary, {} channels x {} samples of {} at {} Hz)",
        args.recording.display(),
        info.num_channels(),
        info.num_samples,
        info.stored_format,
        info.sample_rate.as_hz()
    );
    println!(
        "wrote     {} (later runs open {} without flags)",
        sidecar.display(),
        args.recording.display()
    );
    Ok(())
}

/// Writes a Zarr v3 store in SpikeInterface's layout; the text saying what was written.
#[cfg(feature = "formats")]
fn write_zarr(source: &dyn dspk::RecordingSource, out: &Path) -> Result<String, Box<dyn Error>> {
    if out.exists() {
        // Only a Zarr store is replaced: a folder that is not one is left alone.
        let store = out.join("zarr.json").is_file() || out.join(".zgroup").is_file();
        if !store {
            return Err(format!(
                "{}: --overwrite replaces a Zarr store, and this is not one; give another OUT",
                out.display()
            )
            .into());
        }
        std::fs::remove_dir_all(out)?;
    }
    dspk::io::write_zarr(source, out, dspk::io::ZarrWriteOptions::default())?;
    Ok(format!(
        "{} (Zarr v3 store, SpikeInterface layout)",
        out.display()
    ))
}

/// Zarr needs the `formats` feature.
#[cfg(not(feature = "formats"))]
fn write_zarr(_: &dyn dspk::RecordingSource, out: &Path) -> Result<String, Box<dyn Error>> {
    Err(format!(
        "{}: this dspk was built without Zarr; rebuild with `--features formats`",
        out.display()
    )
    .into())
}
