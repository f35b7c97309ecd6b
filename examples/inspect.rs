//! Opens a recording in any format dspk reads, says what it holds, and reads it through once.
//!
//! ```text
//! cargo run --release --example inspect -- PATH [--header-only]
//! cargo run --release --example inspect -- tests/fixtures/openephys/2024-05-01_12-00-00
//! ```
//!
//! PATH is what a user would point at: a SpikeGLX `.bin`/`.meta`, an mtscomp `.cbin`, an Open
//! Ephys recording folder or `structure.oebin`, an `.nwb` file or NWB-Zarr store, an Intan
//! `.rhd`, a Phy folder, a raw file with a sidecar, a SpikeInterface binary folder or Zarr
//! store. The format is picked from the path and metadata only (`dspk::open`). Unless
//! `--header-only` is given, the whole recording is then read in one-second windows of scaled
//! values (a progress bar on a terminal), and each channel's range and any non-finite values
//! are printed with the read speed. A recording without samples is an error (exit status 1),
//! as is any error opening or reading it: its message and causes are printed on stderr.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use dspk::RecordingSource;
use dspk_examples::{
    describe_scaling, finish, human_bytes, human_rate, progress_bar, require_samples,
};

/// Channels listed one by one; more are summarised.
const LISTED: usize = 8;

fn main() -> ExitCode {
    finish(run())
}

/// Parses the arguments, opens the recording, prints what it holds and reads it through.
fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut path = None;
    let mut header_only = false;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--header-only" => header_only = true,
            "-h" | "--help" => {
                println!("usage: inspect PATH [--header-only]");
                return Ok(());
            }
            _ if path.is_none() => path = Some(PathBuf::from(arg)),
            _ => return Err(format!("unexpected argument `{arg}`").into()),
        }
    }
    let path = path.ok_or("usage: inspect PATH [--header-only] (a recording file or folder)")?;

    let mut registry = dspk::io::Registry::default();
    dspk::synapse::register_formats(&mut registry);
    let format = registry
        .detect(&path)
        .map_or("none", dspk::io::Format::name)
        .to_string();
    let recording = registry.open(&path)?;
    let info = recording.info();
    let rate = info.sample_rate;
    println!("path:      {}", path.display());
    println!("format:    {format}");
    println!(
        "recording: {} channels x {} samples at {rate} ({:.3} s), stored as {:?}, starts at {} s",
        info.num_channels(),
        info.num_samples,
        info.duration().as_secs_f64(),
        info.stored_format,
        info.start_time.as_secs_f64(),
    );
    for (index, channel) in info.channels.iter().enumerate().take(LISTED) {
        println!(
            "  {index:>4} {:<16} {}",
            channel.name,
            describe_scaling(channel.gain, channel.offset, &channel.unit)
        );
    }
    if info.num_channels() > LISTED {
        println!("  ... {} more", info.num_channels() - LISTED);
    }
    if !info.metadata.is_empty() {
        println!("metadata:  {} entries", info.metadata.len());
    }
    require_samples(info)?;
    if header_only {
        return Ok(());
    }
    read_through(recording.as_ref())
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
