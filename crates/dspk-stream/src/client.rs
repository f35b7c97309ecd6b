//! The client: a session with a server that receives the signal stream, and reads and views
//! the remote recording as a [`RecordingSource`] and a [`SignalBackend`], so a remote recording
//! is viewed and processed like a local one.
//!
//! The API blocks; the connections run on a small runtime shared by every session of the
//! process (two threads, started on first use), and each call waits on its own thread, so it
//! may be made from any thread (from async code, prefer `spawn_blocking`: the call blocks).

use std::net::SocketAddr;
use std::ops::Range;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use dspk_core::{ReadRequest, RecordingInfo, RecordingSource, SampleFormat};
use dspk_view::{SignalBackend, View};
use tokio::sync::mpsc;

use crate::framing::{self, ReadLimits};
use crate::messages::{self, Body, Header, Hello, Message, Subscribe};
use crate::transport::{self, Identity, Trust};
use crate::{ALPN, Error, PROTOCOL_VERSION, Result, TransportOptions, code};

/// The client's side of TLS: what it trusts, and its own identity when the server requires
/// one (mutual TLS).
#[derive(Clone, Debug)]
pub struct ClientTls {
    /// The server certificates or authorities trusted (never "anything").
    pub trust: Trust,
    /// The client's certificate and key, for servers that require one.
    pub identity: Option<Identity>,
}

/// A session's limits and sizes.
#[derive(Clone, Debug)]
pub struct SessionOptions {
    /// The largest message accepted from the server, in bytes (default 32 MiB: a server's
    /// default frame is 1 MiB and its largest answer 16 MiB).
    pub max_message: usize,
    /// Time for the connection and header, for each request's answer, and for the next
    /// signal frame (default 10 s).
    pub timeout: Duration,
    /// Bytes asked for per read request when a read is cut into several (default 4 MiB; at
    /// most the server's largest answer).
    pub read_chunk_bytes: usize,
    /// Read requests in flight at once for one read (default 4).
    pub read_parallel: usize,
    /// Signal frames received ahead of the caller (default 4): when full, the server's
    /// sending is held back by the transport.
    pub frame_queue: usize,
    /// Transport sizes and timeouts.
    pub transport: TransportOptions,
}

impl Default for SessionOptions {
    fn default() -> Self {
        Self {
            max_message: 32 << 20,
            timeout: Duration::from_secs(10),
            read_chunk_bytes: 4 << 20,
            read_parallel: 4,
            frame_queue: 4,
            transport: TransportOptions::default(),
        }
    }
}

/// What the words of frames and read answers are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Words {
    /// The recording's stored words (scale them with each channel's gain and offset).
    Stored(SampleFormat),
    /// Scaled `f32` values (the server's source has no stored access).
    Scaled,
}

impl Words {
    /// Bytes per word.
    #[must_use]
    pub fn size(self) -> usize {
        match self {
            Self::Stored(format) => format.size(),
            Self::Scaled => 4,
        }
    }
}

/// A signal frame as received: `num_samples` samples of every channel, channel-major words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Counts the frames of the subscription from 0 (a gap: frames skipped for this client).
    pub sequence: u64,
    /// The recording's index of the first sample.
    pub first_sample: u64,
    /// Samples per channel.
    pub num_samples: usize,
    /// What the words are.
    pub words: Words,
    channels: usize,
    data: Bytes,
}

impl Frame {
    /// All words, little-endian, channel-major (`channels * num_samples` words).
    #[must_use]
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// The words of one channel, or `None` past the last channel.
    #[must_use]
    pub fn channel(&self, channel: usize) -> Option<&[u8]> {
        let run = self.num_samples * self.words.size();
        (channel < self.channels).then(|| &self.data[channel * run..(channel + 1) * run])
    }

    /// The frame's samples scaled (`stored * gain + offset` of `info`'s channels, as a local
    /// [`RecordingSource::read`] computes them) into `out`, channel-major.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] when `info` has another channel count or `out` another length.
    pub fn scale_into(&self, info: &RecordingInfo, out: &mut [f32]) -> Result<()> {
        if info.num_channels() != self.channels || out.len() != self.channels * self.num_samples {
            return Err(Error::invalid(
                "frame: scale",
                format!(
                    "a frame of {} channels x {} samples into {} values for {} channels",
                    self.channels,
                    self.num_samples,
                    out.len(),
                    info.num_channels()
                ),
            ));
        }
        scale_words(
            &self.data,
            self.words,
            info,
            self.num_samples,
            0..self.channels,
            out,
        );
        Ok(())
    }
}

