//! Hostile peers on loopback: each gets a clear error or a clean close, and the server (or
//! client) keeps working for the well-behaved; memory stays bounded.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{connect, identity, options, recording, serve, session_options, trusting};
use dspk_core::{MemoryRecording, RecordingSource};
use dspk_stream::messages::{Body, Header, Hello, Subscribe};
use dspk_stream::{
    ALPN, Authority, ClientTls, Error, Identity, Pacing, Server, ServerOptions, ServerTls, Session,
    Trust, code, framing,
};
use dspk_view::LocalBackend;
use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::pem::PemObject;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A quinn client config trusting `server` and offering `alpn` (what a foreign or broken
/// client would use).
fn raw_client_config(server: &Identity, alpn: &[u8]) -> quinn::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    for c in server.certificates() {
        roots.add(c.clone()).unwrap();
    }
    let mut tls = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![alpn.to_vec()];
    quinn::ClientConfig::new(Arc::new(
        quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap(),
    ))
}

/// A raw connection (and its endpoint) to `addr`.
async fn raw_connect(
    addr: SocketAddr,
    config: quinn::ClientConfig,
) -> (
    quinn::Endpoint,
    Result<quinn::Connection, quinn::ConnectionError>,
) {
    let endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    let connection = endpoint
        .connect_with(config, addr, "localhost")
        .unwrap()
        .await;
    (endpoint, connection)
}

/// A raw connection that said hello and got the header, and its control stream.
async fn raw_session(
    addr: SocketAddr,
    server: &Identity,
) -> (quinn::Endpoint, quinn::Connection, quinn::SendStream) {
    let (endpoint, connection) = raw_connect(addr, raw_client_config(server, ALPN)).await;
    let connection = connection.unwrap();
    let (mut send, mut recv) = connection.open_bi().await.unwrap();
    let hello = framing::encode(
        &Body::Hello(Hello {
            protocol_version: 1,
        })
        .into(),
    )
    .unwrap();
    send.write_all(&hello).await.unwrap();
    let limits = framing::ReadLimits {
        max_message: 1 << 20,
        idle: Some(Duration::from_secs(5)),
        body: Duration::from_secs(5),
    };
    let header = framing::read_message(&mut recv, &limits, "header")
        .await
        .unwrap();
    assert!(matches!(header.and_then(|m| m.body), Some(Body::Header(_))));
    (endpoint, connection, send)
}

/// The close a raw connection gets: its code and reason.
async fn closed(connection: &quinn::Connection) -> (u64, String) {
    let error = tokio::time::timeout(Duration::from_secs(10), connection.closed())
        .await
        .expect("the server closes the connection");
    match error {
        quinn::ConnectionError::ApplicationClosed(close) => (
            close.error_code.into_inner(),
            String::from_utf8_lossy(&close.reason).into_owned(),
        ),
        other => panic!("expected an application close, got {other}"),
    }
}

/// A well-behaved client still gets the header and exact samples.
fn still_serves(addr: SocketAddr, server: &Identity, source: &MemoryRecording) {
    let session = connect(addr, server);
    assert_eq!(session.info(), source.info());
    let (mut remote, mut local) = (vec![0u8; 2 * 2 * 100], vec![0u8; 2 * 2 * 100]);
    session.read_stored(&[1, 0], 50..150, &mut remote).unwrap();
    source.read_stored(&[1, 0], 50..150, &mut local).unwrap();
    assert_eq!(remote, local);
    let mut signal = session.subscribe(0).unwrap();
    assert!(signal.next_frame().unwrap().is_some());
}

fn small() -> MemoryRecording {
    recording(4, 30_011, 11)
}

fn fast_options() -> ServerOptions {
    ServerOptions {
        pacing: Pacing::AsFastAsPossible,
        body_timeout: Duration::from_millis(500),
        ..options()
    }
}

