//! dspk-view measured: pyramid build throughput (host fold and device fold, several thread
//! counts) against the source's own read rate, the latency of a whole-recording overview from
//! the pyramid and from raw samples, the pyramid's size per recording byte, and the host
//! memory while a pyramid is built from a file into a cache file.
//!
//! ```text
//! DSPK_RUNTIME=cuda cargo bench --features cuda --bench view -- --dir /path/on/disk
//! cargo bench --bench view -- --minutes 1 --overview-minutes 2 --file-minutes 1 --no-device
//! ```
//!
//! Flags: `--channels` (384), `--minutes` of the throughput recording (10), `--threads` (a
//! list, default `1,4,16` capped at the machine's cores), `--overview-minutes` of the latency
//! recording (60), `--columns` of the overview (2000), `--file-minutes` of the int16 file the
//! memory run writes in `--dir` (10; 0 skips it; it runs first, while the process holds
//! nothing else, and its file is read from the page cache it was just written to), `--no-device`.
//!
//! The recordings are procedural (`dspk::SyntheticRecording`: samples computed when read, no
//! disk), 30 kHz int16. Rates count the stored bytes (2 per sample) in GB/s of 10^9 bytes and
//! as multiples of real time; the arithmetic is `benches/common/view.rs`.

use std::error::Error;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use dspk::io::{ByteOrder, RawRecording, RawSpec, SampleOrder};
use dspk::rng::SplitMix64;
use dspk::view::{
    BuildOptions, LocalBackend, PageFold, Pyramid, PyramidBuild, PyramidLayout, SignalBackend,
    ViewRequest,
};
use dspk::{
    ChannelInfo, ComputeTarget, RecordingSource, SampleFormat, SampleRate, SyntheticRecording,
};
use dspk_cli::flags::Reader;
use dspk_cli::report::run_program;

#[path = "common/memory.rs"]
mod memory;
#[path = "common/view.rs"]
mod view_figures;

use memory::resident_bytes;
use view_figures::{build_rates, bytes_per_recording_byte, latency_ms, recording_bytes};

type BoxResult<T> = Result<T, Box<dyn Error>>;

const RATE: u64 = 30_000;

struct Args {
    channels: usize,
    minutes: u64,
    threads: Vec<usize>,
    overview_minutes: u64,
    columns: usize,
    file_minutes: u64,
    dir: PathBuf,
    device: bool,
}

fn main() -> ExitCode {
    // SAFETY: first in main, no other thread yet.
    unsafe { run_program("view", USAGE, parse_args, run) }
}

fn run(args: Args) -> BoxResult<()> {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    println!(
        "# view bench: {} channels int16 at {RATE} Hz, procedural source; {cores} cores",
        args.channels
    );
    let device = if args.device {
        let target = ComputeTarget::from_env()?;
        let client = target.client()?;
        println!("# device: {target} ({})", client.properties().identity.name);
        Some(client)
    } else {
        None
    };

    // First, while this process holds nothing else: memory while building from a file.
    let threads = *args.threads.iter().max().unwrap_or(&1);
    if args.file_minutes > 0 {
        memory_run(&args, threads)?;
    }

    // Build throughput, and the source's own read rate (the floor).
    let samples = args.minutes * 60 * RATE;
    let source: Arc<dyn RecordingSource> = Arc::new(synthetic(args.channels, samples)?);
    let bytes = recording_bytes(args.channels, samples, 2);
    let layout = PyramidLayout::for_recording(source.info())?;
    println!(
        "# throughput recording: {} min, {:.3} GB; pyramid {} levels (buckets {}..{}), {} pages \
         of {} samples, {:.1} MB = {:.4} bytes per recording byte",
        args.minutes,
        bytes as f64 / 1e9,
        layout.levels(),
        layout.bucket(0),
        layout.bucket(layout.levels() - 1),
        layout.pages(),
        layout.page_samples(),
        layout.bytes() as f64 / 1e6,
        bytes_per_recording_byte(layout.bytes(), bytes)
    );
    println!(
        "{:<22} {:>7} {:>9} {:>8} {:>11}",
        "what", "threads", "seconds", "GB/s", "x realtime"
    );
    for &threads in &args.threads {
        let seconds = read_only(&source, &layout, threads)?;
        row("source read (floor)", threads, seconds, bytes, samples);
        let seconds = build(&source, &layout, threads, PageFold::Host)?.1;
        row("build, host fold", threads, seconds, bytes, samples);
        if let Some(client) = &device {
            let seconds = build(&source, &layout, threads, PageFold::Device(client.clone()))?.1;
            row("build, device fold", threads, seconds, bytes, samples);
        }
    }

    // Overview latency: whole recording, every channel, `--columns` wide.
    for minutes in [args.minutes, args.overview_minutes] {
        let samples = minutes * 60 * RATE;
        let source: Arc<dyn RecordingSource> = Arc::new(synthetic(args.channels, samples)?);
        let layout = PyramidLayout::for_recording(source.info())?;
        let fold = device.clone().map_or(PageFold::Host, PageFold::Device);
        let (pyramid, build_seconds) = build(&source, &layout, threads, fold)?;
        let backend = LocalBackend::with_pyramid(Arc::clone(&source), pyramid)?;
        let request = ViewRequest {
            channels: (0..args.channels).collect(),
            samples: 0..samples,
            width: args.columns,
        };
        let mut times = Vec::new();
        let mut answered = None;
        for _ in 0..21 {
            let started = Instant::now();
            let view = backend.view(&request)?;
            times.push(started.elapsed().as_secs_f64());
            answered = Some((view.source, view.envelope.columns().len()));
        }
        let (median, max) = latency_ms(&times);
        println!(
            "overview {minutes} min x {} ch -> {} columns from the pyramid ({:?}): median {median:.2} \
             ms, max {max:.2} ms over 21 (pyramid built in {build_seconds:.1} s)",
            args.channels,
            answered.map_or(0, |a| a.1),
            answered.map(|a| a.0),
        );
        if minutes == args.minutes {
            let raw = LocalBackend::new(Arc::clone(&source));
            let started = Instant::now();
            let view = raw.view(&request)?;
            println!(
                "overview {minutes} min x {} ch -> {} columns from raw samples: {:.1} ms",
                args.channels,
                view.envelope.columns().len(),
                started.elapsed().as_secs_f64() * 1e3
            );
        }
    }

    Ok(())
}

