//! The one error type of `dspk-io`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Everything that can go wrong reading or writing a recording file.
///
/// Every variant names the file (or folder) involved and the problem, with the values that
/// disagree, so a log line says what was wrong and where. Messages are lower-case. The enum is
/// `Clone` (I/O and decoder errors sit behind an [`Arc`]).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The operating system refused or failed an operation on the file.
    #[error("{}: {operation}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done (`"open"`, `"read 4096 bytes at 0"`, ...).
        operation: String,
        /// The error the operating system reported.
        #[source]
        source: Arc<std::io::Error>,
    },

    /// A JSON metadata file (sidecar, `binary.json`) is not valid JSON or misses a field.
    #[error("{}: invalid JSON: {source}", path.display())]
    Json {
        /// The JSON file.
        path: PathBuf,
        /// What the JSON parser said.
        #[source]
        source: Arc<serde_json::Error>,
    },

    /// Metadata (a sidecar, a header, Zarr attributes) is well-formed but says something
    /// impossible or unsupported: an unknown dtype, a negative or absurd size, a missing field.
    #[error("{}: {problem}", path.display())]
    Invalid {
        /// The file whose metadata is wrong.
        path: PathBuf,
        /// What is wrong, with the values involved.
        problem: String,
    },

    /// A data file is shorter than its metadata says.
    #[error("{}: file is truncated: {what} needs {needed} bytes, the file has {actual}", path.display())]
    Truncated {
        /// The data file.
        path: PathBuf,
        /// What needs the bytes (`"3000 samples x 4 channels of int16 after a 0-byte header"`).
        what: String,
        /// Bytes the metadata implies.
        needed: u64,
        /// Bytes the file has.
        actual: u64,
    },

    /// A size in the metadata is larger than this reader accepts or this machine can address.
    #[error(
        "{}: {what} is too large: {} (limit {})",
        path.display(),
        dspk_core::format_bytes(*size),
        dspk_core::format_bytes(*limit)
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// What was too large.
        what: String,
        /// The size asked for, in bytes (saturated at `u64::MAX`).
        size: u64,
        /// The largest size accepted.
        limit: u64,
    },

    /// A file inside a container or store is missing (a Zarr array, an `.npz` member).
    #[error("{}: {what} is missing", path.display())]
    Missing {
        /// The container or store.
        path: PathBuf,
        /// What was looked for.
        what: String,
    },

    /// A Zarr chunk that the array's shape covers is not in the store (deleted, never
    /// written, or a shape larger than the data); read as the fill value only on request
    /// ([`MissingChunks::FillValue`](crate::MissingChunks::FillValue)).
    #[error(
        "{}: chunk `{key}` of `{array}` (samples {}..{}) is missing, though the shape {shape:?} \
         covers it; open with `MissingChunks::FillValue` to read missing chunks as the fill value",
        path.display(),
        samples.start,
        samples.end
    )]
    MissingChunk {
        /// The store.
        path: PathBuf,
        /// The chunk's key in the store (`traces_seg0/c/1/0`, `traces_seg0/1.0`).
        key: String,
        /// The array (`traces_seg0`).
        array: String,
        /// The samples (first dimension) the chunk covers.
        samples: std::ops::Range<u64>,
        /// The array's declared shape.
        shape: Vec<u64>,
    },

    /// The path does not exist (nothing to detect or open).
    #[error("{}: no such file or folder", path.display())]
    NotFound {
        /// The path given.
        path: PathBuf,
    },

    /// The file is valid but uses a version or feature this reader does not support (an
    /// unknown probe type, a format version, a codec).
    #[error("{}: unsupported: {what}", path.display())]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// What is not supported.
        what: String,
    },

    /// No compiled-in or registered format recognises the path.
    #[error("{}: no format recognises this path (formats: {formats})", path.display())]
    UnknownFormat {
        /// The path given.
        path: PathBuf,
        /// The names of the formats tried, comma-separated.
        formats: String,
    },

    /// A lower-level library (Zarr, zip) failed on the file; its error is kept.
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

    /// A recording could not be described (`dspk-core` refused the values read from the file).
    #[error("{}: {source}", path.display())]
    Core {
        /// The file the values came from.
        path: PathBuf,
        /// What `dspk-core` said.
        #[source]
        source: dspk_core::Error,
    },
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An [`Error::Io`] for `path`: `operation` (`"open"`, `"list the folder"`) failed.
    pub fn io(path: &Path, operation: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            operation: operation.into(),
            source: Arc::new(source),
        }
    }

    /// An [`Error::Invalid`] for `path`: its metadata says `problem`.
    pub fn invalid(path: &Path, problem: impl Into<String>) -> Self {
        Self::Invalid {
            path: path.to_path_buf(),
            problem: problem.into(),
        }
    }

    /// An [`Error::Library`] for `path`: a library failed while doing `context`.
    pub fn library(
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

    /// An [`Error::Core`] for `path`: `dspk-core` refused the values read from it.
    pub fn core(path: &Path, source: dspk_core::Error) -> Self {
        Self::Core {
            path: path.to_path_buf(),
            source,
        }
    }

    /// An [`Error::Missing`] for `path`: `what` is not in it (or not beside it).
    pub fn missing(path: &Path, what: impl Into<String>) -> Self {
        Self::Missing {
            path: path.to_path_buf(),
            what: what.into(),
        }
    }

    /// An [`Error::Unsupported`] for `path`: it uses `what`, which this reader does not read.
    pub fn unsupported(path: &Path, what: impl Into<String>) -> Self {
        Self::Unsupported {
            path: path.to_path_buf(),
            what: what.into(),
        }
    }

    /// The file or folder the error is about.
    #[must_use]
    pub fn path(&self) -> &Path {
        match self {
            Self::Io { path, .. }
            | Self::Json { path, .. }
            | Self::Invalid { path, .. }
            | Self::Truncated { path, .. }
            | Self::TooLarge { path, .. }
            | Self::Missing { path, .. }
            | Self::NotFound { path }
            | Self::MissingChunk { path, .. }
            | Self::Unsupported { path, .. }
            | Self::UnknownFormat { path, .. }
            | Self::Library { path, .. }
            | Self::Core { path, .. } => path,
        }
    }
}

impl From<Error> for dspk_core::Error {
    /// Wraps a `dspk-io` error as [`dspk_core::Error::Source`] (source name `"dspk-io"`; the
    /// message names the file), for the [`RecordingSource`](dspk_core::RecordingSource) methods.
    fn from(error: Error) -> Self {
        dspk_core::Error::Source {
            source_name: "dspk-io".to_string(),
            cause: Arc::new(error),
        }
    }
}
