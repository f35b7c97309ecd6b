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

use crate::sorting::Sorting;
use crate::{Error, Result};

/// What Kilosort adds to the whitening matrix's diagonal before inverting it for
/// `whitening_mat_inv.npy`.
const INVERSE_RIDGE: f64 = 1e-5;

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
/// [`Error::Input`] naming the field when the sorting's or the output's parts disagree in
/// length (one entry per kept spike, per unit, per channel), a spike time is outside the
/// recording or decreases, a spike's unit or a feature channel is out of range, the sample
/// rates differ, a channel is not a column of the raw file, or `Wrot + 1e-5 I` cannot be
/// inverted; [`Error::Synapse`] from [`write_phy`] (an existing folder without `overwrite`,
/// a file that cannot be written); [`Error::Io`] naming a file this module cannot write.
pub fn write_phy_folder(dir: &Path, output: &PhyOutput, overwrite: bool) -> Result<()> {
    check(output)?;
    let folder = phy_folder(output)?;
    write_phy(dir, &folder, &PhyWriteOptions { overwrite })?;
    write_kilosort_extras(dir, output)?;
    write_text(dir, "dspk_settings.json", &output.settings_json)?;
    write_text(dir, "dspk_report.txt", &output.report)
}

/// An [`Error::Input`] about `what`.
fn input(what: &'static str, reason: String) -> Error {
    Error::Input { what, reason }
}

/// Checks that a field holds `expected` values (`per` says what one is).
fn check_len(what: &'static str, len: usize, expected: usize, per: &str) -> Result<()> {
    if len == expected {
        Ok(())
    } else {
        Err(input(
            what,
            format!("{len} values, expected {expected} ({per})"),
        ))
    }
}

/// Checks that the sorting's and the output's parts agree with each other.
fn check(output: &PhyOutput) -> Result<()> {
    let s = output.sorting;
    let n = s.num_spikes();
    let units = s.num_units();
    let c = s.channels;
    let per_spike = [
        ("Sorting::spike_clusters", s.spike_clusters.len()),
        ("Sorting::spike_templates", s.spike_templates.len()),
        ("Sorting::amplitudes", s.amplitudes.len()),
        ("Sorting::spike_positions", s.spike_positions.len()),
    ];
    for (what, len) in per_spike {
        check_len(what, len, n, "one per kept spike, as Sorting::spike_times")?;
    }
    let kept = s.kept.iter().filter(|&&k| k).count();
    if kept != n {
        return Err(input(
            "Sorting::kept",
            format!("{kept} spikes marked kept, Sorting::spike_times has {n}"),
        ));
    }
    let sizes = [
        (
            "Sorting::pc_features",
            s.pc_features.len(),
            [n, s.p, s.pc_channels],
            "[kept spikes, p, pc_channels]",
        ),
        (
            "Sorting::pc_feature_ind",
            s.pc_feature_ind.len(),
            [units, s.pc_channels, 1],
            "[units, pc_channels]",
        ),
        (
            "Sorting::unit_features",
            s.unit_features.len(),
            [units, c, s.p],
            "[units, channels, p]",
        ),
        (
            "Sorting::templates",
            s.templates.len(),
            [units, s.nt, c],
            "[units, nt, channels]",
        ),
        (
            "Sorting::contamination_pct",
            s.contamination_pct.len(),
            [units, 1, 1],
            "one per unit, as Sorting::labels",
        ),
        (
            "Sorting::unit_amplitudes",
            s.unit_amplitudes.len(),
            [units, 1, 1],
            "one per unit, as Sorting::labels",
        ),
        (
            "Sorting::similar_templates",
            s.similar_templates.len(),
            [units, units, 1],
            "[units, units]",
        ),
        (
            "PhyOutput::channel_map",
            output.channel_map.len(),
            [c, 1, 1],
            "one per sorted channel, Sorting::channels",
        ),
        (
            "PhyOutput::channel_positions",
            output.channel_positions.len(),
            [c, 1, 1],
            "one per sorted channel, Sorting::channels",
        ),
        (
            "PhyOutput::channel_shanks",
            output.channel_shanks.len(),
            [c, 1, 1],
            "one per sorted channel, Sorting::channels",
        ),
        (
            "PhyOutput::whitening",
            output.whitening.len(),
            [c, c, 1],
            "[channels, channels]",
        ),
    ];
    for (what, len, dims, per) in sizes {
        let expected = dims
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or_else(|| input(what, format!("the size {dims:?} overflows")))?;
        check_len(what, len, expected, per)?;
    }
    check_spikes(s)?;
    let int32s = [
        ("Sorting::spike_templates", s.spike_templates.as_slice()),
        ("PhyOutput::channel_shanks", output.channel_shanks),
    ];
    for (what, values) in int32s {
        if let Some(i) = values.iter().position(|&v| i32::try_from(v).is_err()) {
            return Err(input(
                what,
                format!("entry {i} is {}, over the int32 Kilosort writes", values[i]),
            ));
        }
    }
    if let Some(i) = s.pc_feature_ind.iter().position(|&ch| ch as usize >= c) {
        return Err(input(
            "Sorting::pc_feature_ind",
            format!(
                "entry {i} is channel {}, the sorting has {c} channels",
                s.pc_feature_ind[i]
            ),
        ));
    }
    if output.params.sample_rate.to_bits() != s.sample_rate.to_bits() {
        return Err(input(
            "PhyOutput::params",
            format!(
                "sample_rate {} Hz, the sorting's is {} Hz",
                output.params.sample_rate, s.sample_rate
            ),
        ));
    }
    let columns = output.params.n_channels_dat;
    if let Some(i) = output
        .channel_map
        .iter()
        .position(|&m| m as usize >= columns)
    {
        return Err(input(
            "PhyOutput::channel_map",
            format!(
                "channel {i} is column {} of the raw file, params.n_channels_dat is {columns}",
                output.channel_map[i]
            ),
        ));
    }
    Ok(())
}

