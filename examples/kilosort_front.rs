//! The front half of a Kilosort4 sort on the device (preprocessing fit, universal templates,
//! drift, detection) with its per-stage report and, against ground truth, its detection
//! recall.
//!
//! ```text
//! cargo run --release --example kilosort_front                 # synthetic 64 ch, 20 s, drifting
//! cargo run --release --example kilosort_front -- --seconds 4 --channels 32 --min-recall 0.9
//! cargo run --release --example kilosort_front -- --bench DIR  # a ground-truth bench folder (gen_ground_truth.py)
//! cargo run --release --example kilosort_front -- --set nblocks=0 --set Th_universal=8
//! ```
//!
//! `--min-recall X` makes it fail (exit status 1) below that recall.
//!
//! Recall: the fraction of true spikes of units whose peak exceeds 50 µV with a detected spike
//! within 0.4 ms of the trough (a detection's trough is `nt / 2 - nt0min` samples before
//! its Kilosort time, 10 at the defaults).

use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use dspk::ComputeTarget;
use dspk::io::{ByteOrder, NpyArray, RawRecording, RawSpec, SampleOrder};
use dspk::kilosort::{Kilosort4, KilosortSettings, RunOptions, SortProbe};
use dspk::synapse::groundtruth::{Drift, GroundTruthConfig, GroundTruthRecording, recalled};
use dspk::{ChannelInfo, RecordingSource, SampleFormat, SampleRate};
use dspk_cli::flags::Reader;
use dspk_cli::progress::StageBars;
use dspk_cli::report::run_program;
use dspk_cli::settings::{parse_set, settings};

/// True units whose peak is at least this large count in the recall (µV).
const MIN_AMPLITUDE_UV: f64 = 50.0;
/// Tolerance of the recall, ms.
const TOLERANCE_MS: f64 = 0.4;

/// A recording to sort with its ground truth: true spike troughs of the units above
/// [`MIN_AMPLITUDE_UV`].
struct Case {
    name: String,
    source: Arc<dyn RecordingSource>,
    probe: SortProbe,
    truth: Vec<u64>,
}

fn main() -> ExitCode {
    // SAFETY: first in main, no other thread yet.
    unsafe { run_program("kilosort_front", USAGE, parse_args, run) }
}

fn run(args: Args) -> Result<(), Box<dyn Error>> {
    let settings = &args.settings;
    let case = match &args.bench {
        Some(dir) => bench_case(dir)?,
        None => synthetic_case(&args)?,
    };
    let target = ComputeTarget::from_env()?;
    let client = target.client()?;
    let info = case.source.info().clone();
    let seconds = info.num_samples as f64 / info.sample_rate.as_hz();
    println!("runtime:   {target}");
    println!(
        "recording: {} ({} channels sorted, {:.1} s, {} true spikes of units above {MIN_AMPLITUDE_UV} uV)",
        case.name,
        case.probe.len(),
        seconds,
        case.truth.len()
    );
    let mut bars = StageBars::new();
    let started = Instant::now();
    let front = Kilosort4::new(settings.clone())
        .with_options(RunOptions {
            target: Some(target),
            ..RunOptions::default()
        })
        .run_front(&client, case.source.clone(), &case.probe, &mut |p| {
            bars.update(p.stage, p.done, p.total);
        });
    bars.finish();
    let front = front?;
    let wall = started.elapsed().as_secs_f64();
    for stage in &front.stages {
        println!("stage      {stage}");
    }
    let shift = (settings.nt / 2 - settings.trough()) as u64;
    let troughs: Vec<u64> = front
        .spikes
        .sample
        .iter()
        .map(|&s| s.saturating_sub(shift))
        .collect();
    let tolerance = (TOLERANCE_MS * info.sample_rate.as_hz() / 1000.0).round() as u64;
    let found = recalled(&case.truth, &troughs, tolerance);
    let recall = found as f64 / case.truth.len().max(1) as f64;
    println!(
        "detected:  {} spikes; recall {recall:.4} ({found} of {} true spikes within {TOLERANCE_MS} ms)",
        front.spikes.len(),
        case.truth.len()
    );
    if let Some(drift) = &front.drift {
        let shifts = drift.dshift();
        let (lo, hi) = shifts
            .iter()
            .fold((f64::MAX, f64::MIN), |(l, h), &v| (l.min(v), h.max(v)));
        println!(
            "drift:     {} batches x {} blocks, shifts {lo:.1} to {hi:.1} um",
            drift.n_batches(),
            drift.n_blocks()
        );
    }
    println!(
        "total:     {wall:.3} s for {seconds:.1} s of recording ({:.1}x real time)",
        seconds / wall
    );
    // Guards `--min-recall`, which was read and never checked: a recall below it passed.
    if recall < args.min_recall || recall.is_nan() {
        return Err(format!(
            "recall {recall:.4} is below --min-recall {}",
            args.min_recall
        )
        .into());
    }
    Ok(())
}

