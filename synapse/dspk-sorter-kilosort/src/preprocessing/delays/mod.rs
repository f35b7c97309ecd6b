//! EMUsort's channel delays (`docs/KILOSORT4.md` §10.1.1), on the device: estimated from the
//! lagged correlations of normalised channel magnitudes ([`DelayEstimator`], on preprocessed
//! windows before whitening), removed from every window by moving each row by its delay
//! ([`DelayAligner`], after whitening).
//!
//! Both read real neighbouring samples from the windows' halos where EMUsort rolls each padded
//! batch circularly, so results do not depend on where windows begin: estimation needs
//! `max_lag` samples of halo, alignment [`DelayAligner::halo`] more than the stages after it.

mod align;
mod estimate;
mod kernel;
#[cfg(test)]
mod reference;
#[cfg(test)]
mod tests;

pub use align::DelayAligner;
pub use estimate::{ChannelDelays, DelayEstimator, emusort_max_lag};