/// The procedural int16 recording of the bench.
fn synthetic(channels: usize, samples: u64) -> BoxResult<SyntheticRecording> {
    Ok(SyntheticRecording::new(
        channels,
        samples,
        SampleRate::from_hz(RATE)?,
        7,
    )?)
}

fn row(what: &str, threads: usize, seconds: f64, bytes: u64, samples: u64) {
    let (gbps, realtime) = build_rates(bytes, samples, RATE as f64, seconds);
    println!("{what:<22} {threads:>7} {seconds:>9.3} {gbps:>8.2} {realtime:>11.1}");
}

/// Reads every page of `layout` from `source` with `threads` threads (as a build does, without
/// folding): seconds taken.
fn read_only(
    source: &Arc<dyn RecordingSource>,
    layout: &PyramidLayout,
    threads: usize,
) -> BoxResult<f64> {
    let next = AtomicU64::new(0);
    let failed = Mutex::new(None);
    let channels: Vec<usize> = (0..layout.channels()).collect();
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut buffer = Vec::new();
                loop {
                    let page = next.fetch_add(1, Ordering::Relaxed);
                    if page >= layout.pages() {
                        break;
                    }
                    let range = layout.page_range(page);
                    buffer.resize(channels.len() * (range.end - range.start) as usize, 0.0);
                    if let Err(e) = source.read(&channels, range, &mut buffer) {
                        *failed
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(e);
                        break;
                    }
                }
            });
        }
    });
    if let Some(e) = failed
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
    {
        return Err(e.into());
    }
    Ok(started.elapsed().as_secs_f64())
}

/// Builds an in-memory pyramid of `source`: the pyramid and the seconds taken.
fn build(
    source: &Arc<dyn RecordingSource>,
    layout: &PyramidLayout,
    threads: usize,
    fold: PageFold,
) -> BoxResult<(Arc<Pyramid>, f64)> {
    let pyramid = Arc::new(Pyramid::in_memory(layout.clone()));
    let started = Instant::now();
    PyramidBuild::start(
        Arc::clone(&pyramid),
        Arc::clone(source),
        BuildOptions::new().threads(threads).fold(fold),
    )?
    .wait()?;
    Ok((pyramid, started.elapsed().as_secs_f64()))
}

