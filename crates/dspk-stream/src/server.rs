//! The server: one recording (or a live feed) served to many clients over QUIC, each client's
//! signal paced and queued within fixed bounds, reads and views answered on their own streams.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use dspk_core::{RecordingInfo, RecordingSource};
use dspk_view::{LocalBackend, SignalBackend};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::time::Instant;

use crate::framing::{self, BufferPool, ReadLimits};
use crate::live::LiveFeed;
use crate::messages::{
    Body, End, ErrorMessage, Header, Message, ReadAnswer, SignalFrame, Start, ViewAnswer,
};
use crate::transport::{self, Identity, Trust};
use crate::{Error, PROTOCOL_VERSION, Result, TransportOptions, code};

/// Free frame buffers the server keeps for the next frames.
const FREE_FRAME_BUFFERS: usize = 8;

/// How fast a recording's signal is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pacing {
    /// At the recording's sample rate, as an acquisition would deliver it. A client that reads
    /// slower than that misses frames: while its queue is full, frames are skipped (the
    /// sequence numbers of the frames it gets show the gap).
    RealTime,
    /// As fast as the client reads: the client's reading paces the server, nothing is skipped.
    AsFastAsPossible,
}

/// What a server does and how much it may hold. The defaults suit a lab server with a few
/// clients on a local network.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// How a recording's signal is paced (default [`Pacing::RealTime`]; a live feed is paced
    /// by its acquisition).
    pub pacing: Pacing,
    /// Start again at sample 0 after the last one (default `false`: the signal stream ends
    /// with an [`End`] message).
    pub looped: bool,
    /// Connections served at once; more are closed with [`code::BUSY`] (default 64).
    pub max_connections: usize,
    /// Frames queued per client between the reader and the network (default 4): with the
    /// transport's send window, all a client can make the server hold.
    pub queue_frames: usize,
    /// Target bytes per signal frame (default 1 MiB): `frame_bytes / (channels * word)` samples,
    /// at least one.
    pub frame_bytes: usize,
    /// A client whose signal stream takes nothing for this long is dropped with
    /// [`code::SLOW`]; a request answer that cannot be sent in this time is abandoned
    /// (default 10 s).
    pub stall_timeout: Duration,
    /// Time for a new connection's TLS handshake and hello (default 5 s).
    pub handshake_timeout: Duration,
    /// Time for the rest of a message once its first byte arrived (default 5 s).
    pub body_timeout: Duration,
    /// The largest message a client may send, in bytes (default 64 KiB: requests are small).
    pub max_request: usize,
    /// The largest answer to one read or view request, in bytes (default 16 MiB; larger
    /// requests are refused with [`code::OVER_LIMIT`]).
    pub max_answer: usize,
    /// Bytes all request answers being built at once may hold; requests wait for room
    /// (default 256 MiB).
    pub answer_memory: usize,
    /// Threads of the server's runtime (default 2).
    pub threads: usize,
    /// Transport sizes and timeouts.
    pub transport: TransportOptions,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            pacing: Pacing::RealTime,
            looped: false,
            max_connections: 64,
            queue_frames: 4,
            frame_bytes: 1 << 20,
            stall_timeout: Duration::from_secs(10),
            handshake_timeout: Duration::from_secs(5),
            body_timeout: Duration::from_secs(5),
            max_request: 64 << 10,
            max_answer: 16 << 20,
            answer_memory: 256 << 20,
            threads: 2,
            transport: TransportOptions::default(),
        }
    }
}

/// The server's side of TLS: its identity, and the authorities whose client certificates it
/// requires (mutual TLS), if any.
#[derive(Clone, Debug)]
pub struct ServerTls {
    /// The server's certificate chain and key.
    pub identity: Identity,
    /// `Some`: clients must present a certificate issued by one of these; others are refused
    /// during the handshake.
    pub client_authorities: Option<Trust>,
}

