//! Reading a Phy folder.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dspk_io::{ElementKind, METADATA_LIMIT, NpyArray, read_small_file};

use super::{Array, ClusterColumn, PhyFolder, PhyParams, tsv};
use crate::{Error, Result};

/// Reads the Phy folder `path` (or the folder of `path` when it names a `params.py`, as
/// phylib's `load_model` takes it), as phylib's `TemplateModel` reads it.
///
/// Needs `params.py`, `spike_times.npy`, `spike_templates.npy`, `templates.npy`,
/// `channel_map.npy` and `channel_positions.npy`; reads `spike_clusters.npy` (a copy of the
/// templates when absent, as phylib does), `amplitudes.npy`, `template_ind.npy` (else
/// `templates_ind.npy`), `similar_templates.npy`, `whitening_mat.npy`,
/// `whitening_mat_inv.npy`, `pc_features.npy` + `pc_feature_ind.npy` when present, and every
/// `cluster_*.tsv` except phy's summary `cluster_info.tsv` (as phylib skips it). Other files
/// (`recording.dat`, `channel_shanks.npy`, `.csv` metadata) are not read.
///
/// Accepts what Kilosort 2.5/3 (`(n, 1)` vectors, `uint64`/`uint32` ids, float64, Fortran
/// order, CRLF), Kilosort 4 and SpikeInterface's `export_to_phy` write. Vectors may be
/// `(n,)`, `(n, 1)` or `(1, n)`; ids stored as floats must be integral.
///
/// # Errors
///
/// [`dspk_io::Error::Missing`] naming the folder and the file, for a missing required file;
/// [`Error::Io`] for a file that cannot be read or a `.npy` that is malformed or truncated;
/// [`dspk_io::Error::Invalid`] naming the file, for a `params.py` or `cluster_*.tsv` line that does
/// not parse (see [`PhyParams::parse`]), an array of the wrong shape or values (negative or
/// fractional ids, values over the type's range) or parts that disagree
/// ([`PhyFolder::check`]).
pub fn read_phy(path: impl AsRef<Path>) -> Result<PhyFolder> {
    let path = path.as_ref();
    let dir = if path.is_file() && path.file_name().is_some_and(|n| n == "params.py") {
        path.parent().unwrap_or(Path::new("."))
    } else {
        path
    };
    if !dir.is_dir() {
        return Err(Error::missing(dir, "the Phy folder"));
    }
    let params_path = dir.join("params.py");
    if !params_path.is_file() {
        return Err(Error::missing(dir, "params.py"));
    }
    let params = PhyParams::read(&params_path)?;

    let spike_times = vector_i64(&required(dir, "spike_times.npy")?)?;
    let templates_file = required(dir, "spike_templates.npy")?;
    let spike_templates = ids(&templates_file)?;
    let spike_clusters = match optional(dir, "spike_clusters.npy")? {
        Some(array) => ids(&array)?,
        None => spike_templates.clone(),
    };
    let amplitudes = optional(dir, "amplitudes.npy")?
        .map(|a| vector_f64(&a).map(|v| v.into_iter().map(|x| x as f32).collect()))
        .transpose()?;
    let templates = float_array(&required(dir, "templates.npy")?)?;
    let template_channels = match optional(dir, "template_ind.npy")? {
        Some(array) => Some(integer_array(&array)?),
        None => optional(dir, "templates_ind.npy")?
            .map(|a| integer_array(&a))
            .transpose()?,
    };
    let channel_map = ids(&required(dir, "channel_map.npy")?)?;
    let channel_positions = positions(&required(dir, "channel_positions.npy")?)?;
    let similar_templates = optional(dir, "similar_templates.npy")?
        .map(|a| float_array(&a))
        .transpose()?;
    let whitening = |name| -> Result<Option<Array<f64>>> {
        optional(dir, name)?
            .map(|a| Array::new(shape(&a)?, a.to_f64()?).map_err(|e| invalid_of(&a, &e)))
            .transpose()
    };
    let whitening_mat = whitening("whitening_mat.npy")?;
    let whitening_mat_inv = whitening("whitening_mat_inv.npy")?;
    let pc_features = optional(dir, "pc_features.npy")?
        .map(|a| float_array(&a))
        .transpose()?;
    let pc_feature_ind = match optional(dir, "pc_feature_ind.npy")? {
        Some(array) => {
            let values = integer_array(&array)?;
            let shape = values.shape().to_vec();
            let values = values
                .into_values()
                .into_iter()
                .map(|v| u32::try_from(v).map_err(|_| channel_error(&array, v)))
                .collect::<Result<Vec<_>>>()?;
            Some(Array::new(shape, values).map_err(|e| invalid_of(&array, &e))?)
        }
        None => None,
    };
    let cluster_columns = cluster_columns(dir)?;

    let folder = PhyFolder {
        params,
        spike_times,
        spike_templates,
        spike_clusters,
        amplitudes,
        templates,
        template_channels,
        channel_map,
        channel_positions,
        similar_templates,
        whitening_mat,
        whitening_mat_inv,
        pc_features,
        pc_feature_ind,
        cluster_columns,
    };
    folder.check().map_err(|problem| {
        // `template_channels` may have come from Kilosort's `templates_ind.npy`.
        let file = if problem.file == "template_ind.npy" && !dir.join(&problem.file).is_file() {
            "templates_ind.npy".to_string()
        } else {
            problem.file
        };
        Error::invalid(&dir.join(file), problem.message)
    })?;
    Ok(folder)
}

