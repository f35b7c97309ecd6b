//! Long recordings without their storage: a generated ground-truth block (`--seconds`, default
//! 300 s of 384 channels, 120 units) played end to end for `--minutes` minutes through a
//! [`RepeatedRecording`], its true spikes repeated with it, sorted end to end (Kilosort4 on the
//! device) and scored against the repeated truth. `--minutes` may list several lengths
//! (`--minutes 5,10,30,60`): each is sorted in turn from the one generated block.
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
//! stage's end, and the accuracy. Before each sort the process's peak resident set is reset to
//! its current size (Linux's `/proc/self/clear_refs`), so `host_peak_bytes` is that sort's own
//! peak, and `host_sort_bytes` what the sort added to the memory held before it (the block
//! itself, about 7 GB at the default size, is in the first and not in the second). The block's
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

#[path = "common/memory.rs"]
mod memory;

use memory::resident_bytes;

const RATE_HZ: u64 = 30_000;

struct Args {
    /// The block: its seconds, channels, units, seed; `--set`s and bounds.
    block: SortFlags,
    /// Seconds of each repeated recording (`--minutes`, whole numbers of blocks), in order.
    seconds: Vec<u64>,
    settings: KilosortSettings,
}

const USAGE: &str = "usage: long [--minutes N[,N...]] [--seconds N] [--channels N] [--units N] \
                     [--seed N] [--set KEY=VALUE ...] [--min-units N] [--min-accuracy A]\n\
                     (--seconds: the generated block, played end to end for --minutes, a whole \
                     number of blocks; several --minutes, comma-separated, are sorted in turn; \
                     DSPK_RUNTIME=wgpu|cuda|hip|cpu)";

fn main() -> ExitCode {
    // SAFETY: first in main, no other thread yet.
    unsafe { run_program("long", USAGE, parse_args, run) }
}

/// The arguments; `None` for `--help`.
fn parse_args(mut reader: Reader) -> Result<Option<Args>, String> {
    let mut block = SortFlags::new(300, (384, 1), 120, 11);
    let mut minutes = String::from("10");
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
    let seconds = minutes
        .split(',')
        .map(|m| whole_blocks(m, block.seconds))
        .collect::<Result<Vec<_>, _>>()?;
    let settings = settings(None, &block.sets)?;
    Ok(run.then_some(Args {
        block,
        seconds,
        settings,
    }))
}

/// Seconds of `minutes` (a decimal), checked to be a whole number of `block`-second blocks.
fn whole_blocks(minutes: &str, block: u64) -> Result<u64, String> {
    let value: f64 = minutes
        .trim()
        .parse()
        .map_err(|_| format!("--minutes: {minutes:?} is not a number"))?;
    // Whole seconds (0.1 minutes is 6 s, whatever the float's last bit says).
    let seconds = (value * 60.0).round();
    let whole = (1.0..=1e7).contains(&seconds) && (value * 60.0 - seconds).abs() < 1e-6;
    if !(whole && (seconds as u64).is_multiple_of(block)) {
        return Err(format!(
            "--minutes {minutes} is not a whole number of {block}-second blocks"
        ));
    }
    Ok(seconds as u64)
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
    let probe = SortProbe::from_probe(made.truth.probe(), config.channels, &[])?;
    let target = ComputeTarget::from_env()?;
    let client = target.client()?;
    println!(
        "block:     {} s of {} channels ({} units, 10 um sine drift, seed {}), made in {:.1} s",
        block.seconds,
        config.channels,
        config.units,
        block.seed,
        made.made_in.as_secs_f64()
    );
    println!(
        "runtime:   {target} on {}",
        client.properties().identity.name
    );
    for &seconds in &args.seconds {
        let repeats = seconds / block.seconds;
        let source: Arc<dyn RecordingSource> =
            Arc::new(RepeatedRecording::new(made.source.clone(), repeats)?);
        let truth = made
            .truth
            .spike_trains()
            .repeated(config.num_samples as i64, repeats)?;
        println!(
            "recording: {repeats} x the block = {:.1} min, {} true spikes",
            seconds as f64 / 60.0,
            truth.num_spikes()
        );
        let held = reset_peak_host_bytes();
        let sorted = sort_with_bars(&client, args.settings.clone(), source, &probe)?;
        print!("{}", sorted.report(seconds as f64));
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
        let host_sort = held.map_or("unknown".to_string(), |held| {
            host_peak.saturating_sub(held).to_string()
        });
        println!(
            "LONG seconds={seconds} block_s={} channels={} units={} wall_s={:.1} \
             passes={passes} passes_reading={reads} read_bytes={read} \
             host_peak_bytes={host_peak} host_sort_bytes={host_sort} \
             device_peak_bytes={device_peak} found={} mean_accuracy={:.3}",
            block.seconds,
            config.channels,
            config.units,
            sorted.seconds,
            summary.found,
            summary.mean.accuracy
        );
        summary.check(block.min_units, block.min_accuracy)?;
    }
    Ok(())
}

/// Resets the process's peak resident set to its current size (`5` written to
/// `/proc/self/clear_refs`, Linux 4.0 and later) and returns that size (`VmRSS`); `None` where
/// either is not possible, and then the peak is not reset.
fn reset_peak_host_bytes() -> Option<u64> {
    std::fs::write("/proc/self/clear_refs", "5").ok()?;
    resident_bytes(&std::fs::read_to_string("/proc/self/status").ok()?)
}
