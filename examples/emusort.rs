//! EMUsort (Kilosort4 adapted to intramuscular EMG) on the device, scored against an EMG-like
//! ground truth; or any recording sorted with the EMUsort preset into a Phy folder.
//!
//! ```text
//! cargo run --release --example emusort                    # synthetic: 16 ch, 60 s, 8 motor units
//! cargo run --release --example emusort -- --seconds 20 --delay-mode shared --min-units 5
//! cargo run --release --example emusort -- --sweep Th_universal=7,9 --sweep Th_learned=6,8
//! cargo run --release --example emusort -- PATH [--probe FILE] [--out DIR] [--set KEY=VALUE]
//! ```
//!
//! Without PATH, an EMG-like recording is generated in memory
//! (`dspk::synapse::groundtruth::EmgRecording`, seed `--seed`: contacts along the fibres,
//! multiphasic motor-unit potentials that reach each channel with their own delay, or one
//! shared delay profile with `--delay-mode shared`, recruitment that raises rates and overlaps).
//! It is sorted with `KilosortSettings::emusort()` and scored as SpikeInterface's
//! `compare_sorter_to_ground_truth` does (spikes within 0.4 ms, Hungarian matching), strictly
//! and with one constant lag per sorted unit within ±3 ms (`score.py --max-lag-ms 3`, as
//! EMUsort's own figures are scored). The channel delays found are printed beside the truth's
//! (a recording's one set of channel delays is only the truth for `--delay-mode shared`).
//! `--sweep KEY=V1,V2,...` (repeatable) sorts every combination and keeps the run with the
//! best EMUsort score, reporting all. `--min-units N --min-accuracy A` bound the lag-aligned
//! result (exit status 1 below them), as CI runs it.
//!
//! With PATH (any format `dspk::open` reads) the recording is sorted with the EMUsort preset
//! (its channels in file order on EMUsort's line probe, unless `--probe`) into a Phy folder, by
//! default `<PATH stem>_dspk_sort/` beside it.

use std::error::Error;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use dspk::kilosort::sweep::{SweepDevice, SweepProgress, run_sweep, sweep_grid};
use dspk::kilosort::{KilosortSettings, SortOutput, SortProbe};
use dspk::synapse::groundtruth::{
    DelayMode, EmgConfig, EmgRecording, MatchMode, align_lags, compare_to_ground_truth,
};
use dspk::{ComputeTarget, RecordingSource, SampleRate};
use dspk_examples::finish;
use dspk_examples::sorting::{
    check_bounds, compare, print_summary, sort, sort_path, sorted_trains,
};

/// Lag each sorted unit may carry against the truth when scored lag-aligned, ms.
const MAX_LAG_MS: f64 = 3.0;

fn main() -> ExitCode {
    // SAFETY: first in main, no other thread yet.
    unsafe { dspk_examples::quiet_vulkan_device_select() };
    finish(run())
}

fn run() -> Result<(), Box<dyn Error>> {
    let Some(args) = parse_args()? else {
        return Ok(());
    };
    let mut settings = KilosortSettings::emusort();
    for (key, value) in &args.sets {
        settings
            .set(key, value)
            .map_err(|e| format!("--set {key}={value}: {e}"))?;
    }
    match &args.path {
        Some(path) => {
            if args.probe.is_some() {
                settings.line_probe_pitch = None;
            }
            sort_path(path, args.probe.as_deref(), args.out.as_deref(), settings)
        }
        None => sort_ground_truth(&args, settings),
    }
}

