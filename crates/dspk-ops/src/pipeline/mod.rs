//! Device pipelines: stages applied in turn to a `[channels, samples]` window on the device.

#[allow(clippy::module_inception)]
mod pipeline;
mod stage;

pub use pipeline::Pipeline;
pub use stage::Stage;
