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
//! - [`picture`]: an RGB canvas with a bitmap font, axes and PNG encoding, and
//!   [`render_traces`](picture::render_traces), which draws an envelope as stacked traces;

#![forbid(unsafe_code)]

mod columns;
mod device;
mod envelope;
mod error;
pub mod picture;

pub use columns::{Columns, MAX_COLUMNS};
pub use device::DeviceFolder;
pub use envelope::{Envelope, Order};
pub use error::{Error, Result};