/// Scales channel-major words of `channels` (indices into `info`) into `out`.
fn scale_words(
    data: &[u8],
    words: Words,
    info: &RecordingInfo,
    n: usize,
    channels: impl Iterator<Item = usize>,
    out: &mut [f32],
) {
    if n == 0 {
        return;
    }
    let run = n * words.size();
    for ((channel, bytes), out) in channels
        .zip(data.chunks_exact(run))
        .zip(out.chunks_exact_mut(n))
    {
        match words {
            Words::Stored(format) => {
                let c = &info.channels[channel];
                format.scale_into(bytes, c.gain, c.offset, out);
            }
            Words::Scaled => {
                for (v, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                    *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                }
            }
        }
    }
}

/// The runtime every session runs on.
fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> =
        OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("dspk-stream-client")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| Error::System {
            what: "client runtime",
            reason: e.clone(),
        })
}

/// Wakes a thread parked in [`block`].
struct ThreadWaker(std::thread::Thread);

impl std::task::Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `future` to completion on the calling thread, parked between polls; its timers and
/// the tasks it spawns belong to the shared runtime, whose threads drive the connections.
/// Works from any thread, a `spawn_blocking` thread included (a thread of another runtime is
/// blocked meanwhile).
fn block<T>(future: impl Future<Output = Result<T>>) -> Result<T> {
    let _context = runtime()?.enter();
    let mut future = std::pin::pin!(future);
    let waker = std::task::Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut context = std::task::Context::from_waker(&waker);
    loop {
        if let std::task::Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        std::thread::park();
    }
}

struct Inner {
    connection: quinn::Connection,
    endpoint: quinn::Endpoint,
    peer: String,
    header: Header,
    info: RecordingInfo,
    words: Words,
    options: SessionOptions,
    control: tokio::sync::Mutex<quinn::SendStream>,
    /// Frame buffers, used again once the caller drops a frame (by this subscription or the
    /// next).
    frames: Arc<framing::BufferPool>,
}

/// A connection to a server: the recording's header, the signal stream, and reads and views
/// of the recording. Implements [`RecordingSource`] (reads are requests answered with the
/// stored words, scaled here exactly as a local read scales them) and [`SignalBackend`].
/// Dropping it closes the connection.
#[derive(Clone)]
pub struct Session {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("peer", &self.inner.peer)
            .field("channels", &self.inner.info.num_channels())
            .field("samples", &self.inner.info.num_samples)
            .finish_non_exhaustive()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.connection
            .close(code::DONE.into(), b"the client closed the session");
    }
}

/// The error of a failed stream operation, preferring the connection's close reason (a
/// refusal the server explained) when the connection is gone.
fn prefer_close(connection: &quinn::Connection, peer: &str, error: Error) -> Error {
    match connection.close_reason() {
        Some(reason) => transport::connection_error(peer, "server", &reason),
        None => error,
    }
}

impl Session {
    /// Connects to the server at `addr`, whose certificate must name `server_name` and be
    /// trusted by `tls`, says hello and receives the header.
    ///
    /// # Errors
    ///
    /// [`Error::Handshake`] for an untrusted server, a refused client certificate or another
    /// protocol (ALPN); [`Error::Closed`] when the server closed the connection (busy, another
    /// version) with its reason; [`Error::Timeout`]; [`Error::Malformed`] for a header that
    /// does not check.
    pub fn connect(
        addr: SocketAddr,
        server_name: &str,
        tls: &ClientTls,
        options: SessionOptions,
    ) -> Result<Self> {
        block(connect(addr, server_name, tls, options))
    }

    /// What the remote recording holds (the header's info, exact).
    #[must_use]
    pub fn info(&self) -> &RecordingInfo {
        &self.inner.info
    }

    /// The recording's header as the server sent it.
    #[must_use]
    pub fn header(&self) -> &Header {
        &self.inner.header
    }

    /// What the words of frames and reads are.
    #[must_use]
    pub fn words(&self) -> Words {
        self.inner.words
    }

    /// Whether the source is live (length 0: reads and views are refused).
    #[must_use]
    pub fn is_live(&self) -> bool {
        self.inner.info.num_samples == 0
    }

    /// The server's address.
    #[must_use]
    pub fn peer(&self) -> &str {
        &self.inner.peer
    }

