//! dspk-stream measured on loopback: the signal stream's throughput (stored int16 words,
//! as fast as the client reads) in GB/s, as a multiple of real time and in CPU seconds per GB,
//! and the latency of view requests alone and while the signal stream runs flat out.
//!
//! ```text
//! cargo bench --bench stream
//! cargo bench --bench stream -- --seconds 5 --views 0 --passes 9 --udp 65507
//! ```
//!
//! Flags: `--channels` (384), `--seconds` of recording held in memory and streamed per pass
//! (5), `--rate` in Hz (30000), `--udp`: the largest UDP payloads to try (a list, default
//! `1472,65507`: Ethernet's, and the largest IPv4 carries, which path MTU discovery reaches on
//! loopback), `--passes` measured after a warm-up pass (5; the median is reported, and the
//! best), `--frame-bytes` per signal frame (the server's default), `--window` bytes of the
//! transport's stream and send windows (its default), `--views` requested per latency run
//! (40; 0 skips the latency runs).
//!
//! The recording is random int16 samples in memory, so the server's reads are copies and the
//! figures are the protocol's and the transport's (TLS 1.3 encryption included). Server and
//! client run in this one process: `cpu_s_per_gb` is the CPU time of both (user and system)
//! per GB received, what bounds the rate on a machine with few or busy cores; `load` is the
//! one-minute load average at the end (other work on the machine). One line per figure,
//! `stream <what> key=value ...`.

use std::error::Error;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use dspk::rng::SplitMix64;
use dspk::stream::transport::MAX_IPV4_UDP_PAYLOAD;
use dspk::stream::{
    ClientTls, Identity, Pacing, Server, ServerOptions, ServerTls, Session, SessionOptions,
    TransportOptions, Trust,
};
use dspk::view::{LocalBackend, SignalBackend, ViewRequest};
use dspk::{ChannelInfo, MemoryRecording, SampleRate};
use dspk_cli::flags::Reader;
use dspk_cli::report::run_program;

struct Flags {
    channels: usize,
    seconds: u64,
    rate: u64,
    udp: Vec<u16>,
    views: usize,
    passes: usize,
    frame_bytes: usize,
    window: Option<u32>,
}

/// The arguments; `None` for `--help`.
fn flags(mut reader: Reader) -> Result<Option<Flags>, String> {
    let mut flags = Flags {
        channels: 384,
        seconds: 5,
        rate: 30_000,
        udp: vec![1472, MAX_IPV4_UDP_PAYLOAD],
        views: 40,
        passes: 5,
        frame_bytes: ServerOptions::default().frame_bytes,
        window: None,
    };
    let run = reader.read_flags(|reader, flag| {
        let count = |reader: &mut Reader| reader.whole(flag, 1..=u64::from(u32::MAX));
        match flag {
            "--channels" => flags.channels = count(reader)? as usize,
            "--seconds" => flags.seconds = count(reader)?,
            "--rate" => flags.rate = count(reader)?,
            "--views" => flags.views = count(reader)? as usize,
            "--passes" => flags.passes = count(reader)? as usize,
            "--frame-bytes" => flags.frame_bytes = count(reader)? as usize,
            "--window" => flags.window = Some(count(reader)? as u32),
            "--udp" => {
                let list = reader.text(flag)?;
                flags.udp = (list.split(','))
                    .map(|size| size.trim().parse().ok())
                    .collect::<Option<_>>()
                    .ok_or(format!(
                        "stream --udp {list}: a list of payload sizes like 1472,65507"
                    ))?;
            }
            "--bench" => {} // passed by `cargo bench`
            _ => return Err(reader.unknown(flag)),
        }
        Ok(())
    })?;
    reader.positional(&[])?;
    Ok(run.then_some(flags))
}

const USAGE: &str = "usage: stream [--channels N] [--seconds N] [--rate HZ] [--udp SIZE,...] \
                     [--views N] [--passes N] [--frame-bytes N] [--window N]";

fn main() -> ExitCode {
    // SAFETY: first in main, no other thread yet.
    unsafe { run_program("stream", USAGE, flags, run) }
}

