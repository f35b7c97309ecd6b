//! The parts of the `dspk` command that other programs reuse (the workspace's `sort` example
//! among them): opening a recording by path with its probe and raw data file
//! ([`recording`]), and a progress bar per sorting stage ([`progress`]).

pub mod progress;
pub mod recording;