/// Checks the spike times (non-decreasing, inside the recording) and units (below the unit
/// count).
fn check_spikes(s: &Sorting) -> Result<()> {
    let samples = i64::try_from(s.num_samples).unwrap_or(i64::MAX);
    if let Some(i) = s.spike_times.iter().position(|&t| t < 0 || t >= samples) {
        return Err(input(
            "Sorting::spike_times",
            format!(
                "spike {i} is at sample {}, outside the recording's {} samples",
                s.spike_times[i], s.num_samples
            ),
        ));
    }
    if let Some(i) = s.spike_times.windows(2).position(|w| w[1] < w[0]) {
        return Err(input(
            "Sorting::spike_times",
            format!(
                "spike {} at sample {} comes after one at {}: times must not decrease",
                i + 1,
                s.spike_times[i + 1],
                s.spike_times[i]
            ),
        ));
    }
    let units = s.num_units();
    if let Some(i) = s.spike_clusters.iter().position(|&u| u as usize >= units) {
        return Err(input(
            "Sorting::spike_clusters",
            format!(
                "spike {i} is in unit {}, the sorting has {units} units (Sorting::labels)",
                s.spike_clusters[i]
            ),
        ));
    }
    Ok(())
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

/// The inverse of `W + 1e-5 I` for the `c x c` row-major `w` (Kilosort's
/// `whitening_mat_inv.npy`, numpy's `linalg.inv` of the ridged matrix), by Gauss-Jordan
/// elimination with partial pivoting in `f64`; `None` if a pivot is below `1e-12` times the
/// largest entry, or an entry is not finite.
fn inverse_with_ridge(w: &[f64], c: usize) -> Option<Vec<f64>> {
    let mut a = w.to_vec();
    for i in 0..c {
        a[i * c + i] += INVERSE_RIDGE;
    }
    let scale = a.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    if a.iter().any(|v| !v.is_finite()) || (c > 0 && scale == 0.0) {
        return None;
    }
    let mut inv: Vec<f64> = (0..c * c)
        .map(|i| if i / c == i % c { 1.0 } else { 0.0 })
        .collect();
    for col in 0..c {
        let pivot =
            (col..c).max_by(|&i, &j| a[i * c + col].abs().total_cmp(&a[j * c + col].abs()))?;
        if a[pivot * c + col].abs() <= 1e-12 * scale {
            return None;
        }
        for k in 0..c {
            a.swap(col * c + k, pivot * c + k);
            inv.swap(col * c + k, pivot * c + k);
        }
        let p = a[col * c + col];
        for k in 0..c {
            a[col * c + k] /= p;
            inv[col * c + k] /= p;
        }
        for row in (0..c).filter(|&r| r != col) {
            let f = a[row * c + col];
            if f != 0.0 {
                for k in 0..c {
                    a[row * c + k] -= f * a[col * c + k];
                    inv[row * c + k] -= f * inv[col * c + k];
                }
            }
        }
    }
    Some(inv)
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

    #[test]
    fn ridged_inverse() {
        let w = [2.0, 1.0, 0.0, 1.0, 3.0, 1.0, 0.0, 1.0, 4.0];
        let inv = inverse_with_ridge(&w, 3).expect("invertible");
        for i in 0..3 {
            for j in 0..3 {
                let dot: f64 = (0..3)
                    .map(|k| {
                        let a = w[i * 3 + k] + if i == k { INVERSE_RIDGE } else { 0.0 };
                        a * inv[k * 3 + j]
                    })
                    .sum();
                let eye = if i == j { 1.0 } else { 0.0 };
                assert!((dot - eye).abs() < 1e-12, "({i}, {j}): {dot}");
            }
        }
        assert!(inverse_with_ridge(&[-1e-5, 0.0, 0.0, 1.0], 2).is_none());
        assert!(inverse_with_ridge(&[f64::NAN], 1).is_none());
        assert!(inverse_with_ridge(&[1.0, f64::NAN, 0.0, 1.0], 2).is_none());
        assert_eq!(inverse_with_ridge(&[], 0), Some(vec![]));
    }
}
