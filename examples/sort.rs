//! A whole Kilosort4 sort on the device of a generated recording, scored against its ground
//! truth. (A recording of your own: `dspk sort PATH`, the `dspk` command of crates/dspk-cli.)
//!
//! ```text
//! cargo run --release --example sort                       # synthetic: 64 ch, 30 s, 16 units, drifting
//! cargo run --release --example sort -- --seconds 20 --units 8 --min-units 6 --min-accuracy 0.8
//! cargo run --release --example sort -- --out sorted/      # also the Phy folder, with recording.dat
//! DSPK_RUNTIME=cpu cargo run --release --features cpu --example sort -- --seconds 10
//! ```
//!
//! A ground-truth recording is generated in memory (`dspk::synapse::groundtruth`, seed
//! `--seed`: units on a two-column Neuropixels-like probe, correlated noise, 20 µm of linear
//! drift), sorted on the best device (or `DSPK_RUNTIME`), and the sorting is compared with the
//! truth as SpikeInterface's `compare_sorter_to_ground_truth` does (spikes within 0.4 ms,
//! Hungarian matching): each true unit's accuracy `tp / (tp + fn + fp)`, recall and precision,
//! how many units reach an accuracy of 0.8, and the mean accuracy. Each stage's time and memory
//! is printed. `--min-units N --min-accuracy A` make a result below them an error (exit status
//! 1), as CI runs it. `--out DIR` writes the Phy folder there (replacing one that is there)
//! with the recording as `recording.dat`, so that Phy shows its traces. `--set KEY=VALUE`
//! changes a Kilosort4 setting (its own names: `--set Th_learned=7 --set nblocks=0`).
//!
//! The defaults (64 channels, 30 s, 16 units, seed 2026) give every unit 130 to 370 spikes:
//! on lavapipe (software Vulkan, 2 busy cores, debug build) the sort took 404 s and found 15
//! of 16 units at accuracy >= 0.8, mean accuracy 0.965; with 20 s it took 181 s and found 8
//! (4 sorted units each merged two true ones). On a GPU the device stages take seconds.

use std::path::PathBuf;
use std::process::ExitCode;

use dspk::io::{RawWriteOptions, write_raw};
use dspk::kilosort::{KilosortSettings, SortProbe};
use dspk::synapse::groundtruth::{Drift, GroundTruthConfig, MatchMode};
use dspk::synapse::phy::PhyParams;
use dspk::{ComputeTarget, SampleRate};
use dspk_cli::flags::Reader;
use dspk_cli::report::run_program;
use dspk_cli::settings::settings;
use dspk_cli::sorter::sort_with_bars;
use dspk_examples::synthetic::generate_in_memory;
use dspk_examples::truth::{SortFlags, Summary, compare};
use dspk_examples::{MemoryLimit, sample_count};

const RATE_HZ: u64 = 30_000;

fn main() -> ExitCode {
    // SAFETY: first in main, no other thread yet.
    unsafe { run_program("sort", USAGE, parse_args, run) }
}

/// The synthetic recording: generated, sorted, scored; the Phy folder with `--out`.
fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let config = GroundTruthConfig {
        channels: args.truth.channels as usize,
        num_samples: sample_count(args.truth.seconds, RATE_HZ)?,
        sample_rate_hz: RATE_HZ,
        units: args.truth.units as usize,
        drift: Drift::Linear { total_um: 20.0 },
        seed: args.truth.seed,
        ..GroundTruthConfig::default()
    };
    let made = generate_in_memory(&config, MemoryLimit::of_this_machine())?;
    let truth = &made.truth;
    println!(
        "recording: synthetic, {} channels x {} s at {RATE_HZ} Hz, {} units, {} true spikes, \
         20 um linear drift, seed {} (made in {:.2} s)",
        config.channels,
        args.truth.seconds,
        config.units,
        truth.spikes().len(),
        args.truth.seed,
        made.made_in.as_secs_f64()
    );
    let probe = SortProbe::from_probe(truth.probe(), config.channels, &[])?;
    let target = ComputeTarget::from_env()?;
    let client = target.client()?;
    println!(
        "runtime:   {target} on {}",
        client.properties().identity.name
    );
    let sorted = sort_with_bars(&client, args.settings, made.source.clone(), &probe)?;
    print!("{}", sorted.report(args.truth.seconds as f64));
    let output = sorted.output;

    let rate = SampleRate::from_hz(RATE_HZ)?;
    let comparison = compare(&truth.spike_trains(), &output.sorting, rate)?;
    let performance = comparison.performance(MatchMode::Hungarian);
    let matches = comparison.hungarian_match();
    println!("accuracy against the truth (spikes within 0.4 ms, Hungarian match):");
    println!("  unit  amplitude  rate    spikes  sorted as  accuracy  recall  precision");
    let trains = truth.spike_trains();
    for (u, unit) in truth.units().iter().enumerate() {
        let p = &performance[u];
        let matched = matches[u].map_or("-".to_string(), |t| comparison.tested_ids()[t].clone());
        println!(
            "  {u:>4}  {:>6.0} uV  {:>4.1} Hz  {:>6}  {matched:>9}  {:>8.3}  {:>6.3}  {:>9.3}",
            unit.amplitude_uv,
            unit.firing_rate_hz,
            trains.train(u).len(),
            p.accuracy,
            p.recall,
            p.precision
        );
    }
    let summary = Summary::of(&comparison);
    print!("{summary}");

    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir)?;
        let dat = dir.join("recording.dat");
        write_raw(made.source.as_ref(), &dat, RawWriteOptions::default())?;
        let params = PhyParams::new("recording.dat", config.channels, RATE_HZ as f64);
        output.write_phy(dir, params, true)?;
        println!(
            "phy:       {} (with the recording as recording.dat; phy template-gui {})",
            dir.display(),
            dir.join("params.py").display()
        );
    }
    Ok(summary.check(args.truth.min_units, args.truth.min_accuracy)?)
}

/// What the command line asked for.
struct Args {
    truth: SortFlags,
    settings: KilosortSettings,
    out: Option<PathBuf>,
}

const USAGE: &str = "usage: sort [--seconds N] [--channels N] [--units N] [--seed N] [--out DIR] \
                     [--set KEY=VALUE ...] [--min-units N] [--min-accuracy A]\n\
                     (DSPK_RUNTIME=wgpu|cuda|hip|cpu; KEY: Kilosort4's setting names; a recording \
                     of your own: dspk sort PATH)";

/// The arguments; `None` for `--help`.
fn parse_args(mut reader: Reader) -> Result<Option<Args>, String> {
    let (mut truth, mut out) = (SortFlags::new(30, (64, 1), 16, 2026), None);
    let run = reader.read_flags(|reader, flag| {
        if !truth.read(reader, flag)? {
            match flag {
                "--out" => out = Some(reader.path(flag)?),
                _ => return Err(reader.unknown(flag)),
            }
        }
        Ok(())
    })?;
    reader.positional(&[])?;
    let settings = settings(None, &truth.sets)?;
    Ok(run.then_some(Args {
        truth,
        settings,
        out,
    }))
}
