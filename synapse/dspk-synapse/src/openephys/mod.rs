//! Open Ephys binary recordings (`structure.oebin` + `continuous.dat`), as the Open Ephys GUI
//! 0.6 and later writes them:
//!
//! ```text
//! Record Node 101/experiment1/recording1/
//!   structure.oebin                       JSON: continuous streams, channels, bit_volts, units
//!   continuous/<folder_name>/
//!     continuous.dat                      int16 little-endian, interleaved (sample-major)
//!     sample_numbers.npy                  int64, one per frame (the board's sample counter)
//!     timestamps.npy                      float64 seconds (not read)
//! ```
//!
//! [`Oebin::parse`] reads `structure.oebin`; [`OpenEphysRecording`] opens one stream of it
//! (headstage channels and ADC channels apart, as neo's `OpenEphysBinaryRawIO`);
//! [`OpenEphysFormat`] plugs it into `dspk_io::open`.

mod oebin;
mod recording;

use std::path::Path;

use dspk_core::RecordingSource;
use dspk_io::{Detection, Format};

pub use oebin::{ContinuousStream, Oebin, OebinChannel};
pub use recording::{OEBIN_FILE, OpenEphysRecording, find_oebin};

/// The Open Ephys binary format for `dspk_io`'s format detection: a `structure.oebin`, or a
/// folder with one in it or up to three folders below (recording, experiment, Record Node or
/// session folder). Opening gives the first stream ([`OpenEphysRecording::open_first`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenEphysFormat;

impl Format for OpenEphysFormat {
    fn name(&self) -> &str {
        "openephys-binary"
    }

    fn detect(&self, path: &Path) -> Detection {
        let is_oebin = path.is_file() && path.file_name().is_some_and(|n| n == OEBIN_FILE);
        if is_oebin || path.is_dir() && !recording::search_oebins(path, 3).is_empty() {
            Detection::ByMetadata
        } else {
            Detection::No
        }
    }

    fn open(&self, path: &Path) -> dspk_io::Result<Box<dyn RecordingSource>> {
        Ok(Box::new(OpenEphysRecording::open_first(path)?))
    }
}
