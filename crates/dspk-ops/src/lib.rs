//! CubeCL kernels for dspk: stored-integer unpack, filters, resampling, spatial operators, statistics, peak finding and device pipelines.
//!
//! Nothing is implemented yet: the kernels arrive with the data-path and signal-processing issues.

#![forbid(unsafe_code)]
