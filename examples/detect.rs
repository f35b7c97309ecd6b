//! Detects spikes in a synthetic recording with known spikes, on the device, and scores the
//! detections against the truth.
//!
//! ```text
//! cargo run --release --example detect                     # 10 s, 64 channels, best runtime
//! DSPK_RUNTIME=cpu cargo run --release --features cpu --example detect -- --seconds 4
//! ```
//!
//! The recording (`dspk::synapse::groundtruth`, fixed seed: units over common, neighbour-shared
//! and independent noise and a 7 Hz oscillation) is held in memory as int16 and streamed through
//! a `WindowStream` (int16 across the bus, unpacked on the device). Its `Pipeline` runs a common
//! average reference, a 300 Hz third-order Butterworth high-pass forward and backward, and local
//! whitening of each channel from its 32 nearest (fitted on the device over a first pass).
//! Negative peaks below 4.5 x each channel's MAD noise are found on the device and only they
//! are downloaded, in recording samples; peaks on neighbouring channels within 0.5 ms merge into
//! events, and an event matches a true spike within 0.4 ms and 60 um
//! (`dspk::synapse::groundtruth::score_events`).
//! Both passes are timed and counted. `--min-recall X --min-precision Y` make a score below
//! them an error (exit status 1), as CI runs it. A recording that overflows or does not fit in
//! memory is refused before anything is made.

use std::process::ExitCode;

use dspk::ComputeTarget;
use dspk::ops::design::{Band, butter};
use dspk::ops::{
    CommonReference, CovarianceAccumulator, NoisePeaks, Pipeline, Polarity, Reference, SosFilter,
    StreamOptions, WindowStream,
};
use dspk::synapse::groundtruth::{
    Bounds, ChannelPeak, GroundTruthConfig, Radius, merge_peaks, score_events,
};
use dspk_cli::flags::Reader;
use dspk_cli::passes::{Pass, speed_report};
use dspk_cli::progress::run_stream;
use dspk_cli::report::run_program;
use dspk_examples::synthetic::generate_in_memory;
use dspk_examples::{MemoryLimit, sample_count};

const RATE_HZ: u64 = 30_000;
/// Samples each window owns: 1 s.
const WINDOW: u64 = 30_000;
/// Detection threshold in units of each channel's MAD noise.
const THRESHOLD: f32 = 4.5;
/// Detections within 0.5 ms and 50 um are one event.
const MERGE: Radius = Radius::new(15, 50.0);
/// An event matches a true spike within 0.4 ms and 60 um of the unit's nearest channel.
const MATCH: Radius = Radius::new(12, 60.0);

fn main() -> ExitCode {
    // SAFETY: first in main, no other thread yet.
    unsafe { run_program("detect", USAGE, parse_args, run) }
}

/// What the command line asked for.
struct Args {
    seconds: u64,
    channels: u64,
    units: u64,
    bounds: Bounds,
}

const USAGE: &str = "usage: detect [--seconds N] [--channels N] [--units N] [--min-recall X] \
                     [--min-precision Y]   (DSPK_RUNTIME=wgpu|cuda|hip|cpu)";

