//! The device data path, measured: read | upload | unpack | total per window, for the stored
//! (int16) path and the f32 path, and the pipelined throughput with the loader thread
//! overlapping the device.
//!
//! ```text
//! DSPK_RUNTIME=cuda cargo bench --features cuda --bench upload -- --windows 200 --reps 30
//! ```
//!
//! Prints `key=value` lines (machine-readable; the arithmetic is `benches/common/upload.rs`):
//! `upload_gbps` counts the upload alone, `upload_and_unpack_gbps` the upload and the unpack.
//! The source repeats four distinct windows as often as the longest run reads (`--windows`,
//! or `--reps` plus two warm-ups).

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use dspk::SampleFormat::{F32, I16};
use dspk::cubecl::bytes::Bytes;
use dspk::cubecl::future::block_on;
use dspk::ops::{ChannelVector, DeviceArray, PipelineWorkspace, StoredArray, unpack_scaled};
use dspk::rng::SplitMix64;
use dspk::{
    ChannelInfo, ChunkSchedule, ComputeTarget, LoaderOptions, LoaderStats, MemoryRecording,
    ReadRequest, RecordingInfo, RecordingSource, SampleRate, WindowElement, WindowLoader,
};
use dspk_cli::flags::Reader;
use dspk_cli::report::run_program;

#[path = "common/rates.rs"]
mod rates;
#[path = "common/upload.rs"]
mod upload_figures;
#[path = "common/window.rs"]
mod window;

use rates::window_bytes;
use upload_figures::{
    loader_only_fields, median_ms, stored_over_f32_upload, upload_and_unpack_fields,
    upload_pipelined_fields, upload_sequential_fields, upload_source_repeats,
};
use window::WindowFlags;

/// The arguments; `None` for `--help`.
fn parse_args(mut reader: Reader) -> Result<Option<WindowFlags>, String> {
    let mut args = WindowFlags {
        channels: 384,
        samples: 60_000,
        windows: 200,
        reps: 30,
    };
    let run = reader.read_flags(|reader, flag| {
        if args.read(reader, flag)? {
            Ok(())
        } else {
            Err(reader.unknown(flag))
        }
    })?;
    reader.positional(&[])?;
    Ok(run.then_some(args))
}

const USAGE: &str = "usage: upload [--channels N] [--samples N] [--windows N] [--reps N]";

/// `inner` repeated `times` times end to end: a long recording without holding it in memory.
/// Reads cost what `inner`'s do (a memcpy from RAM, as from the page cache).
struct Repeated<S> {
    inner: S,
    info: RecordingInfo,
}

impl<S: RecordingSource> Repeated<S> {
    fn new(inner: S, times: u64) -> Self {
        let mut info = inner.info().clone();
        info.num_samples *= times;
        Self { inner, info }
    }

    /// Splits a range of the long recording into ranges of `inner` (at its wrap points).
    fn pieces(&self, range: Range<u64>) -> Vec<Range<u64>> {
        let n = self.inner.info().num_samples;
        let mut pieces = Vec::new();
        let mut start = range.start;
        while start < range.end {
            let local = start % n;
            let len = (n - local).min(range.end - start);
            pieces.push(local..local + len);
            start += len;
        }
        pieces
    }

    fn fill<T: Copy + Default>(
        &self,
        request: &ReadRequest<'_>,
        out: &mut [T],
        per_sample: usize,
        read: impl Fn(&[usize], Range<u64>, &mut [T]) -> dspk::Result<()>,
    ) -> dspk::Result<()> {
        let total = request.samples_per_channel() * per_sample;
        let mut done = 0;
        for piece in self.pieces(request.samples()) {
            let len = (piece.end - piece.start) as usize * per_sample;
            for (k, &channel) in request.channels().iter().enumerate() {
                let out = &mut out[k * total + done..k * total + done + len];
                read(&[channel], piece.clone(), out)?;
            }
            done += len;
        }
        Ok(())
    }
}

impl<S: RecordingSource> RecordingSource for Repeated<S> {
    fn info(&self) -> &RecordingInfo {
        &self.info
    }
    fn fill_scaled(&self, request: &ReadRequest<'_>, out: &mut [f32]) -> dspk::Result<()> {
        self.fill(request, out, 1, |c, r, o| self.inner.read(c, r, o))
    }
    fn fill_stored(&self, request: &ReadRequest<'_>, out: &mut [u8]) -> dspk::Result<()> {
        let size = self.info.stored_format.size();
        self.fill(request, out, size, |c, r, o| {
            self.inner.read_stored(c, r, o)
        })
    }
    fn can_read_stored(&self) -> bool {
        self.inner.can_read_stored()
    }
}

/// What streaming a loader's windows into uploads took: per window, the seconds spent waiting
/// for the reader and in the upload call (with a device sync after each when one is given).
struct Drive {
    waiting: Vec<f64>,
    uploading: Vec<f64>,
    stats: LoaderStats,
}