#[test]
fn bad_control_messages_close_the_connection_with_a_reason() {
    let source = small();
    let id = identity();
    let (server, addr) = serve(Arc::new(source.clone()), &id, fast_options());
    let rt = runtime();
    // (what the client sends first on the control stream, whether it ends the stream,
    // the code and what the close reason must say)
    let mut over = u32::MAX.to_le_bytes().to_vec();
    over.extend_from_slice(&[0; 16]);
    let mut truncated = 100u32.to_le_bytes().to_vec();
    truncated.extend_from_slice(&[0x0a; 10]);
    let mut malformed = 6u32.to_le_bytes().to_vec();
    malformed.extend_from_slice(&[0x0a, 0x40, 1, 2, 3, 4]);
    let wrong_version = framing::encode(
        &Body::Hello(Hello {
            protocol_version: 2,
        })
        .into(),
    )
    .unwrap()
    .to_vec();
    let not_hello = framing::encode(&Body::Subscribe(Subscribe { from_sample: 0 }).into())
        .unwrap()
        .to_vec();
    let stalled = 100u32.to_le_bytes().to_vec();
    let cases: Vec<(&str, Vec<u8>, bool, u32, &str)> = vec![
        (
            "over the limit",
            over,
            false,
            code::PROTOCOL,
            "over the limit of 65536",
        ),
        (
            "truncated",
            truncated,
            true,
            code::PROTOCOL,
            "ended after 10 of 100 bytes",
        ),
        (
            "malformed",
            malformed,
            false,
            code::PROTOCOL,
            "malformed message",
        ),
        (
            "version",
            wrong_version,
            false,
            code::VERSION,
            "protocol version 2",
        ),
        (
            "not hello",
            not_hello,
            false,
            code::PROTOCOL,
            "expected hello",
        ),
        (
            "stalled body",
            stalled,
            false,
            code::PROTOCOL,
            "nothing after 500ms",
        ),
    ];
    for (name, bytes, finish, expected_code, expected_reason) in cases {
        rt.block_on(async {
            let (_endpoint, connection) = raw_connect(addr, raw_client_config(&id, ALPN)).await;
            let connection = connection.unwrap();
            let (mut send, _recv) = connection.open_bi().await.unwrap();
            send.write_all(&bytes).await.unwrap();
            if finish {
                send.finish().unwrap();
            }
            let (code, reason) = closed(&connection).await;
            assert_eq!(code, u64::from(expected_code), "{name}: {reason}");
            assert!(reason.contains(expected_reason), "{name}: `{reason}`");
        });
    }
    wait_for(|| server.stats().protocol_errors >= 6);
    assert!(server.stats().protocol_errors >= 6, "{:?}", server.stats());
    still_serves(addr, &id, &source);
}

#[test]
fn bad_requests_get_error_answers_and_the_connection_lives() {
    let source = small();
    let id = identity();
    let (server, addr) = serve(Arc::new(source.clone()), &id, fast_options());
    let rt = runtime();
    rt.block_on(async {
        let (_endpoint, connection, _control) = raw_session(addr, &id).await;
        let mut over = u32::MAX.to_le_bytes().to_vec();
        over.extend_from_slice(&[0; 16]);
        let mut malformed = 3u32.to_le_bytes().to_vec();
        malformed.extend_from_slice(&[0x0f, 0xff, 0xff]);
        let hello = framing::encode(
            &Body::Hello(Hello {
                protocol_version: 1,
            })
            .into(),
        )
        .unwrap()
        .to_vec();
        let past_end = framing::encode(
            &Body::ReadRequest(dspk_stream::messages::ReadRequest {
                channels: vec![0],
                start: 0,
                end: 30_012,
            })
            .into(),
        )
        .unwrap()
        .to_vec();
        let too_large = framing::encode(
            &Body::ReadRequest(dspk_stream::messages::ReadRequest {
                channels: vec![0; 1000],
                start: 0,
                end: 30_000,
            })
            .into(),
        )
        .unwrap()
        .to_vec();
        let bad_view = framing::encode(
            &Body::ViewRequest(dspk_stream::messages::ViewRequest {
                channels: vec![9],
                start: 0,
                end: 100,
                width: 10,
            })
            .into(),
        )
        .unwrap()
        .to_vec();
        for (bytes, expected_code, expected) in [
            (over, code::PROTOCOL, "over the limit"),
            (malformed, code::PROTOCOL, "malformed"),
            (
                hello,
                code::PROTOCOL,
                "expected a read or view request, got hello",
            ),
            (past_end, code::INVALID_REQUEST, "past the end"),
            (too_large, code::OVER_LIMIT, "over the limit of 16777216"),
            (bad_view, code::INVALID_REQUEST, "channel 9"),
        ] {
            let (mut send, mut recv) = connection.open_bi().await.unwrap();
            send.write_all(&bytes).await.unwrap();
            let _ = send.finish();
            let limits = framing::ReadLimits {
                max_message: 1 << 20,
                idle: Some(Duration::from_secs(5)),
                body: Duration::from_secs(5),
            };
            let answer = framing::read_message(&mut recv, &limits, "answer")
                .await
                .unwrap();
            let Some(Body::Error(error)) = answer.and_then(|m| m.body) else {
                panic!("expected an error answer for `{expected}`");
            };
            assert_eq!(error.code, expected_code, "{}", error.message);
            assert!(
                error.message.contains(expected),
                "`{}` lacks `{expected}`",
                error.message
            );
        }
        // The connection still answers.
        assert!(connection.close_reason().is_none());
    });
    wait_for(|| server.stats().refused_requests >= 6);
    assert!(server.stats().refused_requests >= 6);
    still_serves(addr, &id, &source);
}

