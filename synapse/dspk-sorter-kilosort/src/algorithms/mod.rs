//! Algorithms the stages share: HDBSCAN and blocked row distances on the host's cores.

pub mod hdbscan;
pub(crate) mod rows;
