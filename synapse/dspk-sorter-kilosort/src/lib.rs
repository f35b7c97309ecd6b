//! Kilosort4 and EMUsort spike sorting on the device, on one runner.
//!
//! Built stage by stage from `docs/KILOSORT4.md` (a specification of Kilosort 4.1.7 in our
//! own words; Kilosort is GPL and this crate is MIT/Apache, so nothing is transcribed from it).
//! Every pass over the recording goes through [`windows::DeviceWindows`] (the streaming path of
//! dspk-ops with the sorter's preprocessing chain, and the recording kept on the device between
//! passes when it fits); kernels run on whichever runtime the client belongs to, and only
//! results come back to the host.
//!
//! The front half ([`front::run_front`]) is here: preprocessing fit ([`preprocess`]: offsets,
//! lower-median common reference, zero-phase high-pass, local whitening), universal templates
//! ([`universal`]: learned from the data or read from an `.npz`), template centres
//! ([`centres`]), detection with universal templates ([`detect`]) and drift estimation and
//! correction ([`drift`]), with a per-stage report ([`report`]). Clustering, matching, merges and
//! the Phy output follow.
//!
//! ```no_run
//! # fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use dspk_core::{ComputeTarget, RecordingSource};
//! use dspk_sorter_kilosort::front::{RunOptions, run_front};
//! use dspk_sorter_kilosort::{KilosortSettings, SortProbe};
//! use dspk_synapse::groundtruth::{GroundTruthConfig, GroundTruthRecording};
//!
//! let recording = GroundTruthRecording::generate(&GroundTruthConfig::default())?;
//! let probe = SortProbe::from_probe(recording.probe(), recording.info().num_channels(), &[])?;
//! let client = ComputeTarget::from_env()?.client()?;
//! let settings = KilosortSettings::default();
//! let front = run_front(&client, Arc::new(recording), &probe, &settings, &RunOptions::default(), &mut |_| {})?;
//! for stage in &front.stages {
//!     println!("{stage}");
//! }
//! println!("{} spikes", front.spikes.len());
//! # Ok(()) }
//! ```
//!
//! Where this crate departs from Kilosort 4.1.7 on purpose (each documented where it happens):
//! the high-pass runs with halos instead of Kilosort's circular convolution of each batch
//! ([`preprocess`]); channel offsets are one value per channel ([`preprocess`]); spikes near
//! window edges see their real neighbours ([`front`]); universal templates are learned once
//! ([`front`]); batches without spikes get no drift shift ([`drift`]).
//!
//! # Feature flags
//!
//! The runtimes its kernels launch on, forwarded to `dspk-core` and `dspk-ops`: `wgpu`
//! (default), `cuda`, `hip`, `cpu`.

#![forbid(unsafe_code)]

pub mod ccg;
pub mod centres;
pub mod cluster;
pub mod detect;
pub mod drift;
mod error;
pub mod front;
pub mod groups;
pub mod learned;
pub mod matching;
pub mod merge;
pub mod phy;
pub mod postprocess;
pub mod preprocess;
mod probe;
mod readback;
pub mod report;
mod settings;
pub mod sort;
pub mod sorting;
pub mod summary;
pub mod universal;
pub mod windows;

pub use error::{Error, Result};
pub use probe::SortProbe;
pub use settings::KilosortSettings;
pub use sort::{Kilosort4, SortOutput};
