//! Min/max envelopes and pyramids for viewing dspk recordings, local or remote.
//!
//! Whoever draws a recording needs, for each pixel column of each channel, the smallest and
//! largest sample under it: every spike stays visible at every zoom. This crate computes those
//! envelopes exactly and reads as little of the recording as it can:
//! - [`Columns`]: a sample range cut into pixel columns (evenly, or on a bucket grid);
//! - [`Envelope`]: each column's minimum and maximum per channel, NaN skipped and counted,
//!   folded on the host from blocks in either memory [`Order`];
//! - [`DeviceFolder`]: the same envelope, bit for bit, folded on the device from a
//!   [`DeviceArray`](dspk_ops::DeviceArray), only the columns downloaded;
//! - [`Pyramid`]: min/max levels over fixed buckets ([`PyramidLayout`]), each level a fixed
//!   factor coarser, in memory or in a cache file reused while the recording is unchanged
//!   ([`CacheState`]), answering grid columns exactly; built page by page, nearest a focus
//!   first, on several threads by a [`PyramidBuild`];
//! - [`ViewRequest`] / [`View`]: channels, a sample range and a pixel width answered from the
//!   coarsest exact pyramid level, from raw samples folded block by block, or as the samples
//!   themselves ([`ViewSource`]);
//! - [`SignalBackend`]: what a viewer draws from, local ([`LocalBackend`]) or remote;
//! - [`picture`]: an RGB canvas with a bitmap font, axes and PNG encoding, and
//!   [`render_traces`](picture::render_traces), which draws an envelope as stacked traces;

#![forbid(unsafe_code)]

mod backend;
mod columns;
mod device;
mod envelope;
mod error;
pub mod picture;
mod pyramid;
mod view;

pub use backend::{LocalBackend, RAW_FALLBACK_VALUES, SignalBackend};
pub use columns::{Columns, MAX_COLUMNS};
pub use device::DeviceFolder;
pub use envelope::{Envelope, Order};
pub use error::{Error, Result};
pub use pyramid::{
    BuildCancel, BuildOptions, BuildProgress, CacheState, MAX_PAGE_VALUES, MAX_RESIDENT_BYTES,
    PageFold, ProgressFn, Pyramid, PyramidBuild, PyramidLayout, RecordingSignature,
};
pub use view::{RAW_BLOCK_VALUES, View, ViewRequest, ViewSource, fold_raw};
