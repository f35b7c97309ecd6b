//! IIR filtering on the device: sosfilt and sosfiltfilt over many channels at once.
