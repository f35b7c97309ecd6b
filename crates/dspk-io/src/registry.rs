//! Format detection: which reader opens a path, decided from the path and metadata files only.

use std::path::Path;
use std::sync::{PoisonError, RwLock};

use dspk_core::RecordingSource;

use crate::file::{METADATA_LIMIT, read_small_file};
use crate::raw::{RawRecording, SI_BINARY_JSON, SIDECAR_FORMAT, is_json, sidecar_path};
use crate::zarr::ZarrRecording;
use crate::{Error, Result};

/// How sure a [`Format`] is that it reads a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Detection {
    /// Not this format.
    No,
    /// The name fits (an extension, a folder suffix), the metadata was not checked.
    ByName,
    /// The metadata file says so (a sidecar's `format`, a `binary.json`, a Zarr root).
    ByMetadata,
}

/// A recording format: a name, a detector and an opener.
///
/// `detect` must decide from the path and small metadata files only, never by reading samples.
/// Crates with more formats implement this and add them with [`register`] (for [`open`]) or
/// [`Registry::register`].
pub trait Format: Send + Sync {
    /// A short name, listed when no format recognises a path (e.g. `"zarr"`).
    fn name(&self) -> &str;

    /// How sure this format is that it reads `path`.
    fn detect(&self, path: &Path) -> Detection;

    /// Opens `path` as a recording.
    ///
    /// # Errors
    ///
    /// Whatever the reader reports, naming the file and the problem.
    fn open(&self, path: &Path) -> Result<Box<dyn RecordingSource>>;
}

/// A list of formats, tried in order; the most certain detection wins, the earliest on a tie.
pub struct Registry {
    formats: Vec<Box<dyn Format>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl Default for Registry {
    /// The built-in formats: `dspk-raw`, `spikeinterface-binary`, `zarr`.
    fn default() -> Self {
        Self {
            formats: vec![
                Box::new(DspkRaw),
                Box::new(SpikeInterfaceBinary),
                Box::new(Zarr),
            ],
        }
    }
}

impl Registry {
    /// A registry without any format.
    #[must_use]
    pub fn empty() -> Self {
        Self {
            formats: Vec::new(),
        }
    }

    /// Adds a format (after those already there, so it wins only on a more certain detection).
    pub fn register(&mut self, format: impl Format + 'static) -> &mut Self {
        self.formats.push(Box::new(format));
        self
    }

    /// The names of the formats, in order.
    #[must_use]
    pub fn names(&self) -> Vec<&str> {
        self.formats.iter().map(|f| f.name()).collect()
    }

    /// The format that reads `path`, if any.
    #[must_use]
    pub fn detect(&self, path: &Path) -> Option<&dyn Format> {
        let mut best: Option<(&dyn Format, Detection)> = None;
        for format in &self.formats {
            let detection = format.detect(path);
            if detection > best.map_or(Detection::No, |(_, d)| d) {
                best = Some((format.as_ref(), detection));
            }
        }
        best.map(|(format, _)| format)
    }

    /// Opens `path` with the format that recognises it.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownFormat`], listing the formats, if none recognises the path; otherwise
    /// what the format's reader reports.
    pub fn open(&self, path: impl AsRef<Path>) -> Result<Box<dyn RecordingSource>> {
        let path = path.as_ref();
        match self.detect(path) {
            Some(format) => format.open(path),
            None => Err(Error::UnknownFormat {
                path: path.to_path_buf(),
                formats: self.names().join(", "),
            }),
        }
    }
}

/// The registry [`open`] uses: the built-in formats plus those added with [`register`].
static GLOBAL: RwLock<Option<Registry>> = RwLock::new(None);

/// Adds a format to the registry that [`open`] uses (e.g. a neural format from another crate).
pub fn register(format: impl Format + 'static) {
    configure(|registry| {
        registry.register(format);
    });
}

/// Changes the registry that [`open`] uses (built-in formats first), e.g. with a function that
/// adds a crate's formats: `dspk_io::configure(dspk_synapse::register_formats)`.
pub fn configure(change: impl FnOnce(&mut Registry)) {
    let mut global = GLOBAL.write().unwrap_or_else(PoisonError::into_inner);
    change(global.get_or_insert_with(Registry::default));
}

/// Opens a recording, picking its format from the path and metadata files only, among the
/// built-in formats and those added with [`register`].
///
/// # Errors
///
/// [`Error::UnknownFormat`] listing the formats if none recognises `path`; otherwise what the
/// reader reports.
pub fn open(path: impl AsRef<Path>) -> Result<Box<dyn RecordingSource>> {
    let global = GLOBAL.read().unwrap_or_else(PoisonError::into_inner);
    match global.as_ref() {
        Some(registry) => registry.open(path),
        None => Registry::default().open(path),
    }
}

/// dspk's raw binary sidecar, or a data file with one beside it.
struct DspkRaw;

impl Format for DspkRaw {
    fn name(&self) -> &str {
        SIDECAR_FORMAT
    }

    fn detect(&self, path: &Path) -> Detection {
        let sidecar = if is_json(path) {
            path.to_path_buf()
        } else {
            sidecar_path(path)
        };
        if !sidecar.is_file() {
            return Detection::No;
        }
        let names_format = read_small_file(&sidecar, METADATA_LIMIT)
            .ok()
            .and_then(|json| serde_json::from_slice::<serde_json::Value>(&json).ok())
            .is_some_and(|value| {
                value.get("format").and_then(|f| f.as_str()) == Some(SIDECAR_FORMAT)
            });
        if names_format {
            Detection::ByMetadata
        } else {
            Detection::No
        }
    }

    fn open(&self, path: &Path) -> Result<Box<dyn RecordingSource>> {
        Ok(Box::new(RawRecording::open(path)?))
    }
}

/// SpikeInterface's binary folder.
struct SpikeInterfaceBinary;

impl Format for SpikeInterfaceBinary {
    fn name(&self) -> &str {
        "spikeinterface-binary"
    }

    fn detect(&self, path: &Path) -> Detection {
        let metadata = path.is_dir() && path.join(SI_BINARY_JSON).is_file()
            || path.file_name().is_some_and(|n| n == SI_BINARY_JSON) && path.is_file();
        if metadata {
            Detection::ByMetadata
        } else {
            Detection::No
        }
    }

    fn open(&self, path: &Path) -> Result<Box<dyn RecordingSource>> {
        Ok(Box::new(RawRecording::open_spikeinterface(path)?))
    }
}

/// A Zarr store in SpikeInterface's layout.
struct Zarr;

impl Format for Zarr {
    fn name(&self) -> &str {
        "zarr"
    }

    fn detect(&self, path: &Path) -> Detection {
        if !path.is_dir() {
            return Detection::No;
        }
        let root = path.join("zarr.json").is_file() || path.join(".zgroup").is_file();
        let traces = path.join("traces_seg0").is_dir();
        if root && traces {
            Detection::ByMetadata
        } else if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("zarr"))
        {
            Detection::ByName
        } else {
            Detection::No
        }
    }

    fn open(&self, path: &Path) -> Result<Box<dyn RecordingSource>> {
        Ok(Box::new(ZarrRecording::open(path)?))
    }
}
