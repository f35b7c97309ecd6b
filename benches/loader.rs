//! The window loader measured on a raw int16 file: the loader alone and the pipelined stored
//! upload with 1, 2, 4, 8 and 16 reader threads, from the page cache and from the disk, and the
//! disk's own rate with `O_DIRECT` reads into page-aligned buffers. From the page cache, the
//! `pread only` rows read the same bytes with plain `pread`s, each thread its share of every
//! window (cut by time, as the loader's threads are) straight into its share of one
//! window-sized buffer: the copy the loader's reads cost before their values are
//! de-interleaved into channel runs. With a device, the `loader, upload buffers` rows run the
//! loader alone with the buffers the pipelined rows use (page-locked on CUDA), so the cost of
//! the upload itself is the difference between those two rows. Under each loader row a
//! `reader:` line says where the reader's time went (`LoaderStats`).
//!
//! ```text
//! DSPK_RUNTIME=cuda cargo bench --features cuda --bench loader -- --gb 4 --dir /path/on/disk
//! cargo bench --bench loader -- --file recording.bin --channels 384 --no-upload
//! ```
//!
//! Flags: `--file PATH` (an interleaved int16 file without header; else one of `--gb` GB,
//! default 4, is written in `--dir`, default the target's temporary folder, and removed after
//! unless `--keep`), `--channels` (384), `--samples` per window (60 000), `--threads` (a list,
//! `1,2,4,8,16`), `--no-upload` (no device), `--no-disk` (page cache only), `--no-direct`,
//! `--direct-mib` (the `O_DIRECT` block per read, 8), `--repeat` (runs per page-cache row, 1:
//! a row shows the fastest, which the host's other tenants slowed least; the loader's rows run
//! in turns, one run of each per round).
//!
//! "From the disk" means after `fsync` and `posix_fadvise(DONTNEED)` on the whole file before
//! each run; the `resident%` column says how much of the file was still in the page cache when
//! the run started (measured with `mincore`), so a run that did not start cold shows it.
//! Rates count the file's bytes in GB/s (10^9 bytes per second) and windows per second
//! (arithmetic: `benches/common/loader.rs`). From the disk the loader runs twice, without
//! and with the `posix_fadvise(WILLNEED)` hint of the next window (`LoaderOptions::read_ahead`).

use std::fs::File;
use std::num::NonZeroUsize;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use dspk::SampleFormat::I16;
use dspk::cubecl::future::block_on;
use dspk::io::{ByteOrder, RawRecording, RawSpec, SampleOrder};
use dspk::ops::PipelineWorkspace;
use dspk::readahead::advise_dont_need;
use dspk::rng::SplitMix64;
use dspk::{
    ChannelInfo, ChunkSchedule, ComputeTarget, LoaderOptions, LoaderStats, RecordingSource,
    SampleRate, WindowLoader,
};
use dspk_cli::flags::Reader;
use dspk_cli::report::run_program;

#[path = "common/loader.rs"]
mod loader_figures;

use loader_figures::{
    BenchRecording, parse_thread_list, resident_percent, table_header, table_row,
};

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

struct Args {
    file: Option<PathBuf>,
    dir: PathBuf,
    gb: f64,
    channels: usize,
    samples: u64,
    threads: Vec<usize>,
    upload: bool,
    disk: bool,
    direct: bool,
    direct_mib: usize,
    repeat: usize,
    keep: bool,
}

/// The arguments; `None` for `--help`.
fn parse_args(mut reader: Reader) -> Result<Option<Args>, String> {
    let mut args = Args {
        file: None,
        dir: PathBuf::from(env!("CARGO_TARGET_TMPDIR")),
        gb: 4.0,
        channels: 384,
        samples: 60_000,
        threads: vec![1, 2, 4, 8, 16],
        upload: true,
        disk: true,
        direct: true,
        direct_mib: 8,
        repeat: 1,
        keep: false,
    };
    let run = reader.read_flags(|reader, flag| {
        let count = |reader: &mut Reader| reader.whole(flag, 1..=u64::from(u32::MAX));
        match flag {
            "--file" => args.file = Some(reader.path(flag)?),
            "--dir" => args.dir = reader.path(flag)?,
            "--gb" => args.gb = reader.parsed(flag, "a positive number of GB")?,
            "--channels" => args.channels = count(reader)? as usize,
            "--samples" => args.samples = count(reader)?,
            "--threads" => {
                let list = reader.text(flag)?;
                args.threads = parse_thread_list(&list)
                    .ok_or(format!("loader --threads {list}: a list like 1,2,4,8,16"))?;
            }
            "--direct-mib" => args.direct_mib = count(reader)? as usize,
            "--repeat" => args.repeat = count(reader)? as usize,
            "--no-upload" => args.upload = false,
            "--no-disk" => args.disk = false,
            "--no-direct" => args.direct = false,
            "--keep" => args.keep = true,
            "--bench" => {} // passed by `cargo bench`
            _ => return Err(reader.unknown(flag)),
        }
        Ok(())
    })?;
    reader.positional(&[])?;
    if args.gb.is_nan() || args.gb <= 0.0 {
        return Err("loader --gb needs a positive number of GB".into());
    }
    Ok(run.then_some(args))
}