    /// Starts (or restarts) the signal at `from_sample`: the frames come through the returned
    /// [`Signal`]. A previous signal of this session ends.
    ///
    /// # Errors
    ///
    /// What the connection reports; [`Error::Timeout`] when the server opens no signal stream.
    pub fn subscribe(&self, from_sample: u64) -> Result<Signal> {
        let inner = &self.inner;
        block(async {
            let mut control = inner.control.lock().await;
            let message = framing::encode(&Body::Subscribe(Subscribe { from_sample }).into())?;
            let timeout = inner.options.timeout;
            let fail = |e: Error| prefer_close(&inner.connection, &inner.peer, e);
            match tokio::time::timeout(timeout, control.write_all(&message)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    return Err(fail(Error::Connection {
                        peer: inner.peer.clone(),
                        reason: e.to_string(),
                    }));
                }
                Err(_) => {
                    return Err(fail(Error::Timeout {
                        what: "subscribe",
                        after: timeout,
                    }));
                }
            }
            let mut recv = match tokio::time::timeout(timeout, inner.connection.accept_uni()).await
            {
                Ok(Ok(recv)) => recv,
                Ok(Err(e)) => {
                    return Err(transport::connection_error(&inner.peer, "server", &e));
                }
                Err(_) => {
                    return Err(Error::Timeout {
                        what: "signal stream",
                        after: timeout,
                    });
                }
            };
            let limits = ReadLimits {
                max_message: inner.options.max_message,
                idle: Some(timeout),
                body: timeout,
            };
            let start = framing::read_message(&mut recv, &limits, "signal start")
                .await
                .map_err(fail)?;
            match start.and_then(|m| m.body) {
                Some(Body::Start(start)) if start.from_sample == from_sample => {}
                Some(Body::Start(start)) => {
                    return Err(Error::Protocol(format!(
                        "a signal stream from sample {} answered a subscribe from {from_sample}",
                        start.from_sample
                    )));
                }
                other => {
                    return Err(Error::Protocol(format!(
                        "expected the signal stream's start, got {}",
                        other.map_or("its end", |b| b.kind())
                    )));
                }
            }
            let (tx, rx) = mpsc::channel(inner.options.frame_queue.max(1));
            let receiver = SignalReceiver {
                connection: inner.connection.clone(),
                peer: inner.peer.clone(),
                limits: ReadLimits {
                    max_message: inner.options.max_message,
                    idle: None,
                    body: timeout,
                },
                channels: inner.info.num_channels(),
                words: inner.words,
                pool: inner.frames.clone(),
            };
            let task = tokio::spawn(receiver.run(recv, tx));
            Ok(Signal {
                frames: rx,
                task: task.abort_handle(),
                timeout,
                ended: None,
            })
        })
    }

    /// The envelope of a view, computed by the server (from its pyramid or the raw samples).
    ///
    /// # Errors
    ///
    /// [`Error::Remote`] when the server refuses the request (outside the recording, over its
    /// limit, a live source), what the connection reports, [`Error::Malformed`] for an answer
    /// that does not check.
    pub fn request_view(&self, request: &dspk_view::ViewRequest) -> Result<View> {
        let message = Body::ViewRequest(messages::ViewRequest::from_request(request)?);
        let answer = block(self.request(message.into()))?;
        match answer.body {
            Some(Body::ViewAnswer(answer)) => answer.to_view(request.channels.len()),
            Some(other) => Err(Error::Protocol(format!(
                "expected a view answer, got {}",
                other.kind()
            ))),
            None => Err(Error::malformed("view answer", "no kind")),
        }
    }

    /// Sends one request on its own stream and returns the answer (an error answer becomes
    /// [`Error::Remote`]).
    async fn request(&self, message: Message) -> Result<Message> {
        request(self.inner.clone(), framing::encode(&message)?).await
    }

    /// The words of `channels` over `samples` into `out` (channel-major), cut into read
    /// requests of about `read_chunk_bytes`, several in flight.
    fn read_words(&self, channels: &[usize], samples: Range<u64>, out: &mut [u8]) -> Result<()> {
        let word = self.inner.words.size();
        let per_sample = channels.len() * word;
        let n = (samples.end - samples.start) as usize;
        if per_sample == 0 || n == 0 {
            return Ok(());
        }
        let wire = messages::channels_to_wire(channels)?;
        let chunk = (self.inner.options.read_chunk_bytes / per_sample).max(1) as u64;
        let parallel = self.inner.options.read_parallel.max(1);
        let starts: Vec<u64> = (samples.start..samples.end)
            .step_by(chunk as usize)
            .collect();
        block(async {
            let mut set = tokio::task::JoinSet::new();
            let mut next = 0;
            let mut done = 0;
            while done < starts.len() {
                while set.len() < parallel && next < starts.len() {
                    let start = starts[next];
                    let end = (start + chunk).min(samples.end);
                    let message = Body::ReadRequest(messages::ReadRequest {
                        channels: wire.clone(),
                        start,
                        end,
                    });
                    let inner = self.inner.clone();
                    let framed = framing::encode(&message.into())?;
                    set.spawn(async move { (start..end, request(inner, framed).await) });
                    next += 1;
                }
                let Some(joined) = set.join_next().await else {
                    break;
                };
                let (range, answer) = joined.map_err(|e| Error::System {
                    what: "read request",
                    reason: e.to_string(),
                })?;
                let data = match answer?.body {
                    Some(Body::ReadAnswer(answer)) => answer.samples,
                    Some(other) => {
                        return Err(Error::Protocol(format!(
                            "expected a read answer, got {}",
                            other.kind()
                        )));
                    }
                    None => return Err(Error::malformed("read answer", "no kind")),
                };
                let len = (range.end - range.start) as usize;
                if data.len() != channels.len() * len * word {
                    return Err(Error::malformed(
                        "read answer",
                        format!(
                            "{} bytes for {} channels x {len} samples of {word} bytes",
                            data.len(),
                            channels.len()
                        ),
                    ));
                }
                let offset = (range.start - samples.start) as usize * word;
                for (k, run) in data.chunks_exact(len * word).enumerate() {
                    let at = k * n * word + offset;
                    out[at..at + run.len()].copy_from_slice(run);
                }
                done += 1;
            }
            Ok(())
        })
    }

    /// Closes the connection and waits (up to a second) for the close to be sent.
    pub fn close(self) {
        let inner = self.inner.clone();
        inner
            .connection
            .close(code::DONE.into(), b"the client closed the session");
        drop(self);
        let _ = block(async {
            let _ = tokio::time::timeout(Duration::from_secs(1), inner.endpoint.wait_idle()).await;
            Ok(())
        });
    }
}

