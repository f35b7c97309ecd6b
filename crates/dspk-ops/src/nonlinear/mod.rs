//! Non-linear and smoothing filters on the device: median filter, Gaussian smoothing.

mod kernel;
mod launch;

pub use launch::{
    GaussianFilter, MAX_GAUSSIAN_RADIUS, MAX_MEDFILT_KERNEL, MedianFilter, gaussian_filter1d,
    gaussian_kernel1d, medfilt,
};
