//! Channel mixing `out = W @ x` with a dense or sparse matrix: how whitening is applied.

mod kernel;
mod launch;

pub use launch::{ChannelMixing, Whitening, mix_channels};
