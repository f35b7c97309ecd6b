//! Connects to a dspk-stream server (`serve`), prints the recording's header, receives seconds
//! of its signal and says how fast they came, checks every received word against the same
//! file read here (on the server's machine, or a copy), and draws a view of the first seconds.
//!
//! ```text
//! cargo run --release --example client -- 127.0.0.1:4433 --trust tls/cert.pem
//! cargo run --release --example client -- 127.0.0.1:4433 --trust tls/cert.pem --seconds 20 \
//!     --check recording.ap.bin --png view.png
//! ```
//!
//! `--trust` names the PEM certificates (the server's own, or its authority's) the client
//! trusts; there is no mode that trusts anything. The server's certificate must name
//! `--server-name` (default `localhost`). `--cert` and `--key` give the client's identity for
//! servers that require one (mutual TLS). `--seconds` of signal are received (5; fewer when
//! the recording ends first), from `--from` (sample 0). `--check PATH` opens `PATH` here and
//! compares every received word with the word stored there: a difference ends the program
//! with status 1, naming the frame, channel and sample. `--png FILE` draws the first
//! `--seconds` (at most the recording) of the first 48 channels from a view the server
//! computes (from its pyramid, or the raw samples). Errors print their message and causes
//! and exit with status 1.

use std::error::Error;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use dspk::stream::{ClientTls, Frame, Identity, Session, SessionOptions, TransportOptions, Words};
use dspk::view::picture::{TraceStyle, render_traces};
use dspk::view::{SignalBackend, ViewRequest, ViewSource};
use dspk::{RecordingInfo, RecordingSource};
use dspk_cli::describe::{human_bytes, human_rate};
use dspk_cli::flags::Reader;
use dspk_cli::report::run_program;

const USAGE: &str = "usage: client ADDR --trust CERT.pem [--server-name NAME] \
                     [--cert CERT.pem --key KEY.pem] [--seconds N] [--from SAMPLE] \
                     [--check PATH] [--png FILE]";

/// Channels drawn in the picture at most.
const DRAWN_CHANNELS: usize = 48;
/// The picture's width in pixels, and the part left of and right of the traces (names and a
/// margin): the envelope has one column per remaining pixel.
const WIDTH: usize = 1600;
const MARGINS: usize = 110;

struct Args {
    addr: SocketAddr,
    trust: PathBuf,
    server_name: String,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    seconds: u64,
    from: u64,
    check: Option<PathBuf>,
    png: Option<PathBuf>,
}

fn main() -> ExitCode {
    // SAFETY: first in main, no other thread yet.
    unsafe { run_program("client", USAGE, parse_args, run) }
}

fn run(args: Args) -> Result<(), Box<dyn Error>> {
    let tls = ClientTls {
        trust: dspk::stream::Trust::from_pem_file(&args.trust)?,
        identity: match (&args.cert, &args.key) {
            (Some(cert), Some(key)) => Some(Identity::from_pem_files(cert, key)?),
            (None, None) => None,
            _ => return Err("--cert and --key go together".into()),
        },
    };
    let transport = if args.addr.ip().is_loopback() {
        TransportOptions::loopback()
    } else {
        TransportOptions::default()
    };
    let options = SessionOptions {
        transport,
        ..SessionOptions::default()
    };
    let connected = Instant::now();
    let session = Session::connect(args.addr, &args.server_name, &tls, options)?;
    println!(
        "connected: {} as `{}` in {:.1} ms",
        session.peer(),
        args.server_name,
        connected.elapsed().as_secs_f64() * 1e3
    );
    print_header(&session);
    let info = session.info().clone();

    let local = match &args.check {
        Some(path) => {
            let opened = dspk_cli::recording::open(path)?;
            same_recording(&info, opened.source.info())
                .map_err(|e| format!("--check {}: {e}", path.display()))?;
            println!("check:     against {} ({})", path.display(), opened.format);
            Some(opened.source)
        }
        None => None,
    };

    receive(&session, &args, local.as_deref())?;
    if let Some(png) = &args.png {
        picture(&session, &args, png)?;
    }
    session.close();
    Ok(())
}