#[test]
fn wrong_alpn_is_refused_on_both_sides() {
    let source = small();
    let id = identity();
    let (server, addr) = serve(Arc::new(source.clone()), &id, fast_options());
    let rt = runtime();
    // A client offering another protocol (an older version) is refused in the handshake.
    rt.block_on(async {
        let (_endpoint, result) = raw_connect(addr, raw_client_config(&id, b"dspk-stream/0")).await;
        let error = result.expect_err("a foreign ALPN must not connect");
        let text = error.to_string();
        assert!(
            text.contains("120")
                || text.contains("no_application_protocol")
                || text.to_lowercase().contains("alpn")
                || text.contains("application protocol"),
            "{text}"
        );
    });
    wait_for(|| server.stats().failed_handshakes >= 1);
    assert!(server.stats().failed_handshakes >= 1);
    still_serves(addr, &id, &source);

    // Our client against a server of another protocol says so.
    let (chain, key) = (
        id.certificates().to_vec(),
        PrivateKeyDer::from_pem_slice(id.key_pem().as_bytes()).unwrap(),
    );
    let mut tls = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    tls.alpn_protocols = vec![b"dspk-stream/2".to_vec()];
    let config = quinn::ServerConfig::with_crypto(Arc::new(
        quinn::crypto::rustls::QuicServerConfig::try_from(tls).unwrap(),
    ));
    let foreign = rt.block_on(async {
        quinn::Endpoint::server(config, "127.0.0.1:0".parse().unwrap()).unwrap()
    });
    let foreign_addr = foreign.local_addr().unwrap();
    let accept = {
        let foreign = foreign.clone();
        rt.spawn(async move {
            if let Some(incoming) = foreign.accept().await {
                let _ = incoming.await;
            }
        })
    };
    let err =
        Session::connect(foreign_addr, "localhost", &trusting(&id), session_options()).unwrap_err();
    assert!(matches!(err, Error::Handshake { .. }), "{err}");
    assert!(err.to_string().contains("ALPN"), "{err}");
    drop(accept);
}

/// A raw server that answers hello with `header` and, on subscribe, sends `signal` bytes on a
/// signal stream.
fn fake_server(
    rt: &tokio::runtime::Runtime,
    id: &Identity,
    header: Header,
    signal: Vec<u8>,
) -> (quinn::Endpoint, SocketAddr) {
    let (chain, key) = (
        id.certificates().to_vec(),
        PrivateKeyDer::from_pem_slice(id.key_pem().as_bytes()).unwrap(),
    );
    let mut tls = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let config = quinn::ServerConfig::with_crypto(Arc::new(
        quinn::crypto::rustls::QuicServerConfig::try_from(tls).unwrap(),
    ));
    let endpoint = rt.block_on(async {
        quinn::Endpoint::server(config, "127.0.0.1:0".parse().unwrap()).unwrap()
    });
    let addr = endpoint.local_addr().unwrap();
    let accepting = endpoint.clone();
    rt.spawn(async move {
        while let Some(incoming) = accepting.accept().await {
            let (header, signal) = (header.clone(), signal.clone());
            tokio::spawn(async move {
                let Ok(connection) = incoming.await else {
                    return;
                };
                let Ok((mut send, mut recv)) = connection.accept_bi().await else {
                    return;
                };
                let limits = framing::ReadLimits {
                    max_message: 1 << 16,
                    idle: None,
                    body: Duration::from_secs(5),
                };
                let _ = framing::read_message(&mut recv, &limits, "hello").await;
                let bytes = framing::encode(&Body::Header(header).into()).unwrap();
                let _ = send.write_all(&bytes).await;
                let _ = framing::read_message(&mut recv, &limits, "subscribe").await;
                let Ok(mut uni) = connection.open_uni().await else {
                    return;
                };
                let start = framing::encode(
                    &Body::Start(dspk_stream::messages::Start { from_sample: 0 }).into(),
                )
                .unwrap();
                let _ = uni.write_all(&start).await;
                let _ = uni.write_all(&signal).await;
                let _ = uni.finish();
                connection.closed().await;
            });
        }
    });
    (endpoint, addr)
}

