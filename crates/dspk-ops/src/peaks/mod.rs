//! Peak detection on the device (`scipy.signal.find_peaks` semantics), only peaks downloaded.

mod kernel;
mod launch;

pub use launch::{Height, NoisePeaks, Peak, PeakDetector, PeakOptions, Polarity, find_peaks};
