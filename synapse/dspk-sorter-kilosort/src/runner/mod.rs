//! The runner: the one path every pass of a sort takes through the recording
//! ([`DeviceWindows`]), the per-stage reports and progress.

pub(crate) mod buffers;
mod report;
mod windows;

pub use report::{Progress, StageReport, device_reserved_bytes, peak_host_bytes};
pub use windows::{DEFAULT_RESIDENT_FRACTION, DeviceWindows, PassReport, resident_budget};
