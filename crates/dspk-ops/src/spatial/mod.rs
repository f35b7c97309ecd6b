//! Spatial operators on the device: common average/median reference, covariance, whitening.
//!
//! All work on `[channels, samples]` `f32` windows, channel-major, and act on each sample's
//! column of channels; none reads a neighbouring sample, so none needs a halo.

mod covariance;
mod mixing;
mod reference;

pub use covariance::CovarianceAccumulator;
pub use mixing::{ChannelMixing, Whitening, mix_channels};
pub use reference::{CommonReference, Reference, common_reference};
