//! Detects spikes in a synthetic recording with known spikes, on the device, and scores the
//! detections against the truth.
//!
//! ```text
//! cargo run --release --example detect                     # 10 s, 64 channels, best runtime
//! DSPK_RUNTIME=cpu cargo run --release --features cpu --example detect -- --seconds 4
//! ```
//!
//! The recording (`dspk::synapse::groundtruth::GroundTruthRecording`, from a fixed seed) has
//! units in front of a Neuropixels-like staggered two-column probe, each firing its own
//! waveform with refractory Poisson timing and an amplitude decaying with distance, over noise
//! that is partly common to all channels, partly shared by neighbours and partly independent,
//! plus a 7 Hz oscillation. Its int16 samples are computed once into memory (so the timing
//! below is the device chain's, not the synthesis'), then streamed window by window: a
//! `WindowLoader` reads on its own thread, windows cross to the device as int16 and are
//! unpacked there, and a device `Pipeline` runs
//!
//! 1. common average reference (removes the common noise),
//! 2. a 300 Hz third-order Butterworth high-pass, forward and backward (removes the
//!    oscillation, keeps the spikes' shape in time),
//! 3. local whitening: each channel from its 32 nearest, from the channel covariance
//!    accumulated on the device over a first pass (removes the neighbour-shared noise),
//!
//! then negative peaks below 4.5 times each channel's MAD noise are found on the device and
//! only they are downloaded. Windows overlap by the pipeline's settling length, so the result
//! is the same as processing the recording whole. Detections on neighbouring channels within
//! 0.5 ms are merged into events; an event matches a true spike within 0.4 ms and 60 um.
//!
//! The recording is held in memory, so the arguments are checked first: a duration whose
//! sample count overflows, or a recording (with its true spikes) larger than the memory
//! available (`MemAvailable` on Linux, a fixed 16 GB elsewhere), is refused with a message
//! before anything is allocated. Errors print their message and causes on stderr and exit
//! with status 1.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use dspk::ops::buffers::empty_f32;
use dspk::ops::design::{Band, butter};
use dspk::ops::{
    ChannelMixing, CommonReference, CovarianceAccumulator, Height, Peak, PeakDetector, PeakOptions,
    Pipeline, PipelineWorkspace, Polarity, Reference, SosFilter, Whitening, linalg, mad_noise_into,
};
use dspk::synapse::groundtruth::{GroundTruthConfig, GroundTruthRecording, TrueSpike};
use dspk::{ChunkSchedule, ComputeTarget, MemoryRecording, RecordingSource, WindowLoader};
use dspk_examples::{
    MemoryLimit, Refusal, checked_product, finish, human_bytes, human_rate, progress_bar,
};

