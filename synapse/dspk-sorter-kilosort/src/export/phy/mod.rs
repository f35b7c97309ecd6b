//! The sort's Phy folder (`docs/KILOSORT4.md` §9): the files Kilosort 4 writes for phy and
//! SpikeInterface, written from a finished [`Sorting`].
//!
//! dspk-synapse's [`write_phy`] writes the files phylib reads; this module adds Kilosort 4's
//! other arrays with [`NpyArray`] and the run's settings and report. The files and their
//! dtypes (`n` kept spikes, `K` units, `C` channels, `P` components, `L` feature channels):
//!
//! | file | written as | by |
//! |---|---|---|
//! | `spike_times.npy` | `int64 [n]` | [`write_phy`] |
//! | `spike_clusters.npy`, `spike_templates.npy` | `int32 [n]`, both the unit (Phy's template is the unit, as in Kilosort 4) | [`write_phy`] |
//! | `amplitudes.npy` | `float32 [n]` | [`write_phy`] |
//! | `templates.npy` | `float32 [K, nt, C]` dense | [`write_phy`] |
//! | `similar_templates.npy` | `float32 [K, K]` | [`write_phy`] |
//! | `pc_features.npy` | `float32 [n, P, L]` | [`write_phy`] |
//! | `pc_feature_ind.npy` | `int32 [K, L]` (Kilosort: `uint32`) | [`write_phy`] |
//! | `channel_map.npy` | `int32 [C]` | [`write_phy`] |
//! | `channel_positions.npy` | `float32 [C, 2]` | [`write_phy`] |
//! | `whitening_mat.npy` | `float64 [C, C]` `Wrot` (Kilosort: `float32`) | [`write_phy`] |
//! | `whitening_mat_inv.npy` | `float64 [C, C]`, the inverse of `Wrot + 1e-5 I` (Kilosort: `float32`) | [`write_phy`] |
//! | `cluster_KSLabel.tsv`, `cluster_group.tsv` | identical: `cluster_id\tKSLabel`, `good` / `mua` | [`write_phy`] |
//! | `cluster_ContamPct.tsv`, `cluster_Amplitude.tsv` | `%.1f` values | [`write_phy`] |
//! | `params.py` | [`PhyParams::to_python`](dspk_synapse::phy::PhyParams::to_python) | [`write_phy`] |
//! | `spike_detection_templates.npy` | `int32 [n]`, the learned template of each spike | here |
//! | `spike_positions.npy` | `float32 [n, 2]` | here |
//! | `kept_spikes.npy` | `bool [n_all]` | here |
//! | `templates_ind.npy` | `int64 [K, C]`, `0..C` on every row | here |
//! | `channel_shanks.npy` | `int32 [C]` (Kilosort: the probe's `kcoords` dtype) | here |
//! | `whitening_mat_dat.npy` | `float32 [C, C]` `Wrot` | here |
//! | `dspk_settings.json`, `dspk_report.txt` | the run's settings and per-stage report (ours) | here |
//!
//! Where the dtypes differ from Kilosort's, they are dspk-synapse's writer's choices, which
//! phylib and SpikeInterface read alike: the whitening matrices stay in `float64` (the `f64`
//! `Wrot` the sort used, not rounded), the feature channel table is `int32` (phylib's own dtype
//! for channel indices). Kilosort's `ops.npy` (a pickled dict), `kilosort4.log` and its plots
//! are not written; `dspk_settings.json` and `dspk_report.txt` hold what the run used and did.

use std::collections::BTreeMap;
use std::path::Path;

use dspk_io::{ByteOrder, Dtype, ElementKind, NpyArray};
use dspk_synapse::phy::{Array, ClusterColumn, PhyFolder, PhyParams, PhyWriteOptions, write_phy};

use crate::export::sorting::Sorting;
use crate::{Error, Result};

mod check;
mod whitening;

use check::input;
use whitening::INVERSE_RIDGE;
pub(crate) use whitening::inverse_with_ridge;

/// A finished sort and what the Phy folder says about the recording and the run.
#[derive(Debug, Clone)]
pub struct PhyOutput<'a> {
    /// The sort.
    pub sorting: &'a Sorting,
    /// The recording column of each sorted channel (`channel_map.npy`).
    pub channel_map: &'a [u32],
    /// `[x, y]` µm of each sorted channel (`channel_positions.npy`).
    pub channel_positions: &'a [[f32; 2]],
    /// The shank of each sorted channel (`channel_shanks.npy`).
    pub channel_shanks: &'a [u32],
    /// The whitening matrix `Wrot`, `[C, C]` row-major.
    pub whitening: &'a [f64],
    /// `params.py`: the raw file(s), their channel count and dtype, the sample rate (equal to
    /// the sorting's), `hp_filtered = False`.
    pub params: PhyParams,
    /// The run's settings (`KilosortSettings::to_json`), written to `dspk_settings.json`.
    pub settings_json: String,
    /// The run's per-stage report, written to `dspk_report.txt`.
    pub report: String,
}