/// What the header says, as a person reads it.
fn print_header(session: &Session) {
    let info = session.info();
    let header = session.header();
    let rate = info.sample_rate;
    let names = info
        .channels
        .iter()
        .take(4)
        .map(|c| c.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    println!(
        "header:    {} channels ({names}{}), {}, {}/{} Hz ({} Hz), starts at {}",
        info.num_channels(),
        if info.num_channels() > 4 { ", ..." } else { "" },
        if session.is_live() {
            "live".to_string()
        } else {
            format!(
                "{} samples ({:.2} s)",
                info.num_samples,
                info.num_samples as f64 / rate.as_hz()
            )
        },
        rate.numerator(),
        rate.denominator(),
        rate.as_hz(),
        info.start_time
    );
    let first = &info.channels[0];
    println!(
        "           stored {}, {} per unit ({}), frames of {} samples of {}",
        info.stored_format,
        first.gain,
        first.unit,
        header.frame_samples,
        match session.words() {
            Words::Stored(_) => "stored words",
            Words::Scaled => "scaled f32 words (the server's source has no stored access)",
        }
    );
    if !info.metadata.is_empty() {
        let keys = info.metadata.keys().take(6).cloned().collect::<Vec<_>>();
        println!(
            "           metadata: {} entries ({}{})",
            info.metadata.len(),
            keys.join(", "),
            if info.metadata.len() > 6 { ", ..." } else { "" }
        );
    }
}

/// Refuses a local recording that cannot be the served one.
fn same_recording(remote: &RecordingInfo, local: &RecordingInfo) -> Result<(), String> {
    let shape = |i: &RecordingInfo| {
        (
            i.num_channels(),
            i.num_samples,
            i.sample_rate.numerator(),
            i.sample_rate.denominator(),
            i.stored_format,
        )
    };
    if shape(remote) != shape(local) {
        return Err(format!(
            "the server has {} channels x {} samples of {} at {} Hz, this file {} x {} of {} at \
             {} Hz",
            remote.num_channels(),
            remote.num_samples,
            remote.stored_format,
            remote.sample_rate.as_hz(),
            local.num_channels(),
            local.num_samples,
            local.stored_format,
            local.sample_rate.as_hz()
        ));
    }
    Ok(())
}

/// Receives `--seconds` of signal from `--from`, checking each frame against `local` when
/// given; prints what came and how fast.
fn receive(
    session: &Session,
    args: &Args,
    local: Option<&dyn RecordingSource>,
) -> Result<(), Box<dyn Error>> {
    let info = session.info();
    let wanted = (args.seconds as f64 * info.sample_rate.as_hz()).ceil() as u64;
    let started = Instant::now();
    let mut signal = session.subscribe(args.from)?;
    let (mut samples, mut bytes, mut frames, mut skipped) = (0u64, 0u64, 0u64, 0u64);
    let mut next_sequence = 0;
    let mut scratch = Vec::new();
    while samples < wanted {
        let Some(frame) = signal.next_frame()? else {
            break;
        };
        skipped += frame.sequence - next_sequence.min(frame.sequence);
        next_sequence = frame.sequence + 1;
        if let Some(local) = local {
            check(local, &frame, &mut scratch)?;
        }
        samples += frame.num_samples as u64;
        bytes += frame.data().len() as u64;
        frames += 1;
    }
    let seconds = started.elapsed().as_secs_f64();
    let recorded = samples as f64 / info.sample_rate.as_hz();
    println!(
        "received:  {frames} frames, {samples} samples per channel ({recorded:.2} s of \
         recording, {} of {}) in {seconds:.3} s: {}, {:.1}x real time{}{}",
        human_bytes(bytes as f64),
        match session.words() {
            Words::Stored(format) => format.to_string(),
            Words::Scaled => "f32".to_string(),
        },
        human_rate(bytes as f64, seconds),
        recorded / seconds.max(f64::MIN_POSITIVE),
        if local.is_some() {
            " (each frame checked as it came)"
        } else {
            ""
        },
        if skipped > 0 {
            format!("; {skipped} frames skipped (this client was slower than real time)")
        } else {
            String::new()
        },
    );
    if let Some(end) = signal.end() {
        println!("           the recording ended at sample {end}");
    }
    if local.is_some() {
        println!("check:     every received word equals the file's");
    }
    Ok(())
}

/// Compares a frame's words with `local`'s words at the same samples.
fn check(
    local: &dyn RecordingSource,
    frame: &Frame,
    scratch: &mut Vec<u8>,
) -> Result<(), Box<dyn Error>> {
    let info = local.info();
    let range = frame.first_sample..frame.first_sample + frame.num_samples as u64;
    let channels = info.all_channels();
    let word = frame.words.size();
    scratch.resize(frame.data().len(), 0);
    match frame.words {
        Words::Stored(_) => local.read_stored(&channels, range.clone(), scratch)?,
        Words::Scaled => {
            let mut values = vec![0f32; frame.data().len() / 4];
            local.read(&channels, range.clone(), &mut values)?;
            for (bytes, value) in scratch.chunks_exact_mut(4).zip(&values) {
                bytes.copy_from_slice(&value.to_le_bytes());
            }
        }
    }
    let Some(at) = frame
        .data()
        .iter()
        .zip(scratch.iter())
        .position(|(a, b)| a != b)
    else {
        return Ok(());
    };
    let run = frame.num_samples * word;
    let (channel, sample) = (at / run, range.start + ((at % run) / word) as u64);
    let word_at = |data: &[u8]| {
        let start = at - at % word;
        format!("{:02x?}", &data[start..start + word])
    };
    Err(format!(
        "frame {} differs from the file at channel {channel} ({}), sample {sample}: received \
         {}, the file holds {}",
        frame.sequence,
        info.channels[channel].name,
        word_at(frame.data()),
        word_at(scratch)
    )
    .into())
}

/// Draws the first `--seconds` of the first channels from a view the server computes.
fn picture(session: &Session, args: &Args, png: &std::path::Path) -> Result<(), Box<dyn Error>> {
    let info = session.info();
    if session.is_live() {
        return Err("--png: a live source answers no views".into());
    }
    let rate = info.sample_rate.as_hz();
    let end = ((args.seconds as f64 * rate).ceil() as u64).clamp(1, info.num_samples);
    let channels: Vec<usize> = (0..info.num_channels().min(DRAWN_CHANNELS)).collect();
    let request = ViewRequest {
        channels: channels.clone(),
        samples: 0..end,
        width: (WIDTH - MARGINS).min(end as usize),
    };
    let started = Instant::now();
    let view = SignalBackend::view(session, &request)?;
    let latency = started.elapsed().as_secs_f64();
    let mut style = TraceStyle::new(rate, 900);
    style.labels = channels
        .iter()
        .map(|&c| info.channels[c].name.clone())
        .collect();
    style.title = format!(
        "samples 0..{end} of {} at {}, channels 0..={}",
        info.num_samples,
        session.peer(),
        channels.len() - 1
    );
    render_traces(&view.envelope, &style)?.write_png(png)?;
    let from = match view.source {
        ViewSource::Pyramid { level, bucket } => {
            format!("the server's pyramid, level {level} ({bucket}-sample buckets)")
        }
        ViewSource::Raw => "the server's raw samples".to_string(),
        ViewSource::Samples => "the samples themselves".to_string(),
    };
    println!(
        "picture:   {}: {} columns from {from} in {:.1} ms{}",
        png.display(),
        view.envelope.columns().len(),
        latency * 1e3,
        if view.complete { "" } else { " (incomplete)" }
    );
    Ok(())
}

/// The arguments; `None` for `--help`.
fn parse_args(mut reader: Reader) -> Result<Option<Args>, String> {
    let (mut trust, mut server_name) = (None, "localhost".to_string());
    let (mut cert, mut key, mut check, mut png) = (None, None, None, None);
    let (mut seconds, mut from) = (5, 0);
    let run = reader.read_flags(|reader, flag| {
        match flag {
            "--trust" => trust = Some(reader.path(flag)?),
            "--cert" => cert = Some(reader.path(flag)?),
            "--key" => key = Some(reader.path(flag)?),
            "--check" => check = Some(reader.path(flag)?),
            "--png" => png = Some(reader.path(flag)?),
            "--server-name" => server_name = reader.text(flag)?,
            "--seconds" => seconds = reader.whole(flag, 1..=24 * 3600)?,
            "--from" => from = reader.whole(flag, 0..=u64::MAX)?,
            _ => return Err(reader.unknown(flag)),
        }
        Ok(())
    })?;
    if !run {
        return Ok(None);
    }
    let address = reader.positional(&["ADDR"])?.remove(0);
    let addr = (address.to_str())
        .and_then(|text| text.parse::<SocketAddr>().ok())
        .ok_or_else(|| {
            format!(
                "client: `{}` is not an address IP:PORT (e.g. 127.0.0.1:4433)",
                address.display()
            )
        })?;
    let trust = trust.ok_or(
        "client: --trust CERT.pem is missing: the certificate the server presents, or its \
         authority's",
    )?;
    Ok(Some(Args {
        addr,
        trust,
        server_name,
        cert,
        key,
        seconds,
        from,
        check,
        png,
    }))
}
