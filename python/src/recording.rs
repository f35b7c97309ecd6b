//! `dspk.Recording`: a recording opened by path (any format the `dspk` command reads, or a
//! plain binary file) or a Python recording object read through `get_traces`, with the
//! probe it is sorted through.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dspk::io::{ByteOrder, RawRecording, RawSpec, SampleOrder};
use dspk::kilosort::SortProbe;
use dspk::{ChannelInfo, RecordingInfo, RecordingSource, SampleFormat, SampleRate};
use dspk_cli::recording::{
    Opened, PhyDat, PlainArgs, open_with, read_probe_file, recording_probe, sort_channels,
};
use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray2};
use pyo3::exceptions::{PyFileNotFoundError, PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::errors::{DspkError, dspk_error, message};
use crate::source::PyTracesSource;

/// Where a recording's samples come from, and what it knows of its probe.
enum Origin {
    /// Opened by path.
    Path {
        /// The path given.
        path: PathBuf,
        /// What opened it.
        opened: Opened,
    },
    /// A Python object read through `get_traces`, or from its own binary file.
    Python {
        /// Each channel's `[x, y]` (µm), from `get_channel_locations()`.
        positions: Vec<[f64; 2]>,
        /// Each channel's shank (the probe's `shank_ids`; all 0 without them).
        shanks: Vec<u32>,
        /// The object's binary file and its header's length, when the samples are read from it.
        file: Option<(PathBuf, u64)>,
    },
}

/// A recording: its channels, rate, length and stored sample type, its samples
/// (`get_traces`), and the probe a sort reads it through.
#[pyclass(frozen, module = "dspk._dspk")]
pub(crate) struct Recording {
    /// The samples.
    source: Arc<dyn RecordingSource>,
    /// Where they come from.
    origin: Origin,
}

impl Recording {
    /// The samples.
    pub(crate) fn source(&self) -> Arc<dyn RecordingSource> {
        self.source.clone()
    }

    /// What the recording holds.
    pub(crate) fn info(&self) -> &RecordingInfo {
        self.source.info()
    }

    /// The name errors give the recording: its path, or `the Python recording`.
    pub(crate) fn name(&self) -> String {
        match &self.origin {
            Origin::Path { path, .. } => path.display().to_string(),
            Origin::Python { .. } => "the Python recording".to_string(),
        }
    }

    /// The channels to sort and where they came from, as the `dspk` command picks them: the
    /// probe file `file` when given; else the recording's own probe (its format's, or the
    /// Python recording's locations and shanks); else, with `line_pitch` (EMUsort's
    /// `line_probe_pitch`), every channel on a line.
    pub(crate) fn sort_probe(
        &self,
        file: Option<&Path>,
        line_pitch: Option<f64>,
    ) -> Result<(SortProbe, String), Box<dyn Error>> {
        let num_channels = self.info().num_channels();
        match &self.origin {
            Origin::Path { path, opened } => {
                sort_channels(path, &opened.format, file, num_channels, line_pitch)
            }
            Origin::Python {
                positions, shanks, ..
            } => {
                if let Some(file) = file {
                    let probe = read_probe_file(file)?;
                    let channels = SortProbe::from_probe(&probe, num_channels, &[])?;
                    return Ok((channels, file.display().to_string()));
                }
                let channels = SortProbe::new(
                    (0..num_channels).collect(),
                    positions
                        .iter()
                        .map(|p| [p[0] as f32, p[1] as f32])
                        .collect(),
                    shanks.clone(),
                )?;
                Ok((channels, "the recording's channel locations".to_string()))
            }
        }
    }

    /// The raw file Phy can show traces from (a path recording's, where it keeps one in
    /// Phy's layout; a Python recording's binary file when it has no header).
    pub(crate) fn phy_dat(&self) -> Option<PhyDat> {
        match &self.origin {
            Origin::Path { path, opened } => opened.phy_dat(path),
            // Phy reads interleaved samples from the file's start.
            Origin::Python {
                file: Some((path, 0)),
                ..
            } => Some(PhyDat {
                path: std::path::absolute(path).unwrap_or_else(|_| path.clone()),
                columns: self.source.info().num_channels(),
            }),
            Origin::Python { .. } => None,
        }
    }
}

#[pymethods]
impl Recording {
    /// Number of channels.
    #[getter]
    fn num_channels(&self) -> usize {
        self.info().num_channels()
    }

    /// Samples per second per channel (Hz).
    #[getter]
    fn sampling_frequency(&self) -> f64 {
        self.info().sample_rate.as_hz()
    }

    /// Samples per channel.
    #[getter]
    fn num_samples(&self) -> u64 {
        self.info().num_samples
    }

    /// Seconds of recording.
    #[getter]
    fn duration(&self) -> f64 {
        self.info().duration().as_secs_f64()
    }

    /// The stored sample type, as numpy names it (`"int16"`).
    #[getter]
    fn dtype(&self) -> &'static str {
        self.info().stored_format.name()
    }

    /// The format that opened it (`"spikeglx"`, `"plain-binary"`, ...; `"python"` for a
    /// Python recording read through `get_traces`, `"python-binary"` for one read from its
    /// binary file).
    #[getter]
    fn format(&self) -> &str {
        match &self.origin {
            Origin::Path { opened, .. } => &opened.format,
            Origin::Python { file: None, .. } => "python",
            Origin::Python { file: Some(_), .. } => "python-binary",
        }
    }

    /// The path it was opened from, or the binary file a Python recording is read from
    /// (`None` for one read through `get_traces`).
    #[getter]
    fn path(&self) -> Option<PathBuf> {
        match &self.origin {
            Origin::Path { path, .. } => Some(path.clone()),
            Origin::Python { file, .. } => file.as_ref().map(|(path, _)| path.clone()),
        }
    }

    /// Each channel's name or id.
    #[getter]
    fn channel_ids(&self) -> Vec<String> {
        self.info()
            .channels
            .iter()
            .map(|c| c.name.clone())
            .collect()
    }

    /// Each channel's gain: `scaled = stored * gain + offset`.
    #[getter]
    fn gains<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        PyArray1::from_vec(py, self.info().channels.iter().map(|c| c.gain).collect())
    }

    /// Each channel's offset: `scaled = stored * gain + offset`.
    #[getter]
    fn offsets<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        PyArray1::from_vec(py, self.info().channels.iter().map(|c| c.offset).collect())
    }

    /// Each channel's `[x, y]` in µm (`channels x 2`), from the recording's own probe; `None`
    /// when it has none.
    ///
    /// # Errors
    ///
    /// The metadata holding the probe cannot be read.
    fn get_channel_locations<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<Option<Bound<'py, PyArray2<f64>>>> {
        let positions = match &self.origin {
            Origin::Python { positions, .. } => positions.clone(),
            Origin::Path { path, opened } => {
                let probe =
                    recording_probe(path, &opened.format).map_err(|e| dspk_error(e.as_ref()))?;
                match probe {
                    Some(probe) => probe
                        .channel_positions(self.info().num_channels())
                        .map_err(|e| dspk_error(&e))?,
                    None => return Ok(None),
                }
            }
        };
        let flat: Vec<f64> = positions.iter().flatten().copied().collect();
        Ok(Some(
            PyArray1::from_vec(py, flat).reshape([positions.len(), 2])?,
        ))
    }

    /// Samples `start_frame..end_frame` (`end_frame=None`: to the end) of every channel as a
    /// `(samples, channels)` array: the stored values in their stored type, or with
    /// `return_scaled=True` `stored * gain + offset` as float32.
    ///
    /// # Errors
    ///
    /// `ValueError` for a range outside the recording; what the reader reports.
    #[pyo3(signature = (start_frame=0, end_frame=None, return_scaled=false))]
    fn get_traces<'py>(
        &self,
        py: Python<'py>,
        start_frame: u64,
        end_frame: Option<u64>,
        return_scaled: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let info = self.info();
        let end = end_frame.unwrap_or(info.num_samples);
        if start_frame > end || end > info.num_samples {
            return Err(PyValueError::new_err(format!(
                "frames {start_frame}..{end} are not inside the recording's {} samples",
                info.num_samples
            )));
        }
        let channels = info.all_channels();
        let n = usize::try_from(end - start_frame)
            .map_err(|_| PyValueError::new_err("the range does not fit in memory"))?;
        let source = self.source.clone();
        let format = info.stored_format;
        let shape = [channels.len(), n];
        // Read channel-major without the GIL, then transposed to (samples, channels).
        macro_rules! stored {
            ($t:ty) => {{
                let bytes = py
                    .detach(|| {
                        let mut out = vec![0u8; channels.len() * n * format.size()];
                        source
                            .read_stored(&channels, start_frame..end, &mut out)
                            .map(|()| out)
                    })
                    .map_err(|e| dspk_error(&e))?;
                let values: Vec<$t> = bytes
                    .chunks_exact(std::mem::size_of::<$t>())
                    .map(|b| <$t>::from_le_bytes(b.try_into().unwrap_or_default()))
                    .collect();
                transposed(py, values, shape)
            }};
        }
        let scaled = || {
            let values = py
                .detach(|| {
                    let mut out = vec![0f32; channels.len() * n];
                    source
                        .read(&channels, start_frame..end, &mut out)
                        .map(|()| out)
                })
                .map_err(|e| dspk_error(&e))?;
            transposed(py, values, shape)
        };
        if return_scaled || !self.source.can_read_stored() {
            return scaled();
        }
        match format {
            SampleFormat::I16 => stored!(i16),
            SampleFormat::U16 => stored!(u16),
            SampleFormat::I32 => stored!(i32),
            SampleFormat::F32 => stored!(f32),
            _ => scaled(),
        }
    }

    fn __repr__(&self) -> String {
        let info = self.info();
        format!(
            "<dspk.Recording {}: {} channels x {} samples at {} Hz ({:.2} s), {}>",
            self.format(),
            info.num_channels(),
            info.num_samples,
            info.sample_rate.as_hz(),
            info.duration().as_secs_f64(),
            info.stored_format.name()
        )
    }
}

