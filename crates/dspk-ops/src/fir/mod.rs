//! FIR filtering on the device: `lfilter` (FIR), `resample_poly`, `decimate`.

mod fir;
mod kernel;

pub use fir::Fir;
