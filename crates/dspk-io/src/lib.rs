//! Recording files for dspk: raw binary and Zarr recordings, .npy/.npz containers, format detection and a chunk cache.
//!
//! Nothing is implemented yet: the readers and writers arrive with the dspk-io issue.

#![forbid(unsafe_code)]