/// A channel-major `[channels, samples]` vector as a `(samples, channels)` numpy array (one
/// copy, numpy's transpose made contiguous).
fn transposed<'py, T: numpy::Element>(
    py: Python<'py>,
    values: Vec<T>,
    shape: [usize; 2],
) -> PyResult<Bound<'py, PyAny>> {
    let array = PyArray1::from_vec(py, values).reshape(shape)?;
    let numpy = py.import("numpy")?;
    numpy.call_method1("ascontiguousarray", (array.transpose()?,))
}

/// Opens the recording at `path` as the `dspk` command does; `plain` holds Kilosort's names
/// for reading it as a plain binary file (`n_chan_bin`, `fs`, `data_dtype`) as text.
///
/// # Errors
///
/// `FileNotFoundError` for a path that does not exist; `ValueError` for a plain description
/// that is incomplete or wrong, or a key that is none of those three; `DspkError` for what the
/// format's reader reports.
#[pyfunction]
#[pyo3(signature = (path, plain=Vec::new()))]
pub(crate) fn open(
    py: Python<'_>,
    path: PathBuf,
    plain: Vec<(String, String)>,
) -> PyResult<Recording> {
    let mut args = PlainArgs::default();
    for (key, value) in &plain {
        if !args
            .setting("open", key, value)
            .map_err(PyValueError::new_err)?
        {
            return Err(PyValueError::new_err(format!(
                "`{key}` does not describe a plain binary file (n_chan_bin, fs, data_dtype)"
            )));
        }
    }
    let plain = args.finish("open").map_err(PyValueError::new_err)?;
    let opened = py.detach(|| open_with(&path, plain.as_ref()).map_err(|e| message(e.as_ref())));
    let opened = opened.map_err(|e| match path.exists() {
        true => DspkError::new_err(e),
        false => PyFileNotFoundError::new_err(e),
    })?;
    Ok(Recording {
        source: opened.source.clone(),
        origin: Origin::Path { path, opened },
    })
}

