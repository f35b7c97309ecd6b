//! The foundation of dspk: recordings, exact rates, windows, the background window loader, and
//! the run-time choice of compute device.
//!
//! - [`RecordingSource`] is what every reader implements: `read` gives scaled `f32` values
//!   (`stored * gain + offset`, channel-major), `read_stored` the stored little-endian values
//!   untouched (for the compact upload path). [`MemoryRecording`] holds samples in memory;
//!   [`SyntheticRecording`] computes them on demand; [`ScaledOnly`] hides stored access.
//! - [`SampleRate`] and [`RationalTime`] are exact rationals (30000.12 Hz stays exact).
//! - [`ChunkSchedule`] cuts a recording into [`HaloWindow`]s whose valid ranges tile it, with
//!   halos for context and an owner-only rule so events are never reported twice.
//! - [`WindowLoader`] reads window i+1 on a background thread while the caller works on
//!   window i, with exactly two buffers circulating; sources that allow it
//!   ([`ConcurrentReads`]) have each window read by a few threads at once.
//! - [`rng::SplitMix64`] is the seeded generator of synthetic data and tests.
//! - [`ComputeTarget`] picks a CubeCL runtime (`DSPK_RUNTIME=wgpu|cuda|hip|cpu`) among those
//!   compiled in and opens its client.
//! - [`KernelCache`] keeps compiled CUDA/HIP kernels on disk between runs
//!   (`DSPK_KERNEL_CACHE=DIR|off`, default `~/.cache/dspk/kernels`); see [`kernel_cache`].
//!
//! This crate knows nothing of neurons, probes or file formats.
//!
//! # Feature flags
//!
//! - `wgpu` (default): the wgpu runtime (Vulkan, Metal, DX12; lavapipe without a GPU).
//! - `cuda`: the CUDA runtime (with `kernel-cache`).
//! - `hip`: the ROCm/HIP runtime (with `kernel-cache`).
//! - `cpu`: CubeCL's CPU runtime.
//! - `kernel-cache`: compiled kernels kept on disk between runs ([`kernel_cache`]); only the
//!   CUDA and HIP runtimes read it.
//! - `test-util`: the `test_util` module, helpers for tests (runtime fan-out, conformance suites).

mod buffer;
mod compute;
mod error;
pub mod kernel_cache;
mod loader;
mod memory;
mod parts;
mod pinned;
pub mod readahead;
mod recording;
mod repeated;
pub mod rng;
mod sample;
mod time;
mod units;
mod window;

#[cfg(feature = "test-util")]
pub mod test_util;

pub use compute::{ComputeTarget, DEVICE_ENV, RUNTIME_ENV, parse_device_index};
pub use error::{Error, Result};
pub use kernel_cache::{KERNEL_CACHE_ENV, KernelCache, KernelCacheOff};
pub use loader::{
    LOADER_THREADS_ENV, LoadedWindow, LoaderOptions, LoaderStats, MAX_LOADER_THREADS,
    WindowElement, WindowLoader,
};
pub use memory::{MemoryRecording, SyntheticRecording};
pub use recording::{
    ChannelInfo, ConcurrentReads, ReadRequest, RecordingInfo, RecordingSource, ScaledOnly,
    fill_scaled_by_runs, fill_stored_by_runs,
};
pub use repeated::RepeatedRecording;
pub use sample::{SampleFormat, StoredSample, scale};
pub use time::{RationalTime, SampleRate};
pub use units::{format_bytes, format_count};
pub use window::{ChunkSchedule, HaloWindow};

/// CubeCL, as dspk uses it (so dependents name one version).
pub use cubecl;