#[test]
fn a_hostile_server_gets_clear_errors_from_the_client() {
    let rt = runtime();
    let id = identity();
    let source = small();
    let good = Header::from_info(source.info(), true, 64).unwrap();
    let frame = |n: u32, bytes: usize| {
        framing::encode(
            &Body::SignalFrame(dspk_stream::messages::SignalFrame {
                sequence: 0,
                first_sample: 0,
                num_samples: n,
                samples: Bytes::from(vec![0u8; bytes]),
            })
            .into(),
        )
        .unwrap()
        .to_vec()
    };
    let mut over = u32::MAX.to_le_bytes().to_vec();
    over.extend_from_slice(&[0; 64]);
    let mut truncated = frame(8, 64);
    truncated.truncate(40);
    let mut zero_channels = good.clone();
    zero_channels.channels.clear();
    let mut zero_rate = good.clone();
    zero_rate.rate_denominator = 0;
    let mut version = good.clone();
    version.protocol_version = 2;
    // (header, signal bytes, what connect or the first frame must say)
    let cases: Vec<(Header, Vec<u8>, &str)> = vec![
        (zero_channels, vec![], "at least one channel"),
        (zero_rate, vec![], "positive numerator and denominator"),
        (version, vec![], "protocol version 2"),
        (good.clone(), over, "over the limit of 33554432"),
        (good.clone(), truncated, "ended after"),
        (
            good.clone(),
            frame(8, 63),
            "4 channels x 8 samples of 2 bytes need 64",
        ),
        (
            good.clone(),
            vec![2, 0, 0, 0, 0x0f, 0xff],
            "malformed message",
        ),
    ];
    for (header, signal, expected) in cases {
        let (_endpoint, addr) = fake_server(&rt, &id, header, signal);
        let result = Session::connect(addr, "localhost", &trusting(&id), session_options())
            .and_then(|session| {
                let mut signal = session.subscribe(0)?;
                signal.next_frame().map(|_| ())
            });
        let err = result.expect_err(expected);
        assert!(
            err.to_string().contains(expected),
            "`{err}` lacks `{expected}`"
        );
    }
}

#[test]
fn untrusted_certificates_are_refused() {
    let source = small();
    let id = identity();
    let (server, addr) = serve(Arc::new(source.clone()), &id, fast_options());
    // A client that trusts another certificate.
    let other = Identity::self_signed(&["localhost"]).unwrap();
    let err =
        Session::connect(addr, "localhost", &trusting(&other), session_options()).unwrap_err();
    assert!(matches!(err, Error::Handshake { .. }), "{err}");
    assert!(err.to_string().contains("certificate"), "{err}");
    // The right certificate under another name.
    let err = Session::connect(addr, "lab.example", &trusting(&id), session_options()).unwrap_err();
    assert!(matches!(err, Error::Handshake { .. }), "{err}");
    wait_for(|| server.stats().failed_handshakes >= 2);
    assert!(
        server.stats().failed_handshakes >= 2,
        "{:?}",
        server.stats()
    );
    still_serves(addr, &id, &source);
}

