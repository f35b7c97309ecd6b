//! Spike detection with universal templates (Kilosort4 §5.2-5.3): template projections scored
//! at every template centre, spatial and temporal max-pools, and each spike's position and PC
//! features, on the device.

pub mod centres;
mod kernel;
mod launch;
#[cfg(test)]
mod reference;
mod spikes;
#[cfg(test)]
mod tests;
pub mod universal;

pub use launch::UniversalDetector;
pub use spikes::Spikes;
