//! Preprocessing throughput on the device: common average reference, 300 Hz high-pass
//! (third-order Butterworth, zero-phase) and local whitening (32 nearest channels), the
//! Kilosort4 preprocessing chain, on 384 x 60 000 windows of int16.
//!
//! ```text
//! DSPK_RUNTIME=cuda cargo bench --features cuda --bench preprocess -- --reps 50
//! ```
//!
//! Measures (all after warm-up, timed around a device sync):
//! - each stage alone, and unpack + the whole chain, on a window already on the device;
//! - the streamed path: a `WindowStream` (its loader reading int16 windows on its thread,
//!   uploads of the stored bytes, unpack and the chain) over `--windows` windows, each read
//!   with the chain's settling halo on both sides; its bytes are those uploaded.
//!
//! and prints the device-memory floor next to them: the bytes each kernel must move (the
//! passes are counted in the output) over the device's bandwidth (`--bandwidth`, GB/s read +
//! write; 4260 measured on an H200). One `key=value` line per figure.

use std::sync::Arc;
use std::time::Instant;

use dspk::SampleFormat::{F32, I16};
use dspk::cubecl::bytes::Bytes;
use dspk::cubecl::client::Client;
use dspk::cubecl::future::block_on;
use dspk::ops::design::{Band, butter};
use dspk::ops::{
    ChannelMixing, ChannelVector, CommonReference, CovarianceAccumulator, DeviceArray, Initial,
    Pipeline, Reference, SosFilter, Stage, StoredArray, StreamOptions, Whitening, WindowStream,
    linalg, mix_channels, unpack_scaled,
};
use dspk::{ComputeTarget, RecordingSource, SampleRate, SyntheticRecording};
use dspk_cli::flags::Reader;
use dspk_cli::report::run_program;

#[path = "common/preprocess.rs"]
mod preprocess_figures;
#[path = "common/rates.rs"]
mod rates;
#[path = "common/window.rs"]
mod window;

use preprocess_figures::{device_chain_fields, stage_fields, streamed_fields};
use rates::window_bytes;
use window::WindowFlags;

struct Args {
    window: WindowFlags,
    /// `--bandwidth`: the device memory's GB/s, for the floor of each stage.
    bandwidth_gbps: f64,
}

/// The arguments; `None` for `--help`.
fn parse_args(mut reader: Reader) -> Result<Option<Args>, String> {
    let mut args = Args {
        window: WindowFlags {
            channels: 384,
            samples: 60_000,
            windows: 100,
            reps: 30,
        },
        bandwidth_gbps: 4260.0,
    };
    let run = reader.read_flags(|reader, flag| {
        if !args.window.read(reader, flag)? {
            match flag {
                "--bandwidth" => args.bandwidth_gbps = reader.parsed(flag, "GB/s")?,
                _ => return Err(reader.unknown(flag)),
            }
        }
        Ok(())
    })?;
    reader.positional(&[])?;
    Ok(run.then_some(args))
}

const USAGE: &str = "usage: preprocess [--channels N] [--samples N] [--windows N] [--reps N] \
                     [--bandwidth GB/s]";

fn sync(client: &Client) {
    block_on(client.sync()).expect("device sync");
}

/// Milliseconds per call of `f`, over `reps` calls after two warm-up calls.
fn time_ms(client: &Client, reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    f();
    sync(client);
    let start = Instant::now();
    for _ in 0..reps {
        f();
    }
    sync(client);
    start.elapsed().as_secs_f64() * 1e3 / reps as f64
}

/// Probe positions of a Neuropixels 1.0 shank: four columns (16, 48, 0, 32 um) in a
/// checkerboard, 20 um rows.
fn positions(channels: usize) -> Vec<(f64, f64)> {
    (0..channels)
        .map(|c| {
            let x = [16.0, 48.0, 0.0, 32.0][c % 4];
            (x, 20.0 * (c / 2) as f64)
        })
        .collect()
}

fn main() -> std::process::ExitCode {
    // SAFETY: first in main, no other thread yet.
    unsafe { run_program("preprocess", USAGE, parse_args, run) }
}

