//! Writing a Phy folder.

use std::path::Path;
use std::sync::Arc;

use dspk_io::NpyArray;

use super::{Array, ClusterColumn, PhyFolder, tsv};
use crate::{Error, Result};

/// How [`write_phy`] treats an existing folder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PhyWriteOptions {
    /// Write into a folder that already has a `params.py` or `spike_times.npy`, replacing
    /// the files, and remove the optional Phy files (and `cluster_*.tsv`) of the old folder that
    /// this one does not write, so phylib does not mix old and new. Default `false`: such a
    /// folder is refused.
    pub overwrite: bool,
}

/// Optional files a Phy reader picks up when present (phylib or [`read_phy`](super::read_phy)),
/// removed on overwrite unless written again.
const OPTIONAL_FILES: [&str; 8] = [
    "amplitudes.npy",
    "template_ind.npy",
    "templates_ind.npy",
    "similar_templates.npy",
    "whitening_mat.npy",
    "whitening_mat_inv.npy",
    "pc_features.npy",
    "pc_feature_ind.npy",
];

/// Writes `folder` as a Phy folder in `dir` (created if needed) that phylib's `load_model`
/// and SpikeInterface's `read_phy` open, with the dtypes Kilosort 4 writes:
///
/// - `spike_times.npy` `int64 (n,)`; `spike_templates.npy`, `spike_clusters.npy` `int32 (n,)`;
///   `amplitudes.npy` `float32 (n,)` when [`amplitudes`](PhyFolder::amplitudes) is set;
/// - `templates.npy` `float32 [templates, samples, channels]` C order; `template_ind.npy`
///   `int64` only when the templates are sparse (a channel table other than every channel in
///   order);
/// - `channel_map.npy` `int32`; `channel_positions.npy` `float32 [channels, 2]`, or `float64`
///   when a position is not exactly a `float32` (so nothing is rounded);
/// - `whitening_mat_inv.npy` `float64`: the given inverse, else the inverse of the given
///   whitening matrix, else the identity: phylib computes and *writes* this file into the
///   folder when it is absent, so it is always written; `whitening_mat.npy` `float64`,
///   `similar_templates.npy` `float32`, `pc_features.npy` `float32` and `pc_feature_ind.npy`
///   `int32` only when set (phylib takes zeros for missing similarities);
/// - `params.py` ([`PhyParams::to_python`](super::PhyParams::to_python));
/// - one TSV per [`ClusterColumn::file`], its columns in order (`cluster_KSLabel.tsv`,
///   `cluster_group.tsv`, ...), LF line ends.
///
/// The raw recording named by `dat_path` is not written or copied.
///
/// # Errors
///
/// [`Error::Argument`] if the parts disagree ([`PhyFolder::check`]), `dir` already holds a
/// Phy folder and [`PhyWriteOptions::overwrite`] is off, the whitening matrix has no inverse,
/// or a parameter cannot be written ([`PhyParams::to_python`](super::PhyParams::to_python));
/// [`Error::Io`] naming the file if a file cannot be written.
pub fn write_phy(
    dir: impl AsRef<Path>,
    folder: &PhyFolder,
    options: &PhyWriteOptions,
) -> Result<()> {
    let dir = dir.as_ref();
    folder
        .check()
        .map_err(|problem| Error::Argument(format!("Phy folder {}: {problem}", dir.display())))?;
    let params = folder.params.to_python()?;
    let channels = folder.num_channels();
    let whitening_inv = match (&folder.whitening_mat_inv, &folder.whitening_mat) {
        (Some(inverse), _) => inverse.clone(),
        (None, Some(matrix)) => invert(matrix).ok_or_else(|| {
            Error::Argument("whitening_mat.npy: the whitening matrix has no inverse".into())
        })?,
        (None, None) => identity(channels),
    };
    let existing = ["params.py", "spike_times.npy"]
        .iter()
        .find(|name| dir.join(name).exists());
    if let Some(name) = existing {
        if !options.overwrite {
            return Err(Error::Argument(format!(
                "{} already holds a Phy folder ({name}); set PhyWriteOptions::overwrite to \
                 replace it",
                dir.display()
            )));
        }
        remove_stale(dir, folder)?;
    }
    std::fs::create_dir_all(dir).map_err(|e| io_error(dir, "create the folder", e))?;

    let n = folder.num_spikes() as u64;
    let ints32 = |values: &[u32]| -> Vec<u8> {
        // `check` keeps every id and channel at most i32::MAX, so the bytes are the int32's.
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    };
    let write = |name: &str, dtype: &str, shape: Vec<u64>, data: Vec<u8>| -> Result<()> {
        let dtype = dtype.parse().map_err(Error::Argument)?;
        NpyArray::new(dtype, false, shape, data)?.write(dir.join(name))?;
        Ok(())
    };
    write(
        "spike_times.npy",
        "<i8",
        vec![n],
        folder
            .spike_times
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
    )?;
    write(
        "spike_templates.npy",
        "<i4",
        vec![n],
        ints32(&folder.spike_templates),
    )?;
    write(
        "spike_clusters.npy",
        "<i4",
        vec![n],
        ints32(&folder.spike_clusters),
    )?;
    if let Some(amplitudes) = &folder.amplitudes {
        write("amplitudes.npy", "<f4", vec![n], f32_bytes(amplitudes))?;
    }
    write(
        "templates.npy",
        "<f4",
        shape_u64(&folder.templates),
        f32_bytes(folder.templates.values()),
    )?;
    if let Some(table) = folder
        .template_channels
        .as_ref()
        .filter(|t| !every_channel(t, channels))
    {
        write(
            "template_ind.npy",
            "<i8",
            shape_u64(table),
            table
                .values()
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        )?;
    }
    write(
        "channel_map.npy",
        "<i4",
        vec![channels as u64],
        ints32(&folder.channel_map),
    )?;
    let flat: Vec<f64> = folder.channel_positions.iter().flatten().copied().collect();
    let exact_f32 = flat
        .iter()
        .all(|&v| f64::from(v as f32).to_bits() == v.to_bits());
    let (dtype, bytes) = if exact_f32 {
        (
            "<f4",
            flat.iter()
                .flat_map(|&v| (v as f32).to_le_bytes())
                .collect(),
        )
    } else {
        ("<f8", f64_bytes(&flat))
    };
    write(
        "channel_positions.npy",
        dtype,
        vec![channels as u64, 2],
        bytes,
    )?;
    if let Some(similar) = &folder.similar_templates {
        write(
            "similar_templates.npy",
            "<f4",
            shape_u64(similar),
            f32_bytes(similar.values()),
        )?;
    }
    if let Some(matrix) = &folder.whitening_mat {
        write(
            "whitening_mat.npy",
            "<f8",
            shape_u64(matrix),
            f64_bytes(matrix.values()),
        )?;
    }
    write(
        "whitening_mat_inv.npy",
        "<f8",
        shape_u64(&whitening_inv),
        f64_bytes(whitening_inv.values()),
    )?;
    if let (Some(features), Some(ind)) = (&folder.pc_features, &folder.pc_feature_ind) {
        write(
            "pc_features.npy",
            "<f4",
            shape_u64(features),
            f32_bytes(features.values()),
        )?;
        write(
            "pc_feature_ind.npy",
            "<i4",
            shape_u64(ind),
            ints32(ind.values()),
        )?;
    }
    write_text(&dir.join("params.py"), &params)?;
    for (file, columns) in columns_by_file(&folder.cluster_columns) {
        write_text(&dir.join(file), &tsv::format(&columns))?;
    }
    Ok(())
}

