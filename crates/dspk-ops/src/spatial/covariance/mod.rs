//! Channel covariance (second moments) accumulated on the device over many windows.

mod kernel;
mod launch;

pub use launch::CovarianceAccumulator;
