//! Filter design in `f64` on the host (scipy.signal semantics), and `f64` host references of the
//! filters.
//!
//! Designs are computed once on the host in `f64` and cast when uploaded:
//!
//! - IIR: [`butter`], [`cheby1`], [`iirnotch`] as second-order sections ([`Sos`], scipy's `sos`
//!   layout and section order), [`sosfilt_zi`], [`lfilter_zi`], and
//!   [`Sos::settling_length`] to size window halos;
//! - FIR: [`firwin`] with a [`Window`], [`kaiser_beta`], [`kaiser_atten`], [`kaiserord`];
//! - resampling: [`resample_poly_filter`] ([`PolyphaseFilter`]), [`decimate_iir`],
//!   [`decimate_fir`];
//! - [`host`]: the filters themselves on one channel in `f64` (`sosfilt`, `sosfiltfilt`,
//!   `lfilter`, `filtfilt`, `resample_poly`, `decimate`), the references device kernels are
//!   tested against.
//!
//! Frequencies are in Hz with the sample rate `fs` given beside them, like scipy's `fs=` keyword;
//! pass `fs = 2.0` for frequencies as fractions of Nyquist (scipy's default). Every design is
//! tested against scipy 1.17 (`tests/reference/cases_design.py`).

mod complex;
mod fir;
pub mod host;
mod iir;
mod resample;
pub(crate) mod sos;
mod zpk;

pub use fir::{MAX_KAISER_BETA, Window, firwin, kaiser_atten, kaiser_beta, kaiserord};
pub use iir::{Band, MAX_IIR_ORDER, butter, cheby1, iirnotch};
pub use resample::{PolyphaseFilter, decimate_fir, decimate_iir, resample_poly_filter};
pub use sos::{MAX_SETTLING_LENGTH, Sos, lfilter_zi, sosfilt_zi};
