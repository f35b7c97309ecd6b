//! A whole Kilosort4 sort on the device, scored against ground truth; or any recording sorted
//! into a Phy folder.
//!
//! ```text
//! cargo run --release --example sort                       # synthetic: 64 ch, 30 s, 16 units, drifting
//! cargo run --release --example sort -- --seconds 20 --units 8 --min-units 6 --min-accuracy 0.8
//! cargo run --release --example sort -- --out sorted/      # also the Phy folder, with recording.dat
//! cargo run --release --example sort -- PATH [--probe FILE] [--out DIR]   # a real recording
//! DSPK_RUNTIME=cpu cargo run --release --features cpu --example sort -- --seconds 10
//! ```
//!
//! Without PATH, a ground-truth recording is generated in memory (`dspk::synapse::groundtruth`,
//! seed `--seed`: units on a two-column Neuropixels-like probe, correlated noise, 20 µm of
//! linear drift), sorted on the best device (or `DSPK_RUNTIME`), and the sorting is compared
//! with the truth as SpikeInterface's `compare_sorter_to_ground_truth` does (spikes within
//! 0.4 ms, Hungarian matching): each true unit's accuracy `tp / (tp + fn + fp)`, recall and
//! precision, how many units reach an accuracy of 0.8, and the mean accuracy. Each stage's time
//! and memory is printed. `--min-units N --min-accuracy A` make a result below them an error
//! (exit status 1), as CI runs it. `--out DIR` writes the Phy folder there (replacing one that
//! is there) with the recording as `recording.dat`, so that Phy shows its traces.
//!
//! The defaults (64 channels, 30 s, 16 units, seed 2026) give every unit 130 to 370 spikes:
//! on lavapipe (software Vulkan, 2 busy cores, debug build) the sort took 404 s and found 15
//! of 16 units at accuracy >= 0.8, mean accuracy 0.965; with 20 s it took 181 s and found 8
//! (4 sorted units each merged two true ones). On a GPU the device stages take seconds.
//!
//! With PATH (any format `dspk::open` reads; `--features formats` for Zarr and NWB) the
//! recording is sorted with its own probe or `--probe FILE` into a Phy folder, by default
//! `<PATH stem>_dspk_sort/` beside it. `--set KEY=VALUE` changes a Kilosort4 setting (its own
//! names: `--set Th_learned=7 --set nblocks=0`).

use std::error::Error;
use std::path::PathBuf;
use std::process::ExitCode;

use dspk::SampleRate;
use dspk::io::{RawWriteOptions, write_raw};
use dspk::kilosort::{KilosortSettings, SortProbe};
use dspk::synapse::groundtruth::{Drift, GroundTruthConfig, MatchMode};
use dspk::synapse::phy::PhyParams;
use dspk_examples::sorting::{check_bounds, compare, print_summary, sort, sort_path};
use dspk_examples::synthetic::generate_in_memory;
use dspk_examples::{MemoryLimit, checked_product, finish};

const RATE_HZ: u64 = 30_000;

fn main() -> ExitCode {
    // SAFETY: first in main, no other thread yet.
    unsafe { dspk_examples::quiet_vulkan_device_select() };
    finish(run())
}

fn run() -> Result<(), Box<dyn Error>> {
    let Some(args) = parse_args()? else {
        return Ok(());
    };
    let mut settings = KilosortSettings::default();
    for (key, value) in &args.sets {
        settings
            .set(key, value)
            .map_err(|e| format!("--set {key}={value}: {e}"))?;
    }
    match &args.path {
        Some(path) => sort_path(path, args.probe.as_deref(), args.out.as_deref(), settings),
        None => sort_ground_truth(&args, settings),
    }
}

/// The synthetic recording: generated, sorted, scored; the Phy folder with `--out`.
fn sort_ground_truth(args: &Args, settings: KilosortSettings) -> Result<(), Box<dyn Error>> {
    let what = format!(
        "the sample count of --seconds {} at {RATE_HZ} Hz",
        args.seconds
    );
    let config = GroundTruthConfig {
        channels: args.channels as usize,
        num_samples: checked_product(&what, &[args.seconds, RATE_HZ])?,
        sample_rate_hz: RATE_HZ,
        units: args.units as usize,
        drift: Drift::Linear { total_um: 20.0 },
        seed: args.seed,
        ..GroundTruthConfig::default()
    };
    let made = generate_in_memory(&config, MemoryLimit::of_this_machine())?;
    let truth = &made.truth;
    println!(
        "recording: synthetic, {} channels x {} s at {RATE_HZ} Hz, {} units, {} true spikes, \
         20 um linear drift, seed {} (made in {:.2} s)",
        config.channels,
        args.seconds,
        config.units,
        truth.spikes().len(),
        args.seed,
        made.made_in.as_secs_f64()
    );
    let probe = SortProbe::from_probe(truth.probe(), config.channels, &[])?;
    let output = sort(settings, made.source.clone(), &probe)?;

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
    let (well, mean) = print_summary(&comparison);

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
    check_bounds(well, mean, args.min_units, args.min_accuracy)
}

