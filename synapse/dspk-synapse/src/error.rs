//! The one error type of `dspk-synapse`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Everything that can go wrong reading or writing electrophysiology files and comparing
/// sortings.
///
/// Variants about files name the file and the problem with the values that disagree, so a log
/// line says what was wrong and where. Messages are lower-case. The enum is `Clone` (library
/// errors sit behind an [`Arc`]).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading a file or container failed in `dspk-io` (I/O, `.npy`, Zarr, sizes); its error
    /// names the file.
    #[error(transparent)]
    Io(#[from] dspk_io::Error),

    /// A metadata file (`.meta`, `structure.oebin`, `.ch`, a header, a probe file) is
    /// malformed or says something impossible: a missing key, a value that does not parse,
    /// sizes that disagree with the data.
    #[error("{}: {problem}", path.display())]
    Invalid {
        /// The file whose contents are wrong.
        path: PathBuf,
        /// What is wrong, with the values involved.
        problem: String,
    },

    /// A file is shorter than its metadata says.
    #[error("{}: file is truncated: {what} needs {needed} bytes, the file has {actual}", path.display())]
    Truncated {
        /// The data file.
        path: PathBuf,
        /// What needs the bytes.
        what: String,
        /// Bytes the metadata implies.
        needed: u64,
        /// Bytes the file has.
        actual: u64,
    },

    /// A companion file or an object inside a container is missing (a `.meta` beside a
    /// `.bin`, an HDF5 dataset, a Phy array).
    #[error("{}: {what} is missing", path.display())]
    Missing {
        /// The file or folder that needs it.
        path: PathBuf,
        /// What was looked for.
        what: String,
    },

    /// The file is valid but uses a version or feature this reader does not support
    /// (an unknown probe type, a format version, a codec).
    #[error("{}: unsupported: {what}", path.display())]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// What is not supported.
        what: String,
    },

    /// A lower-level library (HDF5, Zarr, zlib) failed on the file; its error is kept.
    #[error("{}: {context}: {source}", path.display())]
    Library {
        /// The file or store.
        path: PathBuf,
        /// What was being done.
        context: String,
        /// The library's error.
        #[source]
        source: Arc<dyn std::error::Error + Send + Sync>,
    },

    /// `dspk-core` refused the values read from a file (no channels, a non-finite gain).
    #[error("{}: {source}", path.display())]
    Core {
        /// The file the values came from.
        path: PathBuf,
        /// What `dspk-core` said.
        #[source]
        source: dspk_core::Error,
    },

    /// An argument is invalid (spike trains not sorted, a negative tolerance, mismatched
    /// lengths); no file involved.
    #[error("invalid argument: {0}")]
    Argument(String),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An [`Error::Invalid`] for `path`.
    pub(crate) fn invalid(path: &Path, problem: impl Into<String>) -> Self {
        Self::Invalid {
            path: path.to_path_buf(),
            problem: problem.into(),
        }
    }

    /// An [`Error::Missing`] for `path`.
    pub(crate) fn missing(path: &Path, what: impl Into<String>) -> Self {
        Self::Missing {
            path: path.to_path_buf(),
            what: what.into(),
        }
    }

    /// An [`Error::Unsupported`] for `path`.
    pub(crate) fn unsupported(path: &Path, what: impl Into<String>) -> Self {
        Self::Unsupported {
            path: path.to_path_buf(),
            what: what.into(),
        }
    }

    /// An [`Error::Library`] for `path`.
    pub(crate) fn library(
        path: &Path,
        context: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Library {
            path: path.to_path_buf(),
            context: context.into(),
            source: Arc::new(source),
        }
    }

    /// An [`Error::Core`] for `path`.
    pub(crate) fn core(path: &Path, source: dspk_core::Error) -> Self {
        Self::Core {
            path: path.to_path_buf(),
            source,
        }
    }

    /// The file or folder the error is about (`None` for [`Error::Argument`]).
    #[must_use]
    pub fn path(&self) -> Option<&Path> {
        match self {
            Self::Io(error) => Some(error.path()),
            Self::Invalid { path, .. }
            | Self::Truncated { path, .. }
            | Self::Missing { path, .. }
            | Self::Unsupported { path, .. }
            | Self::Library { path, .. }
            | Self::Core { path, .. } => Some(path),
            Self::Argument(_) => None,
        }
    }
}

impl From<Error> for dspk_io::Error {
    /// Keeps a synapse reader's error as [`dspk_io::Error::Library`] (for [`dspk_io::Format`]
    /// openers): the path stays the file's, the message is the synapse error's.
    fn from(error: Error) -> Self {
        match error {
            Error::Io(inner) => inner,
            other => dspk_io::Error::Library {
                path: other.path().map(Path::to_path_buf).unwrap_or_default(),
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
