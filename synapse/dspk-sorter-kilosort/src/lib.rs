//! Kilosort4 and EMUsort spike sorting on the device, on one runner.
//!
//! Nothing is implemented yet: the sorter arrives stage by stage with the sorter issues.
//!
//! # Feature flags
//!
//! The runtimes its kernels launch on, forwarded to `dspk-core` and `dspk-ops`: `wgpu`
//! (default), `cuda`, `hip`, `cpu`.

#![forbid(unsafe_code)]