/// Runs the benchmark with the command-line arguments.
fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let (channels, samples) = (args.window.channels, args.window.samples);
    let target = ComputeTarget::from_env()?;
    let client = target.client()?;
    println!(
        "runtime={target} device=\"{}\" channels={channels} samples={samples}",
        client.properties().identity.name
    );
    let source = Arc::new(SyntheticRecording::new(
        channels,
        (samples * args.window.windows) as u64,
        SampleRate::from_hz(30_000)?,
        7,
    )?);
    let info = source.info();
    let gains: Vec<f32> = info.channels.iter().map(|c| c.gain as f32).collect();
    let offsets: Vec<f32> = info.channels.iter().map(|c| c.offset as f32).collect();

    // One window on the device, stored and scaled.
    let mut stored_bytes = vec![0u8; window_bytes(channels, samples, I16) as usize];
    source.read_stored(&info.all_channels(), 0..samples as u64, &mut stored_bytes)?;
    let stored_handle = client.create(Bytes::from_bytes_vec(stored_bytes));
    let stored = StoredArray::from_handle(stored_handle, I16, channels, samples)?;
    let gains = ChannelVector::from_host(&client, &gains)?;
    let offsets = ChannelVector::from_host(&client, &offsets)?;
    let scaled = DeviceArray::empty(&client, channels, samples)?;
    let scratch = DeviceArray::empty(&client, channels, samples)?;
    let unpack = || {
        unpack_scaled(&client, &stored, &gains, &offsets, &scaled).expect("unpack");
    };
    unpack();

    // The stages. Whitening from the second moment of the referenced, filtered first 6000
    // samples (as Kilosort4 estimates it from filtered data).
    let highpass = butter(3, Band::Highpass(300.0), 30_000.0)?;
    let mut car = CommonReference::new(Reference::Mean);
    let mut filter = SosFilter::zero_phase(&highpass)?;
    car.apply(&client, &scaled, &scratch)?;
    let filtered = DeviceArray::empty(&client, channels, samples)?;
    filter.run(&client, &scratch, &filtered)?;
    let estimate = samples.min(6000);
    let host: Vec<f64> = filtered
        .to_host(&client)?
        .chunks(samples)
        .flat_map(|row| row[..estimate].iter().map(|&v| f64::from(v)))
        .collect();
    let cov = linalg::second_moment(&host, channels, estimate)?;
    let white = linalg::local_zca(&cov, &positions(channels), 32, 1e-6)?;
    let mut whitening = Whitening::from_matrix(&client, &white)?;

    let reps = args.window.reps;
    // One pass = one f32 read or write of the window; rates in int16 bytes of the window.
    let (f32_bytes, int16_bytes) = (
        window_bytes(channels, samples, F32),
        window_bytes(channels, samples, I16),
    );
    let report = |name: &str, ms: f64, passes: f64| {
        let bytes = (f32_bytes, int16_bytes);
        let fields = stage_fields(ms, passes, bytes, args.bandwidth_gbps);
        println!("stage={name} {fields}");
    };
    // Passes (one pass = one f32 read or write of the window): unpack reads half a pass
    // (int16) and writes one; the reference reads and writes one each; the zero-phase filter
    // reads its input twice and writes once per direction (the padded intermediate included);
    // the mixing reads each input value from cache 32 times but from memory once, and writes.
    let ms = time_ms(&client, reps, || {
        unpack();
    });
    report("unpack", ms, 1.5);
    let ms = time_ms(&client, reps, || {
        car.apply(&client, &scaled, &scratch).expect("car");
    });
    report("car", ms, 2.0);
    let ms = time_ms(&client, reps, || {
        filter.apply(&client, &scaled, &scratch).expect("filter");
    });
    report("sosfiltfilt", ms, 6.0);
    for block_len in [64, 128, 512, 1024] {
        let mut filter = SosFilter::zero_phase(&highpass)?.with_block_len(block_len)?;
        let ms = time_ms(&client, reps, || {
            filter.apply(&client, &scaled, &scratch).expect("filter");
        });
        report(&format!("sosfiltfilt_block{block_len}"), ms, 6.0);
    }
    let mut forward = SosFilter::forward(&highpass, Initial::Zero)?;
    let ms = time_ms(&client, reps, || {
        forward.apply(&client, &scaled, &scratch).expect("sosfilt");
    });
    report("sosfilt", ms, 3.0);
    let ms = time_ms(&client, reps, || {
        whitening
            .apply(&client, &scaled, &scratch)
            .expect("whitening");
    });
    report("whitening_local32", ms, 2.0);
    let mut cmr = CommonReference::new(Reference::Median);
    let ms = time_ms(&client, reps, || {
        cmr.apply(&client, &scaled, &scratch).expect("cmr");
    });
    report("cmr", ms, 2.0);
    let dense = ChannelMixing::from_dense(&client, &white.dense(), channels)?;
    let ms = time_ms(&client, reps, || {
        mix_channels(&client, &scaled, &scratch, &dense).expect("mixing");
    });
    report("whitening_dense", ms, 2.0);
    let mut covariance = CovarianceAccumulator::new(&client, channels)?;
    let ms = time_ms(&client, reps, || {
        covariance
            .add(&client, &scaled, 0..samples)
            .expect("covariance");
    });
    report("covariance_add", ms, 1.0);

    let mut pipeline = Pipeline::new()
        .with(CommonReference::new(Reference::Mean))
        .with(SosFilter::zero_phase(&highpass)?)
        .with(Whitening::new(whitening.mixing().clone()));
    let ms = time_ms(&client, reps, || {
        unpack();
        pipeline.run(&client, &scaled).expect("pipeline");
    });
    report("unpack+car+sosfiltfilt+whitening", ms, 11.5);
    println!("{}", device_chain_fields(ms, int16_bytes));

    // Streamed: loader thread, stored upload, unpack, chain, one window after another.
    let chain = Pipeline::new()
        .with(CommonReference::new(Reference::Mean))
        .with(SosFilter::zero_phase(&highpass)?)
        .with(Whitening::new(whitening.mixing().clone()));
    let options = StreamOptions {
        window: samples as u64,
        target: Some(target),
        ..StreamOptions::default()
    };
    let mut stream = WindowStream::new(&client, source.clone(), chain, &options)?;
    let (mut bytes, start) = (0, Instant::now());
    while let Some(window) = stream.next_window() {
        bytes += window_bytes(channels, window?.window().read_len(), I16);
    }
    stream.workspace().sync()?;
    let seconds = start.elapsed().as_secs_f64();
    if bytes != stream.uploaded_bytes() || !stream.uploads_stored() {
        let uploaded = stream.uploaded_bytes();
        return Err(
            format!("counted {bytes} bytes of int16, the stream uploaded {uploaded}").into(),
        );
    }
    let windows = stream.schedule().len();
    println!(
        "streamed_windows={windows} halo={} {} device_allocations={}",
        stream.halo(),
        streamed_fields(windows as u64, bytes, seconds),
        stream.workspace().device_allocations()
    );
    Ok(())
}
