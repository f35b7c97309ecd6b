//! The one error type of `dspk-synapse`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Everything that can go wrong reading or writing electrophysiology files and comparing
/// sortings.
///
/// A problem with a file (missing, truncated, malformed, unsupported, or a library failing on
/// it) is `dspk-io`'s [`dspk_io::Error`], which names the file and the problem once, with the
/// values that disagree; this crate adds its own variant only for what involves no file.
/// Messages are lower-case. The enum is `Clone`.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file or folder is missing, truncated, malformed or unsupported, or a library (HDF5,
    /// Zarr, zlib) failed on it: the error names the file. Metadata problems of this crate's
    /// formats (`.meta`, `structure.oebin`, `.ch`, a header, a probe file) are
    /// [`dspk_io::Error::Invalid`]; versions and features not read are
    /// [`dspk_io::Error::Unsupported`].
    #[error(transparent)]
    Io(#[from] dspk_io::Error),

    /// An argument is invalid (spike trains not sorted, a negative tolerance, mismatched
    /// lengths); no file involved.
    #[error("invalid argument: {0}")]
    Argument(String),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A [`dspk_io::Error::Invalid`] for `path`: its contents say `problem`.
    pub(crate) fn invalid(path: &Path, problem: impl Into<String>) -> Self {
        Self::Io(dspk_io::Error::invalid(path, problem))
    }

    /// A [`dspk_io::Error::Missing`] for `path`: `what` is not in it (or beside it).
    pub(crate) fn missing(path: &Path, what: impl Into<String>) -> Self {
        Self::Io(dspk_io::Error::missing(path, what))
    }

    /// A [`dspk_io::Error::Unsupported`] for `path`: it uses `what`, which is not read.
    pub(crate) fn unsupported(path: &Path, what: impl Into<String>) -> Self {
        Self::Io(dspk_io::Error::unsupported(path, what))
    }

    /// A [`dspk_io::Error::Library`] for `path`: a library failed while doing `context`.
    pub(crate) fn library(
        path: &Path,
        context: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Io(dspk_io::Error::library(path, context, source))
    }

    /// A [`dspk_io::Error::Core`] for `path`: `dspk-core` refused the values read from it.
    pub(crate) fn core(path: &Path, source: dspk_core::Error) -> Self {
        Self::Io(dspk_io::Error::core(path, source))
    }

    /// The file or folder the error is about (`None` for [`Error::Argument`]).
    #[must_use]
    pub fn path(&self) -> Option<&Path> {
        match self {
            Self::Io(error) => Some(error.path()),
            Self::Argument(_) => None,
        }
    }
}

impl From<Error> for dspk_io::Error {
    /// The file error itself (for [`dspk_io::Format`] openers, whose errors are `dspk-io`'s);
    /// an argument error, which opening a file does not produce, is kept as the source of a
    /// [`dspk_io::Error::Library`] without a path.
    fn from(error: Error) -> Self {
        match error {
            Error::Io(inner) => inner,
            other @ Error::Argument(_) => dspk_io::Error::Library {
                path: PathBuf::new(),
                context: "dspk-synapse".to_string(),
                source: Arc::new(other),
            },
        }
    }
}

impl From<Error> for dspk_core::Error {
    /// Wraps a synapse error as [`dspk_core::Error::Source`] (source name `"dspk-synapse"`),
    /// for the [`RecordingSource`](dspk_core::RecordingSource) methods.
    fn from(error: Error) -> Self {
        dspk_core::Error::Source {
            source_name: "dspk-synapse".to_string(),
            cause: Arc::new(error),
        }
    }
}
