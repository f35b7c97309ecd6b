//! Pictures of a recording at three zooms, drawn from min/max envelopes: the whole recording,
//! 10 s and 100 ms, each pixel column showing the smallest and largest sample under it (every
//! spike visible at every zoom).
//!
//! ```text
//! cargo run --release --example view                          # a generated 384-channel recording
//! cargo run --release --example view -- PATH                  # any recording dspk opens
//! cargo run --release --example view -- --seconds 10 --out pictures --channels 0..32
//! ```
//!
//! With no path the recording is generated (384 channels of a Neuropixels-like probe, 60 s,
//! 120 units with known spikes; samples computed when read). A pyramid of min/max levels is
//! built first (in memory, or in a cache file beside a large recording file, or in `--cache
//! DIR`; reused on the next run while the file is unchanged); the views read the coarsest
//! exact level, or the raw samples where no level fits. Flags: `--out DIR` (default `.`),
//! `--channels A..B` (default the first 48), `--width` pixels (1600), `--height` (900),
//! `--seconds` and `--seed` of the generated recording, `--threads` building the pyramid,
//! `--device` to fold the pyramid's pages on the device (`DSPK_RUNTIME` picks it).

use std::error::Error;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use dspk::synapse::groundtruth::{GroundTruthConfig, GroundTruthRecording};
use dspk::view::picture::{TraceStyle, render_traces};
use dspk::view::{
    BuildOptions, CacheState, LocalBackend, PageFold, Pyramid, PyramidBuild, PyramidLayout,
    SignalBackend, View, ViewRequest, ViewSource,
};
use dspk::{ComputeTarget, RecordingSource};
use dspk_cli::describe::{human_bytes, human_rate};
use dspk_cli::flags::Reader;
use dspk_cli::progress::progress_bar;
use dspk_cli::report::run_program;

struct Args {
    path: Option<PathBuf>,
    out: PathBuf,
    cache: Option<PathBuf>,
    channels: Option<Range<usize>>,
    width: usize,
    height: u32,
    seconds: u64,
    seed: u64,
    threads: usize,
    device: bool,
}

/// Channels drawn when `--channels` is not given.
const DEFAULT_CHANNELS: usize = 48;
/// Pixels left of the traces for the channel names and right of them for a margin (the
/// envelope gets the rest of `--width`, one column per pixel).
const MARGINS: usize = 110;

fn main() -> ExitCode {
    // SAFETY: first in main, no other thread yet.
    unsafe { run_program("view", USAGE, parse_args, run) }
}

const USAGE: &str = "usage: view [PATH] [--out DIR] [--cache DIR] [--channels A..B] [--width PX] \
                     [--height PX] [--seconds S] [--seed N] [--threads N] [--device]";

fn run(args: Args) -> Result<(), Box<dyn Error>> {
    let (source, name, file): (Arc<dyn RecordingSource>, String, Option<&Path>) = match &args.path {
        Some(path) => {
            let opened = dspk_cli::recording::open(path)?;
            let name = format!("{} ({})", path.display(), opened.format);
            (opened.source, name, Some(path.as_path()))
        }
        None => {
            let config = GroundTruthConfig {
                channels: 384,
                units: 120,
                num_samples: args.seconds * 30_000,
                seed: args.seed,
                ..GroundTruthConfig::default()
            };
            let truth = GroundTruthRecording::generate(&config)?;
            let name = format!(
                "generated: 384 channels, {} s, {} units, {} spikes",
                args.seconds,
                config.units,
                truth.spikes().len()
            );
            (Arc::new(truth), name, None)
        }
    };
    let info = source.info().clone();
    let rate = info.sample_rate.as_hz();
    println!(
        "recording: {name}: {} channels x {} samples at {rate} Hz",
        info.num_channels(),
        info.num_samples
    );

    let layout = PyramidLayout::for_recording(&info)?;
    let (pyramid, state) = match file {
        Some(path) => Pyramid::open(path, &info, layout, args.cache.as_deref())?,
        None => (Pyramid::in_memory(layout), CacheState::InMemory),
    };
    let pyramid = Arc::new(pyramid);
    println!(
        "pyramid: {} levels, buckets of {}..{} samples, {} pages, {} ({state:?})",
        pyramid.levels(),
        pyramid.bucket(0),
        pyramid.bucket(pyramid.levels() - 1),
        pyramid.layout().pages(),
        human_bytes(pyramid.layout().bytes() as f64),
    );
    build(&args, &source, &pyramid)?;

    let backend = LocalBackend::with_pyramid(Arc::clone(&source), pyramid)?;
    let drawn = args
        .channels
        .clone()
        .unwrap_or(0..info.num_channels().min(DEFAULT_CHANNELS));
    if drawn.start >= drawn.end || drawn.end > info.num_channels() {
        return Err(format!(
            "--channels {}..{}: the recording has channels 0..{}",
            drawn.start,
            drawn.end,
            info.num_channels()
        )
        .into());
    }
    let channels: Vec<usize> = drawn.collect();
    let labels = channels
        .iter()
        .map(|&c| info.channels[c].name.clone())
        .collect::<Vec<_>>();
    let width = args.width.saturating_sub(MARGINS).max(1);
    std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;

    // Whole recording; 10 s from the middle; 100 ms around the largest deflection of the 10 s.
    let samples = info.num_samples;
    let ten = ((10.0 * rate) as u64).min(samples);
    let middle = (samples - ten) / 2..(samples - ten) / 2 + ten;
    let mut zooms = vec![("whole", 0..samples), ("10s", middle.clone())];
    let request = |samples: Range<u64>| ViewRequest {
        channels: channels.clone(),
        samples,
        width,
    };
    let (ten_view, _) = timed_view(&backend, &request(middle.clone()))?;
    let peak = largest_deflection(&ten_view);
    let hundred = ((0.1 * rate) as u64).clamp(1, samples);
    let start = peak.saturating_sub(hundred / 2).min(samples - hundred);
    zooms.push(("100ms", start..start + hundred));

    for (label, range) in zooms {
        let (view, seconds) = timed_view(&backend, &request(range.clone()))?;
        let from = match view.source {
            ViewSource::Pyramid { level, bucket } => {
                format!("pyramid level {level} ({bucket}-sample buckets)")
            }
            ViewSource::Raw => "raw samples".to_string(),
            ViewSource::Samples => "the samples themselves".to_string(),
        };
        let mut style = TraceStyle::new(rate, args.height);
        style.labels.clone_from(&labels);
        style.title = format!(
            "{label}: samples {}..{} of {name}, channels {}..={}",
            range.start,
            range.end,
            channels[0],
            channels[channels.len() - 1]
        );
        let picture = render_traces(&view.envelope, &style)?;
        let path = args.out.join(format!("view_{label}.png"));
        picture.write_png(&path)?;
        println!(
            "{}: {} columns from {from} in {:.2} ms{}",
            path.display(),
            view.envelope.columns().len(),
            seconds * 1e3,
            if view.complete { "" } else { " (incomplete)" }
        );
    }
    Ok(())
}

