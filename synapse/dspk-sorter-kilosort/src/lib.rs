//! Kilosort4 and EMUsort spike sorting on the device, on one runner.
//!
//! Nothing is implemented yet: the sorter arrives stage by stage with the sorter issues.

#![forbid(unsafe_code)]