/// Writes `output` as a Kilosort 4 Phy folder in `dir` (created if needed): the files of the
/// module's table. With `overwrite` off, a `dir` that already holds a Phy folder (`params.py`
/// or `spike_times.npy`) is refused before anything is written; with it on, the old folder's
/// files are replaced and the optional Phy files this sort does not write are removed
/// ([`PhyWriteOptions::overwrite`]).
///
/// # Errors
///
/// [`Error::Input`] naming the field when the sorting's or the output's
/// parts disagree in length (one entry per kept spike, per unit, per channel), a spike time is
/// outside the recording or decreases, a spike's unit or a feature channel is out of range,
/// the sample rates differ, a channel is not a column of the raw file, or `Wrot + 1e-5 I`
/// cannot be inverted; [`Error::Synapse`] from [`write_phy`] (an
/// existing folder without `overwrite`, a file that cannot be written);
/// [`Error::Io`] naming a file this module cannot write.
pub fn write_phy_folder(dir: &Path, output: &PhyOutput, overwrite: bool) -> Result<()> {
    check::check(output)?;
    let folder = phy_folder(output)?;
    write_phy(dir, &folder, &PhyWriteOptions { overwrite })?;
    write_kilosort_extras(dir, output)?;
    write_text(dir, "dspk_settings.json", &output.settings_json)?;
    write_text(dir, "dspk_report.txt", &output.report)
}

/// Checks, before a sort, that its Phy folder can be written to `dir`: `dir` does not hold a
/// Phy folder (`params.py` or `spike_times.npy`) unless `overwrite`, `dir` is a folder if it
/// exists, and a folder can be made beside it (where [`staging_folder`] writes) and, when
/// `dir` exists, a file inside it (probed by creating and removing one of each).
///
/// # Errors
///
/// [`Error::Input`] (`Phy folder`) saying which of these fails and why.
pub fn check_phy_destination(dir: &Path, overwrite: bool) -> Result<()> {
    let fail = |reason: String| Error::Input {
        what: "Phy folder",
        reason: format!("{}: {reason}", dir.display()),
    };
    if dir.exists() {
        if !dir.is_dir() {
            return Err(fail("exists and is not a folder".to_string()));
        }
        if let Some(name) = ["params.py", "spike_times.npy"]
            .iter()
            .find(|name| dir.join(name).exists())
            && !overwrite
        {
            return Err(fail(format!(
                "already holds a Phy folder ({name}); overwrite it or choose another folder"
            )));
        }
        let probe = dir.join(format!(".dspk-write-check-{}", std::process::id()));
        std::fs::write(&probe, b"")
            .map_err(|e| fail(format!("cannot be written ({e}); choose another folder")))?;
        let _ = std::fs::remove_file(&probe);
    }
    let staging = staging_folder(dir)?;
    std::fs::remove_dir(&staging).map_err(|e| fail(format!("cannot remove a test folder: {e}")))
}

/// Makes and returns a fresh empty folder beside `dir` (same parent, so that renaming it to
/// `dir` moves no data): `.<name>.partial-<process id>-<n>`, the first `n` not taken.
///
/// # Errors
///
/// [`Error::Input`] (`Phy folder`) when `dir` has no file name or the parent (created if
/// missing) cannot be written.
pub fn staging_folder(dir: &Path) -> Result<std::path::PathBuf> {
    let fail = |reason: String| Error::Input {
        what: "Phy folder",
        reason: format!("{}: {reason}", dir.display()),
    };
    let name = dir
        .file_name()
        .ok_or_else(|| fail("has no folder name".to_string()))?
        .to_string_lossy()
        .into_owned();
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|e| {
        fail(format!(
            "cannot create the parent folder {} ({e})",
            parent.display()
        ))
    })?;
    for n in 0..1000 {
        let staging = parent.join(format!(".{name}.partial-{}-{n}", std::process::id()));
        match std::fs::create_dir(&staging) {
            Ok(()) => return Ok(staging),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(fail(format!(
                    "cannot create a folder in {} ({e}); choose a folder you can write",
                    parent.display()
                )));
            }
        }
    }
    Err(fail(
        "1000 staging folders beside it already exist".to_string(),
    ))
}

