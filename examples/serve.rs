//! Serves a recording over QUIC + TLS 1.3 (dspk-stream): its header, its signal as frames of
//! stored words, and reads and views of any range, to every client that trusts the server.
//!
//! ```text
//! cargo run --release --example serve -- PATH --cert cert.pem --key key.pem
//! cargo run --release --example serve -- --self-signed tls          # a generated recording
//! cargo run --release --example serve -- PATH --self-signed tls --addr 0.0.0.0:4433 --real-time --loop
//! ```
//!
//! `PATH` is any recording dspk opens; without one, a recording is generated (384 channels of
//! a Neuropixels-like probe, `--seconds` long (60), units with known spikes, samples computed
//! when read), and `--save FILE` writes it as a raw file with its sidecar first and serves that
//! file (what `client --check FILE` compares against). TLS: `--cert` and `--key` (PEM), or
//! `--self-signed DIR`, which writes `DIR/cert.pem` (what clients trust: `client --trust`) and
//! `DIR/key.pem`; `--client-ca CA.pem` requires client certificates issued by that authority
//! (mutual TLS). The signal goes as fast as each client reads, or at the recording's rate with
//! `--real-time`; `--loop` starts again at the end. A min/max pyramid of the recording is
//! built in memory in the background, so views of long ranges are fast once it is done.
//!
//! Prints `listening on ADDR` once clients may connect (the certificate is written by then;
//! `--addr 127.0.0.1:0` takes a free port), then the server's counts when they change. Runs
//! until interrupted, or for `--for SECONDS`. On a loopback address the transport sends the
//! largest datagrams loopback carries (`TransportOptions::loopback`).

use std::error::Error;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dspk::RecordingSource;
use dspk::io::{RawWriteOptions, write_raw};
use dspk::stream::{
    Identity, Pacing, Server, ServerOptions, ServerStats, ServerTls, TransportOptions, Trust,
};
use dspk::synapse::groundtruth::{GroundTruthConfig, GroundTruthRecording};
use dspk::view::{BuildOptions, LocalBackend, Pyramid, PyramidBuild, PyramidLayout};
use dspk_cli::describe::human_bytes;
use dspk_cli::flags::Reader;
use dspk_cli::report::run_program;

const USAGE: &str = "usage: serve [PATH] [--addr IP:PORT] [--cert CERT.pem --key KEY.pem | \
                     --self-signed DIR] [--client-ca CA.pem] [--real-time] [--loop] \
                     [--seconds S] [--seed N] [--save FILE] [--for SECONDS]";

struct Args {
    path: Option<PathBuf>,
    addr: SocketAddr,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    self_signed: Option<PathBuf>,
    client_ca: Option<PathBuf>,
    real_time: bool,
    looped: bool,
    seconds: u64,
    seed: u64,
    save: Option<PathBuf>,
    run_for: Option<Duration>,
}

fn main() -> ExitCode {
    // SAFETY: first in main, no other thread yet.
    unsafe { run_program("serve", USAGE, parse_args, run) }
}

fn run(args: Args) -> Result<(), Box<dyn Error>> {
    let (source, name) = recording(&args)?;
    let info = source.info().clone();
    println!(
        "recording: {name}: {} channels x {} samples ({:.1} s) at {} Hz, stored {}",
        info.num_channels(),
        info.num_samples,
        info.num_samples as f64 / info.sample_rate.as_hz(),
        info.sample_rate.as_hz(),
        info.stored_format
    );

    // Views of long ranges read the pyramid once it is built; until then, the raw samples.
    let pyramid = Arc::new(Pyramid::in_memory(PyramidLayout::for_recording(&info)?));
    // Half the cores at most: the rest serve.
    let threads = std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1));
    let build = PyramidBuild::start(
        Arc::clone(&pyramid),
        Arc::clone(&source),
        BuildOptions::new().threads(threads),
    )?;
    let backend = LocalBackend::with_pyramid(Arc::clone(&source), pyramid)?;

    let tls = ServerTls {
        identity: identity(&args)?,
        client_authorities: match &args.client_ca {
            Some(path) => Some(Trust::from_pem_file(path)?),
            None => None,
        },
    };
    let transport = if args.addr.ip().is_loopback() {
        TransportOptions::loopback()
    } else {
        TransportOptions::default()
    };
    let options = ServerOptions {
        pacing: if args.real_time {
            Pacing::RealTime
        } else {
            Pacing::AsFastAsPossible
        },
        looped: args.looped,
        transport,
        ..ServerOptions::default()
    };
    let server = Server::bind(args.addr, &tls, backend, options)?;
    let addr = server.local_addr()?;
    let header = server.header();
    println!(
        "frames:    {} samples ({} of {}), {}{}",
        header.frame_samples,
        human_bytes(
            header.frame_samples as f64
                * info.num_channels() as f64
                * info.stored_format.size() as f64
        ),
        if header.stored_access {
            "stored words"
        } else {
            "scaled f32 words"
        },
        if args.real_time {
            "paced at the recording's rate"
        } else {
            "as fast as each client reads"
        },
        if args.looped { ", looped" } else { "" }
    );
    println!(
        "listening on {addr}{}",
        if tls.client_authorities.is_some() {
            " (client certificates required)"
        } else {
            ""
        }
    );

    let started = Instant::now();
    let mut build = Some(build);
    let (mut shown, mut shown_at) = (ServerStats::default(), started);
    loop {
        std::thread::sleep(Duration::from_millis(250));
        if let Some(running) = build.take_if(|b| b.is_finished()) {
            running.wait()?;
            println!(
                "pyramid:   built ({:.1} s)",
                started.elapsed().as_secs_f64()
            );
        }
        // Connections as they come and go; other counts every few seconds.
        let stats = server.stats();
        if stats.connections != shown.connections
            || (stats != shown && shown_at.elapsed() >= Duration::from_secs(5))
        {
            print_stats(&stats);
            (shown, shown_at) = (stats, Instant::now());
        }
        if args.run_for.is_some_and(|d| started.elapsed() >= d) {
            println!("stopping after {:.0} s", started.elapsed().as_secs_f64());
            server.shutdown();
            return Ok(());
        }
    }
}