async fn connect(
    addr: SocketAddr,
    server_name: &str,
    tls: &ClientTls,
    options: SessionOptions,
) -> Result<Session> {
    let peer = addr.to_string();
    let crypto = transport::client_crypto(&tls.trust, tls.identity.as_ref(), ALPN)?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    // The server opens a signal stream per subscribe (a few may overlap while old ones end);
    // it opens no bidirectional streams.
    config.transport_config(Arc::new(options.transport.config(
        0,
        16,
        addr.ip().is_loopback(),
    )?));
    let local: SocketAddr = if addr.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = options.transport.socket(local, "client socket")?;
    let endpoint = quinn::Endpoint::new(
        options.transport.endpoint()?,
        None,
        socket,
        Arc::new(quinn::TokioRuntime),
    )
    .map_err(|e| Error::System {
        what: "client endpoint",
        reason: e.to_string(),
    })?;
    let connecting = endpoint
        .connect_with(config, addr, server_name)
        .map_err(|e| Error::invalid("connect", format!("{addr} as `{server_name}`: {e}")))?;
    let connection = match tokio::time::timeout(options.timeout, connecting).await {
        Ok(Ok(connection)) => connection,
        Ok(Err(e)) => return Err(transport::connection_error(&peer, "server", &e)),
        Err(_) => {
            return Err(Error::Timeout {
                what: "connection",
                after: options.timeout,
            });
        }
    };
    transport::check_alpn(&connection)?;
    let fail = |e: Error| prefer_close(&connection, &peer, e);
    let (mut send, mut recv) = connection
        .open_bi()
        .await
        .map_err(|e| transport::connection_error(&peer, "server", &e))?;
    let hello = framing::encode(
        &Body::Hello(Hello {
            protocol_version: PROTOCOL_VERSION,
        })
        .into(),
    )?;
    send.write_all(&hello).await.map_err(|e| {
        fail(Error::Connection {
            peer: peer.clone(),
            reason: e.to_string(),
        })
    })?;
    let limits = ReadLimits {
        max_message: options.max_message,
        idle: Some(options.timeout),
        body: options.timeout,
    };
    let reply = framing::read_message(&mut recv, &limits, "header")
        .await
        .map_err(fail)?;
    let header = match reply.and_then(|m| m.body) {
        Some(Body::Header(header)) => header,
        Some(Body::Error(error)) => {
            return Err(Error::Remote {
                code: error.code,
                message: error.message,
            });
        }
        Some(other) => {
            return Err(Error::Protocol(format!(
                "expected the header, got {}",
                other.kind()
            )));
        }
        None => {
            // The server closes the stream when it refuses: wait for its reason.
            let closed = tokio::time::timeout(Duration::from_secs(1), connection.closed()).await;
            return Err(match closed {
                Ok(reason) => transport::connection_error(&peer, "server", &reason),
                Err(_) => {
                    Error::Protocol("the server ended the control stream before the header".into())
                }
            });
        }
    };
    if header.protocol_version != PROTOCOL_VERSION {
        return Err(Error::Version {
            ours: PROTOCOL_VERSION,
            theirs: header.protocol_version,
        });
    }
    let info = header.to_info()?;
    let words = if header.stored_access {
        Words::Stored(info.stored_format)
    } else {
        Words::Scaled
    };
    Ok(Session {
        inner: Arc::new(Inner {
            connection,
            endpoint,
            peer,
            header,
            info,
            words,
            // The queue's frames, the one being read, and one the caller holds.
            frames: framing::BufferPool::new(options.frame_queue.max(1) + 2),
            options,
            control: tokio::sync::Mutex::new(send),
        }),
    })
}