/// The synthetic EMG recording: generated, sorted (or swept), scored.
fn sort_ground_truth(args: &Args, settings: KilosortSettings) -> Result<(), Box<dyn Error>> {
    let config = EmgConfig {
        duration_s: args.seconds as f64,
        channels: args.channels as usize,
        units: args.units as usize,
        seed: args.seed,
        delay_mode: args.delay_mode,
        ..EmgConfig::default()
    };
    let started = std::time::Instant::now();
    let truth = Arc::new(EmgRecording::generate(&config)?);
    println!(
        "recording: synthetic EMG, {} channels x {} s at {} Hz, {} motor units, {} true \
         spikes, delays per {}, seed {} (made in {:.2} s)",
        config.channels,
        args.seconds,
        config.sample_rate_hz,
        config.units,
        truth.spike_times().len(),
        match config.delay_mode {
            DelayMode::Unit => "unit",
            DelayMode::Shared => "recording (shared)",
        },
        args.seed,
        started.elapsed().as_secs_f64()
    );
    let probe = SortProbe::from_probe(truth.probe(), config.channels, &[])?;
    let source: Arc<dyn RecordingSource> = truth.clone();
    let output = if args.sweeps.is_empty() {
        sort(settings, source, &probe)?
    } else {
        sweep(&settings, &args.sweeps, source, &probe)?
    };

    let rate = SampleRate::from_hz(config.sample_rate_hz)?;
    print_delays(&output, &truth);
    let gt = truth.spike_trains();
    let strict = compare(&gt, &output.sorting, rate)?;
    println!("strict (spikes within 0.4 ms of the truth's landmark):");
    let _ = print_summary(&strict);
    let aligned = align_lags(&gt, &sorted_trains(&output.sorting)?, rate, MAX_LAG_MS, 0.4)?;
    let lagged = compare_to_ground_truth(&gt, &aligned.trains, rate, &Default::default())?;
    let performance = lagged.performance(MatchMode::Hungarian);
    let matches = lagged.hungarian_match();
    println!("lag-aligned (one lag per sorted unit within +-{MAX_LAG_MS} ms):");
    println!("  unit  amplitude  spikes  sorted as  lag (samples)  accuracy  recall  precision");
    for (u, unit) in truth.units().iter().enumerate() {
        let p = &performance[u];
        let (matched, lag) = matches[u].map_or(("-".to_string(), "-".to_string()), |t| {
            (
                lagged.tested_ids()[t].clone(),
                aligned.lags[t].lag_samples.to_string(),
            )
        });
        println!(
            "  {u:>4}  {:>6.0} uV  {:>6}  {matched:>9}  {lag:>13}  {:>8.3}  {:>6.3}  {:>9.3}",
            unit.peak_amplitude_uv,
            gt.train(u).len(),
            p.accuracy,
            p.recall,
            p.precision
        );
    }
    let (well, mean) = print_summary(&lagged);
    let score = dspk::kilosort::export::score::run_score(&output.units);
    println!(
        "EMUsort score: {} (mean over units)",
        score.map_or("n/a".to_string(), |s| format!("{s:.4}"))
    );
    check_bounds(well, mean, args.min_units, args.min_accuracy)
}

/// Every combination of `axes` over `source`, on the device `DSPK_RUNTIME` names; the report,
/// and the best run's output.
fn sweep(
    base: &KilosortSettings,
    axes: &[(String, Vec<String>)],
    source: Arc<dyn RecordingSource>,
    probe: &SortProbe,
) -> Result<SortOutput, Box<dyn Error>> {
    let runs = sweep_grid(base, axes)?;
    let target = ComputeTarget::from_env()?;
    let device = SweepDevice {
        client: target.client()?,
        target: Some(target),
    };
    println!("runtime:   {target}; sweeping {} settings", runs.len());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let bar = dspk_examples::progress_bar(runs.len() as u64, "runs");
    let started = std::time::Instant::now();
    let swept = run_sweep(
        &[device],
        source,
        probe,
        &runs,
        &Default::default(),
        threads,
        &|p: SweepProgress| {
            bar.set_message(format!("run {} {}", p.run, p.progress.stage));
            if p.progress.stage == "post-processing" && p.progress.done == p.progress.total {
                bar.inc(1);
            }
        },
    )?;
    bar.finish_and_clear();
    println!(
        "sweep:     {} runs in {:.1} s (* the best EMUsort score)",
        runs.len(),
        started.elapsed().as_secs_f64()
    );
    print!("{}", swept.report());
    let best = swept.best.ok_or("no run of the sweep has a score")?;
    let mut runs = swept.runs;
    Ok(runs.swap_remove(best).outcome?)
}

/// The channel delays found beside the truth: for each channel, the truth's delay of the
/// unit best seen there relative to the reference channel.
fn print_delays(output: &SortOutput, truth: &EmgRecording) {
    let Some(delays) = &output.fit.delays else {
        return;
    };
    let r = delays.reference;
    // The truth's delay profile of the largest unit, relative to the reference channel.
    let Some(unit) = truth
        .units()
        .iter()
        .max_by(|a, b| a.peak_amplitude_uv.total_cmp(&b.peak_amplitude_uv))
    else {
        return;
    };
    let relative: Vec<i64> = unit
        .delays_samples
        .iter()
        .map(|d| d - unit.delays_samples[r])
        .collect();
    let within = delays
        .delays
        .iter()
        .zip(&relative)
        .filter(|(a, b)| (i64::from(**a) - **b).abs() <= 1)
        .count();
    println!(
        "delays:    reference channel {r}; found {:?}\n           largest unit's truth {:?} \
         ({within} of {} channels within 1 sample)",
        delays.delays,
        relative,
        relative.len()
    );
}

