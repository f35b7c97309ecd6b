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
//! - [`EmgRecording`] is a deterministic EMG-like recording (motor units on a line of
//!   contacts along the fibres, multiphasic potentials with conduction delays, recruitment by
//!   a ramping drive), held in memory as a `RecordingSource`.
//! - [`merge_peaks`] and [`score_events`] score a spike detection against the true spikes
//!   (peaks merged into events, events matched in time and on the probe), [`Bounds`] say what
//!   score a run accepts, and [`recalled`] counts true spike times a detection found.
//! - [`align_lags`] shifts each sorted cluster by its best constant lag before a comparison
//!   (for sorters that time spikes on another landmark than the ground truth).

mod compare;
mod detection;
mod emg;
mod hungarian;
mod lag;
mod synth;
mod trains;

pub use compare::{
    CompareOptions, GroundTruthComparison, MatchMode, Performance, UnitCategories, UnitCounts,
    compare_to_ground_truth, delta_frames, match_count_matrix,
};
pub use detection::{
    Bounds, ChannelPeak, Event, Radius, Score, Shortfall, merge_peaks, recalled, score_events,
};
pub use emg::{DelayMode, EmgConfig, EmgNoise, EmgRecording, EmgUnit, MAX_EMG_VALUES};
pub use hungarian::linear_sum_assignment;
pub use lag::{ClusterLag, LagAlignment, align_lags};
pub use synth::{
    Drift, GroundTruthConfig, GroundTruthRecording, MAX_CHANNELS, MAX_SPIKES, MAX_UNITS,
    NoiseConfig, SyntheticUnit, TrueSpike,
};
pub use trains::SpikeTrains;
