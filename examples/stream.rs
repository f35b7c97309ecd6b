//! Streams a synthetic 384-channel int16 recording onto the compute device, window by window,
//! and reports what crossed and how fast.
//!
//! ```text
//! cargo run --release --example stream                # 20 s of recording, best runtime here
//! DSPK_RUNTIME=cpu cargo run --release --features cpu --example stream -- --seconds 60
//! ```
//!
//! The data path is the one every dspk pipeline uses, `dspk::ops::WindowStream`: its loader
//! reads window i+1 on a background thread while window i is uploaded; windows cross as stored
//! int16 bytes (half the size of f32), moved into the upload without a copy (from page-locked
//! buffers on CUDA), into device buffers allocated once; a kernel unpacks and scales them to
//! f32 microvolts on the device (the pipeline here is empty). At the end the last window is read back and compared
//! with the source's own scaled values. Errors print their message and causes on stderr and
//! exit with status 1.

use std::process::ExitCode;
use std::sync::Arc;

use dspk::ops::{Pipeline, StreamOptions, WindowStream};
use dspk::{ComputeTarget, RecordingSource, SampleRate, SyntheticRecording};
use dspk_cli::describe::{human_bytes, human_rate};
use dspk_cli::flags::Reader;
use dspk_cli::progress::run_stream;
use dspk_cli::report::run_program;
use dspk_examples::sample_count;

const CHANNELS: usize = 384;
const RATE_HZ: u64 = 30_000;
/// Samples per window: 2 s at 30 kHz, 46 MB of int16 for 384 channels.
const WINDOW: u64 = 60_000;

fn main() -> ExitCode {
    // SAFETY: first in main, no other thread yet.
    unsafe { run_program("stream", USAGE, parse_seconds, run) }
}

const USAGE: &str =
    "usage: stream [--seconds N]   (DSPK_RUNTIME=wgpu|cuda|hip|cpu picks the runtime)";

/// Streams the recording the arguments ask for and prints what crossed.
fn run(seconds: u64) -> Result<(), Box<dyn std::error::Error>> {
    let num_samples = sample_count(seconds, RATE_HZ)?;
    let target = ComputeTarget::from_env()?;
    let client = target.client()?;
    let properties = client.properties();
    println!("runtime: {target} on {}", properties.identity.name);
    let source = Arc::new(SyntheticRecording::new(
        CHANNELS,
        num_samples,
        SampleRate::from_hz(RATE_HZ)?,
        2026,
    )?);
    let format = source.info().stored_format;

    // Windows as long as the device allows in one buffer (the f32 output is the largest).
    let max_buffer = properties.memory.max_page_size;
    let bytes_per_sample = (CHANNELS * 4) as u64;
    let window = WINDOW
        .min(max_buffer / bytes_per_sample)
        .min(num_samples)
        .max(1);
    if window < WINDOW {
        println!(
            "note: {} buffers are limited to {}; windows of {window} samples",
            target,
            human_bytes(max_buffer as f64)
        );
    }
    let options = StreamOptions {
        window,
        target: Some(target),
        ..StreamOptions::default()
    };
    let mut stream = WindowStream::new(&client, source.clone(), Pipeline::new(), &options)?;
    let mut last = None;
    let seconds_taken = run_stream(&mut stream, "windows", |window| {
        last = Some(window.clone());
        Ok(())
    })?;
    let last = last.ok_or("the recording has no window")?;

    // What is on the device is what the source holds, scaled (within one f32 rounding: the
    // device multiplies in f32, the host in f64).
    let mut expected = vec![0f32; CHANNELS * last.window().read_len()];
    source.read(
        &source.info().all_channels(),
        last.window().read(),
        &mut expected,
    )?;
    let on_device = last.array().to_host(&client)?;
    let verified = on_device.len() == expected.len()
        && on_device
            .iter()
            .zip(&expected)
            .all(|(a, e)| (a - e).abs() <= e.abs() * 2.4e-7);

    let windows = stream.schedule().len();
    let moved = stream.uploaded_bytes();
    let counted: u64 = (stream.schedule().iter())
        .map(|w| (CHANNELS * w.read_len() * format.size()) as u64)
        .sum();
    if moved != counted || !stream.uploads_stored() {
        return Err(format!("uploaded {moved} bytes, expected {counted} of {format}").into());
    }
    println!(
        "moved:   {windows} windows of {CHANNELS} channels x {window} samples ({} of {format}; {} as f32)",
        human_bytes(moved as f64),
        human_bytes((moved / format.size() as u64 * 4) as f64),
    );
    println!(
        "time:    {seconds_taken:.3} s -> {} to the device and unpacked, {:.1}x real time",
        human_rate(moved as f64, seconds_taken),
        seconds as f64 / seconds_taken,
    );
    let stats = stream.loader_stats();
    println!(
        "loader:  {} window buffers allocated ({} page-locked), at most {} in flight; \
         {} device buffers",
        stats.buffers_allocated,
        stats.buffers_pinned,
        stats.peak_in_flight,
        stream.workspace().device_allocations()
    );
    println!(
        "check:   last window unpacked on the device {}",
        if verified {
            "matches the source's scaled values"
        } else {
            "DIFFERS from the source"
        }
    );
    if !verified {
        return Err("device contents differ from the source".into());
    }
    Ok(())
}

/// `--seconds N` (default 20): how much recording to stream; `None` for `--help`.
fn parse_seconds(mut reader: Reader) -> Result<Option<u64>, String> {
    let mut seconds = 20;
    let run = reader.read_flags(|reader, flag| {
        match flag {
            "--seconds" => seconds = reader.whole(flag, 1..=100_000)?,
            _ => return Err(reader.unknown(flag)),
        }
        Ok(())
    })?;
    reader.positional(&[])?;
    Ok(run.then_some(seconds))
}
