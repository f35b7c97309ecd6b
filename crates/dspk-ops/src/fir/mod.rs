//! FIR filtering on the device: lfilter, resample_poly, decimate.
