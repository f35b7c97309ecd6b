//! Pictures: an RGB [`Canvas`] with lines, rectangles, discs and text in a 5 x 7 bitmap
//! [`font`] of our own, [`axes`] with "nice" ticks, and [`render_traces`], which draws an
//! [`Envelope`](crate::Envelope) as stacked channel traces with names and a time axis. The
//! `png` crate (image-rs) only encodes the pixels ([`Canvas::encode_png`]); the same input
//! gives the same bytes.

pub mod axes;
mod canvas;
pub mod font;
mod traces;

pub use canvas::{Canvas, MAX_PIXELS, Rect, Rgb};
pub use traces::{Gain, PAPER, TraceStyle, render_traces, robust_spread};
