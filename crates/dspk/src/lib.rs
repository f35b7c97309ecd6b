//! dspk: multi-channel signal processing written once in CubeCL and run on any GPU (wgpu,
//! CUDA, HIP) or the CPU, chosen at run time, with a GPU spike sorter for electrophysiology.
//!
//! This crate re-exports the workspace: the foundation types of [`dspk_core`] at the top level,
//! and each other crate as a module.
//!
//! ```no_run
//! use dspk::ComputeTarget;
//!
//! // DSPK_RUNTIME=wgpu|cuda|hip|cpu picks one of the runtimes compiled in; unset, the best
//! // available one.
//! let target = ComputeTarget::from_env()?;
//! let client = target.client()?;
//! println!("running on {target}: {}", client.properties().identity.name);
//! # Ok::<(), dspk::Error>(())
//! ```
//!
//! # Feature flags
//!
//! Runtimes (any number; `DSPK_RUNTIME` picks among them at run time), forwarded to every
//! crate that opens a device or launches kernels (the sorter included):
//! - `wgpu` (default): Vulkan, Metal, DX12, or lavapipe (software Vulkan) without a GPU.
//! - `cuda`: NVIDIA GPUs; needs only the driver at run time.
//! - `hip`: AMD GPUs through ROCm.
//! - `cpu`: CubeCL's CPU runtime.
//!
//! `cpu`, `cuda` and `hip` build LLVM-based compilers (a few minutes more to build).
//!
//! Parts of the workspace:
//! - `synapse` (default): the `synapse` module, electrophysiology (neural formats, probes,
//!   sorting outputs, ground truth). With it [`open`] reads every format; without it, the
//!   formats of [`io`] only.
//! - `zarr` (default): Zarr stores in [`open`] and `io` (blosc and zstd, built from C).
//! - `nwb` (default; implies `synapse` and `zarr`): NWB files (HDF5) and NWB-Zarr stores.
//! - `kilosort` (default): the `kilosort` module, the Kilosort4 and EMUsort sorter.
//! - `view` (default): the `view` module, min/max envelopes, pyramids and pictures of
//!   recordings (the sorter's summary picture draws with it).
//! - `stream`: the `stream` module, recordings and views served over QUIC + TLS 1.3 (quinn,
//!   rustls, tokio, prost: off by default, so a build without networking does not compile them).
//! - `test-util`: the `test_util` module, helpers for testing crates built on dspk.
//!
//! `default-features = false, features = ["wgpu"]` builds the core, the files of [`io`] and
//! the kernels of [`ops`] only.

#![forbid(unsafe_code)]

pub use dspk_core::*;

/// Recording files: raw binary, Zarr, .npy/.npz, format detection.
pub use dspk_io as io;
/// Device kernels and pipelines.
pub use dspk_ops as ops;
/// Kilosort4 and EMUsort.
#[cfg(feature = "kilosort")]
pub use dspk_sorter_kilosort as kilosort;
/// Recordings and views over QUIC + TLS 1.3: a server and a client session.
#[cfg(feature = "stream")]
pub use dspk_stream as stream;
/// Electrophysiology: neural formats, probes, sorting outputs, ground truth.
#[cfg(feature = "synapse")]
pub use dspk_synapse as synapse;
/// Min/max envelopes, pyramids and pictures for viewing.
#[cfg(feature = "view")]
pub use dspk_view as view;

/// Opens a recording of any format compiled in (raw binary and Zarr from [`io`]; SpikeGLX
/// files and run folders, mtscomp, Open Ephys, NWB, Intan and Phy folders from [`synapse`]),
/// picked from the path and metadata files only. A `.npy` holds no sample rate: open a 2-D one
/// with [`io::open_npy_recording`] (given a `.npy`, this says so).
#[cfg(feature = "synapse")]
pub use dspk_synapse::open;

/// Opens a recording in one of the formats of [`io`] (raw binary, Zarr), picked from the path
/// and metadata files only. The feature `synapse` adds the neural formats. A `.npy` holds no
/// sample rate: open a 2-D one with [`io::open_npy_recording`] (given a `.npy`, this says so).
#[cfg(not(feature = "synapse"))]
pub use dspk_io::open;

/// The types most programs name.
pub mod prelude {
    pub use dspk_core::{
        ChunkSchedule, ComputeTarget, RecordingSource, SampleFormat, SampleRate, WindowLoader,
    };
}
