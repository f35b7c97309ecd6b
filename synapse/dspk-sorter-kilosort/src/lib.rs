//! Kilosort4 and EMUsort spike sorting on the device, on one runner.
//!
//! Built stage by stage from `docs/KILOSORT4.md` (a specification of Kilosort 4.1.7 in our
//! own words; Kilosort is GPL and this crate is MIT/Apache, so nothing is transcribed from it).
//! Every pass over the recording goes through [`runner::DeviceWindows`] (the streaming path of
//! dspk-ops with the sorter's preprocessing chain, and the recording kept on the device between
//! passes when it fits); kernels run on whichever runtime the client belongs to, and only
//! results come back to the host.
//!
//! A whole sort is one call, [`Kilosort4::run`], which returns a [`SortOutput`] with the units
//! ([`export::sorting::Sorting`]) and a report per stage; [`SortOutput::write_phy`] writes the
//! Phy folder and a summary picture. The stages are folders named as Kilosort4's modules are,
//! each with one entry point `run(ctx, ..)` that records its report in the
//! [`runner::SortContext`], in the order [`Kilosort4::run`] calls them:
//! - [`preprocessing`]: offsets, lower-median common reference, zero-phase high-pass, local
//!   whitening, EMUsort's channel delays ([`preprocessing::delays`]);
//! - [`detection`]: universal templates ([`detection::universal`]), template centres
//!   ([`detection::centres`]), spike detection with them;
//! - [`drift`]: drift estimation from a detection pass, and correction of every later pass;
//! - [`clustering`]: the first and final clusterings (groups by probe section, the graph
//!   clustering of one group in `clustering/group/`);
//! - [`templates`]: the learned templates ([`templates::learned`]) and matching them on the
//!   device ([`templates::matching`]);
//! - [`merging`]: the global merges by template similarity and refractoriness;
//! - [`export`]: post-processing, the sorting, Phy folder, summary picture, quality metrics and
//!   EMUsort's score.
//!
//! Beside them: [`runner`] (windows, corrected windows, the context, reports), [`spikes`] (what
//! passes between stages), [`algorithms`] (HDBSCAN, cross-correlograms, shared kernels) and
//! [`sweep`] (many sorts of one recording, EMUsort's parameter sweeps).
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
//! Kilosort's circular convolution of each batch ([`preprocessing`]); channel offsets are one
//! value per channel ([`preprocessing`]); spikes near window edges see their real neighbours
//! ([`detection`]); universal templates are learned once ([`detection::universal`]); batches
//! without spikes get no drift shift ([`drift`]); small clustering groups are clustered and the
//! tree's cross-refractory test is evaluated ([`clustering`]); templates are aligned one by one
//! ([`templates::learned`]); matching's subtractions never race ([`templates::matching`]).
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
mod kilosort4;
pub mod merging;
pub mod preprocessing;
mod probe;
pub mod runner;
mod settings;
pub mod spikes;
pub mod sweep;
pub mod templates;

pub use error::{Error, Result};
pub use kilosort4::{FrontHalf, Kilosort4, RunOptions, SortOutput, THREADS_VAR, host_threads};
pub use probe::SortProbe;
pub use runner::{Progress, StageReport};
pub use settings::{Alignment, ClipScaling, KilosortSettings};
