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

use crate::algorithms::hdbscan::{HdbscanSettings, hdbscan_labels};
use crate::runner::{CorrectedWindows, SortContext};
use crate::{Error, KilosortSettings, Result};

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

/// The universal-templates stage (`docs/KILOSORT4.md` §4): with `templates_from_data`, clips
/// harvested from every `clip_batch_stride`-th batch of the whitened recording (one pass,
/// recorded in `ctx`) and templates learned from them on the host; else the templates of
/// `templates_file`. Learned once and used by both detection passes (Kilosort learns them
/// again after drift correction, from a draw that depends on the drift pass).
///
/// # Errors
///
/// [`Error::Setting`] for a missing or mismatched templates file or halos too short for the
/// clips; too few clips to learn from; device and read errors.
pub fn run(ctx: &mut SortContext, windows: &mut CorrectedWindows) -> Result<UniversalTemplates> {
    let settings = ctx.settings();
    let nt = settings.nt;
    if !settings.templates_from_data {
        let path = settings.templates_file.as_ref().ok_or(Error::Setting {
            name: "templates_file",
            reason: "templates_from_data is false but no file is given".to_string(),
        })?;
        let file = UniversalTemplates::from_npz(path)?;
        if file.nt() != nt {
            return Err(Error::Setting {
                name: "templates_file",
                reason: format!(
                    "{} holds templates of {} samples, nt is {nt}",
                    path.display(),
                    file.nt()
                ),
            });
        }
        return Ok(file);
    }
    let client = ctx.client().clone();
    let mut harvester = ClipHarvester::new(&client, ctx.probe().len(), settings.clips())?;
    windows.check_halo("clip harvest", harvester.halo())?;
    let (batch, stride) = (settings.batch_size, settings.clip_batch_stride);
    // The windows holding a harvested batch (the harvester keeps those batches' clips only).
    let harvested = |w: &dspk_core::HaloWindow| {
        let owned = w.valid();
        (owned.start / batch..owned.end.div_ceil(batch))
            .any(|b| (b as usize).is_multiple_of(stride))
    };
    ctx.pass_selected(windows, "universal templates", harvested, |w| {
        if !harvester.is_full() {
            harvester.harvest(&client, w)?;
        }
        Ok(())
    })?;
    harvester.finish();
    let batches = windows
        .num_samples()
        .div_ceil(batch)
        .div_ceil(stride as u64);
    ctx.host("template learning", |ctx| {
        check_clip_count(harvester.clips().len() / nt, batches, ctx.settings())?;
        learn_universal(
            ctx.client(),
            harvester.clips(),
            ctx.settings(),
            ctx.threads(),
        )
    })
}

impl KilosortSettings {
    /// The settings of the clip harvest (`Th_single_ch`, `nt`, `nt0min`; the rest Kilosort4's
    /// fixed values).
    #[must_use]
    pub fn clips(&self) -> ClipSettings {
        ClipSettings {
            thresholds: self.th_single_ch.clone(),
            nt: self.nt,
            nt0min: self.trough(),
            batch: self.batch_size,
            batch_stride: self.clip_batch_stride,
            ..ClipSettings::default()
        }
    }
}

/// Checks that `clips` clips, harvested from `batches` batches, are enough to learn the
/// `n_templates` universal templates from; the error says how many there were, where they
/// came from, the likely cause and the settings that change it.
fn check_clip_count(clips: usize, batches: u64, settings: &KilosortSettings) -> Result<()> {
    let k = settings.n_templates;
    if clips >= k {
        return Ok(());
    }
    Err(Error::Input {
        what: "universal templates",
        reason: format!(
            "{clips} isolated spike clips in the {batches} batch(es) harvested (every \
             clip_batch_stride = {}th batch of batch_size = {} samples), fewer than the \
             n_templates = {k} templates to learn from them: the recording is too short, its \
             batches too short, or it holds too few spikes above Th_single_ch = {:?}; sort a \
             longer recording, use longer batches (batch_size), a lower clip_batch_stride or \
             Th_single_ch, or the built-in templates (templates_from_data = false)",
            settings.clip_batch_stride, settings.batch_size, settings.th_single_ch,
        ),
    })
}

/// Universal templates from harvested clips as `settings` say: scaled per clip or globally,
/// wPCA on all, k-means on all or on those HDBSCAN does not call noise, on up to `threads`
/// host threads.
fn learn_universal(
    client: &cubecl::client::Client,
    clips: &[f32],
    settings: &KilosortSettings,
    threads: usize,
) -> Result<UniversalTemplates> {
    let (nt, nt0min) = (settings.nt, settings.trough());
    let scaled = scale_clips(clips, nt, settings.clip_scaling)?;
    let n = scaled.len() / nt;
    let min_size = settings.hdbscan_min_cluster_size;
    // EMUsort removes outliers only from at least max(20, min_cluster_size) clips.
    let keep = if settings.remove_spike_outliers && n >= min_size.max(20) {
        let points: Vec<f32> = scaled.iter().map(|&v| v as f32).collect();
        let hdbscan = HdbscanSettings {
            min_cluster_size: min_size,
            min_samples: None,
        };
        let labels = hdbscan_labels(client, &points, nt, &hdbscan, threads)?;
        Some(labels.iter().map(|&l| l >= 0).collect::<Vec<bool>>())
    } else {
        None
    };
    learn_templates_scaled(
        &scaled,
        keep.as_deref(),
        nt,
        nt0min,
        settings.n_templates,
        settings.n_pcs,
        settings.templates_seed,
        threads,
    )
}