/// Removes the optional files and `cluster_*.tsv` of an old folder in `dir` that `folder`
/// will not write again.
fn remove_stale(dir: &Path, folder: &PhyFolder) -> Result<()> {
    let written: Vec<&str> = folder
        .cluster_columns
        .iter()
        .map(|c| c.file.as_str())
        .collect();
    let mut stale: Vec<String> = OPTIONAL_FILES.iter().map(|s| (*s).to_string()).collect();
    let entries = std::fs::read_dir(dir).map_err(|e| io_error(dir, "list the folder", e))?;
    for entry in entries {
        let entry = entry.map_err(|e| io_error(dir, "list the folder", e))?;
        if let Ok(name) = entry.file_name().into_string()
            && name.starts_with("cluster_")
            && name.ends_with(".tsv")
            && !written.contains(&name.as_str())
        {
            stale.push(name);
        }
    }
    for name in stale {
        let path = dir.join(&name);
        if path.is_file() {
            std::fs::remove_file(&path).map_err(|e| io_error(&path, "remove", e))?;
        }
    }
    Ok(())
}

/// The columns grouped by file, files in order of first appearance.
fn columns_by_file(columns: &[ClusterColumn]) -> Vec<(&str, Vec<&ClusterColumn>)> {
    let mut files: Vec<(&str, Vec<&ClusterColumn>)> = Vec::new();
    for column in columns {
        match files.iter_mut().find(|(file, _)| *file == column.file) {
            Some((_, group)) => group.push(column),
            None => files.push((&column.file, vec![column])),
        }
    }
    files
}