/// One request on its own stream, within the session's timeout.
async fn request(inner: Arc<Inner>, framed: Bytes) -> Result<Message> {
    let timeout = inner.options.timeout;
    let run = async {
        let fail = |e: Error| prefer_close(&inner.connection, &inner.peer, e);
        let (mut send, mut recv) = inner
            .connection
            .open_bi()
            .await
            .map_err(|e| transport::connection_error(&inner.peer, "server", &e))?;
        send.write_all(&framed).await.map_err(|e| {
            fail(Error::Connection {
                peer: inner.peer.clone(),
                reason: e.to_string(),
            })
        })?;
        let _ = send.finish();
        let limits = ReadLimits {
            max_message: inner.options.max_message,
            idle: None,
            body: timeout,
        };
        let answer = framing::read_message(&mut recv, &limits, "answer")
            .await
            .map_err(fail)?
            .ok_or_else(|| {
                Error::Protocol("the server ended a request stream without answering".into())
            })?;
        match answer.body {
            Some(Body::Error(error)) => Err(Error::Remote {
                code: error.code,
                message: error.message,
            }),
            _ => Ok(answer),
        }
    };
    tokio::time::timeout(timeout, run)
        .await
        .map_err(|_| Error::Timeout {
            what: "answer",
            after: timeout,
        })?
}

/// What the signal task hands the caller.
enum Item {
    Frame(Frame),
    End(u64),
}

/// What the signal task needs of the session (not the session itself: dropping the session
/// closes the connection, which ends the task).
struct SignalReceiver {
    connection: quinn::Connection,
    peer: String,
    limits: ReadLimits,
    channels: usize,
    words: Words,
    /// The session's frame buffers.
    pool: Arc<framing::BufferPool>,
}

impl SignalReceiver {
    /// Reads a signal stream into the caller's queue until it ends, fails, or the caller
    /// leaves.
    async fn run(self, mut recv: quinn::RecvStream, tx: mpsc::Sender<Result<Item>>) {
        let (channels, words) = (self.channels, self.words);
        loop {
            let read = framing::read_message_pooled(
                &mut recv,
                &self.limits,
                "signal stream",
                Some(&self.pool),
            );
            let item = match read.await {
                Ok(Some(message)) => match message.body {
                    Some(Body::SignalFrame(frame)) => {
                        frame.check(channels, words.size()).map(|()| {
                            Item::Frame(Frame {
                                sequence: frame.sequence,
                                first_sample: frame.first_sample,
                                num_samples: frame.num_samples as usize,
                                words,
                                channels,
                                data: frame.samples,
                            })
                        })
                    }
                    Some(Body::End(end)) => Ok(Item::End(end.next_sample)),
                    Some(other) => Err(Error::Protocol(format!(
                        "expected a signal frame, got {}",
                        other.kind()
                    ))),
                    None => Err(Error::malformed("signal frame", "no kind")),
                },
                Ok(None) => Err(Error::Protocol(
                    "the signal stream ended without an end message (a new subscribe replaced \
                     it, or the server stopped)"
                        .into(),
                )),
                Err(e) => Err(prefer_close(&self.connection, &self.peer, e)),
            };
            let last = !matches!(item, Ok(Item::Frame(_)));
            if tx.send(item).await.is_err() || last {
                return;
            }
        }
    }
}