/// What a server is doing and has done: connections, queues, frames, refusals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Connections open now.
    pub connections: usize,
    /// Connections that completed their handshake and hello.
    pub accepted: u64,
    /// Connections closed at once because the server was at its limit.
    pub refused_busy: u64,
    /// Connections whose TLS handshake failed (untrusted, missing certificate, wrong ALPN).
    pub failed_handshakes: u64,
    /// Connections or requests closed for breaking the protocol (malformed or oversized
    /// messages, wrong version, timeouts).
    pub protocol_errors: u64,
    /// Clients dropped for reading too slowly.
    pub dropped_slow: u64,
    /// Signal subscriptions running now.
    pub subscriptions: usize,
    /// Frames waiting in all per-client queues, or being written, now (at most
    /// `queue_frames + 1` per subscription).
    pub queued_frames: usize,
    /// The most frames that ever waited in all per-client queues, or were being written, at
    /// once.
    pub peak_queued_frames: usize,
    /// Signal frames sent.
    pub frames_sent: u64,
    /// Signal frames skipped for slow clients.
    pub frames_skipped: u64,
    /// Read and view requests answered.
    pub answered: u64,
    /// Read and view requests refused.
    pub refused_requests: u64,
}

#[derive(Default)]
struct Counters {
    connections: AtomicUsize,
    accepted: AtomicU64,
    refused_busy: AtomicU64,
    failed_handshakes: AtomicU64,
    protocol_errors: AtomicU64,
    dropped_slow: AtomicU64,
    subscriptions: AtomicUsize,
    queued_frames: AtomicUsize,
    peak_queued_frames: AtomicUsize,
    frames_sent: AtomicU64,
    frames_skipped: AtomicU64,
    answered: AtomicU64,
    refused_requests: AtomicU64,
}

