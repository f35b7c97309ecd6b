//! Device pipelines: stages applied in turn to a `[channels, samples]` window on the device.

mod stage;

pub use stage::Stage;