fn main() -> std::process::ExitCode {
    // SAFETY: first in main, no other thread yet.
    unsafe { run_program("loader", USAGE, parse_args, run) }
}

const USAGE: &str = "usage: loader [--file FILE] [--dir DIR] [--gb GB] [--channels N] [--samples N] \
                     [--threads 1,2,4,...] [--direct-mib N] [--repeat N] [--no-upload] \
                     [--no-disk] [--no-direct] [--keep]";

/// Writes `recording` as interleaved int16 noise to `path` (one seeded 8 MiB block, its first
/// 8 bytes replaced by the block's number so no two blocks are alike) and syncs it to the disk.
fn write_file(path: &Path, recording: &BenchRecording) -> BoxResult<()> {
    const BLOCK: usize = 8 << 20;
    let mut rng = SplitMix64::new(2026);
    let mut block: Vec<u8> = (0..BLOCK / 8)
        .flat_map(|_| rng.next_u64().to_le_bytes())
        .collect();
    let file = File::create(path)?;
    let total = recording.bytes();
    let mut written = 0u64;
    while written < total {
        let len = (total - written).min(BLOCK as u64) as usize;
        block[..8].copy_from_slice(&(written / BLOCK as u64).to_le_bytes());
        file.write_all_at(&block[..len], written)?;
        written += len as u64;
    }
    file.sync_all()?;
    Ok(())
}

/// The fraction of `file`'s pages in the page cache, in percent (`mincore` over a read-only
/// mapping, which reads nothing).
fn resident(file: &File) -> BoxResult<f64> {
    let len = usize::try_from(file.metadata()?.len())?;
    if len == 0 {
        return Ok(100.0);
    }
    // SAFETY: `sysconf` reads a constant.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })?;
    let pages = len.div_ceil(page);
    // SAFETY: a fresh shared read-only mapping of an open file, unmapped below; nothing reads
    // through it (mincore only asks about residency).
    let address = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if address == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error().into());
    }
    let mut status = vec![0u8; pages];
    // SAFETY: `address` maps `len` bytes; `status` holds one byte per page.
    let code = unsafe { libc::mincore(address, len, status.as_mut_ptr().cast()) };
    let error = std::io::Error::last_os_error();
    // SAFETY: unmaps the mapping made above.
    unsafe { libc::munmap(address, len) };
    if code != 0 {
        return Err(error.into());
    }
    let resident = status.iter().filter(|&&s| s & 1 == 1).count();
    Ok(resident_percent(resident as u64, pages as u64))
}

/// Drops `file`'s pages from the page cache (clean pages only: the file was synced) and says
/// how much is still resident.
fn drop_cache(file: &File) -> BoxResult<f64> {
    file.sync_all()?;
    advise_dont_need(file, 0, 0);
    resident(file)
}

/// The file system `file` lies on, by its magic number (a RAM-backed one has no disk to read).
fn file_system(file: &File) -> String {
    // SAFETY: `fstatfs` fills the zeroed struct for an open descriptor.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::fstatfs(file.as_raw_fd(), &raw mut stat) } != 0 {
        return "unknown".into();
    }
    #[allow(clippy::unnecessary_cast)] // f_type's type differs between C libraries
    let magic = stat.f_type as u64;
    let name = match magic {
        0x0102_1994 => "tmpfs (RAM: no disk runs)",
        0x794c_7630 => "overlayfs",
        0xef53 => "ext4",
        0x5846_5342 => "xfs",
        0x9123_683e => "btrfs",
        _ => "other",
    };
    format!("{name} (0x{magic:x})")
}

