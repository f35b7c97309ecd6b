//! Network sessions for continuous signals (QUIC + TLS 1.3, protobuf messages) for dspk.
//!
//! A recording on a lab server (or a live acquisition) is served to other machines without
//! copying files:
//! - [`transport`]: TLS 1.3 identities and trust (PEM files, self-signed, an [`Authority`] for
//!   mutual TLS), the protocol's [`ALPN`] name and version, transport limits;
//! - [`messages`]: the protobuf messages and their checked conversions to dspk's types;
//! - [`framing`]: length-prefixed messages, the receiver's limit checked before allocating;
//! - [`Server`]: serves a recording (through a [`LocalBackend`](dspk_view::LocalBackend), so
//!   views come from its pyramid when it has one) or a [`LiveFeed`], paced in real time or as
//!   fast as the client reads, looped or not, with a bounded queue per client and a
//!   connection limit ([`ServerStats`] says what it holds);
//! - [`Session`]: the client, which receives the signal ([`Signal`], [`Frame`]) and is a
//!   [`RecordingSource`](dspk_core::RecordingSource) and a
//!   [`SignalBackend`](dspk_view::SignalBackend), so a remote recording is viewed and run
//!   through a pipeline like a local one.
//!
//! The protocol: a client opens a control stream and says [`Hello`](messages::Hello) with its
//! version; the server answers with the [`Header`](messages::Header) (the whole recording info,
//! exact rational rate and start time). Each [`Subscribe`](messages::Subscribe) makes the
//! server open a signal stream of frames of stored words (the int16 words themselves, not
//! `f32`), which the client scales. Reads and views are requests, each on its own stream, so
//! a zoom never waits behind signal data. A wrong ALPN, an untrusted certificate, a missing or
//! refused client certificate (mutual TLS), another version, a malformed or oversized message:
//! each ends in an error that says which, on both sides.
//!
//! Nothing a peer sends can make either side allocate without bound: every message length is
//! checked against the receiver's limit first.

#![forbid(unsafe_code)]

mod client;
mod error;
pub mod framing;
mod live;
pub mod messages;
mod server;
pub mod transport;

pub use client::{ClientTls, Frame, Session, SessionOptions, Signal, Words};
pub use error::{Error, Result};
pub use live::LiveFeed;
pub use server::{Pacing, Server, ServerOptions, ServerStats, ServerTls};
pub use transport::{ALPN, Authority, Identity, PROTOCOL_VERSION, TransportOptions, Trust};

/// Codes of refusals ([`messages::ErrorMessage`]) and of connection closes.
pub mod code {
    /// A normal end: the client or the server is done.
    pub const DONE: u32 = 0;
    /// A message that breaks the protocol (malformed, unexpected, over a limit).
    pub const PROTOCOL: u32 = 1;
    /// A protocol version the server does not speak.
    pub const VERSION: u32 = 2;
    /// The server is at its connection limit.
    pub const BUSY: u32 = 3;
    /// The client read too slowly (its signal stream stalled) and was dropped.
    pub const SLOW: u32 = 4;
    /// The server is shutting down.
    pub const SHUTDOWN: u32 = 5;
    /// A request outside the recording (channels, samples, width).
    pub const INVALID_REQUEST: u32 = 6;
    /// A request whose answer would be larger than the server's limit.
    pub const OVER_LIMIT: u32 = 7;
    /// A request the source cannot answer (reads and views of a live source).
    pub const UNSUPPORTED: u32 = 8;
    /// The recording failed to read.
    pub const RECORDING: u32 = 9;
}
