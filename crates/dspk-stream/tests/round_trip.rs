//! Loopback round trips: the header, the signal stream, reads and views of a served recording
//! equal the local recording's, exactly.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{connect, identity, options, recording, serve};
use dspk_core::{RecordingSource, ScaledOnly};
use dspk_io::{RawRecording, RawWriteOptions, write_raw};
use dspk_stream::{Pacing, ServerOptions, Session, Words};
use dspk_view::{LocalBackend, SignalBackend, ViewRequest};

/// Every frame of a subscription from `from` to the end, glued per channel; the end sample.
fn receive_all(session: &Session, from: u64) -> (Vec<Vec<u8>>, u64, u64) {
    let channels = session.info().num_channels();
    let word = session.words().size();
    let mut glued = vec![Vec::new(); channels];
    let mut signal = session.subscribe(from).unwrap();
    let mut expected_first = from;
    let mut frames = 0;
    while let Some(frame) = signal.next_frame().unwrap() {
        assert_eq!(frame.sequence, frames, "frames in order, none skipped");
        assert_eq!(frame.first_sample, expected_first);
        for (c, out) in glued.iter_mut().enumerate() {
            let run = frame.channel(c).unwrap();
            assert_eq!(run.len(), frame.num_samples * word);
            out.extend_from_slice(run);
        }
        expected_first += frame.num_samples as u64;
        frames += 1;
    }
    (glued, signal.end().unwrap(), frames)
}

