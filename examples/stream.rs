//! Streams a synthetic 384-channel int16 recording onto the compute device, window by window,
//! and reports what crossed and how fast.
//!
//! ```text
//! cargo run --release --example stream                # 20 s of recording, best runtime here
//! DSPK_RUNTIME=cpu cargo run --release --features cpu --example stream -- --seconds 60
//! ```
//!
//! The data path is the one every dspk pipeline uses: a `WindowLoader` reads window i+1 on a
//! background thread while window i is uploaded; windows cross as stored int16 bytes (half the
//! size of f32), moved into the upload without a copy (from page-locked buffers on CUDA), into
//! a `PipelineWorkspace` whose device buffers are allocated once; a kernel unpacks and scales
//! them to f32 microvolts on the device. At the end the last window is read back and compared
//! with the source's own scaled values. Errors print their message and causes on stderr and
//! exit with status 1.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dspk::ops::PipelineWorkspace;
use dspk::{
    ChunkSchedule, ComputeTarget, RecordingSource, SampleRate, SyntheticRecording, WindowLoader,
};
use dspk_examples::{checked_product, finish, human_bytes, human_rate, progress_bar};

const CHANNELS: usize = 384;
const RATE_HZ: u64 = 30_000;
/// Samples per window: 2 s at 30 kHz, 46 MB of int16 for 384 channels.
const WINDOW: u64 = 60_000;

fn main() -> ExitCode {
    // SAFETY: first in main, no other thread yet.
    unsafe { dspk_examples::quiet_vulkan_device_select() };
    finish(run())
}

/// Streams the recording the arguments ask for and prints what crossed.
fn run() -> Result<(), Box<dyn std::error::Error>> {
    let seconds = parse_seconds()?;
    let num_samples = checked_product(
        &format!("the sample count of --seconds {seconds} at {RATE_HZ} Hz"),
        &[seconds, RATE_HZ],
    )?;
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
    let schedule = ChunkSchedule::new(num_samples, window, 0, 0)?;
    let mut workspace = PipelineWorkspace::new(&client, CHANNELS, window as usize)?;
    let gains: Vec<f64> = source.info().channels.iter().map(|c| c.gain).collect();
    let offsets: Vec<f64> = source.info().channels.iter().map(|c| c.offset).collect();
    workspace.set_stored_scaling(&gains, &offsets)?;

    let channels = source.info().all_channels();
    let mut loader =
        WindowLoader::stored_for(source.clone(), channels.clone(), schedule, Some(target))?;
    let bar = progress_bar(schedule.len() as u64, "windows");
    let started = Instant::now();
    let mut waited = Duration::ZERO;
    let mut moved = 0usize;
    let mut last_read = 0..0;
    loop {
        let wait = Instant::now();
        let Some(loaded) = loader.next() else { break };
        let loaded = loaded?;
        waited += wait.elapsed();
        last_read = loaded.window().read();
        moved += loaded.data().len();
        let samples = loaded.window().read_len();
        // The loader's buffer itself becomes the upload, and comes back once copied.
        workspace.process_stored_upload(loaded.into_upload(), format, samples)?;
        bar.inc(1);
    }
    workspace.sync()?;
    let elapsed = started.elapsed();
    bar.finish_and_clear();
    let stats = loader.stats();
    drop(loader);

    // What is on the device is what the source holds, scaled (within one f32 rounding: the
    // device multiplies in f32, the host in f64).
    let last_len = (last_read.end - last_read.start) as usize;
    let mut expected = vec![0f32; CHANNELS * last_len];
    source.read(&channels, last_read.clone(), &mut expected)?;
    let on_device = workspace.read_output()?;
    let verified = on_device.len() == expected.len()
        && on_device
            .iter()
            .zip(&expected)
            .all(|(a, e)| (a - e).abs() <= e.abs() * 2.4e-7);

    let seconds_taken = elapsed.as_secs_f64();
    println!(
        "moved:   {} windows of {CHANNELS} channels x {window} samples ({} of {format}; {} as f32)",
        schedule.len(),
        human_bytes(moved as f64),
        human_bytes((moved / format.size() * 4) as f64),
    );
    println!(
        "time:    {seconds_taken:.3} s -> {} to the device and unpacked, {:.1}x real time \
         (waited {:.3} s for the reader thread)",
        human_rate(moved as f64, seconds_taken),
        seconds as f64 / seconds_taken,
        waited.as_secs_f64()
    );
    println!(
        "loader:  {} window buffers allocated ({} page-locked), at most {} in flight; \
         {} device buffers",
        stats.buffers_allocated,
        stats.buffers_pinned,
        stats.peak_in_flight,
        workspace.device_allocations()
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

/// `--seconds N` (default 20): how much recording to stream.
fn parse_seconds() -> Result<u64, String> {
    let mut args = std::env::args().skip(1);
    let mut seconds = 20;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seconds" => {
                seconds = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|&s| s > 0)
                    .ok_or("--seconds needs a positive whole number")?;
            }
            "-h" | "--help" => {
                println!(
                    "usage: stream [--seconds N]   (DSPK_RUNTIME=wgpu|cuda|hip|cpu picks the runtime)"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument `{other}` (try --help)")),
        }
    }
    Ok(seconds)
}