/// What the command line asked for.
struct Args {
    path: Option<PathBuf>,
    probe: Option<PathBuf>,
    out: Option<PathBuf>,
    sets: Vec<(String, String)>,
    seconds: u64,
    channels: u64,
    units: u64,
    seed: u64,
    min_units: u64,
    min_accuracy: f64,
}

const USAGE: &str = "usage: sort [--seconds N] [--channels N] [--units N] [--seed N] [--out DIR] \
                     [--set KEY=VALUE ...] [--min-units N] [--min-accuracy A]\n       \
                     sort PATH [--probe FILE] [--out DIR] [--set KEY=VALUE ...]\n\
                     (DSPK_RUNTIME=wgpu|cuda|hip|cpu; KEY: Kilosort4's setting names)";

/// The arguments; `None` after printing the usage for `--help`.
fn parse_args() -> Result<Option<Args>, Box<dyn Error>> {
    let mut parsed = Args {
        path: None,
        probe: None,
        out: None,
        sets: Vec::new(),
        seconds: 30,
        channels: 64,
        units: 16,
        seed: 2026,
        min_units: 0,
        min_accuracy: 0.0,
    };
    let mut args = std::env::args_os().skip(1);
    let whole =
        |name: &str, value: Option<std::ffi::OsString>, least: u64| -> Result<u64, String> {
            value
                .and_then(|v| v.to_str()?.parse().ok())
                .filter(|&v| v >= least && v <= 100_000)
                .ok_or(format!(
                    "{name} needs a whole number from {least} to 100000"
                ))
        };
    let mut synthetic_flag = None;
    while let Some(arg) = args.next() {
        if let Some(flag) = [
            "--seconds",
            "--channels",
            "--units",
            "--seed",
            "--min-units",
            "--min-accuracy",
        ]
        .into_iter()
        .find(|f| arg == *f)
        {
            synthetic_flag = Some(flag);
        }
        match arg.to_str().unwrap_or("") {
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(None);
            }
            "--seconds" => parsed.seconds = whole("--seconds", args.next(), 1)?,
            "--channels" => parsed.channels = whole("--channels", args.next(), 1)?,
            "--units" => parsed.units = whole("--units", args.next(), 1)?,
            "--seed" => parsed.seed = whole("--seed", args.next(), 0)?,
            "--min-units" => parsed.min_units = whole("--min-units", args.next(), 0)?,
            "--min-accuracy" => {
                parsed.min_accuracy = args
                    .next()
                    .and_then(|v| v.to_str()?.parse().ok())
                    .filter(|v| (0.0..=1.0).contains(v))
                    .ok_or("--min-accuracy needs a number from 0 to 1")?;
            }
            "--out" => parsed.out = Some(args.next().ok_or("--out needs a folder")?.into()),
            "--probe" => parsed.probe = Some(args.next().ok_or("--probe needs a file")?.into()),
            "--set" => {
                let pair = args.next().and_then(|v| v.into_string().ok());
                let pair = pair.ok_or("--set needs KEY=VALUE")?;
                let (key, value) = pair
                    .split_once('=')
                    .ok_or(format!("--set {pair}: expected KEY=VALUE"))?;
                parsed.sets.push((key.to_string(), value.to_string()));
            }
            flag if flag.starts_with('-') => {
                return Err(format!("unknown argument `{flag}` (try --help)").into());
            }
            _ if parsed.path.is_none() => parsed.path = Some(PathBuf::from(arg)),
            _ => return Err(format!("unexpected argument {arg:?} (try --help)").into()),
        }
    }
    if let (Some(path), Some(flag)) = (&parsed.path, synthetic_flag) {
        return Err(format!(
            "{flag} is for the synthetic recording; {} is sorted as it is",
            path.display()
        )
        .into());
    }
    if parsed.path.is_none() && parsed.probe.is_some() {
        return Err("--probe is for a recording given as PATH".into());
    }
    Ok(Some(parsed))
}
