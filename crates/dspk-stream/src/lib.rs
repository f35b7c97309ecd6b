//! Network sessions for continuous signals (QUIC + TLS 1.3, protobuf messages) for dspk.
//!
//! A recording on a lab server (or a live acquisition) is served to other machines without
//! copying files:
//! - [`transport`]: TLS 1.3 identities and trust (PEM files, self-signed, an [`Authority`] for
//!   mutual TLS), the protocol's [`ALPN`] name and version, transport limits;
//! - [`messages`]: the protobuf messages and their checked conversions to dspk's types;
//! - [`framing`]: length-prefixed messages, the receiver's limit checked before allocating;
//!
//! Nothing a peer sends can make either side allocate without bound: every message length is
//! checked against the receiver's limit first.

#![forbid(unsafe_code)]

mod error;
pub mod framing;
pub mod messages;
pub mod transport;

pub use error::{Error, Result};
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