const RATE_HZ: u64 = 30_000;
/// Every unit's mean firing rate, Hz.
const FIRING_RATE_HZ: u64 = 8;
/// Samples per window: 1 s.
const WINDOW: u64 = 30_000;
/// Detection threshold in units of each channel's MAD noise.
const THRESHOLD: f32 = 4.5;
/// Detections closer than this in time (samples, 0.5 ms) and space are one event.
const MERGE_SAMPLES: u64 = 15;
/// Detections closer than this in space (um) are one event.
const MERGE_UM: f64 = 50.0;
/// An event matches a true spike within this time (samples, 0.4 ms) ...
const MATCH_SAMPLES: u64 = 12;
/// ... and this distance (um) between the event's channel and the unit's nearest channel.
const MATCH_UM: f64 = 60.0;

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
    let args = parse_args()?;
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
    let positions: Vec<(f64, f64)> = truth
        .channel_positions()
        .iter()
        .map(|&[x, y]| (x, y))
        .collect();
    let spikes = truth.spikes();
    let info = truth.info().clone();
    let mut stored = vec![0u8; info.num_channels() * info.num_samples as usize * 2];
    truth.read_stored(&info.all_channels(), 0..info.num_samples, &mut stored)?;
    let source = Arc::new(MemoryRecording::new(info.clone(), stored)?);
    let channels = info.num_channels();
    println!(
        "recording: {channels} channels x {} samples at {} Hz, int16; {} units, {} true \
         spikes (made in {:.2} s)",
        info.num_samples,
        RATE_HZ,
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
    let halo = front()?.settling() as u64;
    let window = WINDOW.min(info.num_samples);
    let schedule = ChunkSchedule::symmetric(info.num_samples, window, halo)?;
    let max_read = schedule.max_read_len() as usize;
    let mut workspace = PipelineWorkspace::new(&client, channels, max_read)?;
    let gains: Vec<f64> = info.channels.iter().map(|c| c.gain).collect();
    let offsets: Vec<f64> = info.channels.iter().map(|c| c.offset).collect();
    workspace.set_stored_scaling(&gains, &offsets)?;
    let format = info.stored_format;
    let all = info.all_channels();

    // Pass 1: reference + high-pass, channel covariance accumulated on the device over the
    // samples each window owns.
    workspace.set_pipeline(front()?)?;
    let mut covariance = CovarianceAccumulator::new(&client, channels)?;
    let bar = progress_bar(schedule.len() as u64, "windows (whitening fit)");
    let loader = WindowLoader::stored_for(source.clone(), all.clone(), schedule, Some(target))?;
    for loaded in loader {
        let loaded = loaded?;
        let halo_window = loaded.window().clone();
        workspace.process_stored_upload(loaded.into_upload(), format, halo_window.read_len())?;
        covariance.add(
            &client,
            workspace.output(),
            halo_window.read_len(),
            halo_window.valid_local(),
        )?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    let cov = covariance.finish(&client)?;
    // The common average reference leaves the covariance of all channels singular (the
    // channels sum to zero), so a neighbourhood never holds every channel.
    let nearest = 32.min(channels - 1).max(1);
    let white = linalg::local_zca(&cov, &positions, nearest, 1e-6)?;
    let indices: Vec<usize> = white.indices().iter().map(|&i| i as usize).collect();
    let mixing = ChannelMixing::from_sparse(&client, &indices, white.weights(), channels)?;

    // Pass 2: reference + high-pass + whitening, then peaks below -4.5 MAD on each channel.
    workspace.set_pipeline(front()?.with(Whitening::new(mixing)))?;
    let noise = empty_f32(&client, channels);
    let mut detector = PeakDetector::new(&client, channels * window as usize / 10)?;
    let bar = progress_bar(schedule.len() as u64, "windows (detection)");
    let started = Instant::now();
    let mut peaks: Vec<(u64, Peak)> = Vec::new();
    let mut moved = 0usize;
    let loader = WindowLoader::stored_for(source.clone(), all, schedule, Some(target))?;
    for loaded in loader {
        let loaded = loaded?;
        let halo_window = loaded.window().clone();
        let samples = halo_window.read_len();
        moved += loaded.data().len();
        workspace.process_stored_upload(loaded.into_upload(), format, samples)?;
        mad_noise_into(&client, workspace.output(), &noise, channels, samples)?;
        detector.detect(
            &client,
            workspace.output(),
            channels,
            samples,
            halo_window.valid_local(),
            &PeakOptions {
                polarity: Polarity::Negative,
                height: Height::PerChannel {
                    thresholds: noise.clone(),
                    scale: THRESHOLD,
                },
                distance: MERGE_SAMPLES as usize,
            },
        )?;
        let start = halo_window.read().start;
        peaks.extend(
            detector
                .peaks(&client)?
                .into_iter()
                .map(|p| (start + u64::from(p.sample), p)),
        );
        bar.inc(1);
    }
    let elapsed = started.elapsed().as_secs_f64();
    bar.finish_and_clear();

    let events = merge(&peaks, &positions);
    let (recall, precision, matched) = score(&events, spikes, &positions);
    println!(
        "pipeline:  unpack -> {} (halo {halo} samples), then peaks < -{THRESHOLD} x MAD noise",
        workspace.pipeline().stage_names().join(" -> ")
    );
    println!(
        "detected:  {} peaks on channels -> {} events; {matched} of {} true spikes found",
        peaks.len(),
        events.len(),
        spikes.len()
    );
    println!("accuracy:  recall {recall:.3}, precision {precision:.3}");
    println!(
        "speed:     {} windows in {elapsed:.2} s ({:.1} windows/s, {} of int16, {:.1}x real time)",
        schedule.len(),
        schedule.len() as f64 / elapsed,
        human_rate(moved as f64, elapsed),
        args.seconds as f64 / elapsed
    );
    println!("moved:     {} to the device", human_bytes(moved as f64));
    Ok(())
}

/// One detected event: the largest peak among those merged into it.
struct Event {
    sample: u64,
    channel: usize,
}

/// Merges peaks closer than [`MERGE_SAMPLES`] and [`MERGE_UM`], largest first.
fn merge(peaks: &[(u64, Peak)], positions: &[(f64, f64)]) -> Vec<Event> {
    let mut order: Vec<usize> = (0..peaks.len()).collect();
    order.sort_by(|&a, &b| peaks[a].1.value.total_cmp(&peaks[b].1.value));
    let mut by_time: Vec<usize> = (0..peaks.len()).collect();
    by_time.sort_by_key(|&i| peaks[i].0);
    let mut taken = vec![false; peaks.len()];
    let mut events = Vec::new();
    for &i in &order {
        if taken[i] {
            continue;
        }
        let (sample, peak) = peaks[i];
        let channel = peak.channel as usize;
        let first = by_time.partition_point(|&j| peaks[j].0 + MERGE_SAMPLES < sample);
        for &j in &by_time[first..] {
            if peaks[j].0 > sample + MERGE_SAMPLES {
                break;
            }
            if distance(positions, channel, peaks[j].1.channel as usize) <= MERGE_UM {
                taken[j] = true;
            }
        }
        events.push(Event { sample, channel });
    }
    events.sort_by_key(|e| e.sample);
    events
}

/// Recall, precision and matches: each true spike matches at most one event and vice versa
/// (greedy in time order).
fn score(events: &[Event], spikes: &[TrueSpike], positions: &[(f64, f64)]) -> (f64, f64, usize) {
    let mut used = vec![false; events.len()];
    let mut matched = 0;
    for spike in spikes {
        let first = events.partition_point(|e| e.sample + MATCH_SAMPLES < spike.sample);
        let best = (first..events.len())
            .take_while(|&e| events[e].sample <= spike.sample + MATCH_SAMPLES)
            .filter(|&e| !used[e])
            .filter(|&e| distance(positions, events[e].channel, spike.channel) <= MATCH_UM)
            .min_by_key(|&e| events[e].sample.abs_diff(spike.sample));
        if let Some(e) = best {
            used[e] = true;
            matched += 1;
        }
    }
    let recall = matched as f64 / spikes.len().max(1) as f64;
    let precision = matched as f64 / events.len().max(1) as f64;
    (recall, precision, matched)
}

fn distance(positions: &[(f64, f64)], a: usize, b: usize) -> f64 {
    (positions[a].0 - positions[b].0).hypot(positions[a].1 - positions[b].1)
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
    let samples = checked_product(&what, &[args.channels as u64, args.num_samples, 2])?;
    let spikes = checked_product(
        &what,
        &[
            args.units as u64,
            args.seconds,
            FIRING_RATE_HZ,
            size_of::<TrueSpike>() as u64,
        ],
    )?;
    let needed = samples
        .checked_add(spikes)
        .ok_or_else(|| Refusal::Overflow { what: what.clone() })?;
    limit.check(&what, needed)
}

/// `--seconds N` (default 10), `--channels N` (default 64), `--units N` (default 24); the
/// sample count is computed checked.
fn parse_args() -> Result<Args, Box<dyn std::error::Error>> {
    let mut args = Args {
        seconds: 10,
        channels: 64,
        units: 24,
        num_samples: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| -> Result<u64, String> {
            it.next()
                .and_then(|v| v.parse().ok())
                .filter(|&v| v > 0)
                .ok_or(format!("{name} needs a positive whole number"))
        };
        match flag.as_str() {
            "--seconds" => args.seconds = value("--seconds")?,
            "--channels" => args.channels = value("--channels")? as usize,
            "--units" => args.units = value("--units")? as usize,
            "-h" | "--help" => {
                println!(
                    "usage: detect [--seconds N] [--channels N] [--units N]   \
                     (DSPK_RUNTIME=wgpu|cuda|hip|cpu picks the runtime)"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument `{other}` (try --help)").into()),
        }
    }
    args.num_samples = checked_product(
        &format!(
            "the sample count of --seconds {} at {RATE_HZ} Hz",
            args.seconds
        ),
        &[args.seconds, RATE_HZ],
    )?;
    Ok(args)
}
