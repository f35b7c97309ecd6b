//! IIR filtering on the device: `sosfilt` and `sosfiltfilt` over many channels at once.

mod filter;
mod kernel;
mod plan;

pub use filter::{Initial, MAX_BLOCK_LEN, MAX_BLOCKS, MAX_SECTIONS, SosFilter};