/// Reads the file's whole `block`s with `O_DIRECT` on `threads` threads, each block into a
/// page-aligned buffer, blocks handed out in file order; returns the bytes read and seconds.
fn direct_read(path: &Path, threads: usize, block: usize) -> BoxResult<(u64, f64)> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)?;
    let blocks = file.metadata()?.len() / block as u64;
    let next = AtomicU64::new(0);
    let started = Instant::now();
    std::thread::scope(|scope| -> BoxResult<()> {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| -> std::io::Result<()> {
                    let mut memory = vec![0u8; block + 4096];
                    let skip = memory.as_ptr().align_offset(4096);
                    let buffer = &mut memory[skip..skip + block];
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= blocks {
                            return Ok(());
                        }
                        file.read_exact_at(buffer, i * block as u64)?;
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().map_err(|_| "an O_DIRECT reader panicked")??;
        }
        Ok(())
    })?;
    Ok((blocks * block as u64, started.elapsed().as_secs_f64()))
}

/// Seconds to read every window of `recording` from `file` with plain `pread`s on `threads`
/// threads: thread `p` reads part `p` of each window (`BenchRecording::window_part`) into the
/// same part of one window-sized buffer.
fn pread_only(file: &File, recording: &BenchRecording, threads: usize) -> BoxResult<f64> {
    let frame = recording.frame_bytes();
    let parts = threads as u64;
    let mut buffer = vec![0u8; usize::try_from(recording.window_samples * frame)?];
    // Each thread's share of the buffer: the bytes of its part of a whole window.
    let mut shares = Vec::with_capacity(threads);
    let mut rest = buffer.as_mut_slice();
    for part in 0..parts {
        let samples = recording.window_part(0, part, parts);
        let len = usize::try_from((samples.end - samples.start) * frame)?;
        let (share, tail) = std::mem::take(&mut rest).split_at_mut(len);
        shares.push(share);
        rest = tail;
    }
    let started = Instant::now();
    std::thread::scope(|scope| -> BoxResult<()> {
        let workers: Vec<_> = (0..parts)
            .zip(shares)
            .map(|(part, share)| {
                scope.spawn(move || -> std::io::Result<()> {
                    for window in 0..recording.windows() {
                        let samples = recording.window_part(window, part, parts);
                        let len = ((samples.end - samples.start) * frame) as usize;
                        file.read_exact_at(&mut share[..len], samples.start * frame)?;
                    }
                    Ok(())
                })
            })
            .collect();
        for worker in workers {
            worker.join().map_err(|_| "a pread thread panicked")??;
        }
        Ok(())
    })?;
    Ok(started.elapsed().as_secs_f64())
}

/// The fastest of `runs` calls of `run` (seconds and what else it returns); `runs` >= 1.
fn fastest<T>(runs: usize, mut run: impl FnMut() -> BoxResult<(f64, T)>) -> BoxResult<(f64, T)> {
    let mut best = run()?;
    for _ in 1..runs {
        let next = run()?;
        if next.0 < best.0 {
            best = next;
        }
    }
    Ok(best)
}

/// A comment line under a loader row: where the reader's time went.
fn reader_line(stats: &LoaderStats) -> String {
    format!(
        "#   reader: filling windows {:.3} s, waiting for buffers {:.3} s, preparing buffers {:.3} s",
        stats.reading.as_secs_f64(),
        stats.waiting_for_buffers.as_secs_f64(),
        stats.preparing_buffers.as_secs_f64()
    )
}

/// The device side of the pipelined runs.
struct Device {
    client: dspk::cubecl::client::Client,
    workspace: PipelineWorkspace,
    target: ComputeTarget,
}

/// What a timed run does with each window.
enum Consumer<'a> {
    /// Drops it: the loader alone, its buffers prepared for uploads to this target if any
    /// (page-locked for CUDA).
    Drop(Option<ComputeTarget>),
    /// Uploads and unpacks it on the device (pipelined; waits for the device at the end).
    Upload(&'a mut Device),
}

/// A page-cache row of the loader's: the loader alone, its buffers prepared for uploads to
/// this target if any, or the pipelined upload on the bench's device.
enum Row {
    Alone(Option<ComputeTarget>),
    Upload,
}