/// Adds one to a counter.
fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// A connection's place under the limit, given back when dropped.
struct Slot(Arc<Shared>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.counters.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A subscription counted while it runs.
struct Running(Arc<Shared>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0
            .counters
            .subscriptions
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// A framed signal message waiting in a client's queue (counted while it waits).
struct Queued {
    parts: [Bytes; 2],
    shared: Arc<Shared>,
}

impl Queued {
    fn new(parts: [Bytes; 2], shared: &Arc<Shared>) -> Self {
        let now = shared
            .counters
            .queued_frames
            .fetch_add(1, Ordering::Relaxed)
            + 1;
        shared
            .counters
            .peak_queued_frames
            .fetch_max(now, Ordering::Relaxed);
        Self {
            parts,
            shared: shared.clone(),
        }
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.shared
            .counters
            .queued_frames
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// What is served.
enum Served {
    Recording { backend: LocalBackend, stored: bool },
    Live(LiveFeed),
}

struct Shared {
    served: Served,
    info: RecordingInfo,
    header: Header,
    word: usize,
    options: ServerOptions,
    counters: Counters,
    /// Answer memory, in KiB.
    answer_memory: Semaphore,
    /// Its size, in KiB.
    answer_kib: usize,
    /// Buffers of signal frames, used again once the transport is done with them.
    frames: Arc<BufferPool>,
}

/// A running server: its own runtime and endpoint; dropping it (or [`shutdown`](Self::shutdown))
/// closes every connection with [`code::SHUTDOWN`].
pub struct Server {
    runtime: Option<tokio::runtime::Runtime>,
    endpoint: quinn::Endpoint,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.endpoint.local_addr().ok())
            .field("stats", &self.stats())
            .finish()
    }
}

impl Server {
    /// Serves a recording (through `backend`, which answers views from its pyramid when it
    /// has one) at `addr` (port 0: any free port, see [`local_addr`](Self::local_addr)).
    ///
    /// Frames and read answers carry the stored words when the source can return them
    /// ([`RecordingSource::can_read_stored`]); otherwise the scaled `f32` values, and the
    /// header says so.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for options that make no sense (no connection, an empty queue, a
    /// frame over the client's default limit), [`Error::Tls`] for an identity that cannot be
    /// used, [`Error::System`] when the socket or runtime cannot be set up.
    pub fn bind(
        addr: SocketAddr,
        tls: &ServerTls,
        backend: LocalBackend,
        options: ServerOptions,
    ) -> Result<Self> {
        let stored = backend.source().can_read_stored();
        let info = backend.info().clone();
        Self::start(
            addr,
            tls,
            Served::Recording { backend, stored },
            info,
            stored,
            options,
        )
    }

    /// Serves a live feed at `addr`: every client gets the frames pushed after it subscribed
    /// (from its subscribe's sample on), skipping those it was too slow for. Reads and views
    /// are refused with [`code::UNSUPPORTED`].
    ///
    /// # Errors
    ///
    /// As [`bind`](Self::bind).
    pub fn bind_live(
        addr: SocketAddr,
        tls: &ServerTls,
        feed: LiveFeed,
        options: ServerOptions,
    ) -> Result<Self> {
        let info = feed.info().clone();
        Self::start(addr, tls, Served::Live(feed), info, true, options)
    }

    fn start(
        addr: SocketAddr,
        tls: &ServerTls,
        served: Served,
        info: RecordingInfo,
        stored: bool,
        options: ServerOptions,
    ) -> Result<Self> {
        check_options(&options)?;
        let word = if stored { info.stored_format.size() } else { 4 };
        let frame_samples = match &served {
            Served::Live(feed) => feed.frame_samples(),
            Served::Recording { .. } => {
                let per_sample = info.num_channels().saturating_mul(word).max(1);
                u32::try_from((options.frame_bytes / per_sample).max(1)).unwrap_or(u32::MAX)
            }
        };
        let header = Header::from_info(&info, stored, frame_samples)?;
        let crypto = transport::server_crypto(&tls.identity, tls.client_authorities.as_ref())?;
        let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        // The control stream and a few requests at once per client; no client-opened
        // unidirectional streams.
        config.transport_config(Arc::new(options.transport.config(
            8,
            0,
            addr.ip().is_loopback(),
        )?));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(options.threads)
            .thread_name("dspk-stream-server")
            .enable_all()
            .build()
            .map_err(|e| Error::System {
                what: "server runtime",
                reason: e.to_string(),
            })?;
        let socket = options.transport.socket(addr, "server socket")?;
        let endpoint = {
            let _guard = runtime.enter();
            quinn::Endpoint::new(
                options.transport.endpoint()?,
                Some(config),
                socket,
                Arc::new(quinn::TokioRuntime),
            )
            .map_err(|e| Error::System {
                what: "server endpoint",
                reason: e.to_string(),
            })?
        };
        let answer_kib = (options.answer_memory / 1024).min(Semaphore::MAX_PERMITS);
        let shared = Arc::new(Shared {
            served,
            info,
            header,
            word,
            options,
            counters: Counters::default(),
            answer_memory: Semaphore::new(answer_kib),
            answer_kib,
            frames: BufferPool::new(FREE_FRAME_BUFFERS),
        });
        runtime.spawn(accept_loop(endpoint.clone(), shared.clone()));
        Ok(Self {
            runtime: Some(runtime),
            endpoint,
            shared,
        })
    }

    /// The address the server listens on.
    ///
    /// # Errors
    ///
    /// [`Error::System`] when the socket cannot say.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.endpoint.local_addr().map_err(|e| Error::System {
            what: "server address",
            reason: e.to_string(),
        })
    }

    /// What the server is doing and has done.
    #[must_use]
    pub fn stats(&self) -> ServerStats {
        let c = &self.shared.counters;
        ServerStats {
            connections: c.connections.load(Ordering::Relaxed),
            accepted: c.accepted.load(Ordering::Relaxed),
            refused_busy: c.refused_busy.load(Ordering::Relaxed),
            failed_handshakes: c.failed_handshakes.load(Ordering::Relaxed),
            protocol_errors: c.protocol_errors.load(Ordering::Relaxed),
            dropped_slow: c.dropped_slow.load(Ordering::Relaxed),
            subscriptions: c.subscriptions.load(Ordering::Relaxed),
            queued_frames: c.queued_frames.load(Ordering::Relaxed),
            peak_queued_frames: c.peak_queued_frames.load(Ordering::Relaxed),
            frames_sent: c.frames_sent.load(Ordering::Relaxed),
            frames_skipped: c.frames_skipped.load(Ordering::Relaxed),
            answered: c.answered.load(Ordering::Relaxed),
            refused_requests: c.refused_requests.load(Ordering::Relaxed),
        }
    }

    /// The header clients receive.
    #[must_use]
    pub fn header(&self) -> &Header {
        &self.shared.header
    }

    /// Closes every connection with [`code::SHUTDOWN`] and stops, waiting up to a second for
    /// the closes to be sent.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.endpoint
            .close(code::SHUTDOWN.into(), b"the server is shutting down");
        if let Some(runtime) = self.runtime.take() {
            let endpoint = self.endpoint.clone();
            runtime.block_on(async {
                let _ = tokio::time::timeout(Duration::from_secs(1), endpoint.wait_idle()).await;
            });
            runtime.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Refuses options that make no sense.
fn check_options(options: &ServerOptions) -> Result<()> {
    let checks = [
        ("server: max connections", options.max_connections == 0, "0"),
        ("server: queue frames", options.queue_frames == 0, "0"),
        ("server: threads", options.threads == 0, "0"),
        ("server: frame bytes", options.frame_bytes == 0, "0"),
        (
            "server: max answer",
            options.max_answer > options.answer_memory,
            "larger than the answer memory",
        ),
    ];
    for (what, bad, reason) in checks {
        if bad {
            return Err(Error::invalid(what, reason));
        }
    }
    Ok(())
}

async fn accept_loop(endpoint: quinn::Endpoint, shared: Arc<Shared>) {
    while let Some(incoming) = endpoint.accept().await {
        tokio::spawn(handle_incoming(incoming, shared.clone()));
    }
}

/// Takes a place under the connection limit, if one is free.
fn take_slot(shared: &Arc<Shared>) -> Option<Slot> {
    let max = shared.options.max_connections;
    shared
        .counters
        .connections
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            (n < max).then_some(n + 1)
        })
        .ok()
        .map(|_| Slot(shared.clone()))
}

