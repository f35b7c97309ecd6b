//! Peak detection on the device (scipy.signal.find_peaks semantics), only peaks downloaded.
