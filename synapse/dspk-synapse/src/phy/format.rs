//! The raw recording of a Phy folder as a [`dspk_io::Format`].

use std::path::Path;

use dspk_core::RecordingSource;
use dspk_io::{Detection, Format};

use super::PhyParams;

/// The raw recording a Phy folder's `params.py` describes (`dat_path`, `n_channels_dat`,
/// `dtype`, `offset`, `sample_rate`), opened with [`PhyParams::open_recording`]: the traces
/// phy shows, as stored values (Phy records no gains).
///
/// Detects a folder holding `params.py` and `spike_times.npy`, or a `params.py` beside a
/// `spike_times.npy`, from the names alone.
#[derive(Debug, Clone, Copy, Default)]
pub struct PhyFormat;

impl PhyFormat {
    /// The folder of a Phy `path` (the folder itself, or the folder of its `params.py`).
    fn folder(path: &Path) -> &Path {
        if path.file_name().is_some_and(|n| n == "params.py") {
            path.parent().unwrap_or(Path::new("."))
        } else {
            path
        }
    }
}

impl Format for PhyFormat {
    fn name(&self) -> &str {
        "phy"
    }

    fn detect(&self, path: &Path) -> Detection {
        let folder = Self::folder(path);
        if folder.join("params.py").is_file() && folder.join("spike_times.npy").is_file() {
            Detection::ByMetadata
        } else {
            Detection::No
        }
    }

    fn open(&self, path: &Path) -> dspk_io::Result<Box<dyn RecordingSource>> {
        let folder = Self::folder(path);
        let params = PhyParams::read(&folder.join("params.py"))?;
        Ok(Box::new(params.open_recording(folder)?))
    }
}