async fn handle_incoming(incoming: quinn::Incoming, shared: Arc<Shared>) {
    let slot = take_slot(&shared);
    let timeout = shared.options.handshake_timeout;
    let connecting = match incoming.accept() {
        Ok(connecting) => connecting,
        Err(_) => {
            bump(&shared.counters.failed_handshakes);
            return;
        }
    };
    let connection = match tokio::time::timeout(timeout, connecting).await {
        Ok(Ok(connection)) => connection,
        _ => {
            bump(&shared.counters.failed_handshakes);
            return;
        }
    };
    let Some(_slot) = slot else {
        bump(&shared.counters.refused_busy);
        let reason = format!(
            "the server is at its limit of {} connections",
            shared.options.max_connections
        );
        connection.close(code::BUSY.into(), reason.as_bytes());
        return;
    };
    if let Err(e) = transport::check_alpn(&connection) {
        bump(&shared.counters.failed_handshakes);
        close(&connection, code::PROTOCOL, &e);
        return;
    }
    if let Err(e) = serve_connection(&connection, &shared).await {
        let code = match e {
            Error::Version { .. } => code::VERSION,
            Error::Closed { .. } | Error::Connection { .. } => return,
            _ => code::PROTOCOL,
        };
        bump(&shared.counters.protocol_errors);
        close(&connection, code, &e);
    }
}

/// Closes a connection with a code and the error as reason (cut to fit a packet).
fn close(connection: &quinn::Connection, code: u32, error: &Error) {
    let mut reason = error.to_string();
    if reason.len() > 512 {
        let mut cut = 512;
        while !reason.is_char_boundary(cut) {
            cut -= 1;
        }
        reason.truncate(cut);
    }
    connection.close(code.into(), reason.as_bytes());
}

