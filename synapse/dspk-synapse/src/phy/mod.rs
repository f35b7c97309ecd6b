//! Phy sorting folders: the `.npy` arrays, `params.py` and `cluster_*.tsv` files that Kilosort
//! and SpikeInterface's `export_to_phy` write and phy (through phylib's `TemplateModel`) opens.
//!
//! [`read_phy`] reads a folder into a [`PhyFolder`]; [`write_phy`] writes one;
//! [`PhyFormat`] opens the raw recording `params.py` names ([`PhyParams::open_recording`]).
//! The files
//! (phylib's names; all arrays are numpy `.npy`):
//!
//! | file | contents | read as | written as |
//! |---|---|---|---|
//! | `spike_times.npy` | spike times in samples | any integer dtype, `(n,)` or `(n, 1)` | `int64 (n,)` |
//! | `spike_templates.npy` | template of each spike | integers (or integral floats) | `int32 (n,)` |
//! | `spike_clusters.npy` | cluster of each spike (optional: phylib copies the templates) | as templates | `int32 (n,)` |
//! | `amplitudes.npy` | amplitude of each spike (optional) | any float or integer | `float32 (n,)` |
//! | `templates.npy` | `[templates, samples, channels]` | float32/float64, C or Fortran order | `float32`, C order |
//! | `template_ind.npy` | channels of sparse templates (optional) | integers, -1 for none | `int64` |
//! | `templates_ind.npy` | Kilosort's channel table (phylib ignores it) | integers | not written |
//! | `channel_map.npy` | raw-file column of each channel | integers | `int32 (channels,)` |
//! | `channel_positions.npy` | `[channels, 2]` in µm | any float | `float32` (float64 if a value needs it) |
//! | `similar_templates.npy` | `[templates, templates]` (optional) | any float | `float32` |
//! | `whitening_mat.npy`, `whitening_mat_inv.npy` | `[channels, channels]` (optional) | any float | `float64`; the inverse always (identity if absent) |
//! | `pc_features.npy`, `pc_feature_ind.npy` | `[spikes, pcs, local channels]`, `[templates, local channels]` (optional) | floats, integers | `float32`, `int32` |
//! | `params.py` | [`PhyParams`] | `name = literal` lines | the same |
//! | `cluster_*.tsv` | [`ClusterColumn`]s (`KSLabel`, `group`, ...) | LF or CRLF | LF |
//!
//! Every `.npy` goes through [`dspk_io::NpyArray`], which checks the header's size against
//! the file before allocating; the checks between files (equal spike counts, template ids
//! below the template count, one channel map entry per template channel, ...) are
//! [`PhyFolder::check`]'s, and a failure names the file that disagrees.

mod format;
mod params;
mod read;
mod tsv;
mod write;

pub use format::PhyFormat;
pub use params::{ParamValue, PhyParams};
pub use read::read_phy;
pub use tsv::ClusterColumn;
pub use write::{PhyWriteOptions, write_phy};

use crate::{Error, Result};

