//! Universal templates (Kilosort4 §4): the temporal shapes (`wTEMP`) and principal components
//! (`wPCA`) that detection scores with and spike features are projected on.
//!
//! Two ways to get them, as Kilosort4's `templates_from_data` setting chooses:
//! - learned from the data: [`ClipHarvester`] collects the clips of isolated single-channel
//!   peaks from whitened windows on the device, and [`learn_templates`] turns them into
//!   principal components and k-means centroids on the host;
//! - loaded from a file in the layout of Kilosort4's bundled `wTEMP.npz`
//!   ([`UniversalTemplates::from_npz`]).

mod clips;
mod kernel;
mod kmeans;
mod learn;
mod npz;
mod pca;

pub use clips::{ClipHarvester, ClipSettings};
pub use learn::{learn_templates, learn_templates_scaled, scale_clips};

use crate::{Error, Result};

/// `k` temporal templates and `p` principal components, each `nt` samples long with the trough
/// at `nt0min`, row-major (`wtemp[i * nt + j]` is sample `j` of template `i`).
#[derive(Debug, Clone, PartialEq)]
pub struct UniversalTemplates {
    nt: usize,
    nt0min: usize,
    wtemp: Vec<f32>,
    wpca: Vec<f32>,
}

impl UniversalTemplates {
    /// Templates from their values: `wtemp` holds `k x nt` values, `wpca` `p x nt`.
    ///
    /// # Errors
    ///
    /// [`Error::Setting`] when `nt` is even or 0, `nt0min >= nt`, a matrix is empty or not a
    /// whole number of rows, or a value is not finite.
    pub fn new(nt: usize, nt0min: usize, wtemp: Vec<f32>, wpca: Vec<f32>) -> Result<Self> {
        if nt == 0 || nt.is_multiple_of(2) {
            return Err(Error::Setting {
                name: "nt",
                reason: format!("the template length must be odd, got {nt}"),
            });
        }
        if nt0min >= nt {
            return Err(Error::Setting {
                name: "nt0min",
                reason: format!("the trough index {nt0min} must lie inside the {nt} samples"),
            });
        }
        for (name, values) in [("wTEMP", &wtemp), ("wPCA", &wpca)] {
            if values.is_empty() || !values.len().is_multiple_of(nt) {
                return Err(Error::Setting {
                    name: "universal templates",
                    reason: format!("{name} holds {} values, not rows of {nt}", values.len()),
                });
            }
            if let Some(i) = values.iter().position(|v| !v.is_finite()) {
                return Err(Error::Setting {
                    name: "universal templates",
                    reason: format!("{name} value {i} is {}", values[i]),
                });
            }
        }
        Ok(Self {
            nt,
            nt0min,
            wtemp,
            wpca,
        })
    }

    /// Samples per template (`nt`, 61 by default).
    pub fn nt(&self) -> usize {
        self.nt
    }

    /// The trough's index inside a template (`nt0min`, 20 by default).
    pub fn nt0min(&self) -> usize {
        self.nt0min
    }

    /// Number of temporal templates (`n_templates`, `K`).
    pub fn k(&self) -> usize {
        self.wtemp.len() / self.nt
    }

    /// Number of principal components (`n_pcs`, `P`).
    pub fn p(&self) -> usize {
        self.wpca.len() / self.nt
    }

    /// The temporal templates, `k x nt` row-major.
    pub fn wtemp(&self) -> &[f32] {
        &self.wtemp
    }

    /// The principal components, `p x nt` row-major.
    pub fn wpca(&self) -> &[f32] {
        &self.wpca
    }
}