/// The frames of one subscription, in order. Dropping it stops the stream.
#[derive(Debug)]
pub struct Signal {
    frames: mpsc::Receiver<Result<Item>>,
    task: tokio::task::AbortHandle,
    timeout: Duration,
    ended: Option<u64>,
}

impl std::fmt::Debug for Item {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Frame(frame) => frame.fmt(f),
            Self::End(next) => write!(f, "End({next})"),
        }
    }
}

impl Signal {
    /// The next frame; `Ok(None)` once the recording ended (see [`end`](Self::end)).
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] when no frame came within the session's timeout; what the stream
    /// or connection reported (the server's close reason when it closed the connection);
    /// [`Error::Malformed`] for a frame that does not match the header.
    pub fn next_frame(&mut self) -> Result<Option<Frame>> {
        if self.ended.is_some() {
            return Ok(None);
        }
        let timeout = self.timeout;
        let frames = &mut self.frames;
        let item = block(async {
            match tokio::time::timeout(timeout, frames.recv()).await {
                Ok(Some(item)) => item.map(Some),
                Ok(None) => Ok(None),
                Err(_) => Err(Error::Timeout {
                    what: "signal frame",
                    after: timeout,
                }),
            }
        })?;
        match item {
            Some(Item::Frame(frame)) => Ok(Some(frame)),
            Some(Item::End(next)) => {
                self.ended = Some(next);
                Ok(None)
            }
            None => Err(Error::Protocol("the signal stream stopped".into())),
        }
    }

    /// The sample after the last one, once the recording ended.
    #[must_use]
    pub fn end(&self) -> Option<u64> {
        self.ended
    }
}

impl Drop for Signal {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// This crate's error as dspk-core's (a recording error stays itself).
fn core_error(peer: &str, error: Error) -> dspk_core::Error {
    match error {
        Error::Recording(e) => e,
        other => dspk_core::Error::Source {
            source_name: format!("dspk-stream session with {peer}"),
            cause: Arc::new(other),
        },
    }
}

impl RecordingSource for Session {
    fn info(&self) -> &RecordingInfo {
        &self.inner.info
    }

    fn fill_stored(&self, request: &ReadRequest<'_>, out: &mut [u8]) -> dspk_core::Result<()> {
        if self.inner.words == Words::Scaled {
            return Err(dspk_core::Error::Unsupported {
                source_name: "dspk-stream session (the server's source has no stored access)",
            });
        }
        self.read_words(request.channels(), request.samples(), out)
            .map_err(|e| core_error(&self.inner.peer, e))
    }

    fn fill_scaled(&self, request: &ReadRequest<'_>, out: &mut [f32]) -> dspk_core::Result<()> {
        let words = self.inner.words;
        let mut data = vec![0u8; request.num_values() * words.size()];
        self.read_words(request.channels(), request.samples(), &mut data)
            .map_err(|e| core_error(&self.inner.peer, e))?;
        scale_words(
            &data,
            words,
            &self.inner.info,
            request.samples_per_channel(),
            request.channels().iter().copied(),
            out,
        );
        Ok(())
    }

    fn can_read_stored(&self) -> bool {
        self.inner.words != Words::Scaled
    }
}

impl SignalBackend for Session {
    fn info(&self) -> &RecordingInfo {
        &self.inner.info
    }

    fn view(&self, request: &dspk_view::ViewRequest) -> dspk_view::Result<View> {
        request.check(&self.inner.info)?;
        self.request_view(request).map_err(|e| match e {
            Error::Remote { code, message } if code == code::INVALID_REQUEST => {
                dspk_view::Error::InvalidRequest {
                    what: "remote view",
                    reason: message,
                }
            }
            other => dspk_view::Error::Recording(core_error(&self.inner.peer, other)),
        })
    }

    fn read(
        &self,
        channels: &[usize],
        samples: Range<u64>,
        out: &mut [f32],
    ) -> dspk_view::Result<()> {
        Ok(RecordingSource::read(self, channels, samples, out)?)
    }
}
