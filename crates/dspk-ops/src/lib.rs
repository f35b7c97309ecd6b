//! CubeCL kernels for dspk and the device workspace windows are processed in.
//!
//! - [`PipelineWorkspace`]: persistent device buffers a window is uploaded into, either as
//!   stored integers (unpacked and scaled on the device) or as `f32`;
//! - [`unpack_scaled`]: the unpack kernel (int16 two per 32-bit word, uint16, int32, float32);
//! - [`DeviceLimits`]: the checks every buffer passes (32-bit indices, largest buffer);
//! - [`buffers`]: host arrays to and from the device;
//! - [`Stage`]: one step of a device pipeline.
//!
//! Layout everywhere: `[channels, samples]`, channel-major, `f32` after scaling (physical units,
//! e.g. microvolts). This crate takes a CubeCL client and never picks a device.

pub mod buffers;
pub mod design;
mod error;
mod fir;
mod iir;
mod launch;
mod limits;
pub mod linalg;
mod nonlinear;
mod peaks;
mod pipeline;
mod spatial;
mod stats;
mod unpack;
mod workspace;

pub use error::{Error, Result};
pub use fir::*;
pub use iir::*;
pub use limits::DeviceLimits;
pub use nonlinear::*;
pub use peaks::*;
pub use pipeline::{Pipeline, Stage};
pub use spatial::*;
pub use stats::*;
pub use unpack::unpack_scaled;
pub use workspace::PipelineWorkspace;