/// Moves the complete folder `staging` (from [`staging_folder`]) to `dir`: renamed whole when
/// `dir` does not exist; otherwise the Phy files of `dir` that `staging` does not hold
/// (`*.npy`, `cluster_*.tsv`, `params.py`, `dspk_*`, `summary.png`) are removed, every file
/// of `staging` is renamed into `dir` (replacing its namesake), and `staging` is removed.
/// Other files in `dir` (a raw recording beside the Phy files) are left alone.
///
/// # Errors
///
/// [`Error::Input`] (`Phy folder`) naming the file that could not be moved or removed.
pub fn move_into_place(staging: &Path, dir: &Path) -> Result<()> {
    let fail = |path: &Path, what: &str, e: std::io::Error| Error::Input {
        what: "Phy folder",
        reason: format!("cannot {what} {}: {e}", path.display()),
    };
    if !dir.exists() {
        return std::fs::rename(staging, dir).map_err(|e| fail(dir, "create", e));
    }
    let names = |folder: &Path| -> Result<Vec<std::ffi::OsString>> {
        std::fs::read_dir(folder)
            .map_err(|e| fail(folder, "list", e))?
            .map(|entry| {
                entry
                    .map(|e| e.file_name())
                    .map_err(|e| fail(folder, "list", e))
            })
            .collect()
    };
    let written = names(staging)?;
    for name in names(dir)? {
        let text = name.to_string_lossy();
        let ours = text.ends_with(".npy")
            || (text.starts_with("cluster_") && text.ends_with(".tsv"))
            || text == "params.py"
            || text.starts_with("dspk_")
            || text == "summary.png";
        let path = dir.join(&name);
        if ours && !written.contains(&name) && path.is_file() {
            std::fs::remove_file(&path).map_err(|e| fail(&path, "remove", e))?;
        }
    }
    for name in &written {
        let (from, to) = (staging.join(name), dir.join(name));
        std::fs::rename(&from, &to).map_err(|e| fail(&to, "write", e))?;
    }
    std::fs::remove_dir(staging).map_err(|e| fail(staging, "remove", e))
}

/// The part of the folder dspk-synapse's [`write_phy`] writes.
fn phy_folder(output: &PhyOutput) -> Result<PhyFolder> {
    let s = output.sorting;
    let (n, units, c) = (s.num_spikes(), s.num_units(), s.channels);
    let wrot = Array::new(vec![c, c], output.whitening.to_vec())?;
    let inverse = inverse_with_ridge(output.whitening, c).ok_or_else(|| {
        input(
            "PhyOutput::whitening",
            format!("Wrot + {INVERSE_RIDGE:e} I is singular or not finite"),
        )
    })?;
    let column = |name: &str, value: &dyn Fn(usize) -> String| {
        let values: BTreeMap<u32, String> = (0..units).map(|k| (k as u32, value(k))).collect();
        ClusterColumn::new(name, values)
    };
    let labels = column("KSLabel", &|k| s.labels[k].as_str().to_string());
    // Kilosort 4 writes `cluster_group.tsv` as a copy of `cluster_KSLabel.tsv`, header included.
    let group = ClusterColumn {
        file: "cluster_group.tsv".into(),
        ..labels.clone()
    };
    let contamination = column("ContamPct", &|k| python_1f(s.contamination_pct[k]));
    let amplitude = column("Amplitude", &|k| python_1f(f64::from(s.unit_amplitudes[k])));
    Ok(PhyFolder {
        params: output.params.clone(),
        spike_times: s.spike_times.clone(),
        spike_templates: s.spike_clusters.clone(),
        spike_clusters: s.spike_clusters.clone(),
        amplitudes: Some(s.amplitudes.clone()),
        templates: Array::new(vec![units, s.nt, c], s.templates.clone())?,
        template_channels: None,
        channel_map: output.channel_map.to_vec(),
        channel_positions: output
            .channel_positions
            .iter()
            .map(|&[x, y]| [f64::from(x), f64::from(y)])
            .collect(),
        similar_templates: Some(Array::new(vec![units, units], s.similar_templates.clone())?),
        whitening_mat: Some(wrot),
        whitening_mat_inv: Some(Array::new(vec![c, c], inverse)?),
        pc_features: Some(Array::new(
            vec![n, s.p, s.pc_channels],
            s.pc_features.clone(),
        )?),
        pc_feature_ind: Some(Array::new(
            vec![units, s.pc_channels],
            s.pc_feature_ind.clone(),
        )?),
        cluster_columns: vec![labels, group, contamination, amplitude],
    })
}