/// What the command line asked for.
struct Args {
    path: Option<PathBuf>,
    probe: Option<PathBuf>,
    out: Option<PathBuf>,
    sets: Vec<(String, String)>,
    sweeps: Vec<(String, Vec<String>)>,
    seconds: u64,
    channels: u64,
    units: u64,
    seed: u64,
    delay_mode: DelayMode,
    min_units: u64,
    min_accuracy: f64,
}

const USAGE: &str = "usage: emusort [--seconds N] [--channels N] [--units N] [--seed N] \
                     [--delay-mode unit|shared] [--set KEY=VALUE ...] [--sweep KEY=V1,V2 ...] \
                     [--min-units N] [--min-accuracy A]\n       \
                     emusort PATH [--probe FILE] [--out DIR] [--set KEY=VALUE ...]\n\
                     (DSPK_RUNTIME=wgpu|cuda|hip|cpu; KEY: Kilosort4/EMUsort setting names)";

/// The arguments; `None` after printing the usage for `--help`.
fn parse_args() -> Result<Option<Args>, Box<dyn Error>> {
    let mut parsed = Args {
        path: None,
        probe: None,
        out: None,
        sets: Vec::new(),
        sweeps: Vec::new(),
        seconds: 60,
        channels: 16,
        units: 8,
        seed: 1,
        delay_mode: DelayMode::Unit,
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
    let pair =
        |flag: &str, value: Option<std::ffi::OsString>| -> Result<(String, String), String> {
            let text = value
                .and_then(|v| v.into_string().ok())
                .ok_or(format!("{flag} needs KEY=VALUE"))?;
            let (key, value) = text
                .split_once('=')
                .ok_or(format!("{flag} {text}: expected KEY=VALUE"))?;
            Ok((key.to_string(), value.to_string()))
        };
    let mut synthetic_only = None;
    while let Some(arg) = args.next() {
        let flag = arg.to_str().unwrap_or("");
        if [
            "--seconds",
            "--channels",
            "--units",
            "--seed",
            "--delay-mode",
            "--sweep",
            "--min-units",
            "--min-accuracy",
        ]
        .contains(&flag)
        {
            synthetic_only = Some(flag.to_string());
        }
        match flag {
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(None);
            }
            "--seconds" => parsed.seconds = whole("--seconds", args.next(), 1)?,
            "--channels" => parsed.channels = whole("--channels", args.next(), 2)?,
            "--units" => parsed.units = whole("--units", args.next(), 1)?,
            "--seed" => parsed.seed = whole("--seed", args.next(), 0)?,
            "--min-units" => parsed.min_units = whole("--min-units", args.next(), 0)?,
            "--delay-mode" => {
                parsed.delay_mode = match args.next().and_then(|v| v.into_string().ok()).as_deref()
                {
                    Some("unit") => DelayMode::Unit,
                    Some("shared") => DelayMode::Shared,
                    _ => return Err("--delay-mode needs `unit` or `shared`".into()),
                };
            }
            "--min-accuracy" => {
                parsed.min_accuracy = args
                    .next()
                    .and_then(|v| v.to_str()?.parse().ok())
                    .filter(|v| (0.0..=1.0).contains(v))
                    .ok_or("--min-accuracy needs a number from 0 to 1")?;
            }
            "--out" => parsed.out = Some(args.next().ok_or("--out needs a folder")?.into()),
            "--probe" => parsed.probe = Some(args.next().ok_or("--probe needs a file")?.into()),
            "--set" => parsed.sets.push(pair("--set", args.next())?),
            "--sweep" => {
                let (key, values) = pair("--sweep", args.next())?;
                let values: Vec<String> = values.split(',').map(str::to_string).collect();
                parsed.sweeps.push((key, values));
            }
            other if other.starts_with('-') => {
                return Err(format!("unknown argument `{other}` (try --help)").into());
            }
            _ if parsed.path.is_none() => parsed.path = Some(PathBuf::from(arg)),
            _ => return Err(format!("unexpected argument {arg:?} (try --help)").into()),
        }
    }
    if let (Some(path), Some(flag)) = (&parsed.path, synthetic_only) {
        return Err(format!(
            "{flag} is for the synthetic recording; {} is sorted as it is",
            path.display()
        )
        .into());
    }
    if parsed.path.is_none() && (parsed.probe.is_some() || parsed.out.is_some()) {
        return Err("--probe and --out are for a recording given as PATH".into());
    }
    Ok(Some(parsed))
}
