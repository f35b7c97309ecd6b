//! Long recordings without their storage: a generated ground-truth block (`--seconds`, default
//! 300 s of 384 channels, 120 units) played end to end for `--minutes` minutes through a
//! [`RepeatedRecording`], its true spikes repeated with it, sorted end to end (Kilosort4 on the
//! device) and scored against the repeated truth.
//!
//! ```text
//! DSPK_RUNTIME=cuda cargo bench --features cuda --bench long -- --minutes 60
//! cargo bench --features cpu --bench long -- --minutes 2 --seconds 30 --channels 32 --units 8
//! ```
//!
//! Prints each stage (time, windows, bytes read and uploaded, host and device peaks, as the
//! `sort` example does), then one line of `key=value` figures: the wall, the passes over the
//! recording and how many of them read it (the others ran on windows kept on the device), the
//! bytes read, the process's peak resident memory and the most device memory reserved at a
//! stage's end, and the accuracy. The block's
//! drift is a sine of half the block's period, so the motion is continuous where a repeat
//! starts; `--minutes` equal to the block's length (`--minutes 0.5 --seconds 30`) sorts the
//! block alone, the reference for the repeated one.

use std::process::ExitCode;
use std::sync::Arc;

use dspk::kilosort::{KilosortSettings, SortProbe};
use dspk::synapse::groundtruth::{Drift, GroundTruthConfig};
use dspk::{ComputeTarget, RecordingSource, RepeatedRecording, SampleRate};
use dspk_cli::flags::Reader;
use dspk_cli::report::run_program;
use dspk_cli::settings::settings;
use dspk_cli::sorter::sort_with_bars;
use dspk_examples::synthetic::generate_in_memory;
use dspk_examples::truth::{SortFlags, Summary, compare};
use dspk_examples::{MemoryLimit, sample_count};

const RATE_HZ: u64 = 30_000;

struct Args {
    /// The block: its seconds, channels, units, seed; `--set`s and bounds.
    block: SortFlags,
    /// Seconds of the repeated recording (`--minutes`, a whole number of blocks).
    seconds: u64,
    settings: KilosortSettings,
}

const USAGE: &str = "usage: long [--minutes N] [--seconds N] [--channels N] [--units N] \
                     [--seed N] [--set KEY=VALUE ...] [--min-units N] [--min-accuracy A]\n\
                     (--seconds: the generated block, played end to end for --minutes, a whole \
                     number of blocks; \
                     DSPK_RUNTIME=wgpu|cuda|hip|cpu)";

fn main() -> ExitCode {
    // SAFETY: first in main, no other thread yet.
    unsafe { run_program("long", USAGE, parse_args, run) }
}

/// The arguments; `None` for `--help`.
fn parse_args(mut reader: Reader) -> Result<Option<Args>, String> {
    let mut block = SortFlags::new(300, (384, 1), 120, 11);
    let mut minutes: f64 = 10.0;
    let run = reader.read_flags(|reader, flag| {
        if !block.read(reader, flag)? {
            match flag {
                "--minutes" => minutes = reader.parsed(flag, "minutes")?,
                // cargo bench passes --bench to every bench binary.
                "--bench" => {}
                _ => return Err(reader.unknown(flag)),
            }
        }
        Ok(())
    })?;
    reader.positional(&[])?;
    // Whole seconds (0.1 minutes is 6 s, whatever the float's last bit says).
    let seconds = (minutes * 60.0).round();
    let whole = (1.0..=1e7).contains(&seconds) && (minutes * 60.0 - seconds).abs() < 1e-6;
    if !(whole && (seconds as u64).is_multiple_of(block.seconds)) {
        return Err(format!(
            "--minutes {minutes} is not a whole number of {}-second blocks",
            block.seconds
        ));
    }
    let settings = settings(None, &block.sets)?;
    Ok(run.then_some(Args {
        block,
        seconds: seconds as u64,
        settings,
    }))
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let block = &args.block;
    let config = GroundTruthConfig {
        channels: block.channels as usize,
        num_samples: sample_count(block.seconds, RATE_HZ)?,
        sample_rate_hz: RATE_HZ,
        units: block.units as usize,
        drift: Drift::Sine {
            amplitude_um: 10.0,
            period_s: block.seconds as f64 / 2.0,
        },
        seed: block.seed,
        ..GroundTruthConfig::default()
    };
    let made = generate_in_memory(&config, MemoryLimit::of_this_machine())?;
    let repeats = args.seconds / block.seconds;
    let source: Arc<dyn RecordingSource> =
        Arc::new(RepeatedRecording::new(made.source.clone(), repeats)?);
    let truth = made
        .truth
        .spike_trains()
        .repeated(config.num_samples as i64, repeats)?;
    println!(
        "recording: {} x a {} s block of {} channels ({} units, 10 um sine drift, seed {}, made \
         in {:.1} s) = {:.1} min, {} true spikes",
        repeats,
        block.seconds,
        config.channels,
        config.units,
        block.seed,
        made.made_in.as_secs_f64(),
        args.seconds as f64 / 60.0,
        truth.num_spikes()
    );
    let probe = SortProbe::from_probe(made.truth.probe(), config.channels, &[])?;
    let target = ComputeTarget::from_env()?;
    let client = target.client()?;
    println!(
        "runtime:   {target} on {}",
        client.properties().identity.name
    );
    let sorted = sort_with_bars(&client, args.settings, source, &probe)?;
    print!("{}", sorted.report(args.seconds as f64));
    let stages = &sorted.output.stages;
    // Stages that visit windows or read samples (channel offsets read a few without windows).
    let passes = stages
        .iter()
        .filter(|s| s.pass.windows > 0 || s.pass.read_bytes > 0)
        .count();
    let reads = stages.iter().filter(|s| s.pass.read_bytes > 0).count();
    let read: u64 = stages.iter().map(|s| s.pass.read_bytes).sum();
    let host_peak = stages
        .iter()
        .filter_map(|s| s.peak_host_bytes)
        .max()
        .unwrap_or(0);
    let device_peak = stages
        .iter()
        .map(|s| s.device_reserved_bytes)
        .max()
        .unwrap_or(0);

    let comparison = compare(
        &truth,
        &sorted.output.sorting,
        SampleRate::from_hz(RATE_HZ)?,
    )?;
    let summary = Summary::of(&comparison);
    print!("{summary}");
    println!(
        "LONG seconds={} block_s={} channels={} units={} wall_s={:.1} passes={passes} \
         passes_reading={reads} read_bytes={read} host_peak_bytes={host_peak} device_peak_bytes={device_peak} \
         found={} mean_accuracy={:.3}",
        args.seconds,
        block.seconds,
        config.channels,
        config.units,
        sorted.seconds,
        summary.found,
        summary.mean.accuracy
    );
    Ok(summary.check(block.min_units, block.min_accuracy)?)
}
