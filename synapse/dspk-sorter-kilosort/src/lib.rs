//! Kilosort4 and EMUsort spike sorting on the device, on one runner.
//!
//! Built stage by stage from `../shared/KILOSORT4.md` (a specification of Kilosort 4.1.7 in our
//! own words; Kilosort is GPL and this crate is MIT/Apache, so nothing is transcribed from it).
//!
//! # Feature flags
//!
//! The runtimes its kernels launch on, forwarded to `dspk-core` and `dspk-ops`: `wgpu`
//! (default), `cuda`, `hip`, `cpu`.

#![forbid(unsafe_code)]

pub mod centres;
pub mod detect;
pub mod drift;
mod error;
pub mod front;
pub mod preprocess;
mod probe;
pub mod report;
mod settings;
pub mod universal;
pub mod windows;

pub use error::{Error, Result};
pub use probe::SortProbe;
pub use settings::KilosortSettings;