/// Seconds to read every window of `schedule` with `threads` threads and hand each to
/// `consumer`, and the loader's statistics.
fn run_loader(
    source: &Arc<RawRecording>,
    schedule: ChunkSchedule,
    threads: usize,
    read_ahead: bool,
    consumer: Consumer<'_>,
) -> BoxResult<(f64, LoaderStats)> {
    let all = source.info().all_channels();
    let options = LoaderOptions {
        target: match &consumer {
            Consumer::Drop(target) => *target,
            Consumer::Upload(device) => Some(device.target),
        },
        threads: NonZeroUsize::new(threads),
        read_ahead,
    };
    let started = Instant::now();
    let mut loader = WindowLoader::<u8>::new(source.clone(), all, schedule, options)?;
    match consumer {
        Consumer::Drop(_) => {
            for window in &mut loader {
                drop(window?);
            }
        }
        Consumer::Upload(device) => {
            for window in &mut loader {
                let window = window?;
                let samples = window.window().read_len();
                device
                    .workspace
                    .process_stored(window.into_upload(), I16, samples)?;
            }
            block_on(device.client.sync())?;
        }
    }
    let stats = loader.stats();
    // Timed to the end of the loader, as when the loop consumed it: its threads joined and
    // its buffers freed.
    drop(loader);
    Ok((started.elapsed().as_secs_f64(), stats))
}

