//! Intan `.rhd` recordings in the traditional single-file format: a Standard Intan RHD2000
//! header, then data blocks of 60 (file version 1.x) or 128 (2.0 on) samples holding
//! timestamps, amplifier, auxiliary, supply, temperature, board ADC and digital samples
//! (Intan, "RHD2000 Application Note: Data File Formats").
//!
//! [`RhdHeader::parse`] reads the header; [`IntanRecording`] reads the amplifier channels;
//! [`IntanFormat`] plugs it into `dspk_io::open`.

mod header;
mod recording;

use std::path::Path;

use dspk_core::RecordingSource;
use dspk_io::{Detection, Format};

pub use header::{RHD_MAGIC, RhdChannel, RhdHeader, RhdSignalGroup, RhdSignalType};
pub use recording::{AMPLIFIER_UV_PER_STEP, IntanRecording};

/// The Intan `.rhd` format for `dspk_io`'s format detection: a file starting with the RHD
/// magic number (read from its first four bytes), or, less surely, any `.rhd` file. Opening
/// gives the amplifier channels ([`IntanRecording::open`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct IntanFormat;

impl Format for IntanFormat {
    fn name(&self) -> &str {
        "intan-rhd"
    }

    fn detect(&self, path: &Path) -> Detection {
        if !path.is_file() {
            return Detection::No;
        }
        if recording::has_magic(path) {
            Detection::ByMetadata
        } else if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("rhd"))
        {
            Detection::ByName
        } else {
            Detection::No
        }
    }

    fn open(&self, path: &Path) -> dspk_io::Result<Box<dyn RecordingSource>> {
        Ok(Box::new(IntanRecording::open(path)?))
    }
}