/// Writes the `.npy` files of Kilosort 4's folder that [`write_phy`] does not.
fn write_kilosort_extras(dir: &Path, output: &PhyOutput) -> Result<()> {
    let s = output.sorting;
    let (n, units, c) = (s.num_spikes() as u64, s.num_units(), s.channels);
    // `check` keeps these values at most `i32::MAX`, so their bytes are the int32's.
    let int32 =
        |values: &[u32]| -> Vec<u8> { values.iter().flat_map(|v| v.to_le_bytes()).collect() };
    npy(
        dir,
        "spike_detection_templates.npy",
        dtype(ElementKind::Int, 4),
        vec![n],
        int32(&s.spike_templates),
    )?;
    npy(
        dir,
        "spike_positions.npy",
        dtype(ElementKind::Float, 4),
        vec![n, 2],
        s.spike_positions
            .iter()
            .flatten()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
    )?;
    npy(
        dir,
        "kept_spikes.npy",
        dtype(ElementKind::Bool, 1),
        vec![s.kept.len() as u64],
        s.kept.iter().map(|&k| u8::from(k)).collect(),
    )?;
    npy(
        dir,
        "templates_ind.npy",
        dtype(ElementKind::Int, 8),
        vec![units as u64, c as u64],
        (0..units)
            .flat_map(|_| (0..c as i64).flat_map(i64::to_le_bytes))
            .collect(),
    )?;
    npy(
        dir,
        "channel_shanks.npy",
        dtype(ElementKind::Int, 4),
        vec![c as u64],
        int32(output.channel_shanks),
    )?;
    npy(
        dir,
        "whitening_mat_dat.npy",
        dtype(ElementKind::Float, 4),
        vec![c as u64, c as u64],
        output
            .whitening
            .iter()
            .flat_map(|&v| (v as f32).to_le_bytes())
            .collect(),
    )
}

/// A little-endian dtype of `kind` and `size` bytes.
fn dtype(kind: ElementKind, size: usize) -> Dtype {
    Dtype {
        kind,
        size,
        order: ByteOrder::Little,
    }
}

/// Writes one C-order `.npy` file `name` in `dir`.
fn npy(dir: &Path, name: &str, dtype: Dtype, shape: Vec<u64>, data: Vec<u8>) -> Result<()> {
    NpyArray::new(dtype, false, shape, data)?.write(dir.join(name))?;
    Ok(())
}

/// Writes the text file `name` in `dir`.
fn write_text(dir: &Path, name: &str, text: &str) -> Result<()> {
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(|e| dspk_io::Error::io(&path, "write", e).into())
}

/// `value` as Python's `'%.1f' % value` writes it: one decimal, correctly rounded (ties to
/// even on the exact binary value, as both Rust and Python round), `nan`, `inf`, `-inf`.
fn python_1f(value: f64) -> String {
    if value.is_nan() {
        "nan".into()
    } else if value.is_infinite() {
        if value > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        format!("{value:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_formatting() {
        // Python: '%.1f' % v for each v.
        let cases = [
            (0.25, "0.2"),
            (0.35, "0.3"),
            (0.05, "0.1"),
            (-0.04, "-0.0"),
            (99.95, "100.0"),
            (123.45, "123.5"),
            (f64::NAN, "nan"),
            (f64::NEG_INFINITY, "-inf"),
        ];
        for (v, want) in cases {
            assert_eq!(python_1f(v), want, "{v}");
        }
    }
}

#[cfg(test)]
mod staging_tests {
    use super::{check_phy_destination, move_into_place, staging_folder};

    /// A fresh scratch folder for `name`.
    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("dspk-phy-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn phy_staging_moves_a_complete_folder_into_place_and_leaves_nothing_beside() {
        let root = scratch("move");
        let out = root.join("sorted");
        check_phy_destination(&out, false).unwrap();
        assert!(!out.exists(), "the check made the folder");
        let staging = staging_folder(&out).unwrap();
        std::fs::write(staging.join("spike_times.npy"), b"new").unwrap();
        move_into_place(&staging, &out).unwrap();
        assert_eq!(std::fs::read(out.join("spike_times.npy")).unwrap(), b"new");
        // An existing folder: refused without overwrite; with it, the old Phy files this
        // write lacks go, other files stay.
        let e = check_phy_destination(&out, false).unwrap_err();
        assert!(e.to_string().contains("already holds a Phy folder"), "{e}");
        std::fs::write(out.join("cluster_Old.tsv"), b"old").unwrap();
        std::fs::write(out.join("recording.dat"), b"raw").unwrap();
        check_phy_destination(&out, true).unwrap();
        let staging = staging_folder(&out).unwrap();
        std::fs::write(staging.join("params.py"), b"p").unwrap();
        move_into_place(&staging, &out).unwrap();
        let mut names: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["params.py", "recording.dat"]);
        let beside: Vec<_> = std::fs::read_dir(&root).unwrap().collect();
        assert_eq!(
            beside.len(),
            1,
            "only the Phy folder is left in {}",
            root.display()
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn phy_destination_that_is_a_file_is_refused() {
        let root = scratch("file");
        let file = root.join("taken");
        std::fs::write(&file, b"").unwrap();
        let e = check_phy_destination(&file, true).unwrap_err();
        assert!(e.to_string().contains("not a folder"), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
