//! Opens a recording in any format dspk reads, says what it holds, and reads it through once.
//!
//! ```text
//! cargo run --release --features formats --example inspect -- PATH [--header-only]
//! cargo run --release --features formats --example inspect -- tests/fixtures/openephys/2024-05-01_12-00-00
//! ```
//!
//! PATH is what a user would point at: a SpikeGLX `.bin`/`.meta`, an mtscomp `.cbin`, an Open
//! Ephys recording folder or `structure.oebin`, an `.nwb` file or NWB-Zarr store, an Intan
//! `.rhd`, a Phy folder, a raw file with a sidecar, a SpikeInterface binary folder or Zarr
//! store. The format is picked from the path and metadata only (`dspk::open`), and the header
//! is printed as `dspk info` prints it. Unless `--header-only` is given, the whole recording is
//! then read in one-second windows of scaled values (a progress bar on a terminal), and each
//! channel's range and any non-finite values are printed with the read speed. A recording without samples is an error (exit status 1),
//! as is any error opening or reading it: its message and causes are printed on stderr.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use dspk::RecordingSource;
use dspk_cli::describe::{LISTED, describe, human_bytes, human_rate};
use dspk_cli::flags::Reader;
use dspk_cli::progress::progress_bar;
use dspk_cli::recording::{open, require_samples};
use dspk_cli::report::run_program;

fn main() -> ExitCode {
    // SAFETY: first in main, no other thread yet.
    unsafe { run_program("inspect", USAGE, parse_args, run) }
}

const USAGE: &str = "usage: inspect PATH [--header-only]   (a recording file or folder)";

/// What the command line asked for.
struct Args {
    path: PathBuf,
    header_only: bool,
}

/// `PATH` and `--header-only`; `None` for `--help`.
fn parse_args(mut reader: Reader) -> Result<Option<Args>, String> {
    let mut header_only = false;
    let run = reader.read_flags(|reader, flag| {
        match flag {
            "--header-only" => header_only = true,
            _ => return Err(reader.unknown(flag)),
        }
        Ok(())
    })?;
    if !run {
        return Ok(None);
    }
    let path = reader.positional(&["PATH"])?.remove(0);
    Ok(Some(Args { path, header_only }))
}

/// Opens the recording, prints what it holds and reads it through.
fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let opened = open(&args.path)?;
    let recording = opened.source.as_ref();
    print!("{}", describe(&args.path, &opened.format, recording));
    require_samples(&args.path, recording.info())?;
    if args.header_only {
        return Ok(());
    }
    read_through(recording)
}

/// Reads every sample of every channel in one-second windows and prints each channel's range.
fn read_through(recording: &dyn RecordingSource) -> Result<(), Box<dyn std::error::Error>> {
    let info = recording.info();
    let channels = info.all_channels();
    let window = (info.sample_rate.as_hz().ceil() as u64).max(1);
    let windows = info.num_samples.div_ceil(window);
    let mut minimum = vec![f32::INFINITY; channels.len()];
    let mut maximum = vec![f32::NEG_INFINITY; channels.len()];
    let mut non_finite = vec![0u64; channels.len()];
    let mut buffer = Vec::new();
    let bar = progress_bar(windows, "windows");
    let started = Instant::now();
    for w in 0..windows {
        let start = w * window;
        let end = (start + window).min(info.num_samples);
        let n = usize::try_from(end - start)?;
        buffer.resize(channels.len() * n, 0.0);
        recording.read(&channels, start..end, &mut buffer)?;
        for (k, values) in buffer.chunks_exact(n).enumerate() {
            for &v in values {
                if v.is_finite() {
                    minimum[k] = minimum[k].min(v);
                    maximum[k] = maximum[k].max(v);
                } else {
                    non_finite[k] += 1;
                }
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let seconds = started.elapsed().as_secs_f64();
    let stored_bytes =
        info.num_samples as f64 * channels.len() as f64 * info.stored_format.size() as f64;
    println!(
        "read:      {windows} windows, {} stored in {seconds:.3} s ({})",
        human_bytes(stored_bytes),
        human_rate(stored_bytes, seconds),
    );
    for (k, channel) in info.channels.iter().enumerate().take(LISTED) {
        println!(
            "  {k:>4} {:<16} {} .. {} {}{}",
            channel.name,
            minimum[k],
            maximum[k],
            channel.unit,
            if non_finite[k] > 0 {
                format!(" ({} non-finite values)", non_finite[k])
            } else {
                String::new()
            }
        );
    }
    let total_non_finite: u64 = non_finite.iter().sum();
    if total_non_finite > 0 {
        println!("non-finite values: {total_non_finite} in all");
    }
    Ok(())
}