fn run(flags: Flags) -> Result<(), Box<dyn Error>> {
    let samples = flags.seconds * flags.rate;
    let mut rng = SplitMix64::new(42);
    let values: Vec<i16> = (0..flags.channels as u64 * samples)
        .map(|_| (rng.next_u64() >> 54) as i16 - 512)
        .collect();
    let channels = (0..flags.channels)
        .map(|c| ChannelInfo::new(format!("AP{c}"), 2.343_75, 0.0, "uV"))
        .collect();
    let recording = Arc::new(MemoryRecording::from_samples(
        channels,
        SampleRate::from_hz(flags.rate)?,
        &values,
    )?);
    drop(values);
    let identity = Identity::self_signed(&["localhost"])?;
    let tls = ServerTls {
        identity: identity.clone(),
        client_authorities: None,
    };
    let client_tls = ClientTls {
        trust: Trust::with(identity.certificates())?,
        identity: None,
    };
    for &udp in &flags.udp {
        let defaults = TransportOptions::default();
        let window = flags.window.unwrap_or(defaults.stream_window);
        let transport = TransportOptions {
            max_udp_payload: udp,
            stream_window: window,
            send_window: window.into(),
            ..defaults
        };
        let server = Server::bind(
            "127.0.0.1:0".parse()?,
            &tls,
            LocalBackend::new(recording.clone()),
            ServerOptions {
                pacing: Pacing::AsFastAsPossible,
                frame_bytes: flags.frame_bytes,
                transport,
                ..ServerOptions::default()
            },
        )?;
        let addr = server.local_addr()?;
        let options = SessionOptions {
            transport,
            ..SessionOptions::default()
        };
        let session = Session::connect(addr, "localhost", &client_tls, options.clone())?;
        // A first pass warms the path (MTU discovery, windows); the second is measured.
        let _ = stream_once(&session)?;
        let passes = (0..flags.passes)
            .map(|_| stream_once(&session))
            .collect::<Result<Vec<_>, _>>()?;
        let mut by_time = passes.clone();
        by_time.sort_by(|a, b| a.secs.total_cmp(&b.secs));
        let median = by_time[by_time.len() / 2];
        let (all_bytes, all_cpu) = passes
            .iter()
            .fold((0u64, 0.0), |(b, c), p| (b + p.bytes, c + p.cpu_secs));
        let real = median.bytes as f64 / (flags.channels as f64 * 2.0 * flags.rate as f64);
        println!(
            "stream throughput channels={} rate_hz={} udp_payload={udp} frame_bytes={} \
             passes={} bytes={} median_secs={:.3} gb_per_s={:.3} x_real_time={:.1} \
             best_x_real_time={:.1} cpu_s_per_gb={:.2} load={}",
            flags.channels,
            flags.rate,
            flags.frame_bytes,
            passes.len(),
            median.bytes,
            median.secs,
            median.bytes as f64 / median.secs / 1e9,
            real / median.secs,
            real / by_time[0].secs,
            all_cpu / (all_bytes as f64 / 1e9),
            load_average(),
        );
        if flags.views == 0 {
            drop(session);
            server.shutdown();
            continue;
        }
        let idle = view_latencies(&session, flags.views, samples)?;
        print_latencies("idle", udp, &idle);
        let loaded = latencies_under_load(addr, &client_tls, &options, flags.views, samples)?;
        print_latencies("under_load", udp, &loaded.0);
        println!(
            "stream signal_during_views udp_payload={udp} gb_per_s={:.3}",
            loaded.1
        );
        drop(session);
        server.shutdown();
    }
    Ok(())
}

/// One pass over the recording: stored bytes received, wall seconds, and CPU seconds of the
/// whole process (server and client) meanwhile.
#[derive(Clone, Copy)]
struct Pass {
    bytes: u64,
    secs: f64,
    cpu_secs: f64,
}

/// Receives the whole recording once.
fn stream_once(session: &Session) -> Result<Pass, Box<dyn Error>> {
    let cpu = process_cpu_secs();
    let started = Instant::now();
    let mut signal = session.subscribe(0)?;
    let mut bytes = 0u64;
    while let Some(frame) = signal.next_frame()? {
        bytes += frame.data().len() as u64;
    }
    Ok(Pass {
        bytes,
        secs: started.elapsed().as_secs_f64(),
        cpu_secs: process_cpu_secs() - cpu,
    })
}

/// User and system CPU seconds of this process so far (`/proc/self/stat`, in Linux's fixed
/// 100 ticks per second; 0 where there is no such file).
fn process_cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at the state, field 3.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15: indices 11 and 12 from the state.
    (ticks(11) + ticks(12)) as f64 / 100.0
}

/// The one-minute load average (`/proc/loadavg`), to say how busy the machine was.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

/// View request latencies (seconds): every channel, a second of recording at a spread of
/// offsets, 1000 columns.
fn view_latencies(
    backend: &dyn SignalBackend,
    count: usize,
    samples: u64,
) -> Result<Vec<f64>, Box<dyn Error>> {
    let channels = backend.info().all_channels();
    let span = (samples / 5).max(1);
    let mut latencies = Vec::with_capacity(count);
    for k in 0..count as u64 {
        let start = (k * 7919) % (samples - span + 1);
        let request = ViewRequest {
            channels: channels.clone(),
            samples: start..start + span,
            width: 1000.min(span as usize),
        };
        let started = Instant::now();
        backend.view(&request)?;
        latencies.push(started.elapsed().as_secs_f64());
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(latencies)
}

/// View latencies while another session of the same client receives the signal flat out
/// (looping over the recording), and that signal's rate in GB/s meanwhile.
fn latencies_under_load(
    addr: SocketAddr,
    tls: &ClientTls,
    options: &SessionOptions,
    count: usize,
    samples: u64,
) -> Result<(Vec<f64>, f64), Box<dyn Error>> {
    let viewer = Session::connect(addr, "localhost", tls, options.clone())?;
    let streamer = Session::connect(addr, "localhost", tls, options.clone())?;
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let stop = stop.clone();
        std::thread::spawn(move || -> Result<(u64, f64), String> {
            let started = Instant::now();
            let mut bytes = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let mut signal = streamer.subscribe(0).map_err(|e| e.to_string())?;
                while let Some(frame) = signal.next_frame().map_err(|e| e.to_string())? {
                    bytes += frame.data().len() as u64;
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                }
            }
            Ok((bytes, started.elapsed().as_secs_f64()))
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let latencies = view_latencies(&viewer, count, samples);
    stop.store(true, Ordering::Relaxed);
    let (bytes, secs) = load.join().map_err(|_| "the load thread panicked")??;
    Ok((latencies?, bytes as f64 / secs / 1e9))
}

fn print_latencies(what: &str, udp: u16, latencies: &[f64]) {
    let mut sorted = latencies.to_vec();
    sorted.sort_by(f64::total_cmp);
    let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize] * 1e3;
    println!(
        "stream view_latency load={what} udp_payload={udp} views={} median_ms={:.2} p90_ms={:.2} max_ms={:.2}",
        sorted.len(),
        at(0.5),
        at(0.9),
        at(1.0)
    );
}