/// Writes an interleaved int16 file, builds its pyramid into a cache file, and prints the
/// resident memory before, during (its largest value) and after.
fn memory_run(args: &Args, threads: usize) -> BoxResult<()> {
    let samples = args.file_minutes * 60 * RATE;
    let path = args.dir.join("dspk-view-bench.bin");
    let cache = args.dir.join("dspk-view-bench.bin.dspk-pyramid");
    let bytes = recording_bytes(args.channels, samples, 2);
    {
        let mut file = std::io::BufWriter::with_capacity(1 << 22, File::create(&path)?);
        let mut rng = SplitMix64::new(3);
        let mut block = vec![0u8; 1 << 22];
        let mut left = bytes;
        while left > 0 {
            for pair in block.chunks_exact_mut(8) {
                pair.copy_from_slice(&(rng.next_u64() & 0x03ff_03ff_03ff_03ff).to_le_bytes());
            }
            let n = left.min(block.len() as u64) as usize;
            file.write_all(&block[..n])?;
            left -= n as u64;
        }
        file.flush()?;
    }
    let _ = std::fs::remove_file(&cache);
    let channels = (0..args.channels)
        .map(|c| ChannelInfo::new(format!("AP{c}"), 2.343_75, 0.0, "uV"))
        .collect();
    let source: Arc<dyn RecordingSource> = Arc::new(RawRecording::new(
        &path,
        RawSpec {
            channels,
            sample_rate: SampleRate::from_hz(RATE)?,
            format: SampleFormat::I16,
            byte_order: ByteOrder::Little,
            order: SampleOrder::Interleaved,
            header_bytes: 0,
            num_samples: Some(samples),
        },
    )?);
    let layout = PyramidLayout::for_recording(source.info())?;
    let signature = dspk::view::RecordingSignature::of_file(&path, source.info())?;
    let before = rss();
    let (pyramid, state) = Pyramid::open_cache(&cache, &signature, layout)?;
    let pyramid = Arc::new(pyramid);
    let peak = Arc::new(AtomicU64::new(0));
    let samples_seen = Arc::new(Mutex::new(Vec::new()));
    let (peak_in, seen_in) = (Arc::clone(&peak), Arc::clone(&samples_seen));
    let total = pyramid.layout().pages();
    let started = Instant::now();
    PyramidBuild::start(
        Arc::clone(&pyramid),
        Arc::clone(&source),
        BuildOptions::new().threads(threads).on_progress(move |p| {
            let now = rss();
            peak_in.fetch_max(now, Ordering::Relaxed);
            if p.done * 4 % total < 4 || p.done == total {
                seen_in
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push((p.done, now));
            }
        }),
    )?
    .wait()?;
    let seconds = started.elapsed().as_secs_f64();
    let cache_bytes = std::fs::metadata(&cache)?.len();
    println!(
        "memory: {:.2} GB int16 file -> cache file {:.1} MB ({state:?}, {:.4} bytes per recording \
         byte) in {seconds:.1} s; resident {:.1} MB before, largest {:.1} MB during, {threads} threads",
        bytes as f64 / 1e9,
        cache_bytes as f64 / 1e6,
        bytes_per_recording_byte(cache_bytes, bytes),
        before as f64 / 1e6,
        peak.load(Ordering::Relaxed) as f64 / 1e6,
    );
    for (done, resident) in samples_seen
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
    {
        println!(
            "memory: {done}/{total} pages built, resident {:.1} MB",
            *resident as f64 / 1e6
        );
    }
    std::fs::remove_file(&path)?;
    std::fs::remove_file(&cache)?;
    Ok(())
}

/// This process's resident bytes (0 where `/proc/self/status` cannot be read).
fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| resident_bytes(&s))
        .unwrap_or(0)
}

/// The arguments; `None` for `--help`.
fn parse_args(mut reader: Reader) -> Result<Option<Args>, String> {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let mut parsed = Args {
        channels: 384,
        minutes: 10,
        threads: [1, 4, 16]
            .into_iter()
            .filter(|&t| t <= cores.max(1))
            .collect(),
        overview_minutes: 60,
        columns: 2000,
        file_minutes: 10,
        dir: std::env::temp_dir(),
        device: true,
    };
    if parsed.threads.last() != Some(&cores) && cores < 16 {
        parsed.threads.push(cores);
    }
    let run = reader.read_flags(|reader, flag| {
        let count = |reader: &mut Reader| reader.whole(flag, 0..=u64::from(u32::MAX));
        match flag {
            "--channels" => parsed.channels = count(reader)? as usize,
            "--minutes" => parsed.minutes = count(reader)?.max(1),
            "--overview-minutes" => parsed.overview_minutes = count(reader)?.max(1),
            "--columns" => parsed.columns = count(reader)? as usize,
            "--file-minutes" => parsed.file_minutes = count(reader)?,
            "--dir" => parsed.dir = reader.path(flag)?,
            "--threads" => {
                parsed.threads = (reader.text(flag)?.split(','))
                    .map(|t| t.trim().parse().ok().filter(|&t: &usize| t > 0))
                    .collect::<Option<_>>()
                    .ok_or("view --threads needs a list of whole numbers, e.g. 1,4,16")?;
            }
            "--no-device" => parsed.device = false,
            "--bench" => {} // passed by `cargo bench`
            _ => return Err(reader.unknown(flag)),
        }
        Ok(())
    })?;
    reader.positional(&[])?;
    Ok(run.then_some(parsed))
}

const USAGE: &str = "usage: view [--channels N] [--minutes N] [--overview-minutes N] [--columns N] \
                     [--file-minutes N] [--dir DIR] [--threads 1,4,...] [--no-device]";
