//! The one error type of `dspk-stream`.

use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong in `dspk-stream`: a message that cannot be decoded or breaks a
/// limit, a peer that speaks another protocol or version, a certificate that is not trusted, a
/// connection that closed, a request the recording refuses.
///
/// Messages are lower-case and carry the values involved, so a log line says what was wrong and
/// where.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A message whose bytes are not a valid protobuf message, or whose fields make no sense
    /// (a header with no channels, a zero rate denominator, tables of disagreeing lengths...).
    #[error("malformed {what}: {reason}")]
    Malformed {
        /// What was being decoded (`"header"`, `"signal frame"`).
        what: &'static str,
        /// What is wrong, with the values.
        reason: String,
    },

    /// A length or count above the limit that keeps memory bounded (checked before anything is
    /// allocated).
    #[error("{what} of {requested} is over the limit of {limit}")]
    OverLimit {
        /// What was sized (`"message length (bytes)"`).
        what: &'static str,
        /// The size asked for.
        requested: u64,
        /// The limit.
        limit: u64,
    },

    /// A stream that ended in the middle of a message.
    #[error("{what} ended after {got} of {expected} bytes")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Bytes the message needed.
        expected: u64,
        /// Bytes that arrived.
        got: u64,
    },

    /// A peer that took too long to send what it had started or was asked for.
    #[error("{what}: nothing after {after:?}")]
    Timeout {
        /// What was awaited.
        what: &'static str,
        /// How long was waited.
        after: Duration,
    },

    /// A peer that sent a valid message where the protocol wants another one, or broke the
    /// protocol's order.
    #[error("protocol: {0}")]
    Protocol(String),

    /// The peer speaks another version of the protocol.
    #[error("protocol version {theirs} of the peer is not supported (this side speaks {ours})")]
    Version {
        /// The version of this side.
        ours: u32,
        /// The version the peer announced.
        theirs: u32,
    },

    /// The TLS handshake failed: another application protocol (ALPN), an untrusted or missing
    /// certificate, a refused client certificate.
    #[error("handshake with {peer}: {reason}")]
    Handshake {
        /// The peer's address.
        peer: String,
        /// What failed, in words.
        reason: String,
    },

    /// The peer closed the connection and said why (code and reason of the close).
    #[error("connection closed by the {by} (code {code}): {reason}")]
    Closed {
        /// `"server"` or `"client"`.
        by: &'static str,
        /// The protocol's close code ([`crate::code`]).
        code: u64,
        /// The reason the peer gave.
        reason: String,
    },

    /// The connection failed at the transport level (reset, timed out, closed locally...).
    #[error("connection to {peer}: {reason}")]
    Connection {
        /// The peer's address.
        peer: String,
        /// What the transport reported.
        reason: String,
    },

    /// The server answered a request with an error.
    #[error("server refused the request ({code}): {message}")]
    Remote {
        /// The error's code ([`crate::code`]).
        code: u32,
        /// The server's message.
        message: String,
    },

    /// A certificate, key or TLS setting that cannot be used.
    #[error("tls: {what}: {reason}")]
    Tls {
        /// What was being loaded or set up.
        what: String,
        /// Why it failed.
        reason: String,
    },

    /// A file (a certificate, a key) could not be read or written.
    #[error("{}: {reason}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system reported.
        reason: String,
    },

    /// An argument or setting outside what the operation accepts.
    #[error("{what}: {reason}")]
    Invalid {
        /// The parameter, with the operation.
        what: &'static str,
        /// What is wrong with it.
        reason: String,
    },

    /// The recording could not be read or described.
    #[error(transparent)]
    Recording(#[from] dspk_core::Error),

    /// A view could not be computed or rebuilt.
    #[error(transparent)]
    View(std::sync::Arc<dspk_view::Error>),

    /// The runtime or a socket could not be set up.
    #[error("{what}: {reason}")]
    System {
        /// What was being set up.
        what: &'static str,
        /// What the system reported.
        reason: String,
    },
}

impl Error {
    /// An [`Error::Malformed`].
    pub(crate) fn malformed(what: &'static str, reason: impl Into<String>) -> Self {
        Self::Malformed {
            what,
            reason: reason.into(),
        }
    }

    /// An [`Error::Invalid`].
    pub(crate) fn invalid(what: &'static str, reason: impl Into<String>) -> Self {
        Self::Invalid {
            what,
            reason: reason.into(),
        }
    }
}

impl From<dspk_view::Error> for Error {
    fn from(error: dspk_view::Error) -> Self {
        Self::View(std::sync::Arc::new(error))
    }
}

/// `Result` with the error of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