/// The recording to serve and its name: the file at the path, or the generated one (written
/// to `--save` and served from there when asked).
fn recording(args: &Args) -> Result<(Arc<dyn RecordingSource>, String), Box<dyn Error>> {
    if let Some(path) = &args.path {
        let opened = dspk_cli::recording::open(path)?;
        return Ok((
            opened.source,
            format!("{} ({})", path.display(), opened.format),
        ));
    }
    let config = GroundTruthConfig {
        channels: 384,
        units: 120,
        num_samples: args
            .seconds
            .checked_mul(30_000)
            .ok_or("--seconds is too large")?,
        seed: args.seed,
        ..GroundTruthConfig::default()
    };
    let truth = GroundTruthRecording::generate(&config)?;
    let name = format!(
        "generated: 384 channels, {} s, {} units, {} spikes (seed {})",
        args.seconds,
        config.units,
        truth.spikes().len(),
        args.seed
    );
    let Some(save) = &args.save else {
        return Ok((Arc::new(truth), name));
    };
    let sidecar = write_raw(&truth, save, RawWriteOptions::default())?;
    println!(
        "saved:     {} and its sidecar {}",
        save.display(),
        sidecar.display()
    );
    let opened = dspk_cli::recording::open(save)?;
    Ok((opened.source, format!("{} ({name})", save.display())))
}

/// The server's identity: from `--cert`/`--key`, or self-signed and written to
/// `--self-signed DIR` (for `localhost` and the address served).
fn identity(args: &Args) -> Result<Identity, Box<dyn Error>> {
    match (&args.cert, &args.key, &args.self_signed) {
        (Some(cert), Some(key), None) => Ok(Identity::from_pem_files(cert, key)?),
        (None, None, Some(dir)) => {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let ip = args.addr.ip().to_string();
            let mut names = vec!["localhost"];
            if !args.addr.ip().is_unspecified() {
                names.push(&ip);
            }
            let identity = Identity::self_signed(&names)?;
            let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
            // The key first: a client that sees the certificate finds the server ready soon.
            write_new(&key, &identity.key_pem())?;
            write_new(&cert, &identity.certificate_pem())?;
            println!(
                "tls:       self-signed for {} (clients trust {})",
                names.join(", "),
                cert.display()
            );
            Ok(identity)
        }
        _ => Err(format!(
            "give --cert and --key, or --self-signed DIR (not both, not one of --cert/--key)\n{USAGE}"
        )
        .into()),
    }
}

/// Writes `text` to `path` under a temporary name, then renames it: a reader never sees half
/// a file.
fn write_new(path: &Path, text: &str) -> Result<(), Box<dyn Error>> {
    let partial = path.with_extension("partial");
    std::fs::write(&partial, text).map_err(|e| format!("{}: {e}", partial.display()))?;
    std::fs::rename(&partial, path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(())
}

fn print_stats(stats: &ServerStats) {
    println!(
        "clients:   {} connected ({} accepted, {} busy, {} failed handshakes, {} protocol \
         errors, {} too slow); {} frames sent, {} skipped; {} requests answered, {} refused",
        stats.connections,
        stats.accepted,
        stats.refused_busy,
        stats.failed_handshakes,
        stats.protocol_errors,
        stats.dropped_slow,
        stats.frames_sent,
        stats.frames_skipped,
        stats.answered,
        stats.refused_requests
    );
}

/// The arguments; `None` for `--help`.
fn parse_args(mut reader: Reader) -> Result<Option<Args>, String> {
    let mut parsed = Args {
        path: None,
        addr: SocketAddr::from(([127, 0, 0, 1], 4433)),
        cert: None,
        key: None,
        self_signed: None,
        client_ca: None,
        real_time: false,
        looped: false,
        seconds: 60,
        seed: 1,
        save: None,
        run_for: None,
    };
    let run = reader.read_flags(|reader, flag| {
        match flag {
            "--addr" => {
                let expected = "IP:PORT (e.g. 127.0.0.1:4433, or port 0 for any)";
                parsed.addr = reader.parsed(flag, expected)?;
            }
            "--cert" => parsed.cert = Some(reader.path(flag)?),
            "--key" => parsed.key = Some(reader.path(flag)?),
            "--self-signed" => parsed.self_signed = Some(reader.path(flag)?),
            "--client-ca" => parsed.client_ca = Some(reader.path(flag)?),
            "--save" => parsed.save = Some(reader.path(flag)?),
            "--real-time" => parsed.real_time = true,
            "--loop" => parsed.looped = true,
            "--seconds" => parsed.seconds = reader.whole(flag, 1..=3600)?,
            "--seed" => parsed.seed = reader.whole(flag, 1..=u64::MAX)?,
            "--for" => {
                let seconds = reader.whole(flag, 1..=7 * 24 * 3600)?;
                parsed.run_for = Some(Duration::from_secs(seconds));
            }
            _ => return Err(reader.unknown(flag)),
        }
        Ok(())
    })?;
    parsed.path = reader.optional("PATH")?;
    if parsed.path.is_some() && parsed.save.is_some() {
        return Err("serve --save writes the generated recording: give it without a PATH".into());
    }
    Ok(run.then_some(parsed))
}