/// Runs the benchmark with the command-line arguments.
fn run(args: Args) -> BoxResult<()> {
    let bench_started = Instant::now();
    let (path, written) = match &args.file {
        Some(path) => (path.clone(), false),
        None => {
            std::fs::create_dir_all(&args.dir)?;
            let path = args.dir.join("dspk-loader-bench.bin");
            let bytes = (args.gb * 1e9) as u64;
            let recording = BenchRecording::of_bytes(bytes, args.channels, args.samples);
            let t = Instant::now();
            write_file(&path, &recording)?;
            println!(
                "# wrote {} ({:.2} GB) in {:.1} s",
                path.display(),
                recording.bytes() as f64 / 1e9,
                t.elapsed().as_secs_f64()
            );
            (path, true)
        }
    };
    let file = File::open(&path)?;
    let recording = BenchRecording::of_file(file.metadata()?.len(), args.channels, args.samples)
        .ok_or("the file holds no whole sample")?;
    let channels = (0..args.channels)
        .map(|c| ChannelInfo::new(format!("AP{c}"), 2.343_75, 0.0, "uV"))
        .collect();
    let source = Arc::new(RawRecording::new(
        &path,
        RawSpec {
            channels,
            sample_rate: SampleRate::from_hz(30_000)?,
            format: I16,
            byte_order: ByteOrder::Little,
            order: SampleOrder::Interleaved,
            header_bytes: 0,
            num_samples: Some(recording.samples),
        },
    )?);
    let schedule = ChunkSchedule::new(recording.samples, recording.window_samples, 0, 0)?;
    let (bytes, windows) = (recording.bytes(), recording.windows());
    println!(
        "# loader bench: {} ({}), {} channels int16 interleaved, {} windows of {} samples \
         ({:.1} MB), {:.2} GB; {} cores; machine default {} reader threads",
        path.display(),
        file_system(&file),
        recording.channels,
        windows,
        recording.window_samples,
        recording.window_samples as f64 * recording.channels as f64 * 2.0 / 1e6,
        bytes as f64 / 1e9,
        std::thread::available_parallelism().map_or(1, NonZeroUsize::get),
        LoaderOptions::machine_threads(),
    );

    let mut device = if args.upload {
        let target = ComputeTarget::from_env()?;
        let client = target.client()?;
        let window = usize::try_from(recording.window_samples)?;
        let mut workspace = PipelineWorkspace::new(&client, recording.channels, window)?;
        let gains = vec![2.343_75; recording.channels];
        workspace.set_stored_scaling(&gains, &vec![0.0; recording.channels])?;
        println!(
            "# device: {target} on {}",
            client.properties().identity.name
        );
        let mut device = Device {
            client,
            workspace,
            target,
        };
        // Warm-up: kernel compilation and page-locking, untimed.
        let warm = ChunkSchedule::new(
            recording.window_samples.min(recording.samples),
            recording.window_samples,
            0,
            0,
        )?;
        run_loader(&source, warm, 1, false, Consumer::Upload(&mut device))?;
        Some(device)
    } else {
        None
    };

    if args.repeat > 1 {
        println!(
            "# page-cache rows: the fastest of {} runs (the loader's rows in turns)",
            args.repeat
        );
    }
    println!("{}", table_header());
    // From the page cache: one untimed pass first brings the file in (if it fits).
    run_loader(
        &source,
        schedule,
        LoaderOptions::machine_threads(),
        false,
        Consumer::Drop(None),
    )?;
    for &threads in &args.threads {
        let cached = resident(&file)?;
        // The loader's rows run in turns, `repeat` rounds, so that a slow spell of the host
        // falls on all of them alike; each row shows its fastest run. With a device they are
        // the loader alone, the loader alone with the buffers an upload uses (page-locked on
        // CUDA: what the pipelined row costs beyond it is the upload's) and the pipelined
        // upload.
        let mut rows = vec![("loader", Row::Alone(None))];
        if let Some(device) = &device {
            rows.push(("loader, upload buffers", Row::Alone(Some(device.target))));
            rows.push(("pipelined upload", Row::Upload));
        }
        let mut best: Vec<Option<(f64, LoaderStats)>> = vec![None; rows.len()];
        for _ in 0..args.repeat {
            for ((_, row), slot) in rows.iter().zip(&mut best) {
                let consumer = match (row, device.as_mut()) {
                    (Row::Alone(target), _) => Consumer::Drop(*target),
                    (Row::Upload, Some(device)) => Consumer::Upload(device),
                    (Row::Upload, None) => unreachable!("upload rows only with a device"),
                };
                let run = run_loader(&source, schedule, threads, false, consumer)?;
                if (*slot).is_none_or(|(seconds, _)| run.0 < seconds) {
                    *slot = Some(run);
                }
            }
        }
        let (pread_seconds, ()) = fastest(args.repeat, || {
            pread_only(&file, &recording, threads).map(|s| (s, ()))
        })?;
        for (row, ((label, _), slot)) in rows.iter().zip(&best).enumerate() {
            let (seconds, stats) = slot.ok_or("--repeat must be positive")?;
            let line = table_row("cache", label, threads, (bytes, windows), seconds, cached);
            println!("{line}");
            println!("{}", reader_line(&stats));
            if row == 0 {
                let line = table_row(
                    "cache",
                    "pread only",
                    threads,
                    (bytes, windows),
                    pread_seconds,
                    cached,
                );
                println!("{line}");
            }
        }
    }
    if args.disk {
        for &threads in &args.threads {
            for (what, read_ahead) in [("loader", false), ("loader, WILLNEED hints", true)] {
                let cached = drop_cache(&file)?;
                let (seconds, _) =
                    run_loader(&source, schedule, threads, read_ahead, Consumer::Drop(None))?;
                println!(
                    "{}",
                    table_row("disk", what, threads, (bytes, windows), seconds, cached)
                );
            }
            if let Some(device) = device.as_mut() {
                let cached = drop_cache(&file)?;
                let (seconds, _) =
                    run_loader(&source, schedule, threads, false, Consumer::Upload(device))?;
                let row = table_row(
                    "disk",
                    "pipelined upload",
                    threads,
                    (bytes, windows),
                    seconds,
                    cached,
                );
                println!("{row}");
            }
        }
    }
    if args.direct {
        let block = args.direct_mib << 20;
        for &threads in &args.threads {
            let cached = drop_cache(&file)?;
            match direct_read(&path, threads, block) {
                Ok((read, seconds)) => {
                    // Windows/s as if the bytes read were the bench's windows.
                    let windows_read = read / (bytes / windows).max(1);
                    let what = format!("O_DIRECT {} MiB reads", args.direct_mib);
                    let row = table_row(
                        "direct",
                        &what,
                        threads,
                        (read, windows_read),
                        seconds,
                        cached,
                    );
                    println!("{row}");
                }
                Err(error) => {
                    println!("# O_DIRECT reads failed here ({error}): no direct rate");
                    break;
                }
            }
        }
    }
    drop(file);
    if written && !args.keep {
        std::fs::remove_file(&path)?;
    }
    println!(
        "# whole bench: {:.1} s",
        bench_started.elapsed().as_secs_f64()
    );
    Ok(())
}
