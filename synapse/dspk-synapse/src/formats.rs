//! The recording formats of this crate in `dspk-io`'s format detection.

use std::path::Path;
use std::sync::Once;

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

/// Opens a recording of any format `dspk-io` or this crate reads, picked from the path and
/// metadata files only. This crate's formats are added to the registry of [`dspk_io::open`]
/// on the first call, so `dspk_io::open` also knows them afterwards.
///
/// # Errors
///
/// [`dspk_io::Error::UnknownFormat`] listing the formats if none recognises `path`; otherwise
/// what the reader reports.
pub fn open(path: impl AsRef<Path>) -> dspk_io::Result<Box<dyn RecordingSource>> {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| dspk_io::configure(register_formats));
    dspk_io::open(path)
}
