//! Common average and median reference: subtract the per-sample mean or median over channels.

mod kernel;
mod launch;

pub use launch::{CommonReference, Reference, common_reference};
