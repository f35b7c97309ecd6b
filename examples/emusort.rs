//! EMUsort (Kilosort4 adapted to intramuscular EMG) on the device, scored against an EMG-like
//! ground truth. (A recording of your own: `dspk sort PATH --preset emusort`.)
//!
//! ```text
//! cargo run --release --example emusort                    # synthetic: 16 ch, 60 s, 8 motor units
//! cargo run --release --example emusort -- --seconds 20 --delay-mode shared --min-units 5
//! cargo run --release --example emusort -- --sweep Th_universal=7,9 --sweep Th_learned=6,8
//! ```
//!
//! An EMG-like recording is generated in memory (`dspk::synapse::groundtruth::EmgRecording`,
//! seed `--seed`: contacts along the fibres, multiphasic motor-unit potentials that reach each
//! channel with their own delay, or one shared delay profile with `--delay-mode shared`,
//! recruitment that raises rates and overlaps). It is sorted with `KilosortSettings::emusort()`
//! (changed by `--set KEY=VALUE`) and scored as SpikeInterface's
//! `compare_sorter_to_ground_truth` does (spikes within 0.4 ms, Hungarian matching), strictly
//! and with one constant lag per sorted unit within ±3 ms (`score.py --max-lag-ms 3`, as
//! EMUsort's own figures are scored). The channel delays found are printed beside the truth's
//! (a recording's one set of channel delays is only the truth for `--delay-mode shared`).
//! `--sweep KEY=V1,V2,...` (repeatable) sorts every combination and keeps the run with the
//! best EMUsort score, reporting all. `--min-units N --min-accuracy A` bound the lag-aligned
//! result (exit status 1 below them), as CI runs it.

use std::error::Error;
use std::process::ExitCode;
use std::sync::Arc;

use dspk::kilosort::sweep::{SweepDevice, SweepProgress, run_sweep, sweep_grid};
use dspk::kilosort::{KilosortSettings, SortOutput, SortProbe};
use dspk::synapse::groundtruth::{
    DelayMode, EmgConfig, EmgRecording, MatchMode, align_lags, compare_to_ground_truth,
};
use dspk::{ComputeTarget, RecordingSource, SampleRate};
use dspk_cli::flags::Reader;
use dspk_cli::progress::progress_bar;
use dspk_cli::report::run_program;
use dspk_cli::settings::{parse_set, settings};
use dspk_cli::sorter::sort_with_bars;
use dspk_examples::truth::{SortFlags, Summary, compare, sorted_trains};

/// Lag each sorted unit may carry against the truth when scored lag-aligned, ms.
const MAX_LAG_MS: f64 = 3.0;

fn main() -> ExitCode {
    // SAFETY: first in main, no other thread yet.
    unsafe { run_program("emusort", USAGE, parse_args, run) }
}

/// The synthetic EMG recording: generated, sorted (or swept), scored.
fn run(args: Args) -> Result<(), Box<dyn Error>> {
    let config = EmgConfig {
        duration_s: args.truth.seconds as f64,
        channels: args.truth.channels as usize,
        units: args.truth.units as usize,
        seed: args.truth.seed,
        delay_mode: args.delay_mode,
        ..EmgConfig::default()
    };
    let started = std::time::Instant::now();
    let truth = Arc::new(EmgRecording::generate(&config)?);
    println!(
        "recording: synthetic EMG, {} channels x {} s at {} Hz, {} motor units, {} true \
         spikes, delays per {}, seed {} (made in {:.2} s)",
        config.channels,
        args.truth.seconds,
        config.sample_rate_hz,
        config.units,
        truth.spike_times().len(),
        match config.delay_mode {
            DelayMode::Unit => "unit",
            DelayMode::Shared => "recording (shared)",
        },
        args.truth.seed,
        started.elapsed().as_secs_f64()
    );
    let probe = SortProbe::from_probe(truth.probe(), config.channels, &[])?;
    let source: Arc<dyn RecordingSource> = truth.clone();
    let target = ComputeTarget::from_env()?;
    let client = target.client()?;
    println!(
        "runtime:   {target} on {}",
        client.properties().identity.name
    );
    let output = if args.sweeps.is_empty() {
        let sorted = sort_with_bars(&client, args.settings, source, &probe)?;
        print!("{}", sorted.report(config.duration_s));
        sorted.output
    } else {
        let device = SweepDevice {
            client,
            target: Some(target),
        };
        sweep(device, &args.settings, &args.sweeps, source, &probe)?
    };

    let rate = SampleRate::from_hz(config.sample_rate_hz)?;
    print_delays(&output, &truth);
    let gt = truth.spike_trains();
    let strict = compare(&gt, &output.sorting, rate)?;
    println!("strict (spikes within 0.4 ms of the truth's landmark):");
    print!("{}", Summary::of(&strict));
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
    let summary = Summary::of(&lagged);
    print!("{summary}");
    let score = dspk::kilosort::export::score::run_score(&output.units);
    println!(
        "EMUsort score: {} (mean over units)",
        score.map_or("n/a".to_string(), |s| format!("{s:.4}"))
    );
    Ok(summary.check(args.truth.min_units, args.truth.min_accuracy)?)
}

/// Every combination of `axes` over `source`, on `device`; the report, and the best run's
/// output.
fn sweep(
    device: SweepDevice,
    base: &KilosortSettings,
    axes: &[(String, Vec<String>)],
    source: Arc<dyn RecordingSource>,
    probe: &SortProbe,
) -> Result<SortOutput, Box<dyn Error>> {
    let runs = sweep_grid(base, axes)?;
    println!("sweeping:  {} settings", runs.len());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let bar = progress_bar(runs.len() as u64, "runs");
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
    truth: SortFlags,
    settings: KilosortSettings,
    sweeps: Vec<(String, Vec<String>)>,
    delay_mode: DelayMode,
}

const USAGE: &str = "usage: emusort [--seconds N] [--channels N] [--units N] [--seed N] \
                     [--delay-mode unit|shared] [--set KEY=VALUE ...] [--sweep KEY=V1,V2 ...] \
                     [--min-units N] [--min-accuracy A]\n\
                     (DSPK_RUNTIME=wgpu|cuda|hip|cpu; KEY: Kilosort4/EMUsort setting names; a \
                     recording of your own: dspk sort PATH --preset emusort)";

/// The arguments; `None` for `--help`.
fn parse_args(mut reader: Reader) -> Result<Option<Args>, String> {
    let mut truth = SortFlags::new(60, (16, 2), 8, 1);
    let (mut sweeps, mut delay_mode) = (Vec::new(), DelayMode::Unit);
    let run = reader.read_flags(|reader, flag| {
        if truth.read(reader, flag)? {
            return Ok(());
        }
        match flag {
            "--delay-mode" => {
                delay_mode = match reader.text(flag)?.as_str() {
                    "unit" => DelayMode::Unit,
                    "shared" => DelayMode::Shared,
                    _ => return Err("emusort --delay-mode needs `unit` or `shared`".into()),
                };
            }
            "--sweep" => {
                let text = reader.text(flag)?;
                let (key, values) = parse_set(&text)
                    .map_err(|_| format!("emusort --sweep {text}: expected KEY=V1,V2,..."))?;
                let values = values.split(',').map(|v| v.trim().to_string()).collect();
                sweeps.push((key, values));
            }
            _ => return Err(reader.unknown(flag)),
        }
        Ok(())
    })?;
    reader.positional(&[])?;
    let settings = settings(Some("emusort"), &truth.sets)?;
    Ok(run.then_some(Args {
        truth,
        settings,
        sweeps,
        delay_mode,
    }))
}