/// Waits (up to 10 s) until `done` holds: the server counts a peer's failure after the peer
/// has seen it.
fn wait_for(done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn mutual_tls_refuses_clients_without_a_certificate_of_the_authority() {
    let source = small();
    let id = identity();
    let lab = Authority::new("lab").unwrap();
    let stranger = Authority::new("stranger").unwrap();
    let tls = ServerTls {
        identity: id.clone(),
        client_authorities: Some(Trust::with(std::slice::from_ref(lab.certificate())).unwrap()),
    };
    let server = Server::bind(
        "127.0.0.1:0".parse().unwrap(),
        &tls,
        LocalBackend::new(Arc::new(source.clone())),
        fast_options(),
    )
    .unwrap();
    let addr = server.local_addr().unwrap();
    let client = |identity: Option<Identity>| ClientTls {
        trust: Trust::with(id.certificates()).unwrap(),
        identity,
    };
    let err = Session::connect(addr, "localhost", &client(None), session_options()).unwrap_err();
    assert!(matches!(err, Error::Handshake { .. }), "{err}");
    assert!(
        err.to_string().contains("client certificate is required"),
        "{err}"
    );
    let wrong = stranger.issue(&["client"]).unwrap();
    let err =
        Session::connect(addr, "localhost", &client(Some(wrong)), session_options()).unwrap_err();
    assert!(matches!(err, Error::Handshake { .. }), "{err}");
    assert!(err.to_string().contains("certificate"), "{err}");
    let good = lab.issue(&["client"]).unwrap();
    let session =
        Session::connect(addr, "localhost", &client(Some(good)), session_options()).unwrap();
    assert_eq!(session.info(), source.info());
    wait_for(|| server.stats().failed_handshakes >= 2);
    assert!(
        server.stats().failed_handshakes >= 2,
        "{:?}",
        server.stats()
    );
}

/// Resident memory of this process, in bytes (Linux).
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

#[test]
fn a_client_that_never_reads_is_dropped_and_memory_stays_bounded() {
    let source = recording(8, 400_000, 5);
    let id = identity();
    let queue_frames = 4;
    let (server, addr) = serve(
        Arc::new(source.clone()),
        &id,
        ServerOptions {
            stall_timeout: Duration::from_secs(1),
            queue_frames,
            // Endless: the transport's windows fill whatever their size.
            looped: true,
            ..fast_options()
        },
    );
    let rt = runtime();
    rt.block_on(async {
        // Subscribes, never accepts the signal stream.
        let (_endpoint, connection, mut control) = raw_session(addr, &id).await;
        let subscribe =
            framing::encode(&Body::Subscribe(Subscribe { from_sample: 0 }).into()).unwrap();
        control.write_all(&subscribe).await.unwrap();
        // While it stalls, a well-behaved client is served.
        tokio::task::spawn_blocking({
            let (id, source) = (id.clone(), source.clone());
            move || still_serves(addr, &id, &source)
        })
        .await
        .unwrap();
        let (code, reason) = closed(&connection).await;
        assert_eq!(code, u64::from(code::SLOW), "{reason}");
        assert!(reason.contains("read nothing"), "{reason}");
    });
    wait_for(|| server.stats().dropped_slow >= 1);
    let stats = server.stats();
    assert_eq!(stats.dropped_slow, 1, "{stats:?}");
    // Two subscriptions (the stalled client's and the well-behaved one's), each its queue and
    // the frame being written.
    assert!(
        stats.peak_queued_frames <= 2 * (queue_frames + 1),
        "{stats:?}"
    );
    // Our own client that subscribes and never asks for a frame is dropped the same way.
    let session = connect(addr, &id);
    let _signal = session.subscribe(0).unwrap();
    wait_for(|| server.stats().dropped_slow >= 2);
    assert_eq!(server.stats().dropped_slow, 2, "{:?}", server.stats());
    assert!(server.stats().peak_queued_frames <= 2 * (queue_frames + 1));
    still_serves(addr, &id, &source);
}

#[test]
fn sixty_four_clients_at_once_and_a_sixty_fifth_is_busy() {
    let source = recording(16, 20_000, 6);
    let id = identity();
    let queue_frames = 4;
    let (server, addr) = serve(
        Arc::new(source.clone()),
        &id,
        ServerOptions {
            max_connections: 64,
            queue_frames,
            ..fast_options()
        },
    );
    let before = rss();
    let barrier = Arc::new(std::sync::Barrier::new(65));
    let threads: Vec<_> = (0..64)
        .map(|k| {
            let (id, source, barrier) = (id.clone(), source.clone(), barrier.clone());
            std::thread::spawn(move || {
                let session = connect(addr, &id);
                // Everyone connected before anyone receives.
                barrier.wait();
                let from = (k * 307) as u64;
                let mut signal = session.subscribe(from).unwrap();
                let mut at = from;
                let channel = k % 16;
                while let Some(frame) = signal.next_frame().unwrap() {
                    assert_eq!(frame.first_sample, at);
                    let mut expected = vec![0u8; frame.num_samples * 2];
                    source
                        .read_stored(&[channel], at..at + frame.num_samples as u64, &mut expected)
                        .unwrap();
                    assert_eq!(frame.channel(channel).unwrap(), &expected[..]);
                    at += frame.num_samples as u64;
                }
                assert_eq!(at, 20_000);
                session
            })
        })
        .collect();
    barrier.wait();
    // All 64 hold their connection: one more is refused with a reason.
    let started = Instant::now();
    while server.stats().connections < 64 && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let err = Session::connect(addr, "localhost", &trusting(&id), session_options()).unwrap_err();
    assert!(matches!(err, Error::Closed { code: 3, .. }), "{err}");
    assert!(err.to_string().contains("limit of 64 connections"), "{err}");
    let sessions: Vec<Session> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let during = rss();
    let stats = server.stats();
    assert_eq!(stats.refused_busy, 1, "{stats:?}");
    assert!(
        stats.peak_queued_frames <= 64 * (queue_frames + 1),
        "{stats:?}"
    );
    drop(sessions);
    let started = Instant::now();
    while server.stats().connections > 0 && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(server.stats().connections, 0);
    assert_eq!(server.stats().queued_frames, 0);
    // The process (server and all 64 clients) grew by less than 64 windows of the transport.
    let growth = during.saturating_sub(before);
    eprintln!(
        "64 clients: RSS {} MiB before, {} MiB with 64 sessions, peak queued frames {}",
        before >> 20,
        during >> 20,
        stats.peak_queued_frames
    );
    assert!(growth < 512 << 20, "RSS grew by {} MiB", growth >> 20);
    still_serves(addr, &id, &source);
}

#[test]
fn disconnects_mid_frame_leave_the_server_serving() {
    let source = recording(8, 200_000, 7);
    let id = identity();
    let (server, addr) = serve(Arc::new(source.clone()), &id, fast_options());
    let rt = runtime();
    rt.block_on(async {
        // Half a hello, then the connection goes.
        let (_endpoint, connection) = raw_connect(addr, raw_client_config(&id, ALPN)).await;
        let connection = connection.unwrap();
        let (mut send, _recv) = connection.open_bi().await.unwrap();
        send.write_all(&[20, 0, 0, 0, 0x0a]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        connection.close(0u32.into(), b"gone");
        // Half a request, then the connection goes.
        let (_endpoint, connection, _control) = raw_session(addr, &id).await;
        let (mut send, _recv) = connection.open_bi().await.unwrap();
        send.write_all(&[200, 0, 0, 0, 0x32, 5]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        connection.close(0u32.into(), b"gone");
    });
    // A client that leaves in the middle of the signal stream.
    for _ in 0..3 {
        let session = connect(addr, &id);
        let mut signal = session.subscribe(0).unwrap();
        signal.next_frame().unwrap().unwrap();
        drop(signal);
        drop(session);
    }
    let started = Instant::now();
    while (server.stats().connections > 0 || server.stats().subscriptions > 0)
        && started.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let stats = server.stats();
    assert_eq!(
        (stats.connections, stats.subscriptions, stats.queued_frames),
        (0, 0, 0),
        "{stats:?}"
    );
    still_serves(addr, &id, &source);
}

#[test]
fn the_server_shutting_down_is_a_clear_error() {
    let source = small();
    let id = identity();
    let (server, addr) = serve(Arc::new(source), &id, fast_options());
    let session = connect(addr, &id);
    server.shutdown();
    let mut out = vec![0u8; 2 * 10];
    let err = session.read_stored(&[0], 0..10, &mut out).unwrap_err();
    assert!(err.to_string().contains("shutting down"), "{err}");
}