/// The hello, the header, then the control stream and the request streams until the client
/// leaves or breaks the protocol.
async fn serve_connection(connection: &quinn::Connection, shared: &Arc<Shared>) -> Result<()> {
    let peer = connection.remote_address().to_string();
    let options = &shared.options;
    let (mut send, mut recv) =
        tokio::time::timeout(options.handshake_timeout, connection.accept_bi())
            .await
            .map_err(|_| Error::Timeout {
                what: "hello",
                after: options.handshake_timeout,
            })?
            .map_err(|e| transport::connection_error(&peer, "client", &e))?;
    let limits = ReadLimits {
        max_message: options.max_request,
        idle: Some(options.handshake_timeout),
        body: options.body_timeout,
    };
    let hello = framing::read_message(&mut recv, &limits, "hello").await?;
    match hello.and_then(|m| m.body) {
        Some(Body::Hello(hello)) if hello.protocol_version == PROTOCOL_VERSION => {}
        Some(Body::Hello(hello)) => {
            return Err(Error::Version {
                ours: PROTOCOL_VERSION,
                theirs: hello.protocol_version,
            });
        }
        Some(other) => {
            return Err(Error::Protocol(format!(
                "expected hello on the control stream, got {}",
                other.kind()
            )));
        }
        None => {
            return Err(Error::Protocol(
                "the control stream ended before hello".into(),
            ));
        }
    }
    let header = framing::encode(&Body::Header(shared.header.clone()).into())?;
    write(&mut send, &mut [header], options.stall_timeout, "header").await?;
    bump(&shared.counters.accepted);
    let control = control_loop(connection, recv, shared);
    let requests = request_loop(connection, shared);
    tokio::select! {
        result = control => result,
        result = requests => result,
    }
}

/// Writes parts to a stream within `timeout`.
async fn write(
    send: &mut quinn::SendStream,
    parts: &mut [Bytes],
    timeout: Duration,
    what: &'static str,
) -> Result<()> {
    match tokio::time::timeout(timeout, send.write_all_chunks(parts)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(Error::Connection {
            peer: what.into(),
            reason: e.to_string(),
        }),
        Err(_) => Err(Error::Timeout {
            what,
            after: timeout,
        }),
    }
}

/// Subscriptions until the client ends its control stream (a clean close) or breaks the
/// protocol.
async fn control_loop(
    connection: &quinn::Connection,
    mut recv: quinn::RecvStream,
    shared: &Arc<Shared>,
) -> Result<()> {
    let limits = ReadLimits {
        max_message: shared.options.max_request,
        idle: None,
        body: shared.options.body_timeout,
    };
    let mut current: Option<watch::Sender<bool>> = None;
    loop {
        let message = framing::read_message(&mut recv, &limits, "control stream").await?;
        match message.and_then(|m| m.body) {
            None => {
                connection.close(code::DONE.into(), b"the client closed its control stream");
                return Ok(());
            }
            Some(Body::Subscribe(subscribe)) => {
                if let Some(cancel) = current.take() {
                    let _ = cancel.send(true);
                }
                let (cancel, cancelled) = watch::channel(false);
                current = Some(cancel);
                tokio::spawn(subscription(
                    connection.clone(),
                    subscribe.from_sample,
                    shared.clone(),
                    cancelled,
                ));
            }
            Some(other) => {
                return Err(Error::Protocol(format!(
                    "expected subscribe on the control stream, got {}",
                    other.kind()
                )));
            }
        }
    }
}

/// One signal stream: frames from `from` until the end, a cancel (a new subscribe), or the
/// client going away or stalling.
async fn subscription(
    connection: quinn::Connection,
    from: u64,
    shared: Arc<Shared>,
    mut cancelled: watch::Receiver<bool>,
) {
    shared
        .counters
        .subscriptions
        .fetch_add(1, Ordering::Relaxed);
    let _running = Running(shared.clone());
    let Ok(mut send) = connection.open_uni().await else {
        return;
    };
    // At once, so the client sees the stream before the first frame (a live feed may have
    // none for a while).
    let Ok(start) = framing::encode(&Body::Start(Start { from_sample: from }).into()) else {
        return;
    };
    if send.write_all(&start).await.is_err() {
        return;
    }
    let (tx, mut rx) = mpsc::channel::<Queued>(shared.options.queue_frames);
    let producer = async {
        match &shared.served {
            Served::Recording { .. } => produce_recording(&shared, from, tx).await,
            Served::Live(feed) => produce_live(&shared, feed, from, tx).await,
        }
    };
    let stall = shared.options.stall_timeout;
    let writer = async {
        while let Some(mut queued) = rx.recv().await {
            match tokio::time::timeout(stall, send.write_all_chunks(&mut queued.parts)).await {
                Ok(Ok(())) => bump(&shared.counters.frames_sent),
                Ok(Err(_)) => return,
                Err(_) => {
                    bump(&shared.counters.dropped_slow);
                    let reason = format!(
                        "the client read nothing of its signal stream for {stall:?}: dropped"
                    );
                    connection.close(code::SLOW.into(), reason.as_bytes());
                    return;
                }
            }
        }
        let _ = send.finish();
    };
    let run = async { tokio::join!(producer, writer) };
    tokio::select! {
        _ = run => {}
        _ = cancelled.changed() => {}
    }
}

