//! CubeCL kernels for dspk, the typed device arrays they take, and the streaming path windows
//! are processed in.
//!
//! - [`DeviceArray`]: `channels x samples` values of `f32`, `u32` or `i32` on the device, its
//!   shape checked once where it is made; [`ChannelVector`] (one value per channel),
//!   [`StoredArray`] (stored integers) and [`DeviceWindow`] (an array with the
//!   [`HaloWindow`](dspk_core::HaloWindow) it was read for);
//! - [`WindowStream`]: the one streaming path: a recording read window by window on a
//!   background thread, uploaded in its most compact form and run through a [`Pipeline`];
//! - [`PipelineWorkspace`]: persistent device buffers a window is uploaded into, either as
//!   stored integers (unpacked and scaled on the device) or as `f32`;
//! - [`Stage`]: one step of a device pipeline; filters ([`SosFilter`], [`Fir`],
//!   [`Decimate`]), non-linear filters ([`medfilt`], [`gaussian_filter1d`]), spatial operators
//!   ([`common_reference`], [`mix_channels`], [`CovarianceAccumulator`]), statistics
//!   ([`channel_mean`], [`mad_noise`], ...), peaks ([`PeakDetector`]) and [`unpack_scaled`];
//! - [`DeviceLimits`]: the checks every buffer passes (32-bit indices, largest buffer).
//!
//! Layout everywhere: `[channels, samples]`, channel-major, `f32` after scaling (physical units,
//! e.g. microvolts). This crate takes a CubeCL client and never picks a device.

mod array;
mod buffers;
pub mod design;
mod error;
mod fir;
mod iir;
pub mod launch;
mod limits;
pub mod linalg;
mod nonlinear;
mod peaks;
mod pipeline;
mod spatial;
mod stats;
mod stream;
mod unpack;
mod workspace;

pub use array::{ChannelVector, DeviceArray, DeviceWindow, Element, Shape, StoredArray};
pub use error::{Error, Result};
pub use fir::*;
pub use iir::*;
pub use limits::DeviceLimits;
pub use nonlinear::*;
pub use peaks::*;
pub use pipeline::{Pipeline, Stage};
pub use spatial::*;
pub use stats::*;
pub use stream::{ResidentWindows, StreamOptions, WindowStream};
pub use unpack::{ChannelAffine, unpack_scaled};
pub use workspace::PipelineWorkspace;
