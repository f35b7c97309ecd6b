//! Learned-template matching (Kilosort4 §7): matching pursuit of the learned templates on
//! whitened, drift-corrected windows, on the device, with each spike's template, score, scale
//! and PC features.

mod kernel;
mod launch;
#[cfg(test)]
mod reference;
mod setup;
#[cfg(test)]
mod tests;

pub use launch::Matcher;

/// Settings of learned-template matching.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatchSettings {
    /// `Th_learned`: a peak's score (projection on the unit-norm template) must exceed it (8).
    pub th_learned: f32,
    /// `max_peels`: matching-pursuit rounds per window at most (100).
    pub max_peels: usize,
    /// `nearest_chans`: feature channels per template, capped at the channel count (10).
    pub nearest_chans: usize,
}

impl Default for MatchSettings {
    /// Kilosort4's defaults: `Th_learned` 8, `max_peels` 100, `nearest_chans` 10.
    fn default() -> Self {
        Self {
            th_learned: 8.0,
            max_peels: 100,
            nearest_chans: 10,
        }
    }
}
