//! The extension module of the `dspk` Python package (`dspk._dspk`): recordings opened by
//! path or read from a Python recording object (`recording`), sorted by Kilosort4 on the
//! device with the GIL released (`sort`), errors as Python exceptions (`errors`). The
//! package's Python part (`python/dspk/`) builds its API on these.
//!
//! Everything the `dspk` command also does (opening recordings and probes, settings, the
//! device, Phy folders) goes through its library, `dspk_cli`, so both sort alike.

mod errors;
mod recording;
mod sort;
mod source;

use pyo3::prelude::*;

/// The module `dspk._dspk`.
#[pymodule]
fn _dspk(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("DspkError", m.py().get_type::<errors::DspkError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<recording::Recording>()?;
    m.add_function(wrap_pyfunction!(recording::open, m)?)?;
    m.add_function(wrap_pyfunction!(recording::python_recording, m)?)?;
    m.add_function(wrap_pyfunction!(sort::sort, m)?)?;
    m.add_function(wrap_pyfunction!(sort::settings_json, m)?)?;
    m.add_function(wrap_pyfunction!(sort::runtime, m)?)?;
    Ok(())
}
