//! CubeCL kernels for dspk and the device workspace windows are processed in.
//!
//! - [`PipelineWorkspace`]: persistent device buffers a window is uploaded into, either as
//!   stored integers (unpacked and scaled on the device) or as `f32`;
//! - [`unpack_scaled`]: the unpack kernel (int16 two per 32-bit word, uint16, int32, float32);
//! - [`DeviceLimits`]: the checks every buffer passes (32-bit indices, largest buffer).
//!
//! Layout everywhere: `[channels, samples]`, channel-major, `f32` after scaling (physical units,
//! e.g. microvolts). This crate takes a CubeCL client and never picks a device.

mod error;
mod launch;
mod limits;
mod unpack;
mod workspace;

pub use error::{Error, Result};
pub use limits::DeviceLimits;
pub use unpack::unpack_scaled;
pub use workspace::PipelineWorkspace;
