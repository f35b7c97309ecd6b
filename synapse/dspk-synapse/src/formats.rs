//! The recording formats of this crate in `dspk-io`'s format detection.

use std::path::Path;

use dspk_core::RecordingSource;
use dspk_io::Registry;

use crate::intan::IntanFormat;
use crate::mtscomp::MtscompFormat;
use crate::nwb::NwbFormat;
use crate::openephys::OpenEphysFormat;
use crate::phy::PhyFormat;
use crate::spikeglx::SpikeGlxFormat;

/// Adds this crate's recording formats to `registry`: `spikeglx`, `mtscomp`,
/// `openephys-binary`, `nwb` (HDF5 and NWB-Zarr), `intan-rhd` and `phy` (the raw recording a Phy folder's
/// `params.py` names).
pub fn register_formats(registry: &mut Registry) {
    registry
        .register(SpikeGlxFormat)
        .register(MtscompFormat)
        .register(OpenEphysFormat)
        .register(NwbFormat)
        .register(IntanFormat)
        .register(PhyFormat);
}

/// A registry of every recording format `dspk-io` and this crate read: `dspk-io`'s built-in
/// formats, then those of [`register_formats`].
#[must_use]
pub fn registry() -> Registry {
    let mut registry = Registry::default();
    register_formats(&mut registry);
    registry
}

/// Opens a recording of any format `dspk-io` or this crate reads, picked from the path and
/// metadata files only, through a fresh [`registry`] (no global state is read or changed:
/// [`dspk_io::open`] still knows `dspk-io`'s formats only).
///
/// # Errors
///
/// As [`Registry::open`]: [`dspk_io::Error::NotFound`] if `path` does not exist,
/// [`dspk_io::Error::UnknownFormat`] listing the formats if none recognises it; otherwise what
/// the reader reports.
pub fn open(path: impl AsRef<Path>) -> dspk_io::Result<Box<dyn RecordingSource>> {
    registry().open(path)
}
