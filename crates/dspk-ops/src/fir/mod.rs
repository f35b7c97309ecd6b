//! FIR filtering on the device: `lfilter` (FIR), `resample_poly`, `decimate`.

mod decimate;
#[allow(clippy::module_inception)]
mod fir;
mod kernel;

pub use decimate::Decimate;
pub use fir::Fir;
