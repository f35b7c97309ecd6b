//! Recording files for dspk: raw binary and Zarr recordings, `.npy`/`.npz` containers, format
//! detection and a chunk cache.
//!
//! Every reader implements [`dspk_core::RecordingSource`]: `read` gives scaled `f32` values,
//! `read_stored` the stored values untouched (little-endian, whatever the file's byte order).
//!
//! - [`RawRecording`]: a raw binary file (interleaved or channel-major, any byte order, a
//!   fixed header) described by a JSON sidecar ([`RawSidecar`]) or by SpikeInterface's
//!   `binary.json` ([`RawRecording::open_spikeinterface`]), or a plain binary file described
//!   by channel count, rate and dtype as Kilosort reads one ([`RawRecording::open_plain`] with
//!   a [`PlainBinary`]); [`write_raw`] writes one, [`RawRecording::write_sidecar`] describes
//!   one in place. Reads go
//!   from the file straight into the caller's buffer with positional reads.
//! - `ZarrRecording`: SpikeInterface's Zarr layout (v2 and v3; blosc, zstd, sharding),
//!   decoded chunks kept in a [`ChunkCache`]; `write_zarr` writes one (feature `zarr`, on by
//!   default).
//! - [`NpyArray`], [`NpyHeader`], [`NpzArchive`]: `.npy`/`.npz` containers with run-time dtypes,
//!   C and Fortran order, both byte orders, zip64; [`open_npy_recording`] reads a 2-D array as
//!   a recording.
//! - [`open`] picks the format of a path from the path and metadata files only, among this
//!   crate's [`Format`]s; a [`Registry`] holds an explicit list, to which other crates add
//!   theirs with [`Registry::register`] (no global state).
//!
//! Files are untrusted: a size from a header or a sidecar is checked against the file's length
//! (or a stated limit) before anything is allocated, and every failure is an [`Error`] that
//! names the file and the problem.

#![forbid(unsafe_code)]

mod cache;
mod dtype;
mod error;
mod file;
mod npy;
mod raw;
mod registry;
#[cfg(feature = "zarr")]
mod zarr;

pub use cache::{CacheStats, ChunkCache, ChunkKey};
pub use dtype::{ByteOrder, Dtype, ElementKind};
pub use error::{Error, Result};
pub use file::{DataFile, METADATA_LIMIT, check_readable, read_small_file};
pub use npy::{NPY_MAGIC, NpyArray, NpyHeader, NpzArchive, open_npy_recording};
pub use raw::{
    MAX_PLAIN_CHANNELS, PlainBinary, RawRecording, RawSidecar, RawSpec, RawWriteOptions,
    SI_BINARY_JSON, SIDECAR_FORMAT, SampleOrder, SiBinaryMeta, sidecar_path, write_raw,
};
pub use registry::{Detection, Format, Registry, open};
#[cfg(feature = "zarr")]
pub use zarr::{
    MAX_ZARR_SAMPLES, MissingChunks, ZarrOptions, ZarrRecording, ZarrWriteOptions,
    check_zarr_extent, retrieve_zarr_chunk, write_zarr,
};
