//! Format detection: which reader opens a path, decided from the path and metadata files only.

use std::path::Path;

use dspk_core::RecordingSource;

use crate::file::{METADATA_LIMIT, check_readable, read_small_file};
use crate::raw::{RawRecording, SI_BINARY_JSON, SIDECAR_FORMAT, is_json, sidecar_path};
#[cfg(feature = "zarr")]
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
/// Crates with more formats implement this and add them to a registry with
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
    /// The built-in formats: `dspk-raw`, `spikeinterface-binary`, `zarr`, `npy`.
    fn default() -> Self {
        Self {
            formats: vec![
                Box::new(DspkRaw),
                Box::new(SpikeInterfaceBinary),
                Box::new(Zarr),
                Box::new(Npy),
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
    /// [`Error::NotFound`] if `path` does not exist; [`Error::Io`] if it cannot be read (a
    /// folder that cannot be listed, a file that cannot be opened: permission denied);
    /// [`Error::UnknownFormat`], listing the formats, if none recognises the path; otherwise
    /// what the format's reader reports.
    pub fn open(&self, path: impl AsRef<Path>) -> Result<Box<dyn RecordingSource>> {
        let path = path.as_ref();
        check_readable(path)?;
        match self.detect(path) {
            Some(format) => format.open(path),
            None => Err(Error::UnknownFormat {
                path: path.to_path_buf(),
                formats: self.names().join(", "),
            }),
        }
    }
}

/// Opens a recording in one of `dspk-io`'s own formats (`dspk-raw`, `spikeinterface-binary`,
/// `zarr`, and `npy`, which explains that a `.npy` needs a rate), picking it from the path and
/// metadata files only: [`Registry::default`]`.open(path)`. For more formats, build a
/// [`Registry`] and add them (`dspk_synapse::open` does so with the neural formats).
///
/// # Errors
///
/// As [`Registry::open`].
pub fn open(path: impl AsRef<Path>) -> Result<Box<dyn RecordingSource>> {
    Registry::default().open(path)
}

/// dspk's raw binary sidecar, or a data file with one beside it.
struct DspkRaw;

impl Format for DspkRaw {
    fn name(&self) -> &str {
        SIDECAR_FORMAT
    }

    /// By its metadata when the sidecar names the format; by name when a sidecar is there
    /// but cannot be read or parsed (a malformed `<data>.json`, or a `.json` given directly
    /// that is not JSON), or sits beside the data file without a `format`: opening it then
    /// reports what is wrong in it (the JSON error's line and column) instead of no format
    /// recognising the path. Valid JSON naming another format is not a sidecar.
    fn detect(&self, path: &Path) -> Detection {
        let beside = !is_json(path);
        let sidecar = if beside {
            sidecar_path(path)
        } else {
            path.to_path_buf()
        };
        if !sidecar.is_file() {
            return Detection::No;
        }
        let Some(value) = read_small_file(&sidecar, METADATA_LIMIT)
            .ok()
            .and_then(|json| serde_json::from_slice::<serde_json::Value>(&json).ok())
        else {
            return Detection::ByName;
        };
        match value.get("format").and_then(|f| f.as_str()) {
            Some(SIDECAR_FORMAT) => Detection::ByMetadata,
            None if beside => Detection::ByName,
            _ => Detection::No,
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

    #[cfg(feature = "zarr")]
    fn open(&self, path: &Path) -> Result<Box<dyn RecordingSource>> {
        Ok(Box::new(ZarrRecording::open(path)?))
    }

    #[cfg(not(feature = "zarr"))]
    fn open(&self, path: &Path) -> Result<Box<dyn RecordingSource>> {
        Err(Error::unsupported(
            path,
            "a Zarr store, but dspk-io was built without its `zarr` feature",
        ))
    }
}

/// A `.npy` file: recognised by name so that opening one says what it lacks (a sample rate)
/// instead of that no format fits. A `.npy` with a dspk sidecar opens as `dspk-raw`.
struct Npy;

impl Format for Npy {
    fn name(&self) -> &str {
        "npy"
    }

    fn detect(&self, path: &Path) -> Detection {
        if path.is_file()
            && path
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("npy"))
        {
            Detection::ByName
        } else {
            Detection::No
        }
    }

    fn open(&self, path: &Path) -> Result<Box<dyn RecordingSource>> {
        Err(Error::invalid(
            path,
            "a `.npy` array holds no sample rate, so it cannot be opened by its path alone: \
             open it with `dspk_io::open_npy_recording(path, sample_rate)`, or describe it in a \
             dspk sidecar (`RawSidecar`, header bytes from `NpyHeader`)",
        ))
    }
}
