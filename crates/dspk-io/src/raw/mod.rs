//! Raw binary recordings: a data file of stored samples described by a JSON sidecar (dspk's
//! own, or SpikeInterface's `binary.json`) or by a channel count, rate and dtype given by the
//! caller (a plain binary file, Kilosort's way), and a writer for the same layout.

mod deinterleave;
mod plain;
mod reader;
mod sidecar;
mod spikeinterface;
mod writer;

use std::path::Path;

pub use plain::{MAX_PLAIN_CHANNELS, PlainBinary};
pub use reader::{RawRecording, RawSpec, SampleOrder};
pub use sidecar::{RawSidecar, SIDECAR_FORMAT};
pub use spikeinterface::{SI_BINARY_JSON, SiBinaryMeta};
pub use writer::{RawWriteOptions, sidecar_path, write_raw};

#[cfg(feature = "zarr")]
pub(crate) use sidecar::{parse_sample_rate, rate_text};

use crate::Result;
use crate::file::{METADATA_LIMIT, read_small_file};

impl RawRecording {
    /// Opens a raw recording from its dspk sidecar, or from its data file when the sidecar
    /// sits beside it as `<data file>.json` (see [`write_raw`] and [`RawSidecar`]).
    ///
    /// # Errors
    ///
    /// [`Error::Io`](crate::Error::Io) if a file cannot be read (a data file without a
    /// sidecar says the sidecar is missing); the sidecar's errors ([`RawSidecar::parse`]);
    /// [`Error::Truncated`](crate::Error::Truncated) if the data file is shorter than the
    /// sidecar says.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let sidecar = if is_json(path) {
            path.to_path_buf()
        } else {
            sidecar_path(path)
        };
        let json = read_small_file(&sidecar, METADATA_LIMIT)?;
        let parsed = RawSidecar::parse(&json, &sidecar)?;
        Self::new(&parsed.data_path, parsed.spec)
    }
}

/// Whether `path` names a `.json` file.
pub(crate) fn is_json(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
}
