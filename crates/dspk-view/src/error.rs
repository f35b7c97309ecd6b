//! The one error type of `dspk-view`.

use std::path::PathBuf;

/// Everything that can go wrong in `dspk-view`: a request that does not fit the recording, a
/// source or device that failed, a cache file that cannot be used, a cancelled build.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A request outside what the recording or the operation accepts (a range past the end, a
    /// zero width, an unknown channel, a level that does not exist, ...).
    #[error("{what}: {reason}")]
    InvalidRequest {
        /// The parameter, with the operation (`"view: width"`).
        what: &'static str,
        /// What is wrong with it, with its value.
        reason: String,
    },

    /// A request larger than a limit that keeps memory bounded.
    #[error("{what} asks for {requested}, over the limit of {limit}")]
    OverLimit {
        /// What was being sized (`"view: width (columns)"`).
        what: &'static str,
        /// What the request needs.
        requested: u64,
        /// The limit.
        limit: u64,
    },

    /// Values whose length disagrees with the shape they are given with.
    #[error("{what}: expected {expected} values, got {actual}")]
    Shape {
        /// What was given.
        what: &'static str,
        /// The length the shape needs.
        expected: usize,
        /// The length given.
        actual: usize,
    },

    /// The recording could not be read.
    #[error(transparent)]
    Recording(#[from] dspk_core::Error),

    /// A device kernel or buffer failed.
    #[error(transparent)]
    Device(#[from] dspk_ops::Error),

    /// A file of ours (a pyramid cache, a picture) could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system reported.
        source: std::io::Error,
    },

    /// A pyramid cache file that does not belong to the recording or is damaged (it is rebuilt
    /// where the caller allows; this says why it was not used).
    #[error("pyramid cache {}: {reason}", path.display())]
    Cache {
        /// The cache file.
        path: PathBuf,
        /// Why it cannot be used.
        reason: String,
    },

    /// A build stopped by its cancel handle before it finished (what was filled is kept).
    #[error("cancelled after {done} of {total} pages")]
    Cancelled {
        /// Pages filled when the build stopped.
        done: u64,
        /// Pages in the pyramid.
        total: u64,
    },
}

impl Error {
    /// An [`Error::InvalidRequest`].
    pub(crate) fn invalid(what: &'static str, reason: impl Into<String>) -> Self {
        Self::InvalidRequest {
            what,
            reason: reason.into(),
        }
    }
}

/// `Result` with the error of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
