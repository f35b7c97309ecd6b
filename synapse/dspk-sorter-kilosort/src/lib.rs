//! Kilosort4 and EMUsort spike sorting on the device, on one runner.
//!
//! Built stage by stage from `docs/KILOSORT4.md` (a specification of Kilosort 4.1.7 in our
//! own words; Kilosort is GPL and this crate is MIT/Apache, so nothing is transcribed from it).
//! Every pass over the recording goes through [`windows::DeviceWindows`] (the streaming path of
//! dspk-ops with the sorter's preprocessing chain, and the recording kept on the device between
//! passes when it fits); kernels run on whichever runtime the client belongs to, and only
//! results come back to the host.
//!
//! A whole sort is one call, [`Kilosort4::run`] (module [`sort`]), which returns a
//! [`SortOutput`] with the units ([`sorting::Sorting`]) and a report per stage; its
//! [`SortOutput::write_phy`] writes the Phy folder ([`phy`]) and a summary picture
//! ([`summary`]). The stages, each public for those who re-run part of a sort:
//! - the front half ([`front`]): preprocessing fit ([`preprocess`]: offsets, lower-median
//!   common reference, zero-phase high-pass, local whitening), universal templates
//!   ([`universal`]), template centres ([`centres`]), detection with universal templates
//!   ([`detect`]), drift estimation and correction ([`drift`]);
//! - the first clustering ([`groups`] by probe section, [`cluster`] the graph clustering of one
//!   group), the learned templates ([`learned`], [`merge`]'s near-duplicate merge);
//! - learned-template matching on the device ([`matching`]);
//! - the final clustering, the global merges ([`merge`], [`ccg`]) and the export
//!   post-processing ([`postprocess`]); per-stage reports ([`report`]).
//!
//! ```no_run
//! # fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use dspk_core::{ComputeTarget, RecordingSource};
//! use dspk_sorter_kilosort::{Kilosort4, KilosortSettings, SortProbe};
//! use dspk_synapse::groundtruth::{GroundTruthConfig, GroundTruthRecording};
//!
//! let recording = GroundTruthRecording::generate(&GroundTruthConfig::default())?;
//! let probe = SortProbe::from_probe(recording.probe(), recording.info().num_channels(), &[])?;
//! let client = ComputeTarget::from_env()?.client()?;
//! let output = Kilosort4::new(KilosortSettings::default())
//!     .run(&client, Arc::new(recording), &probe, &mut |_| {})?;
//! for stage in &output.stages {
//!     println!("{stage}");
//! }
//! println!("{} units, {} spikes", output.sorting.num_units(), output.sorting.num_spikes());
//! # Ok(()) }
//! ```
//!
//! Where this crate departs from Kilosort 4.1.7 on purpose (each documented where it happens,
//! and in `docs/decisions/0004` and `0005`): the high-pass runs with halos instead of
//! Kilosort's circular convolution of each batch ([`preprocess`]); channel offsets are one value
//! per channel ([`preprocess`]); spikes near window edges see their real neighbours
//! ([`front`]); universal templates are learned once ([`front`]); batches without spikes get no
//! drift shift ([`drift`]); small clustering groups are clustered and the tree's
//! cross-refractory test is evaluated ([`groups`], [`cluster`]); templates are aligned one by
//! one ([`learned`]); matching's subtractions never race ([`matching`]).
//!
//! # Feature flags
//!
//! The runtimes its kernels launch on, forwarded to `dspk-core` and `dspk-ops`: `wgpu`
//! (default), `cuda`, `hip`, `cpu`.

#![forbid(unsafe_code)]

pub mod algorithms;
pub mod clustering;
pub mod detection;
pub mod drift;
mod error;
pub mod export;
pub mod kilosort4;
pub mod merging;
pub mod preprocessing;
mod probe;
pub mod runner;
mod settings;
pub mod spikes;
pub mod sweep;
pub mod templates;

pub use error::{Error, Result};
pub use templates::learned::Alignment;
pub use probe::SortProbe;
pub use settings::{ClipScaling, KilosortSettings};
pub use kilosort4::{FrontHalf, Kilosort4, RunOptions, SortOutput};
pub use runner::{Progress, StageReport};
