//! Detects spikes in a synthetic recording with known spikes, on the device, and scores the
//! detections against the truth.
//!
//! ```text
//! cargo run --release --example detect                     # 10 s, 64 channels, best runtime
//! DSPK_RUNTIME=cpu cargo run --release --features cpu --example detect -- --seconds 4
//! ```
//!
//! The recording (`dspk::synapse::groundtruth::GroundTruthRecording`, fixed seed: units over
//! common, neighbour-shared and independent noise and a 7 Hz oscillation) is computed into
//! memory as int16 (so the timing is the device chain's, not the synthesis'), then streamed
//! through a `WindowStream` (int16 across the bus, unpacked on the device) whose `Pipeline`
//! runs a common average reference (against the common noise), a 300 Hz third-order
//! Butterworth high-pass forward and backward (against the oscillation, keeping the spikes'
//! shape) and local whitening of each channel from its 32 nearest, fitted on the device over a
//! first pass (against the neighbour-shared noise). Then negative peaks below 4.5 times each
//! channel's MAD noise are found on the device and only they are downloaded, in recording
//! samples; windows overlap by the pipeline's settling, so the result is that of the whole
//! recording at once. Peaks on neighbouring channels within 0.5 ms merge into events; an event
//! matches a true spike within 0.4 ms and 60 um (`dspk_examples::events`).
//!
//! A duration whose sample count overflows, or a recording larger than the memory available
//! (`dspk_examples::MemoryLimit`), is refused before anything is allocated. Errors print their
//! message and causes on stderr and exit with status 1.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use dspk::ops::design::{Band, butter};
use dspk::ops::{
    CommonReference, Pipeline, Polarity, Reference, SosFilter, StreamOptions, WindowStream,
};
use dspk::synapse::groundtruth::{GroundTruthConfig, GroundTruthRecording, TrueSpike};
use dspk::{ComputeTarget, MemoryRecording, RecordingSource};
use dspk_examples::events::{Radius, merge_peaks, peaks_beyond_noise, score_events};
use dspk_examples::whitening::fit_local_whitening;
use dspk_examples::{
    Flags, MemoryLimit, Refusal, checked_product, checked_sum_of_products, finish, human_bytes,
    human_rate, parse_flags,
};

const RATE_HZ: u64 = 30_000;
/// Every unit's mean firing rate, Hz.
const FIRING_RATE_HZ: u64 = 8;
/// Samples each window owns: 1 s.
const WINDOW: u64 = 30_000;
/// Detection threshold in units of each channel's MAD noise.
const THRESHOLD: f32 = 4.5;
/// Detections within 0.5 ms and 50 um are one event.
const MERGE: Radius = Radius::new(15, 50.0);
/// An event matches a true spike within 0.4 ms and 60 um of the unit's nearest channel.
const MATCH: Radius = Radius::new(12, 60.0);

struct Args {
    seconds: u64,
    channels: usize,
    units: usize,
    /// `seconds` at [`RATE_HZ`].
    num_samples: u64,
}

fn main() -> ExitCode {
    // SAFETY: first in main, no other thread yet.
    unsafe { dspk_examples::quiet_vulkan_device_select() };
    finish(run())
}