#[test]
fn a_raw_file_round_trips_exactly() {
    // A file on disk, opened as a lab server would open it.
    let dir = std::env::temp_dir().join(format!("dspk-stream-rt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let memory = recording(7, 10_007, 1);
    let path = dir.join("rec.bin");
    write_raw(&memory, &path, RawWriteOptions::default()).unwrap();
    let file: Arc<dyn RecordingSource> = Arc::new(RawRecording::open(&path).unwrap());
    let info = file.info().clone();
    let id = identity();
    let (server, addr) = serve(
        file.clone(),
        &id,
        ServerOptions {
            pacing: Pacing::AsFastAsPossible,
            ..options()
        },
    );
    let session = connect(addr, &id);

    // The header: the whole info, the rate exact.
    assert_eq!(RecordingSource::info(&session), &info);
    assert_eq!(session.info().sample_rate.numerator(), 750_003);
    assert_eq!(session.words(), Words::Stored(dspk_core::SampleFormat::I16));
    assert!(!session.is_live());

    // The signal: every stored word of the file, in frames, ending at the last sample.
    let n = info.num_samples;
    let (glued, end, frames) = receive_all(&session, 0);
    assert_eq!(end, n);
    assert!(frames > 1, "several frames ({frames})");
    for (c, words) in glued.iter().enumerate() {
        let mut expected = vec![0u8; n as usize * 2];
        file.read_stored(&[c], 0..n, &mut expected).unwrap();
        assert_eq!(words, &expected, "channel {c}");
    }
    // Subscribing again restarts where asked.
    let (glued, end, _) = receive_all(&session, 9_000);
    assert_eq!(end, n);
    let mut expected = vec![0u8; (n - 9_000) as usize * 2];
    file.read_stored(&[3], 9_000..n, &mut expected).unwrap();
    assert_eq!(glued[3], expected);
    // Past the end: an end at once.
    let (_, end, frames) = receive_all(&session, n + 5);
    assert_eq!((end, frames), (n + 5, 0));

    // Reads: stored words and scaled values, any channels in any order, equal the file's bit
    // for bit; a long read is cut into several requests.
    for (channels, range) in [
        (vec![6, 0, 3], 17..9_999),
        (vec![2], 0..n),
        (vec![1, 1], 10_000..10_007),
        (info.all_channels(), 0..n),
    ] {
        let len = channels.len() * (range.end - range.start) as usize;
        let (mut remote, mut local) = (vec![0u8; len * 2], vec![0u8; len * 2]);
        session
            .read_stored(&channels, range.clone(), &mut remote)
            .unwrap();
        file.read_stored(&channels, range.clone(), &mut local)
            .unwrap();
        assert_eq!(remote, local, "{channels:?} {range:?}");
        let (mut remote, mut local) = (vec![0f32; len], vec![0f32; len]);
        RecordingSource::read(&session, &channels, range.clone(), &mut remote).unwrap();
        file.read(&channels, range.clone(), &mut local).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&remote), bits(&local), "{channels:?} {range:?}");
    }
    // Bad reads are refused here (checked like any source) with dspk-core's errors.
    let mut out = vec![0u8; 2 * 20];
    let err = session.read_stored(&[7], 0..20, &mut out).unwrap_err();
    assert!(
        matches!(err, dspk_core::Error::ChannelOutOfRange { .. }),
        "{err}"
    );

    // Views: the same envelopes as a local backend's.
    let local = LocalBackend::new(file.clone());
    for request in [
        ViewRequest {
            channels: vec![0, 5],
            samples: 0..n,
            width: 300,
        },
        ViewRequest {
            channels: vec![4],
            samples: 100..150,
            width: 200,
        },
        ViewRequest {
            channels: info.all_channels(),
            samples: 5..9_000,
            width: 1,
        },
    ] {
        let remote = SignalBackend::view(&session, &request).unwrap();
        assert_eq!(remote, local.view(&request).unwrap(), "{request:?}");
    }
    // A bad view request is refused before it is sent, with dspk-view's error.
    let bad = ViewRequest {
        channels: vec![0],
        samples: 0..n + 1,
        width: 10,
    };
    let err = SignalBackend::view(&session, &bad).unwrap_err();
    assert!(
        matches!(err, dspk_view::Error::InvalidRequest { .. }),
        "{err}"
    );

    let stats = server.stats();
    assert_eq!(stats.frames_skipped, 0);
    assert_eq!((stats.connections, stats.accepted), (1, 1));
    session.close();
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_source_without_stored_access_sends_scaled_values() {
    let memory = recording(3, 2_001, 2);
    let source: Arc<dyn RecordingSource> = Arc::new(ScaledOnly(memory.clone()));
    let id = identity();
    let (_server, addr) = serve(
        source,
        &id,
        ServerOptions {
            pacing: Pacing::AsFastAsPossible,
            ..options()
        },
    );
    let session = connect(addr, &id);
    assert_eq!(session.words(), Words::Scaled);
    assert!(!session.can_read_stored());
    let mut out = vec![0u8; 4];
    assert!(matches!(
        session.read_stored(&[0], 0..2, &mut out).unwrap_err(),
        dspk_core::Error::Unsupported { .. }
    ));
    let n = 2_001;
    let mut remote = vec![0f32; 3 * n];
    let mut local = vec![0f32; 3 * n];
    RecordingSource::read(&session, &[0, 1, 2], 0..n as u64, &mut remote).unwrap();
    memory.read(&[0, 1, 2], 0..n as u64, &mut local).unwrap();
    assert_eq!(remote, local);
    // Frames scale to the same values.
    let mut signal = session.subscribe(0).unwrap();
    let frame = signal.next_frame().unwrap().unwrap();
    let mut scaled = vec![0f32; 3 * frame.num_samples];
    frame.scale_into(session.info(), &mut scaled).unwrap();
    assert_eq!(&scaled[..frame.num_samples], &local[..frame.num_samples]);
}

#[test]
fn real_time_pacing_follows_the_rate_and_loops() {
    // 3 channels at 30000.12 Hz; 6000 samples (0.2 s) looped: 0.3 s of frames must take
    // about 0.3 s, and wrap to sample 0.
    let memory = recording(3, 6_000, 3);
    let id = identity();
    let (_server, addr) = serve(
        Arc::new(memory.clone()),
        &id,
        ServerOptions {
            pacing: Pacing::RealTime,
            looped: true,
            frame_bytes: 3 * 2 * 500,
            ..options()
        },
    );
    let session = connect(addr, &id);
    let started = Instant::now();
    let mut signal = session.subscribe(1_000).unwrap();
    let mut received = 0u64;
    let mut wrapped = false;
    let mut previous_end = 1_000;
    while received < 9_000 {
        let frame = signal.next_frame().unwrap().unwrap();
        if frame.first_sample == 0 {
            wrapped = true;
            assert_eq!(previous_end, 6_000);
        } else {
            assert_eq!(frame.first_sample, previous_end);
        }
        let mut expected = vec![0u8; frame.num_samples * 2];
        let range = frame.first_sample..frame.first_sample + frame.num_samples as u64;
        memory.read_stored(&[2], range, &mut expected).unwrap();
        assert_eq!(frame.channel(2).unwrap(), &expected[..]);
        previous_end = frame.first_sample + frame.num_samples as u64;
        received += frame.num_samples as u64;
    }
    let elapsed = started.elapsed();
    assert!(wrapped);
    // 9000 samples at 30000.12 Hz = 0.3 s.
    assert!(elapsed >= Duration::from_millis(280), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
}

#[test]
fn a_live_feed_reaches_its_subscribers_and_refuses_reads() {
    use dspk_stream::{LiveFeed, Server, ServerTls};
    let memory = recording(3, 1_000, 4);
    let feed = LiveFeed::new(memory.info().clone(), 128, 64).unwrap();
    let id = identity();
    let server = Server::bind_live(
        "127.0.0.1:0".parse().unwrap(),
        &ServerTls {
            identity: id.clone(),
            client_authorities: None,
        },
        feed.clone(),
        options(),
    )
    .unwrap();
    let session = connect(server.local_addr().unwrap(), &id);
    assert!(session.is_live());
    assert_eq!(session.info().channels, memory.info().channels);
    assert_eq!(session.info().sample_rate, memory.info().sample_rate);
    let mut signal = session.subscribe(0).unwrap();
    // Give the server's subscription time to start before pushing.
    std::thread::sleep(Duration::from_millis(200));
    // Push the recording in blocks of 300 samples (cut into frames of at most 128).
    let mut block = vec![0u8; 3 * 300 * 2];
    for start in (0..900u64).step_by(300) {
        memory
            .read_stored(&[0, 1, 2], start..start + 300, &mut block)
            .unwrap();
        assert_eq!(feed.push(&block).unwrap(), start);
    }
    let mut at = 0;
    while at < 900 {
        let frame = signal
            .next_frame()
            .unwrap_or_else(|e| panic!("{e}: {:?}", server.stats()))
            .unwrap();
        assert_eq!(frame.first_sample, at);
        assert!(frame.num_samples <= 128);
        let mut expected = vec![0u8; frame.num_samples * 2];
        memory
            .read_stored(&[1], at..at + frame.num_samples as u64, &mut expected)
            .unwrap();
        assert_eq!(frame.channel(1).unwrap(), &expected[..]);
        at += frame.num_samples as u64;
    }
    assert!(feed.push(&[0u8; 5]).is_err(), "not whole samples");
    let err = session
        .request_view(&ViewRequest {
            channels: vec![0],
            samples: 0..10,
            width: 5,
        })
        .unwrap_err();
    assert!(err.to_string().contains("live source"), "{err}");
}

#[test]
fn loopback_datagrams_and_large_frames_round_trip_in_reused_buffers() {
    // 64 channels, frames of 1 MiB (8192 samples), datagrams up to 65507 bytes each way (one
    // at a time, no segmentation offload): every word arrives, twice over, and the client
    // reads the frames into a bounded set of buffers.
    use dspk_stream::TransportOptions;
    let memory = recording(64, 120_007, 8);
    let id = identity();
    let (_server, addr) = serve(
        Arc::new(memory.clone()),
        &id,
        ServerOptions {
            pacing: Pacing::AsFastAsPossible,
            frame_bytes: 1 << 20,
            transport: TransportOptions::loopback(),
            ..options()
        },
    );
    let session = Session::connect(
        addr,
        "localhost",
        &common::trusting(&id),
        dspk_stream::SessionOptions {
            transport: TransportOptions::loopback(),
            ..common::session_options()
        },
    )
    .unwrap();
    let channels = memory.info().all_channels();
    let mut buffers = std::collections::HashSet::new();
    for _ in 0..2 {
        let mut signal = session.subscribe(0).unwrap();
        let mut at = 0;
        while let Some(frame) = signal.next_frame().unwrap() {
            assert_eq!(frame.first_sample, at);
            let range = at..at + frame.num_samples as u64;
            let mut expected = vec![0u8; frame.data().len()];
            memory.read_stored(&channels, range, &mut expected).unwrap();
            assert!(frame.data() == &expected[..], "frame {}", frame.sequence);
            buffers.insert(frame.data().as_ptr() as usize);
            at += frame.num_samples as u64;
        }
        assert_eq!(at, 120_007);
    }
    // 30 frames came; the queue (4), the frame being read and the one held here bound the
    // buffers in use, and freed ones are taken again. A buffer's samples start a few bytes
    // in (after the frame's other fields, whose lengths vary): starts within 64 bytes of
    // each other are one buffer (buffers are 1 MiB apart).
    let mut starts: Vec<usize> = buffers.into_iter().collect();
    starts.sort_unstable();
    let distinct = 1 + starts.windows(2).filter(|w| w[1] - w[0] > 64).count();
    assert!(distinct <= 8, "{distinct} buffers: {starts:x?}");
}

#[test]
fn loopback_and_default_transports_talk_to_each_other() {
    // A server and a client on 127.0.0.1, one with loopback datagrams (65507 bytes from the
    // start), the other with Ethernet's: the smaller side's limit holds, and every word
    // arrives, both ways round.
    use dspk_stream::TransportOptions;
    let memory = recording(16, 50_000, 9);
    let id = identity();
    for (server_transport, client_transport) in [
        (TransportOptions::loopback(), TransportOptions::default()),
        (TransportOptions::default(), TransportOptions::loopback()),
    ] {
        let (_server, addr) = serve(
            Arc::new(memory.clone()),
            &id,
            ServerOptions {
                pacing: Pacing::AsFastAsPossible,
                transport: server_transport,
                ..options()
            },
        );
        let session = Session::connect(
            addr,
            "localhost",
            &common::trusting(&id),
            dspk_stream::SessionOptions {
                transport: client_transport,
                ..common::session_options()
            },
        )
        .unwrap();
        let (glued, end, _) = receive_all(&session, 0);
        assert_eq!(end, 50_000);
        let mut expected = vec![0u8; 50_000 * 2];
        memory.read_stored(&[11], 0..50_000, &mut expected).unwrap();
        assert_eq!(glued[11], expected);
    }
}
