//! Stored samples to scaled `f32` on the device: the window crosses the bus in its stored form
//! (int16 is half the bytes of f32) and is unpacked and scaled here.

mod kernel;
mod launch;

pub use launch::{ChannelAffine, unpack_scaled};
