//! Algorithms the stages share: cross-correlograms and refractoriness, HDBSCAN, blocked row distances on the host's cores, and the
//! filter projection detection and matching start each window with.

pub(crate) mod ccg;
pub mod hdbscan;
pub(crate) mod projection;
pub(crate) mod rows;
