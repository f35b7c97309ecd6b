//! Pyramids: min/max levels over fixed buckets, built page by page, in memory or in a cache
//! file beside the recording.

mod build;
mod cache;
mod layout;
mod page;
mod store;

pub use build::{BuildCancel, BuildOptions, BuildProgress, PageFold, ProgressFn, PyramidBuild};
pub use cache::{CacheState, RecordingSignature};
pub use layout::{MAX_PAGE_VALUES, MAX_RESIDENT_BYTES, PyramidLayout};
pub use store::Pyramid;

pub(crate) use page::merge;