/// Builds the pages of `pyramid` not built yet, with a progress bar.
fn build(
    args: &Args,
    source: &Arc<dyn RecordingSource>,
    pyramid: &Arc<Pyramid>,
) -> Result<(), Box<dyn Error>> {
    let total = pyramid.layout().pages();
    let todo = total - pyramid.pages_filled();
    if todo == 0 {
        println!("pyramid: every page already built");
        return Ok(());
    }
    let mut options = BuildOptions::new().threads(args.threads);
    if args.device {
        let target = ComputeTarget::from_env()?;
        println!("folding pages on {target}");
        options = options.fold(PageFold::Device(target.client()?));
    }
    let bar = progress_bar(total, "pages");
    bar.set_position(total - todo);
    let shown = bar.clone();
    options = options.on_progress(move |p| shown.set_position(p.done));
    let started = Instant::now();
    PyramidBuild::start(Arc::clone(pyramid), Arc::clone(source), options)?.wait()?;
    bar.finish_and_clear();
    let seconds = started.elapsed().as_secs_f64();
    let bytes =
        source.info().num_channels() as f64 * source.info().num_samples as f64 * todo as f64
            / total as f64
            * source.info().stored_format.size() as f64;
    println!(
        "pyramid: {todo} pages built in {seconds:.2} s ({} of stored samples)",
        human_rate(bytes, seconds)
    );
    Ok(())
}

/// A view and the seconds it took to answer.
fn timed_view(
    backend: &LocalBackend,
    request: &ViewRequest,
) -> Result<(View, f64), Box<dyn Error>> {
    let started = Instant::now();
    let view = backend.view(request)?;
    Ok((view, started.elapsed().as_secs_f64()))
}

/// The middle sample of the column with the largest span (max - min) over every channel.
fn largest_deflection(view: &View) -> u64 {
    let envelope = &view.envelope;
    let columns = envelope.columns();
    let mut best = (0.0f32, 0usize);
    for c in 0..envelope.channels() {
        for k in 0..columns.len() {
            if let Some((min, max)) = envelope.get(c, k)
                && max - min > best.0
            {
                best = (max - min, k);
            }
        }
    }
    let range = columns.column(best.1);
    range.start + (range.end - range.start) / 2
}

/// The arguments; `None` for `--help`.
fn parse_args(mut reader: Reader) -> Result<Option<Args>, String> {
    let mut parsed = Args {
        path: None,
        out: PathBuf::from("."),
        cache: None,
        channels: None,
        width: 1600,
        height: 900,
        seconds: 60,
        seed: 1,
        threads: std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        device: false,
    };
    let run = reader.read_flags(|reader, flag| {
        let pixels = |reader: &mut Reader| reader.whole(flag, 1..=16_000);
        match flag {
            "--out" => parsed.out = reader.path(flag)?,
            "--cache" => parsed.cache = Some(reader.path(flag)?),
            "--channels" => {
                let text = reader.text(flag)?;
                let range = (text.split_once(".."))
                    .and_then(|(a, b)| Some(a.parse().ok()?..b.parse().ok()?))
                    .ok_or("view --channels needs A..B (e.g. 0..48)")?;
                parsed.channels = Some(range);
            }
            "--width" => parsed.width = pixels(reader)? as usize,
            "--height" => parsed.height = pixels(reader)? as u32,
            "--seconds" => parsed.seconds = reader.whole(flag, 1..=3600)?,
            "--seed" => parsed.seed = reader.whole(flag, 1..=u64::MAX)?,
            "--threads" => parsed.threads = reader.whole(flag, 1..=256)? as usize,
            "--device" => parsed.device = true,
            _ => return Err(reader.unknown(flag)),
        }
        Ok(())
    })?;
    parsed.path = reader.optional("PATH")?;
    if parsed.width <= MARGINS {
        return Err(format!("view --width must be more than {MARGINS} pixels"));
    }
    Ok(run.then_some(parsed))
}