/// `text` for an error message, control characters escaped (`\t`, `\u{0}`).
fn shown(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// An n-dimensional array in C (row-major) order: the last index varies fastest.
#[derive(Debug, Clone, PartialEq)]
pub struct Array<T> {
    shape: Vec<usize>,
    values: Vec<T>,
}

impl<T> Array<T> {
    /// An array of `shape` holding `values` in C order.
    ///
    /// # Errors
    ///
    /// [`Error::Argument`] if `values` does not hold the product of `shape` elements.
    pub fn new(shape: Vec<usize>, values: Vec<T>) -> Result<Self> {
        let count = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        if count != Some(values.len()) {
            return Err(Error::Argument(format!(
                "an array of shape {shape:?} needs {count:?} values, got {}",
                values.len()
            )));
        }
        Ok(Self { shape, values })
    }

    /// The shape.
    #[must_use]
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The values in C order.
    #[must_use]
    pub fn values(&self) -> &[T] {
        &self.values
    }

    /// The values in C order, by value.
    #[must_use]
    pub fn into_values(self) -> Vec<T> {
        self.values
    }

    /// The value at `index` (one index per dimension), if it is inside the shape.
    #[must_use]
    pub fn get(&self, index: &[usize]) -> Option<&T> {
        if index.len() != self.shape.len() {
            return None;
        }
        let mut flat = 0;
        for (&i, &dim) in index.iter().zip(&self.shape) {
            if i >= dim {
                return None;
            }
            flat = flat * dim + i;
        }
        self.values.get(flat)
    }
}

/// The contents of a Phy folder: spikes, templates, channels, parameters and cluster labels.
///
/// Spike `i` is at sample `spike_times[i]`, was found with template `spike_templates[i]` and
/// belongs to cluster `spike_clusters[i]` (equal to the template until a curation splits or
/// merges clusters). Channel `c` of the templates (dense) is column `channel_map[c]` of the raw
/// file, at `channel_positions[c]`.
///
/// Values are converted when read: ids and times to integers (refusing values that do not
/// fit), amplitudes and templates to `f32` (float64 files are rounded to the nearest `f32`),
/// positions and whitening matrices to `f64`. [`check`](Self::check) states what must agree.
#[derive(Debug, Clone, PartialEq)]
pub struct PhyFolder {
    /// `params.py`.
    pub params: PhyParams,
    /// `spike_times.npy`: spike times in samples, non-decreasing.
    pub spike_times: Vec<i64>,
    /// `spike_templates.npy`: the template of each spike.
    pub spike_templates: Vec<u32>,
    /// `spike_clusters.npy`: the cluster of each spike (a copy of the templates when the folder
    /// has no `spike_clusters.npy`, as phylib does).
    pub spike_clusters: Vec<u32>,
    /// `amplitudes.npy`: the template scaling of each spike, if the folder has it.
    pub amplitudes: Option<Vec<f32>>,
    /// `templates.npy`: `[templates, samples, channels]` (dense: one per channel of the
    /// channel map) or `[templates, samples, local channels]` with
    /// [`template_channels`](Self::template_channels).
    pub templates: Array<f32>,
    /// Sparse templates' channels `[templates, local channels]`: channel indices into the
    /// channel map, -1 where a template has fewer channels. Read from phylib's
    /// `template_ind.npy`, else Kilosort's `templates_ind.npy` (which Kilosort fills with
    /// every channel, so the templates are dense either way); written as `template_ind.npy`
    /// only when the templates are really sparse.
    pub template_channels: Option<Array<i64>>,
    /// `channel_map.npy`: the raw-file column of each channel.
    pub channel_map: Vec<u32>,
    /// `channel_positions.npy`: `[x, y]` of each channel in µm.
    pub channel_positions: Vec<[f64; 2]>,
    /// `similar_templates.npy`: `[templates, templates]` similarity, if present.
    pub similar_templates: Option<Array<f32>>,
    /// `whitening_mat.npy`: `[channels, channels]`, if present.
    pub whitening_mat: Option<Array<f64>>,
    /// `whitening_mat_inv.npy`: `[channels, channels]`, if present.
    pub whitening_mat_inv: Option<Array<f64>>,
    /// `pc_features.npy`: `[spikes, pcs, local channels]`, if present.
    pub pc_features: Option<Array<f32>>,
    /// `pc_feature_ind.npy`: `[templates, local channels]` channel indices, with
    /// `pc_features`.
    pub pc_feature_ind: Option<Array<u32>>,
    /// The columns of the `cluster_*.tsv` files, by file name then column order.
    pub cluster_columns: Vec<ClusterColumn>,
}

/// What a [`PhyFolder::check`] found wrong: the file whose contents disagree, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file whose contents are wrong (`spike_clusters.npy`).
    pub file: String,
    /// What is wrong, with the values involved.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.file, self.message)
    }
}

impl PhyFolder {
    /// The number of spikes.
    #[must_use]
    pub fn num_spikes(&self) -> usize {
        self.spike_times.len()
    }

    /// The number of templates (`templates.npy`'s first dimension).
    #[must_use]
    pub fn num_templates(&self) -> usize {
        self.templates.shape().first().copied().unwrap_or(0)
    }

    /// The number of channels (`channel_map.npy`'s length).
    #[must_use]
    pub fn num_channels(&self) -> usize {
        self.channel_map.len()
    }

    /// The first cluster column named `name` (`"KSLabel"`, `"group"`), in file name order.
    #[must_use]
    pub fn cluster_column(&self, name: &str) -> Option<&ClusterColumn> {
        self.cluster_columns.iter().find(|c| c.name == name)
    }

