//! Ground truth: comparison of a sorting with known spike trains, and synthetic recordings.
//!
//! - [`compare_to_ground_truth`] scores a sorting against ground-truth [`SpikeTrains`] as
//!   SpikeInterface's `compare_sorter_to_ground_truth` does (match counts within 0.4 ms,
//!   agreement, Hungarian and best matches, per-unit accuracy, recall and precision, unit
//!   categories); the test suite checks it against numbers SpikeInterface computed.
//! - [`linear_sum_assignment`] is the assignment solver it uses
//!   (`scipy.optimize.linear_sum_assignment`).
//! - [`GroundTruthRecording`] is a deterministic synthetic recording with known spikes (units
//!   on a two-column probe, Poisson firing with a refractory period, spatial footprints,
//!   correlated noise, optional drift), computed window by window as a
//!   [`RecordingSource`](dspk_core::RecordingSource).

mod compare;
mod hungarian;
mod synth;
mod trains;

pub use compare::{
    CompareOptions, GroundTruthComparison, MatchMode, Performance, UnitCategories, UnitCounts,
    compare_to_ground_truth, delta_frames, match_count_matrix,
};
pub use hungarian::linear_sum_assignment;
pub use synth::{
    Drift, GroundTruthConfig, GroundTruthRecording, MAX_CHANNELS, MAX_SPIKES, MAX_UNITS,
    NoiseConfig, SyntheticUnit, TrueSpike,
};
pub use trains::SpikeTrains;
