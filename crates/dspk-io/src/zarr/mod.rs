//! Zarr recordings (v2 and v3) in SpikeInterface's layout, through the `zarrs` crate.
//!
//! ```text
//! store.zarr/
//!   zarr.json | .zgroup + .zattrs   root attributes: sampling_frequency, num_segments, ...
//!   traces_seg0/                    [samples, channels], any compiled-in codecs
//!   channel_ids/                    [channels], strings (or integers)
//!   properties/gain_to_uV/          [channels], float64
//!   properties/offset_to_uV/        [channels], float64
//! ```

mod chunks;
mod reader;
mod writer;

use std::sync::Arc;

pub use chunks::{MAX_ZARR_SAMPLES, MissingChunks, check_zarr_extent, retrieve_zarr_chunk};
pub use reader::ZarrRecording;
pub use writer::{ZarrWriteOptions, write_zarr};

use crate::cache::ChunkCache;

/// Root attribute holding the exact sample rate (`"750003/25"`), written by
/// [`write_zarr`] beside SpikeInterface's float `sampling_frequency` and preferred when read.
const DSPK_RATE_ATTR: &str = "dspk_sample_rate";

/// Root attribute holding the channels' units, written by [`write_zarr`].
const DSPK_UNITS_ATTR: &str = "dspk_channel_units";

/// How a [`ZarrRecording`] is read.
#[derive(Debug, Clone)]
pub struct ZarrOptions {
    /// The cache decoded chunks go through; share one between recordings to share its budget.
    ///
    /// > default: a fresh cache of [`ChunkCache::DEFAULT_BUDGET`] (256 MiB).
    pub cache: Arc<ChunkCache>,
    /// The largest decoded chunk accepted (`[rows, columns] * sample size`); a larger one is
    /// refused before it is decoded, so metadata cannot make a read allocate without bound.
    ///
    /// > default: 512 MiB.
    pub max_chunk_bytes: usize,
    /// What a chunk inside `traces_seg0`'s shape that the store lacks reads as.
    ///
    /// > default: [`MissingChunks::Error`] (and the last chunk must exist at open).
    pub missing_chunks: MissingChunks,
}

impl Default for ZarrOptions {
    fn default() -> Self {
        Self {
            cache: Arc::new(ChunkCache::default()),
            max_chunk_bytes: 512 << 20,
            missing_chunks: MissingChunks::Error,
        }
    }
}