    /// The spike times (samples) of each cluster, by cluster id, in time order.
    #[must_use]
    pub fn spike_trains(&self) -> std::collections::BTreeMap<u32, Vec<i64>> {
        let mut trains = std::collections::BTreeMap::<u32, Vec<i64>>::new();
        for (&cluster, &time) in self.spike_clusters.iter().zip(&self.spike_times) {
            trains.entry(cluster).or_default().push(time);
        }
        trains
    }

    /// Checks that the parts agree, as phylib's `TemplateModel` needs them to:
    ///
    /// - one template, cluster, amplitude and `pc_features` row per spike time;
    /// - spike times non-negative and non-decreasing;
    /// - template and cluster ids at most `i32::MAX` (phylib reads them as `int32`), template
    ///   ids below the number of templates;
    /// - templates three-dimensional, with one channel per channel map entry (dense) or as
    ///   many as `template_channels` has columns (sparse), whose entries are -1 or a channel;
    /// - one position per channel, every `channel_map` entry below `n_channels_dat`;
    /// - `similar_templates` `[templates, templates]`, whitening matrices `[channels,
    ///   channels]`, `pc_feature_ind` `[templates, pc_features' last dimension]` of channels;
    /// - cluster columns in files named `cluster_*.tsv`, names and values without tabs or line
    ///   breaks, no column name twice in a file, `cluster_id` not a column name.
    ///
    /// # Errors
    ///
    /// The first [`Problem`] found, naming the file that disagrees.
    pub fn check(&self) -> std::result::Result<(), Problem> {
        let problem = |file: &str, message: String| {
            Err(Problem {
                file: file.to_string(),
                message,
            })
        };
        let n = self.num_spikes();
        let lengths = [
            ("spike_templates.npy", Some(self.spike_templates.len())),
            ("spike_clusters.npy", Some(self.spike_clusters.len())),
            ("amplitudes.npy", self.amplitudes.as_ref().map(Vec::len)),
            (
                "pc_features.npy",
                self.pc_features
                    .as_ref()
                    .and_then(|a| a.shape().first().copied()),
            ),
        ];
        for (file, len) in lengths {
            if let Some(len) = len.filter(|&len| len != n) {
                return problem(file, format!("{len} spikes, spike_times.npy has {n}"));
            }
        }
        if let Some(i) = self.spike_times.iter().position(|&t| t < 0) {
            return problem(
                "spike_times.npy",
                format!("spike {i} is at a negative sample {}", self.spike_times[i]),
            );
        }
        if let Some(i) = self.spike_times.windows(2).position(|w| w[1] < w[0]) {
            return problem(
                "spike_times.npy",
                format!(
                    "spike times must not decrease: spike {} at {} follows {}",
                    i + 1,
                    self.spike_times[i + 1],
                    self.spike_times[i]
                ),
            );
        }
        let shape = self.templates.shape();
        if shape.len() != 3 {
            return problem(
                "templates.npy",
                format!("expected [templates, samples, channels], got shape {shape:?}"),
            );
        }
        let (units, local) = (shape[0], shape[2]);
        let max_id = i32::MAX.unsigned_abs();
        if let Some(i) = self
            .spike_templates
            .iter()
            .position(|&t| t as usize >= units)
        {
            return problem(
                "spike_templates.npy",
                format!(
                    "spike {i} has template {}, templates.npy has {units} templates",
                    self.spike_templates[i]
                ),
            );
        }
        let ids = [
            ("spike_templates.npy", "template", &self.spike_templates),
            ("spike_clusters.npy", "cluster", &self.spike_clusters),
        ];
        for (file, what, ids) in ids {
            if let Some(i) = ids.iter().position(|&id| id > max_id) {
                return problem(
                    file,
                    format!(
                        "spike {i} has {what} {} over {max_id} (phylib reads int32)",
                        ids[i]
                    ),
                );
            }
        }
        let channels = self.num_channels();
        if self.channel_positions.len() != channels {
            return problem(
                "channel_positions.npy",
                format!(
                    "{} positions, channel_map.npy has {channels} channels",
                    self.channel_positions.len()
                ),
            );
        }
        if let Some(c) = self
            .channel_map
            .iter()
            .position(|&m| m as usize >= self.params.n_channels_dat)
        {
            return problem(
                "channel_map.npy",
                format!(
                    "channel {c} maps to column {}, params.py says n_channels_dat = {}",
                    self.channel_map[c], self.params.n_channels_dat
                ),
            );
        }
        match &self.template_channels {
            None if local != channels => {
                return problem(
                    "templates.npy",
                    format!("{local} channels, channel_map.npy has {channels}"),
                );
            }
            None => {}
            Some(table) => {
                if table.shape() != [units, local] {
                    return problem(
                        "template_ind.npy",
                        format!(
                            "shape {:?}, templates.npy needs [{units}, {local}]",
                            table.shape()
                        ),
                    );
                }
                if let Some(&bad) = table
                    .values()
                    .iter()
                    .find(|&&c| c < -1 || c >= channels as i64)
                {
                    return problem(
                        "template_ind.npy",
                        format!("channel {bad} is neither -1 nor one of the {channels} channels"),
                    );
                }
            }
        }
        let square = [
            (
                "similar_templates.npy",
                self.similar_templates.as_ref().map(Array::shape),
                units,
            ),
            (
                "whitening_mat.npy",
                self.whitening_mat.as_ref().map(Array::shape),
                channels,
            ),
            (
                "whitening_mat_inv.npy",
                self.whitening_mat_inv.as_ref().map(Array::shape),
                channels,
            ),
        ];
        for (file, shape, size) in square {
            if let Some(shape) = shape.filter(|&s| s != [size, size]) {
                return problem(file, format!("shape {shape:?}, expected [{size}, {size}]"));
            }
        }
        match (&self.pc_features, &self.pc_feature_ind) {
            (None, None) => {}
            (Some(_), None) | (None, Some(_)) => {
                return problem(
                    "pc_feature_ind.npy",
                    "pc_features.npy and pc_feature_ind.npy come together".into(),
                );
            }
            (Some(features), Some(ind)) => {
                let fshape = features.shape();
                if fshape.len() != 3 {
                    return problem(
                        "pc_features.npy",
                        format!("expected [spikes, pcs, channels], got shape {fshape:?}"),
                    );
                }
                if ind.shape() != [units, fshape[2]] {
                    return problem(
                        "pc_feature_ind.npy",
                        format!(
                            "shape {:?}, expected [{units}, {}] (templates, pc_features.npy's \
                             channels)",
                            ind.shape(),
                            fshape[2]
                        ),
                    );
                }
                if let Some(&bad) = ind.values().iter().find(|&&c| c as usize >= channels) {
                    return problem(
                        "pc_feature_ind.npy",
                        format!("channel {bad} is not one of the {channels} channels"),
                    );
                }
            }
        }
        self.check_columns()
    }

