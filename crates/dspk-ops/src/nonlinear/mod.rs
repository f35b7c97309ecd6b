//! Non-linear and smoothing filters on the device: median filter, Gaussian smoothing.