/// Runs the detection the arguments ask for and prints its accuracy and speed.
fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let config = GroundTruthConfig {
        channels: args.channels as usize,
        num_samples: sample_count(args.seconds, RATE_HZ)?,
        sample_rate_hz: RATE_HZ,
        units: args.units as usize,
        firing_rate_hz: [8.0, 8.0],
        amplitude_uv: [84.0, 180.0],
        seed: 2026,
        ..GroundTruthConfig::default()
    };
    let made = generate_in_memory(&config, MemoryLimit::of_this_machine())?;
    let target = ComputeTarget::from_env()?;
    let client = target.client()?;
    let (positions, spikes) = (made.truth.channel_positions(), made.truth.spikes());
    let channels = config.channels;
    let device = &client.properties().identity.name;
    println!("runtime:   {target} on {device}");
    println!(
        "recording: {channels} channels x {} samples at {RATE_HZ} Hz, int16; {} units, {} true \
         spikes (made in {:.2} s)",
        config.num_samples,
        config.units,
        spikes.len(),
        made.made_in.as_secs_f64()
    );

    let highpass = butter(3, Band::Highpass(300.0), RATE_HZ as f64)?;
    let front = || -> Result<Pipeline, dspk::ops::Error> {
        Ok(Pipeline::new()
            .with(CommonReference::new(Reference::Mean))
            .with(SosFilter::zero_phase(&highpass)?))
    };
    let options = StreamOptions {
        window: WINDOW.min(config.num_samples),
        target: Some(target),
        ..StreamOptions::default()
    };
    // Pass 1: the whitening fit, from the channel covariance of the referenced, filtered
    // recording (Kilosort4's 32 nearest channels; singular after the common reference, which
    // local_zca whitens as Kilosort4's SVD does).
    let mut stream = WindowStream::new(&client, made.source.clone(), front()?, &options)?;
    let mut covariance = CovarianceAccumulator::new(&client, channels)?;
    let fit = "windows (whitening fit)";
    let mut seconds = run_stream(&mut stream, fit, |window| {
        Ok(covariance.add_window(&client, window)?)
    })?;
    let solving = std::time::Instant::now();
    let xy: Vec<(f64, f64)> = positions.iter().map(|&[x, y]| (x, y)).collect();
    let whitening = covariance.local_whitening(&client, &xy, 32, 1e-6)?;
    seconds += solving.elapsed().as_secs_f64();
    let fitting = Pass::of("whitening fit", &stream, seconds);
    // Pass 2: the whitened recording's peaks below -4.5 MAD on each channel.
    let mut stream = WindowStream::new(&client, made.source, front()?.with(whitening), &options)?;
    let (distance, negative) = (MERGE.samples as usize, Polarity::Negative);
    let mut finder = NoisePeaks::new(&client, stream.workspace(), negative, THRESHOLD, distance)?;
    let mut peaks = Vec::new();
    let seconds = run_stream(&mut stream, "windows (detection)", |window| {
        let found = finder.find(&client, window)?;
        peaks.extend(found.iter().map(|p| ChannelPeak {
            sample: p.sample,
            channel: p.channel as usize,
            value: p.value,
        }));
        Ok(())
    })?;
    let passes = [fitting, Pass::of("detection", &stream, seconds)];

    let events = merge_peaks(&peaks, positions, MERGE);
    let score = score_events(&events, spikes, positions, MATCH);
    let stages = stream.workspace().pipeline().stage_names().join(" -> ");
    println!(
        "pipeline:  unpack -> {stages} (halo {} samples), then peaks < -{THRESHOLD} x MAD noise",
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
    let duration = config.num_samples as f64 / RATE_HZ as f64;
    print!("{}", speed_report(&passes, duration));
    let bounds = args.bounds;
    match bounds.shortfall(score) {
        None => Ok(()),
        Some(short) => Err(format!(
            "{short} (--min-recall {}, --min-precision {})",
            bounds.recall, bounds.precision
        )
        .into()),
    }
}

/// The recording `--seconds N` (default 10), `--channels N` (default 64) and `--units N`
/// (default 24) ask for, and the least score `--min-recall X` and `--min-precision Y` accept
/// (default 0); `None` for `--help`.
fn parse_args(mut reader: Reader) -> Result<Option<Args>, String> {
    let mut args = Args {
        seconds: 10,
        channels: 64,
        units: 24,
        bounds: Bounds::default(),
    };
    let run = reader.read_flags(|reader, flag| {
        match flag {
            "--seconds" => args.seconds = reader.whole(flag, 1..=100_000)?,
            "--channels" => args.channels = reader.whole(flag, 1..=100_000)?,
            "--units" => args.units = reader.whole(flag, 1..=100_000)?,
            "--min-recall" => args.bounds.recall = reader.fraction(flag)?,
            "--min-precision" => args.bounds.precision = reader.fraction(flag)?,
            _ => return Err(reader.unknown(flag)),
        }
        Ok(())
    })?;
    reader.positional(&[])?;
    Ok(run.then_some(args))
}