    /// The cluster columns' part of [`check`](Self::check).
    fn check_columns(&self) -> std::result::Result<(), Problem> {
        let clean = |text: &str| !text.contains(['\t', '\n', '\r']);
        for (i, column) in self.cluster_columns.iter().enumerate() {
            let problem = |message: String| {
                Err(Problem {
                    file: column.file.clone(),
                    message,
                })
            };
            let file = &column.file;
            let valid_file = file.starts_with("cluster_")
                && file.ends_with(".tsv")
                && !file.contains(['/', '\\'])
                && file.len() > "cluster_.tsv".len();
            if !valid_file {
                return problem("expected a file name `cluster_<name>.tsv`".into());
            }
            if column.name.is_empty() || column.name == "cluster_id" || !clean(&column.name) {
                return problem(format!(
                    "column name `{}` is empty, `cluster_id` or has a tab or line break",
                    shown(&column.name)
                ));
            }
            let repeated = self.cluster_columns[..i]
                .iter()
                .any(|c| c.file == column.file && c.name == column.name);
            if repeated {
                return problem(format!("column `{}` appears twice", column.name));
            }
            if let Some((id, value)) = column.values.iter().find(|(_, v)| !clean(v)) {
                return problem(format!(
                    "cluster {id}'s `{}` value `{}` has a tab or line break",
                    column.name,
                    shown(value)
                ));
            }
            if let Some(id) = column.values.keys().find(|&&id| i32::try_from(id).is_err()) {
                return problem(format!("cluster id {id} is over {}", i32::MAX));
            }
        }
        Ok(())
    }
}