/// The synthetic recording: `--channels` (64), `--seconds` (20), `--units` (24), 20 µm of
/// linear drift.
fn synthetic_case(args: &Args) -> Result<Case, Box<dyn Error>> {
    let recording = GroundTruthRecording::generate(&GroundTruthConfig {
        channels: args.channels,
        num_samples: args.seconds * 30_000,
        units: args.units,
        drift: Drift::Linear { total_um: 20.0 },
        seed: 2026,
        ..GroundTruthConfig::default()
    })?;
    let probe = SortProbe::from_probe(recording.probe(), recording.info().num_channels(), &[])?;
    let mut truth: Vec<u64> = recording
        .spikes()
        .iter()
        .filter(|s| recording.units()[s.unit].amplitude_uv >= MIN_AMPLITUDE_UV)
        .map(|s| s.sample)
        .collect();
    truth.sort_unstable();
    Ok(Case {
        name: "synthetic, 20 um linear drift".to_string(),
        source: Arc::new(recording),
        probe,
        truth,
    })
}

/// A ground-truth bench `gen_ground_truth.py` folder: `recording.bin` (int16 interleaved) with
/// `recording.json`, `chanMap.json`, `gt_spike_times.npy`, `gt_spike_clusters.npy`.
fn bench_case(dir: &Path) -> Result<Case, Box<dyn Error>> {
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("recording.json"))?)?;
    let field = |name: &str| {
        meta[name].as_f64().ok_or_else(|| {
            format!(
                "{}: no number `{name}`",
                dir.join("recording.json").display()
            )
        })
    };
    let (channels, rate) = (field("n_channels")? as usize, field("sample_rate_hz")?);
    let (gain, offset) = (field("gain_uv_per_count")?, field("offset_uv")?);
    let spec = RawSpec {
        channels: (0..channels)
            .map(|c| ChannelInfo::new(c.to_string(), gain, offset, "uV"))
            .collect(),
        sample_rate: SampleRate::from_hz(rate.round() as u64)?,
        format: SampleFormat::I16,
        byte_order: ByteOrder::Little,
        order: SampleOrder::Interleaved,
        header_bytes: 0,
        num_samples: None,
    };
    let source = RawRecording::new(dir.join("recording.bin"), spec)?;
    let probe = dspk::synapse::probe::read_kilosort_json(&dir.join("chanMap.json"))?;
    let probe = SortProbe::from_probe(&probe, channels, &[])?;
    let times = NpyArray::read(dir.join("gt_spike_times.npy"))?.to_i64()?;
    let units = NpyArray::read(dir.join("gt_spike_clusters.npy"))?.to_i64()?;
    let amplitudes: Vec<f64> = meta["ground_truth"]["peak_amplitude_uv"]
        .as_array()
        .ok_or("recording.json: no ground_truth.peak_amplitude_uv")?
        .iter()
        .map(|a| a.as_f64().unwrap_or(0.0))
        .collect();
    let mut truth: Vec<u64> = times
        .iter()
        .zip(&units)
        .filter(|&(_, &u)| {
            usize::try_from(u)
                .ok()
                .and_then(|u| amplitudes.get(u))
                .is_some_and(|&a| a >= MIN_AMPLITUDE_UV)
        })
        .map(|(&t, _)| t.max(0) as u64)
        .collect();
    truth.sort_unstable();
    Ok(Case {
        name: dir.display().to_string(),
        source: Arc::new(source),
        probe,
        truth,
    })
}

/// What the command line asked for.
struct Args {
    bench: Option<PathBuf>,
    settings: KilosortSettings,
    seconds: u64,
    channels: usize,
    units: usize,
    min_recall: f64,
}

const USAGE: &str = "usage: kilosort_front [--bench DIR] [--seconds N] [--channels N] [--units N] \
                     [--set KEY=VALUE ...] [--min-recall X]   (DSPK_RUNTIME=wgpu|cuda|hip|cpu)";

/// `--bench DIR`, `--set KEY=VALUE` (repeatable), `--seconds N`, `--channels N`, `--units N`,
/// `--min-recall X`; `None` for `--help`.
fn parse_args(mut reader: Reader) -> Result<Option<Args>, String> {
    let mut sets = Vec::new();
    let mut parsed = Args {
        bench: None,
        settings: KilosortSettings::default(),
        seconds: 20,
        channels: 64,
        units: 24,
        min_recall: 0.0,
    };
    let run = reader.read_flags(|reader, flag| {
        let count = |reader: &mut Reader| reader.whole(flag, 1..=100_000);
        match flag {
            "--bench" => parsed.bench = Some(reader.path(flag)?),
            "--seconds" => parsed.seconds = count(reader)?,
            "--channels" => parsed.channels = count(reader)? as usize,
            "--units" => parsed.units = count(reader)? as usize,
            "--min-recall" => parsed.min_recall = reader.fraction(flag)?,
            "--set" => sets.push(parse_set(&reader.text(flag)?)?),
            _ => return Err(reader.unknown(flag)),
        }
        Ok(())
    })?;
    reader.positional(&[])?;
    parsed.settings = settings(None, &sets)?;
    Ok(run.then_some(parsed))
}
