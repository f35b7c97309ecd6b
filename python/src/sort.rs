//! Sorting a [`Recording`] as `dspk sort` does (same settings parser, probe choice, checks,
//! device choice and Phy folder), with the GIL released while the device works.

use std::path::PathBuf;

use dspk::kilosort::export::phy::check_phy_destination;
use dspk::kilosort::{Kilosort4, Progress};
use dspk_cli::recording::require_samples;
use dspk_cli::settings::settings;
use dspk_cli::sorter::{phy_params, sort_device, sort_with_progress};
use numpy::{PyArray1, PyArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{dspk_error, message};
use crate::recording::Recording;

/// The settings `preset` (`None`: Kilosort4's defaults) with each `(key, value)` applied in
/// order, as `dspk sort --preset NAME --set KEY=VALUE ...` reads them, as JSON under Kilosort's
/// names.
///
/// # Errors
///
/// `ValueError` with the command's message: an unknown preset, or the pair refused (an unknown
/// key, a value of the wrong type or out of range) and why.
#[pyfunction]
#[pyo3(signature = (preset=None, sets=Vec::new()))]
pub(crate) fn settings_json(preset: Option<&str>, sets: Vec<(String, String)>) -> PyResult<String> {
    Ok(settings(preset, &sets)
        .map_err(PyValueError::new_err)?
        .to_json())
}

/// The runtime `DSPK_RUNTIME` picks and the name of its device `device` (`None`: the one
/// `DSPK_DEVICE` names, else the default), as `(runtime, device name)`; opens the device.
///
/// # Errors
///
/// `DspkError`: no such runtime, no device, an index past the devices present.
#[pyfunction]
#[pyo3(signature = (device=None))]
pub(crate) fn runtime(py: Python<'_>, device: Option<usize>) -> PyResult<(String, String)> {
    py.detach(|| {
        let (target, _, client) = sort_device(device)?;
        Ok::<_, dspk::Error>((
            target.to_string(),
            client.properties().identity.name.clone(),
        ))
    })
    .map_err(|e| dspk_error(&e))
}

/// Sorts `recording` through its probe (or the probe file `probe`) with the settings of
/// `preset` and `sets` on the runtime's device `device`, calling `progress(stage, done,
/// total)` as the sort goes, and writes the Phy folder `out` when given (refused when it holds
/// one already, unless `overwrite`). Returns a dict of numpy arrays and the report (what
/// `dspk.sort` makes its result of).
///
/// # Errors
///
/// `ValueError`: settings refused, a recording without samples, a probe that cannot be used,
/// what the sort's checks refuse before reading (settings against the recording); `DspkError`
/// for the rest (no device, a read, the device, the Phy folder); the first exception a
/// `progress` call raised, after the sort.
#[pyfunction]
#[pyo3(signature = (recording, probe=None, preset=None, sets=Vec::new(), out=None, overwrite=false, device=None, progress=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn sort<'py>(
    py: Python<'py>,
    recording: &Recording,
    probe: Option<PathBuf>,
    preset: Option<&str>,
    sets: Vec<(String, String)>,
    out: Option<PathBuf>,
    overwrite: bool,
    device: Option<usize>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let value_error = |e: &dyn std::error::Error| PyValueError::new_err(e.to_string());
    let settings = settings(preset, &sets).map_err(PyValueError::new_err)?;
    let info = recording.info().clone();
    require_samples(std::path::Path::new(&recording.name()), &info)
        .map_err(PyValueError::new_err)?;
    let (channels, probe_from) = recording
        .sort_probe(probe.as_deref(), settings.line_probe_pitch)
        .map_err(|e| PyValueError::new_err(message(e.as_ref())))?;
    if let Some(out) = &out {
        check_phy_destination(out, overwrite).map_err(|e| value_error(&e))?;
    }
    Kilosort4::new(settings.clone())
        .check(&info, &channels)
        .map_err(|e| value_error(&e))?;

    let source = recording.source();
    let mut raised: Option<PyErr> = None;
    let sorted = py.detach(|| {
        let (_, _, client) = sort_device(device)?;
        let mut tell = |p: Progress| {
            let Some(callback) = &progress else { return };
            if raised.is_some() {
                return;
            }
            Python::attach(|py| {
                if let Err(error) = callback.call1(py, (p.stage, p.done, p.total)) {
                    raised = Some(error);
                }
            });
        };
        let sorted = sort_with_progress(&client, settings, source, &channels, &mut tell)?;
        if let Some(out) = &out {
            sorted.output.write_phy(
                out,
                phy_params(&info, recording.phy_dat().as_ref()),
                overwrite,
            )?;
        }
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(sorted)
    });
    let sorted = sorted.map_err(|e| dspk_error(e.as_ref()))?;
    if let Some(error) = raised {
        return Err(error);
    }

    let report = sorted.report(info.duration().as_secs_f64());
    let (seconds, mut output) = (sorted.seconds, sorted.output);
    // The arrays take the sort's vectors over (no copy).
    let sorting = &mut output.sorting;
    let result = PyDict::new(py);
    result.set_item(
        "spike_times",
        PyArray1::from_vec(py, std::mem::take(&mut sorting.spike_times)),
    )?;
    let clusters = std::mem::take(&mut sorting.spike_clusters);
    result.set_item("spike_clusters", PyArray1::from_vec(py, clusters))?;
    result.set_item(
        "amplitudes",
        PyArray1::from_vec(py, std::mem::take(&mut sorting.amplitudes)),
    )?;
    let shape = [sorting.num_units(), sorting.nt, sorting.channels];
    let templates =
        PyArray1::from_vec(py, std::mem::take(&mut sorting.templates)).reshape(shape)?;
    result.set_item("templates", templates)?;
    let labels: Vec<&str> = sorting.labels.iter().map(|l| l.as_str()).collect();
    result.set_item("labels", labels)?;
    result.set_item("sampling_frequency", sorting.sample_rate)?;
    let channel_map: Vec<u64> = output.probe.channels().iter().map(|&c| c as u64).collect();
    result.set_item("channel_map", PyArray1::from_vec(py, channel_map))?;
    let positions: Vec<f32> = output.probe.positions().iter().flatten().copied().collect();
    let positions = PyArray1::from_vec(py, positions).reshape([output.probe.len(), 2])?;
    result.set_item("channel_positions", positions)?;
    result.set_item("warnings", output.warnings.clone())?;
    result.set_item("report", report)?;
    result.set_item("settings", output.settings.to_json())?;
    result.set_item("probe", probe_from)?;
    result.set_item("seconds", seconds)?;
    result.set_item("out", out)?;
    Ok(result)
}