/// The array `dir/name`, which must exist.
fn required(dir: &Path, name: &str) -> Result<NpyArray> {
    optional(dir, name)?.ok_or_else(|| Error::missing(dir, name))
}

/// The array `dir/name`, if the file exists.
fn optional(dir: &Path, name: &str) -> Result<Option<NpyArray>> {
    let path = dir.join(name);
    if path.is_file() {
        Ok(Some(NpyArray::read(&path)?))
    } else {
        Ok(None)
    }
}

/// An [`dspk_io::Error::Invalid`] naming `array`'s file.
fn invalid_of(array: &NpyArray, problem: &dyn std::fmt::Display) -> Error {
    Error::invalid(array.path(), problem.to_string())
}

/// The error for a channel index that is not a channel.
fn channel_error(array: &NpyArray, value: i64) -> Error {
    Error::invalid(
        array.path(),
        format!("channel index {value} is not a channel (negative or over u32)"),
    )
}

/// The shape as `usize`s (each dimension is at most the element count held in memory).
fn shape(array: &NpyArray) -> Result<Vec<usize>> {
    array
        .shape()
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| invalid_of(array, &format!("shape {:?} is too large", array.shape())))
}

/// Checks that `array` is a vector: `(n,)`, or one dimension of `n` and the others 1.
fn check_vector(array: &NpyArray) -> Result<()> {
    if array.shape().iter().filter(|&&d| d != 1).count() > 1 {
        return Err(invalid_of(
            array,
            &format!("expected a vector, got shape {:?}", array.shape()),
        ));
    }
    Ok(())
}

/// The elements of an integer (or integral float) array as `i64`, in C order.
fn integers(array: &NpyArray) -> Result<Vec<i64>> {
    if array.dtype().kind != ElementKind::Float {
        return Ok(array.to_i64()?);
    }
    array
        .to_f64()?
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            // 2^63 is the first float over i64::MAX.
            if v.fract() == 0.0 && v >= -(2f64.powi(63)) && v < 2f64.powi(63) {
                Ok(v as i64)
            } else {
                Err(invalid_of(
                    array,
                    &format!("element {i} is {v}, not an integer that fits in int64"),
                ))
            }
        })
        .collect()
}

/// A vector of integers.
fn vector_i64(array: &NpyArray) -> Result<Vec<i64>> {
    check_vector(array)?;
    integers(array)
}

/// A vector of non-negative ids (templates, clusters, channels) that fit in `u32`.
fn ids(array: &NpyArray) -> Result<Vec<u32>> {
    vector_i64(array)?
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            u32::try_from(v).map_err(|_| {
                invalid_of(
                    array,
                    &format!("element {i} is {v}, not an id in 0..={}", u32::MAX),
                )
            })
        })
        .collect()
}

/// A vector of numbers as `f64`.
fn vector_f64(array: &NpyArray) -> Result<Vec<f64>> {
    check_vector(array)?;
    Ok(array.to_f64()?)
}

/// An array of numbers as `f32` (float64 rounded to the nearest `f32`).
fn float_array(array: &NpyArray) -> Result<Array<f32>> {
    let values = array.to_f64()?.into_iter().map(|v| v as f32).collect();
    Array::new(shape(array)?, values).map_err(|e| invalid_of(array, &e))
}

/// An array of integers (or integral floats) as `i64`.
fn integer_array(array: &NpyArray) -> Result<Array<i64>> {
    Array::new(shape(array)?, integers(array)?).map_err(|e| invalid_of(array, &e))
}

/// `[channels, 2]` positions.
fn positions(array: &NpyArray) -> Result<Vec<[f64; 2]>> {
    if array.shape().len() != 2 || array.shape()[1] != 2 {
        return Err(invalid_of(
            array,
            &format!(
                "expected [channels, 2] positions, got shape {:?}",
                array.shape()
            ),
        ));
    }
    Ok(array
        .to_f64()?
        .chunks_exact(2)
        .map(|xy| [xy[0], xy[1]])
        .collect())
}

/// The columns of every `cluster_*.tsv` in `dir` but `cluster_info.tsv`, by file name.
fn cluster_columns(dir: &Path) -> Result<Vec<ClusterColumn>> {
    let io_error = |path: &Path, operation: &str, source: std::io::Error| {
        Error::Io(dspk_io::Error::Io {
            path: path.to_path_buf(),
            operation: operation.to_string(),
            source: Arc::new(source),
        })
    };
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| io_error(dir, "list the folder", e))?;
    for entry in entries {
        let entry = entry.map_err(|e| io_error(dir, "list the folder", e))?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if name.starts_with("cluster_")
            && name.ends_with(".tsv")
            && name != "cluster_info.tsv"
            && entry.path().is_file()
        {
            files.push((name, entry.path()));
        }
    }
    files.sort();
    let mut columns = Vec::new();
    for (name, path) in files {
        let bytes = read_small_file(&path, METADATA_LIMIT)?;
        let text = String::from_utf8(bytes)
            .map_err(|_| Error::invalid(&path, "the file is not UTF-8 text"))?;
        columns.extend(tsv::parse(&text, &path, &name)?);
    }
    Ok(columns)
}