fn drive<T: WindowElement>(
    mut loader: WindowLoader<T>,
    mut upload: impl FnMut(Bytes, usize) -> dspk::ops::Result<()>,
    sync_each: Option<&dyn Fn()>,
) -> Result<Drive, Box<dyn std::error::Error>> {
    let (mut waiting, mut uploading) = (Vec::new(), Vec::new());
    loop {
        let t = Instant::now();
        let Some(window) = loader.next() else { break };
        let window = window?;
        waiting.push(t.elapsed().as_secs_f64());
        let samples = window.window().read_len();
        let t = Instant::now();
        upload(window.into_upload(), samples)?;
        if let Some(sync) = sync_each {
            sync();
        }
        uploading.push(t.elapsed().as_secs_f64());
    }
    Ok(Drive {
        waiting,
        uploading,
        stats: loader.stats(),
    })
}

fn main() -> std::process::ExitCode {
    // SAFETY: first in main, no other thread yet.
    unsafe { run_program("upload", USAGE, parse_args, run) }
}

/// Runs the benchmark with the command-line arguments.
fn run(args: WindowFlags) -> Result<(), Box<dyn std::error::Error>> {
    let target = ComputeTarget::from_env()?;
    let client = target.client()?;
    let device = client.properties().identity.name.clone();
    let (channels, samples) = (args.channels, args.samples);
    println!(
        "# upload bench: {target} on {device}, {channels} channels x {samples} samples per window"
    );

    // Four distinct windows of int16 noise with realistic gains, repeated as often as the
    // longest run below reads.
    let mut rng = SplitMix64::new(7);
    let distinct = 4u64;
    let stored: Vec<i16> = (0..channels * samples * distinct as usize)
        .map(|_| (rng.uniform(-1.0, 1.0) * 3000.0) as i16)
        .collect();
    let infos: Vec<ChannelInfo> = (0..channels)
        .map(|c| ChannelInfo::new(format!("AP{c}"), 2.343_75, (c % 3) as f64, "uV"))
        .collect();
    let memory =
        MemoryRecording::from_samples(infos.clone(), SampleRate::from_hz(30_000)?, &stored)?;
    drop(stored);
    let gains: Vec<f64> = infos.iter().map(|c| c.gain).collect();
    let offsets: Vec<f64> = infos.iter().map(|c| c.offset).collect();
    let repeats = upload_source_repeats(args.windows as u64, args.reps as u64, distinct);
    let source = Arc::new(Repeated::new(memory, repeats));
    let all: Vec<usize> = (0..channels).collect();
    let stored_bytes = window_bytes(channels, samples, I16);
    let f32_bytes = window_bytes(channels, samples, F32);

    let mut workspace = PipelineWorkspace::new(&client, channels, samples)?;
    workspace.set_stored_scaling(&gains, &offsets)?;
    let raw_stored =
        StoredArray::from_handle(client.empty(stored_bytes as usize), I16, channels, samples)?;
    let raw_f32 = DeviceArray::<f32>::empty(&client, channels, samples)?;
    let unpacked = DeviceArray::<f32>::empty(&client, channels, samples)?;
    let gains32: Vec<f32> = gains.iter().map(|&g| g as f32).collect();
    let offsets32: Vec<f32> = offsets.iter().map(|&o| o as f32).collect();
    let gains_vector = ChannelVector::from_host(&client, &gains32)?;
    let offsets_vector = ChannelVector::from_host(&client, &offsets32)?;
    let sync = || block_on(client.sync()).expect("device sync");

    // Sequential, per window: read | upload | unpack | total.
    let mut stored_buffer = vec![0u8; stored_bytes as usize];
    let mut f32_buffer = vec![0f32; channels * samples];
    let mut times: [Vec<f64>; 7] = Default::default();
    for rep in 0..args.reps + 2 {
        let w = (rep as u64 % distinct) * samples as u64;
        let range = w..w + samples as u64;
        let warm = rep < 2; // first launches compile kernels
        let t = Instant::now();
        source.read_stored(&all, range.clone(), &mut stored_buffer)?;
        let read_stored = t.elapsed().as_secs_f64();
        let upload_data = stored_buffer.clone();
        sync();
        let t = Instant::now();
        client.write(raw_stored.handle(), Bytes::from_bytes_vec(upload_data));
        sync();
        let upload_stored = t.elapsed().as_secs_f64();
        let t = Instant::now();
        unpack_scaled(
            &client,
            &raw_stored,
            &gains_vector,
            &offsets_vector,
            &unpacked,
        )?;
        sync();
        let unpack = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let mut window = vec![0; stored_bytes as usize];
        source.read_stored(&all, range.clone(), &mut window)?;
        workspace.process_stored_chunk_in_vram(&window, I16, samples)?;
        sync();
        let total_stored = t.elapsed().as_secs_f64();

        let t = Instant::now();
        source.read(&all, range.clone(), &mut f32_buffer)?;
        let read_f32 = t.elapsed().as_secs_f64();
        let upload_data = Bytes::from_elems(f32_buffer.clone());
        let t = Instant::now();
        client.write(raw_f32.handle(), upload_data);
        sync();
        let upload_f32 = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let mut values = vec![0f32; channels * samples];
        source.read(&all, range, &mut values)?;
        workspace.process_scaled(Bytes::from_elems(values), samples)?;
        sync();
        let total_f32 = t.elapsed().as_secs_f64();
        if !warm {
            for (slot, value) in times.iter_mut().zip([
                read_stored,
                upload_stored,
                unpack,
                total_stored,
                read_f32,
                upload_f32,
                total_f32,
            ]) {
                slot.push(value);
            }
        }
    }
    let [read_s, up_s, unpack_s, total_s, read_f, up_f, total_f] = times.map(|t| median_ms(&t));
    for (path, read, upload, unpack, total, bytes) in [
        ("stored", read_s, up_s, unpack_s, total_s, stored_bytes),
        ("f32", read_f, up_f, 0.0, total_f, f32_bytes),
    ] {
        let fields = upload_sequential_fields(bytes, read, upload, unpack, total);
        println!("bench=upload runtime={target} path={path} {fields}");
    }
    let ratio = stored_over_f32_upload(up_s, up_f);
    println!("bench=upload runtime={target} {ratio}");

    // Sequential again, from the loader's own buffers (page-locked on CUDA) handed to the
    // upload without a copy: upload (+ unpack) per window, synced after each.
    let sequential = ChunkSchedule::new(
        (args.reps + 2) as u64 * samples as u64,
        samples as u64,
        0,
        0,
    )?;
    let sync_each: &dyn Fn() = &sync;
    // Buffers prepared for uploads to this device (page-locked on CUDA).
    let for_device = LoaderOptions::for_target(Some(target));
    for path in ["stored", "f32"] {
        let run = if path == "stored" {
            let loader =
                WindowLoader::<u8>::new(source.clone(), all.clone(), sequential, for_device)?;
            drive(
                loader,
                |b, n| workspace.process_stored(b, I16, n).map(drop),
                Some(sync_each),
            )?
        } else {
            let loader =
                WindowLoader::<f32>::new(source.clone(), all.clone(), sequential, for_device)?;
            drive(
                loader,
                |b, n| workspace.process_scaled(b, n).map(drop),
                Some(sync_each),
            )?
        };
        // The first two windows warm up (kernel compilation, page-locking).
        let ms = median_ms(&run.uploading[2..]);
        let bytes = if path == "stored" {
            stored_bytes
        } else {
            f32_bytes
        };
        println!(
            "bench=upload runtime={target} path={path}_loader_buffers pinned_buffers={} {}",
            run.stats.buffers_pinned,
            upload_and_unpack_fields(bytes, ms)
        );
    }

    // The loader alone: how fast the reader thread delivers windows (the host side's floor).
    let schedule = ChunkSchedule::new(args.windows as u64 * samples as u64, samples as u64, 0, 0)?;
    let t = Instant::now();
    for window in WindowLoader::<u8>::new(
        source.clone(),
        all.clone(),
        schedule,
        LoaderOptions::default(),
    )? {
        drop(window?);
    }
    let seconds = t.elapsed().as_secs_f64();
    println!(
        "bench=upload runtime={target} path=loader_only {}",
        loader_only_fields(args.windows as u64, stored_bytes, seconds)
    );

    // Pipelined: the loader reads window i+1 while window i goes up and is unpacked.
    for path in ["stored", "f32"] {
        let t = Instant::now();
        let run = if path == "stored" {
            let loader =
                WindowLoader::<u8>::new(source.clone(), all.clone(), schedule, for_device)?;
            drive(
                loader,
                |b, n| workspace.process_stored(b, I16, n).map(drop),
                None,
            )?
        } else {
            let loader =
                WindowLoader::<f32>::new(source.clone(), all.clone(), schedule, for_device)?;
            drive(
                loader,
                |b, n| workspace.process_scaled(b, n).map(drop),
                None,
            )?
        };
        sync();
        let seconds = t.elapsed().as_secs_f64();
        let input_bytes = if path == "stored" {
            stored_bytes
        } else {
            f32_bytes
        };
        let bytes = (input_bytes, stored_bytes);
        let (waiting, uploading) = (&run.waiting, &run.uploading);
        println!(
            "bench=upload runtime={target} path={path} {} buffers_allocated={} pinned={}",
            upload_pipelined_fields(args.windows as u64, seconds, bytes, waiting, uploading),
            run.stats.buffers_allocated,
            run.stats.buffers_pinned,
        );
    }
    Ok(())
}
