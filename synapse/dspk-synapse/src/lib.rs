//! Electrophysiology for dspk: neural recording formats, probes, Phy sorting folders, ground
//! truth and comparison metrics.
//!
//! Every recording reader implements [`dspk_core::RecordingSource`] with `read_stored`
//! returning the file's values untouched and `read` the values in the file's unit (µV for
//! neural channels) from exact per-channel gains and offsets:
//!
//! - [`spikeglx`]: SpikeGLX `.bin` + `.meta` (Neuropixels 1.0/2.0 `ap`/`lf`, `nidq`), gains
//!   from `imroTbl` through `snsSaveChanSubset`, the SY0 sync column kept apart, geometry.
//! - [`openephys`]: Open Ephys binary (`structure.oebin` + `continuous.dat`).
//! - [`nwb`]: NWB `ElectricalSeries` in HDF5 files and NWB-Zarr stores.
//! - [`mtscomp`]: mtscomp `.cbin` + `.ch` (zlib chunks decoded in parallel and cached).
//! - [`intan`]: Intan `.rhd` amplifier data.
//!
//! [`probe`] reads and writes probe descriptions into one [`Probe`] type; [`phy`] writes and
//! reads Phy sorting folders; [`groundtruth`] compares a sorting with known spike trains (as
//! SpikeInterface's `compare_sorter_to_ground_truth`) and generates synthetic ground-truth
//! recordings. [`open`] opens a recording of any format through a [`registry`] of them all;
//! [`register_formats`] adds this crate's formats to a [`dspk_io::Registry`] of your own.
//!
//! Files are untrusted: sizes read from headers are checked against the file before anything
//! is allocated, and every failure is an [`Error`] naming the file and the problem.

#![forbid(unsafe_code)]

mod error;
mod formats;

pub mod groundtruth;
pub mod intan;
pub mod mtscomp;
pub mod nwb;
pub mod openephys;
pub mod phy;
pub mod probe;
pub mod spikeglx;

pub use error::{Error, Result};
pub use formats::{open, register_formats, registry};
pub use probe::{Contact, Probe};
