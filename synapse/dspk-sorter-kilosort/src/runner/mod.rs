//! The runner: the one path every pass of a sort takes through the recording
//! ([`DeviceWindows`], and [`CorrectedWindows`] for the stages after preprocessing), the
//! [`SortContext`] every stage runs in, its reports and progress.

pub(crate) mod buffers;
mod context;
mod corrected;
mod report;
#[cfg(test)]
pub(crate) mod test_windows;
mod windows;

pub use context::SortContext;
pub use corrected::{CorrectedWindows, WindowPasses, WindowTransform};
pub use report::{PassReport, Progress, StageReport, device_reserved_bytes, peak_host_bytes};
pub use windows::{
    DeviceWindows, SCRATCH_BYTES, SCRATCH_FRACTION, WindowChain, default_resident_budget,
    resident_budget,
};