/// Runs the detection the arguments ask for and prints its accuracy and speed.
fn run() -> Result<(), Box<dyn std::error::Error>> {
    let Some(args) = parse_args()? else {
        return Ok(());
    };
    check_limits(&args, MemoryLimit::of_this_machine())?;
    let target = ComputeTarget::from_env()?;
    let client = target.client()?;
    println!(
        "runtime:   {target} on {}",
        client.properties().identity.name
    );

    let made = Instant::now();
    let truth = GroundTruthRecording::generate(&GroundTruthConfig {
        channels: args.channels,
        num_samples: args.num_samples,
        sample_rate_hz: RATE_HZ,
        units: args.units,
        firing_rate_hz: [FIRING_RATE_HZ as f64; 2],
        amplitude_uv: [84.0, 180.0],
        seed: 2026,
        ..GroundTruthConfig::default()
    })?;
    let (positions, spikes) = (truth.channel_positions(), truth.spikes());
    let info = truth.info().clone();
    let mut stored = vec![0u8; info.num_channels() * info.num_samples as usize * 2];
    truth.read_stored(&info.all_channels(), 0..info.num_samples, &mut stored)?;
    let source = Arc::new(MemoryRecording::new(info.clone(), stored)?);
    let channels = info.num_channels();
    println!(
        "recording: {channels} channels x {} samples at {RATE_HZ} Hz, int16; {} units, {} true \
         spikes (made in {:.2} s)",
        info.num_samples,
        args.units,
        spikes.len(),
        made.elapsed().as_secs_f64()
    );

    let highpass = butter(3, Band::Highpass(300.0), RATE_HZ as f64)?;
    let front = || -> Result<Pipeline, dspk::ops::Error> {
        Ok(Pipeline::new()
            .with(CommonReference::new(Reference::Mean))
            .with(SosFilter::zero_phase(&highpass)?))
    };
    let options = StreamOptions {
        window: WINDOW.min(info.num_samples),
        target: Some(target),
        ..StreamOptions::default()
    };

    // Pass 1: reference + high-pass, channel covariance accumulated on the device over the
    // samples each window owns. The common average reference leaves the covariance of all
    // channels singular (the channels sum to zero), so a neighbourhood never holds every channel.
    let mut stream = WindowStream::new(&client, source.clone(), front()?, &options)?;
    let nearest = 32.min(channels - 1).max(1);
    let fit = "windows (whitening fit)";
    let whitening = fit_local_whitening(&client, &mut stream, fit, positions, nearest, 1e-6)?;

    // Pass 2: reference + high-pass + whitening, then peaks below -4.5 MAD on each channel.
    let pipeline = front()?.with(whitening);
    let mut stream = WindowStream::new(&client, source, pipeline, &options)?;
    let (distance, negative) = (MERGE.samples as usize, Polarity::Negative);
    let (peaks, elapsed) = peaks_beyond_noise(&client, &mut stream, negative, THRESHOLD, distance)?;

    let events = merge_peaks(&peaks, positions, MERGE);
    let score = score_events(&events, spikes, positions, MATCH);
    let (windows, moved) = (stream.schedule().len(), stream.uploaded_bytes() as f64);
    println!(
        "pipeline:  unpack -> {} (halo {} samples), then peaks < -{THRESHOLD} x MAD noise",
        stream.workspace().pipeline().stage_names().join(" -> "),
        stream.halo()
    );
    println!(
        "detected:  {} peaks on channels -> {} events; {} of {} true spikes found",
        peaks.len(),
        events.len(),
        score.matched,
        spikes.len()
    );
    println!("accuracy:  {score}");
    println!(
        "speed:     {windows} windows in {elapsed:.2} s ({:.1} windows/s, {} of int16, {:.1}x real time)",
        windows as f64 / elapsed,
        human_rate(moved, elapsed),
        args.seconds as f64 / elapsed
    );
    println!("moved:     {} to the device", human_bytes(moved));
    Ok(())
}

/// Refuses arguments whose recording would not fit in `limit`: the int16 samples held in
/// memory (channels x samples x 2 bytes) plus the true spikes (each unit at
/// [`FIRING_RATE_HZ`]), every size computed checked.
fn check_limits(args: &Args, limit: MemoryLimit) -> Result<(), Refusal> {
    let what = format!(
        "--channels {} --seconds {}: the recording in memory ({} channels x {} samples of \
         int16) with its true spikes",
        args.channels, args.seconds, args.channels, args.num_samples
    );
    let (samples, spike) = (
        [args.channels as u64, args.num_samples, 2],
        size_of::<TrueSpike>(),
    );
    let spikes = [
        args.units as u64,
        args.seconds,
        FIRING_RATE_HZ,
        spike as u64,
    ];
    limit.check(&what, checked_sum_of_products(&what, &[&samples, &spikes])?)
}

/// `--seconds N` (default 10), `--channels N` (default 64), `--units N` (default 24), or
/// `None` after printing the usage for `--help`; the sample count is computed checked.
fn parse_args() -> Result<Option<Args>, Box<dyn std::error::Error>> {
    let (mut seconds, mut channels, mut units) = (10, 64, 24);
    let flags = &mut [
        ("--seconds", &mut seconds),
        ("--channels", &mut channels),
        ("--units", &mut units),
    ];
    if parse_flags(std::env::args().skip(1), flags)? == Flags::Help {
        println!(
            "usage: detect [--seconds N] [--channels N] [--units N]   \
             (DSPK_RUNTIME=wgpu|cuda|hip|cpu picks the runtime)"
        );
        return Ok(None);
    }
    let what = format!("the sample count of --seconds {seconds} at {RATE_HZ} Hz");
    Ok(Some(Args {
        num_samples: checked_product(&what, &[seconds, RATE_HZ])?,
        seconds,
        channels: channels as usize,
        units: units as usize,
    }))
}