/// Whether a channel table lists every channel in order for every template (dense templates).
fn every_channel(table: &Array<i64>, channels: usize) -> bool {
    table.shape().get(1) == Some(&channels)
        && table
            .values()
            .chunks(channels.max(1))
            .all(|row| row.iter().enumerate().all(|(c, &v)| v == c as i64))
}

/// The `n x n` identity.
fn identity(n: usize) -> Array<f64> {
    let values = (0..n * n)
        .map(|i| if i / n == i % n { 1.0 } else { 0.0 })
        .collect();
    Array {
        shape: vec![n, n],
        values,
    }
}

/// The inverse of a square matrix by Gauss-Jordan elimination with partial pivoting, or `None`
/// if it is singular (a pivot below `1e-12` times the largest entry) or not finite.
fn invert(matrix: &Array<f64>) -> Option<Array<f64>> {
    let n = matrix.shape().first().copied()?;
    let mut a = matrix.values().to_vec();
    let mut inverse = identity(n).values;
    let scale = a.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    if !scale.is_finite() || (n > 0 && scale == 0.0) {
        return None;
    }
    for col in 0..n {
        let pivot =
            (col..n).max_by(|&i, &j| a[i * n + col].abs().total_cmp(&a[j * n + col].abs()))?;
        if a[pivot * n + col].abs() <= 1e-12 * scale {
            return None;
        }
        for k in 0..n {
            a.swap(col * n + k, pivot * n + k);
            inverse.swap(col * n + k, pivot * n + k);
        }
        let p = a[col * n + col];
        for k in 0..n {
            a[col * n + k] /= p;
            inverse[col * n + k] /= p;
        }
        for row in (0..n).filter(|&r| r != col) {
            let factor = a[row * n + col];
            if factor != 0.0 {
                for k in 0..n {
                    a[row * n + k] -= factor * a[col * n + k];
                    inverse[row * n + k] -= factor * inverse[col * n + k];
                }
            }
        }
    }
    Some(Array {
        shape: vec![n, n],
        values: inverse,
    })
}

/// The shape as `u64`s.
fn shape_u64<T>(array: &Array<T>) -> Vec<u64> {
    array.shape().iter().map(|&d| d as u64).collect()
}

/// Little-endian bytes of `f32`s.
fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Little-endian bytes of `f64`s.
fn f64_bytes(values: &[f64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Writes a text file.
fn write_text(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| io_error(path, "write", e))
}

/// An I/O error naming `path`.
fn io_error(path: &Path, operation: &str, source: std::io::Error) -> Error {
    Error::Io(dspk_io::Error::Io {
        path: path.to_path_buf(),
        operation: operation.to_string(),
        source: Arc::new(source),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverts() {
        let matrix = Array::new(
            vec![3, 3],
            vec![0.0, 2.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 4.0],
        )
        .expect("3x3");
        let inverse = invert(&matrix).expect("invertible");
        assert_eq!(
            inverse.values(),
            &[0.0, 1.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.25]
        );
        let singular = Array::new(vec![2, 2], vec![1.0, 2.0, 2.0, 4.0]).expect("2x2");
        assert!(invert(&singular).is_none());
    }

    #[test]
    fn dense_tables() {
        let dense = Array::new(vec![2, 3], vec![0, 1, 2, 0, 1, 2]).expect("2x3");
        assert!(every_channel(&dense, 3));
        assert!(!every_channel(&dense, 4));
        let sparse = Array::new(vec![2, 3], vec![0, 1, 2, 1, 2, 3]).expect("2x3");
        assert!(!every_channel(&sparse, 3));
    }
}