/// A framed signal frame, its samples not copied.
fn frame_parts(
    sequence: u64,
    first_sample: u64,
    num_samples: u32,
    samples: Bytes,
) -> Result<[Bytes; 2]> {
    let head = SignalFrame {
        sequence,
        first_sample,
        num_samples,
        samples: Bytes::new(),
    };
    framing::encode_with_payload(4, &head, 4, samples)
}

/// Reads a recording's frames from `from` into the client's queue, paced, looped or ended
/// with [`End`].
async fn produce_recording(shared: &Arc<Shared>, from: u64, tx: mpsc::Sender<Queued>) {
    let Served::Recording { backend, stored } = &shared.served else {
        return;
    };
    let total = shared.info.num_samples;
    let frame = u64::from(shared.header.frame_samples);
    let channels = shared.info.all_channels();
    let rate = shared.info.sample_rate;
    let started = Instant::now();
    let mut sent_samples: u64 = 0;
    let mut at = if shared.options.looped && total > 0 {
        from % total
    } else {
        from
    };
    let mut sequence = 0u64;
    loop {
        if at >= total {
            if shared.options.looped && total > 0 {
                at = 0;
            } else {
                if let Ok(end) = framing::encode(&Body::End(End { next_sample: at }).into()) {
                    let _ = tx.send(Queued::new([end, Bytes::new()], shared)).await;
                }
                return;
            }
        }
        let end = (at + frame).min(total);
        let source = backend.source().clone();
        let (channels_for_read, stored, word) = (channels.clone(), *stored, shared.word);
        let pool = shared.frames.clone();
        let read = tokio::task::spawn_blocking(move || {
            read_words(
                source.as_ref(),
                &channels_for_read,
                at..end,
                stored,
                word,
                Some(&pool),
            )
        })
        .await;
        let Ok(Ok(samples)) = read else {
            return;
        };
        let Ok(parts) = frame_parts(sequence, at, (end - at) as u32, samples) else {
            return;
        };
        sent_samples += end - at;
        match shared.options.pacing {
            Pacing::RealTime => {
                // The frame is due when its last sample would have been acquired.
                let nanos =
                    u128::from(sent_samples) * u128::from(rate.denominator()) * 1_000_000_000
                        / u128::from(rate.numerator());
                let due = started + Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
                tokio::time::sleep_until(due).await;
                if !try_enqueue(&tx, parts, shared) {
                    return;
                }
            }
            Pacing::AsFastAsPossible => {
                // A place first, then the frame: a frame is counted only once it is queued.
                let Ok(place) = tx.reserve().await else {
                    return;
                };
                place.send(Queued::new(parts, shared));
            }
        }
        sequence += 1;
        at = end;
    }
}

/// Forwards a live feed's frames from `from` into the client's queue; frames the client fell
/// too far behind for (more than the feed holds) are skipped, their sequence numbers left
/// out.
async fn produce_live(shared: &Arc<Shared>, feed: &LiveFeed, from: u64, tx: mpsc::Sender<Queued>) {
    let mut frames = feed.subscribe();
    loop {
        let frame = match frames.recv().await {
            Ok(frame) => frame,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(skipped)) => {
                shared
                    .counters
                    .frames_skipped
                    .fetch_add(skipped, Ordering::Relaxed);
                continue;
            }
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        };
        if frame.first_sample + u64::from(frame.num_samples) <= from {
            continue;
        }
        let Ok(parts) = frame_parts(
            frame.sequence,
            frame.first_sample,
            frame.num_samples,
            frame.samples.clone(),
        ) else {
            return;
        };
        // Waiting here lets the feed's held frames absorb a burst; a client further behind
        // than those lags, and skips.
        let Ok(place) = tx.reserve().await else {
            return;
        };
        place.send(Queued::new(parts, shared));
    }
}

