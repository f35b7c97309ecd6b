//! Per-channel statistics on the device: mean, standard deviation, median, MAD noise.
