//! Preprocessing (`docs/KILOSORT4.md` §2, §10.1.1): the device chain every pass runs, and what
//! a sort fits before it looks for spikes (channel offsets, whitening, EMUsort's channel delays).

mod chain;
pub mod delays;
mod fit;

pub(crate) use chain::selected_ranges;
pub use chain::{
    Preprocessing, WHITENING_EPS, Whitener, channel_offsets, fit_whitening, whitening_batches,
};
pub use fit::{FitKey, PreprocessingFit};