/// Queues a frame if the client's queue has room, else skips it (counted); `false` when the
/// client is gone.
fn try_enqueue(tx: &mpsc::Sender<Queued>, parts: [Bytes; 2], shared: &Arc<Shared>) -> bool {
    match tx.try_reserve() {
        Ok(place) => {
            place.send(Queued::new(parts, shared));
            true
        }
        Err(mpsc::error::TrySendError::Full(())) => {
            bump(&shared.counters.frames_skipped);
            true
        }
        Err(mpsc::error::TrySendError::Closed(())) => false,
    }
}

/// The words of `channels` over `samples`: stored, or scaled `f32` little-endian, in a buffer
/// of `pool` (signal frames, all of one size) or a new one.
fn read_words(
    source: &dyn RecordingSource,
    channels: &[usize],
    samples: std::ops::Range<u64>,
    stored: bool,
    word: usize,
    pool: Option<&Arc<BufferPool>>,
) -> Result<Bytes> {
    let values = channels.len() * (samples.end - samples.start) as usize;
    let mut out = match pool {
        Some(pool) => pool.take_filled(values * word),
        None => vec![0; values * word],
    };
    if stored {
        source.read_stored(channels, samples, &mut out)?;
    } else {
        let mut scaled = vec![0f32; values];
        source.read(channels, samples, &mut scaled)?;
        for (bytes, value) in out.chunks_exact_mut(4).zip(&scaled) {
            bytes.copy_from_slice(&value.to_le_bytes());
        }
    }
    Ok(match pool {
        Some(pool) => pool.share(out),
        None => Bytes::from(out),
    })
}

/// Request streams until the connection ends.
async fn request_loop(connection: &quinn::Connection, shared: &Arc<Shared>) -> Result<()> {
    let peer = connection.remote_address().to_string();
    loop {
        let (send, recv) = connection
            .accept_bi()
            .await
            .map_err(|e| transport::connection_error(&peer, "client", &e))?;
        tokio::spawn(answer_request(send, recv, shared.clone()));
    }
}

/// A refusal of a request, with its code.
struct Refusal(u32, String);

impl From<Error> for Refusal {
    fn from(error: Error) -> Self {
        let code = match &error {
            Error::OverLimit { .. } => code::OVER_LIMIT,
            Error::Recording(
                dspk_core::Error::ChannelOutOfRange { .. }
                | dspk_core::Error::ReversedSampleRange { .. }
                | dspk_core::Error::SamplesPastEnd { .. }
                | dspk_core::Error::TooLarge { .. },
            ) => code::INVALID_REQUEST,
            Error::Recording(_) => code::RECORDING,
            Error::View(view) => match view.as_ref() {
                dspk_view::Error::InvalidRequest { .. } => code::INVALID_REQUEST,
                dspk_view::Error::OverLimit { .. } => code::OVER_LIMIT,
                _ => code::RECORDING,
            },
            _ => code::PROTOCOL,
        };
        Self(code, error.to_string())
    }
}