/// A recording over the Python object `recording`, read through its `get_traces`
/// (SpikeInterface's signature), or with `binary = (path, header bytes)` from the object's
/// own interleaved little-endian file, read as the `dspk` command reads one; the other
/// arguments describe it (what `dspk.Recording.from_spikeinterface` reads from a
/// SpikeInterface recording).
///
/// # Errors
///
/// `TypeError` for a `dtype` dspk does not read (int16, uint16, int32, float32);
/// `ValueError` for lists whose lengths disagree with the channel count, locations that are
/// not `channels x 2`, a rate that is not positive, gains or offsets that are not finite;
/// `DspkError` for a `binary` file that cannot be read or is shorter than described.
#[pyfunction]
#[pyo3(signature = (recording, sampling_frequency, num_samples, dtype, channel_ids, gains, offsets, locations, shanks, binary=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn python_recording(
    recording: Py<PyAny>,
    sampling_frequency: f64,
    num_samples: u64,
    dtype: &str,
    channel_ids: Vec<String>,
    gains: Vec<f64>,
    offsets: Vec<f64>,
    locations: PyReadonlyArray2<'_, f64>,
    shanks: Vec<u32>,
    binary: Option<(PathBuf, u64)>,
) -> PyResult<Recording> {
    let format = SampleFormat::ALL
        .into_iter()
        .find(|f| f.name() == dtype)
        .ok_or_else(|| {
            PyTypeError::new_err(format!(
                "the recording's dtype is {dtype}; dspk reads int16, uint16, int32 and float32 \
                 (convert it, e.g. spikeinterface.preprocessing.astype(recording, \"float32\"))"
            ))
        })?;
    let n = channel_ids.len();
    let locations = locations.as_array();
    if gains.len() != n || offsets.len() != n || shanks.len() != n || locations.dim() != (n, 2) {
        return Err(PyValueError::new_err(format!(
            "{n} channel ids, {} gains, {} offsets, {} shank ids and locations of shape {:?}: \
             one of each per channel ({n} x 2 locations)",
            gains.len(),
            offsets.len(),
            shanks.len(),
            locations.dim()
        )));
    }
    let rate: SampleRate = format!("{sampling_frequency}").parse().map_err(|e| {
        PyValueError::new_err(format!("sampling frequency {sampling_frequency}: {e}"))
    })?;
    let channels = (channel_ids.into_iter().zip(gains.iter().zip(&offsets)))
        .map(|(id, (&gain, &offset))| ChannelInfo::new(id, gain, offset, "uV"))
        .collect();
    let positions = locations.rows().into_iter().map(|r| [r[0], r[1]]).collect();
    let file = binary.clone();
    let source: Arc<dyn RecordingSource> = match binary {
        // The object's own file, read as the command reads one (no Python in the loop).
        Some((path, header_bytes)) => {
            let spec = RawSpec {
                channels,
                sample_rate: rate,
                format,
                byte_order: ByteOrder::Little,
                order: SampleOrder::Interleaved,
                header_bytes,
                num_samples: Some(num_samples),
            };
            Arc::new(RawRecording::new(&path, spec).map_err(|e| dspk_error(&e))?)
        }
        None => {
            let info = RecordingInfo::new(channels, num_samples, rate, format)
                .map_err(|e| PyValueError::new_err(e.to_string()))?;
            Arc::new(PyTracesSource::new(recording, info))
        }
    };
    Ok(Recording {
        source,
        origin: Origin::Python {
            positions,
            shanks,
            file,
        },
    })
}
