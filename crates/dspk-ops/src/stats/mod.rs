//! Per-channel statistics on the device: mean, standard deviation, median, MAD noise.

mod kernel;
mod launch;

pub(crate) use kernel::order_key;

pub use launch::{
    channel_mean, channel_mean_into, channel_median, channel_median_into, channel_std,
    channel_std_into, mad_noise, mad_noise_into,
};