/// Reads one request, answers it (or refuses it with an error message), finishes the stream.
async fn answer_request(
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    shared: Arc<Shared>,
) {
    let options = &shared.options;
    let limits = ReadLimits {
        max_message: options.max_request,
        idle: Some(options.body_timeout),
        body: options.body_timeout,
    };
    let answer = match framing::read_message(&mut recv, &limits, "request").await {
        Ok(Some(message)) => answer(message, &shared).await,
        Ok(None) => return,
        Err(e) => {
            bump(&shared.counters.protocol_errors);
            let _ = recv.stop(code::PROTOCOL.into());
            Err(Refusal(code::PROTOCOL, e.to_string()))
        }
    };
    let mut parts = match answer {
        Ok(parts) => {
            bump(&shared.counters.answered);
            parts
        }
        Err(Refusal(code, message)) => {
            bump(&shared.counters.refused_requests);
            let error = Body::Error(ErrorMessage { code, message });
            match framing::encode(&error.into()) {
                Ok(bytes) => [bytes, Bytes::new()],
                Err(_) => return,
            }
        }
    };
    if write(&mut send, &mut parts, options.stall_timeout, "answer")
        .await
        .is_ok()
    {
        let _ = send.finish();
    }
}

/// The framed answer to a read or view request.
async fn answer(message: Message, shared: &Arc<Shared>) -> Result<[Bytes; 2], Refusal> {
    let Served::Recording { backend, stored } = &shared.served else {
        return Err(Refusal(
            code::UNSUPPORTED,
            "a live source answers no reads or views".into(),
        ));
    };
    let max_answer = shared.options.max_answer;
    match message.body {
        Some(Body::ReadRequest(request)) => {
            let channels: Vec<usize> = request.channels.iter().map(|&c| c as usize).collect();
            let range = request.start..request.end;
            let checked = dspk_core::ReadRequest::new(&shared.info, &channels, range.clone())
                .map_err(Error::from)?;
            let bytes = checked.num_values() as u64 * shared.word as u64;
            if bytes > max_answer as u64 {
                return Err(Error::OverLimit {
                    what: "read answer (bytes)",
                    requested: bytes,
                    limit: max_answer as u64,
                }
                .into());
            }
            let _permit = reserve(shared, bytes).await?;
            let source = backend.source().clone();
            let (stored, word) = (*stored, shared.word);
            let samples = tokio::task::spawn_blocking(move || {
                read_words(source.as_ref(), &channels, range, stored, word, None)
            })
            .await
            .map_err(|e| Refusal(code::RECORDING, e.to_string()))??;
            Ok(framing::encode_with_payload(
                7,
                &ReadAnswer {
                    samples: Bytes::new(),
                },
                1,
                samples,
            )?)
        }
        Some(Body::ViewRequest(request)) => {
            let request = request.to_request();
            request.check(&shared.info).map_err(Error::from)?;
            // Upper bound of the answer: min, max (4 bytes each) and a NaN count (at most 5)
            // per channel and column; the raw fold reads blocks of RAW_BLOCK_VALUES.
            let bytes = (request.channels.len() as u64)
                .saturating_mul(request.width as u64)
                .saturating_mul(13);
            if bytes > max_answer as u64 {
                return Err(Error::OverLimit {
                    what: "view answer (bytes, at most)",
                    requested: bytes,
                    limit: max_answer as u64,
                }
                .into());
            }
            let _permit = reserve(shared, bytes + 4 * dspk_view::RAW_BLOCK_VALUES as u64).await?;
            let backend = backend.clone();
            let view = tokio::task::spawn_blocking(move || backend.view(&request))
                .await
                .map_err(|e| Refusal(code::RECORDING, e.to_string()))?
                .map_err(Error::from)?;
            let answer = ViewAnswer::from_view(&view)?;
            Ok([
                framing::encode(&Body::ViewAnswer(answer).into())?,
                Bytes::new(),
            ])
        }
        Some(other) => Err(Refusal(
            code::PROTOCOL,
            format!("expected a read or view request, got {}", other.kind()),
        )),
        None => Err(Refusal(code::PROTOCOL, "a message without a kind".into())),
    }
}

/// Waits for room for `bytes` of answer in the server's answer memory.
async fn reserve(shared: &Shared, bytes: u64) -> Result<tokio::sync::SemaphorePermit<'_>, Refusal> {
    // A request larger than the whole memory waits for all of it (never forever).
    let kib = u32::try_from(bytes.div_ceil(1024).min(shared.answer_kib as u64)).unwrap_or(u32::MAX);
    shared
        .answer_memory
        .acquire_many(kib)
        .await
        .map_err(|e| Refusal(code::RECORDING, e.to_string()))
}
