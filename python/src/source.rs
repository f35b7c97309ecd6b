//! A Python recording object (a SpikeInterface `BaseRecording`, or anything with its
//! `get_traces`) read as a [`RecordingSource`]: chunks are pulled from Python with the GIL
//! held only for the call, and its stored integers reach the device untouched.

use std::sync::Arc;

use dspk::{ChannelInfo, ReadRequest, RecordingInfo, RecordingSource, SampleFormat};
use numpy::ndarray::ArrayView2;
use numpy::{Element, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// A recording read through its Python object's `get_traces(segment_index=0, start_frame,
/// end_frame)`, which returns `(samples, channels)` arrays of the stored type (SpikeInterface's
/// default, `return_in_uV=False`, formerly `return_scaled=False`); `value = stored * gain + offset` per channel (SpikeInterface's
/// `get_channel_gains()` and `get_channel_offsets()`).
pub(crate) struct PyTracesSource {
    /// The Python recording.
    object: Py<PyAny>,
    /// Its channels, length, rate and stored type.
    info: RecordingInfo,
}

impl PyTracesSource {
    /// A source over `object` described by `info` (its channels with their gains and offsets,
    /// its length, rate and the type `get_traces` returns).
    pub(crate) fn new(object: Py<PyAny>, info: RecordingInfo) -> Self {
        Self { object, info }
    }

    /// Calls `get_traces` for the request's sample range (every channel) and copies the
    /// request's channels out channel-major with `write(k, column)`.
    fn pull(
        &self,
        request: &ReadRequest<'_>,
        mut write: impl FnMut(usize, ColumnView<'_>),
    ) -> dspk::Result<()> {
        let samples = request.samples();
        let format = self.info.stored_format;
        let result: Result<(), PyErr> = Python::attach(|py| {
            let kwargs = PyDict::new(py);
            kwargs.set_item("segment_index", 0)?;
            kwargs.set_item("start_frame", samples.start)?;
            kwargs.set_item("end_frame", samples.end)?;
            let traces = self
                .object
                .bind(py)
                .call_method("get_traces", (), Some(&kwargs))?;
            let expected = (request.samples_per_channel(), self.info.num_channels());
            let bad = |what: String| {
                pyo3::exceptions::PyTypeError::new_err(format!(
                    "get_traces(start_frame={}, end_frame={}) returned {what}; expected a \
                     {} x {} array of {} (samples x channels)",
                    samples.start,
                    samples.end,
                    expected.0,
                    expected.1,
                    format.name()
                ))
            };
            macro_rules! columns {
                ($t:ty, $variant:ident) => {{
                    let array: PyReadonlyArray2<'_, $t> =
                        traces.extract().map_err(|_| bad(describe_array(&traces)))?;
                    let view = array.as_array();
                    if view.dim() != expected {
                        return Err(bad(format!("shape {:?}", view.dim())));
                    }
                    for (k, &channel) in request.channels().iter().enumerate() {
                        write(k, ColumnView::$variant(view, channel));
                    }
                }};
            }
            match format {
                SampleFormat::I16 => columns!(i16, I16),
                SampleFormat::U16 => columns!(u16, U16),
                SampleFormat::I32 => columns!(i32, I32),
                SampleFormat::F32 => columns!(f32, F32),
                other => {
                    return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                        "a Python recording of {} samples is not read",
                        other.name()
                    )));
                }
            }
            Ok(())
        });
        result.map_err(|error| dspk::Error::Source {
            source_name: "the Python recording's get_traces".to_string(),
            cause: Arc::new(error),
        })
    }
}

/// What an object returned in place of an array is, for an error message: its numpy dtype
/// and shape, or its Python type.
fn describe_array(object: &Bound<'_, PyAny>) -> String {
    let dtype = object
        .getattr("dtype")
        .and_then(|d| d.str())
        .map(|s| s.to_string());
    let shape = object
        .getattr("shape")
        .and_then(|s| s.str())
        .map(|s| s.to_string());
    match (dtype, shape) {
        (Ok(dtype), Ok(shape)) => format!("an array of {dtype} with shape {shape}"),
        _ => format!(
            "a {}",
            object
                .get_type()
                .name()
                .map_or_else(|_| "?".to_string(), |n| n.to_string())
        ),
    }
}

/// One channel's column of a `(samples, channels)` array of the stored type.
pub(crate) enum ColumnView<'a> {
    /// `int16` samples.
    I16(ArrayView2<'a, i16>, usize),
    /// `uint16` samples.
    U16(ArrayView2<'a, u16>, usize),
    /// `int32` samples.
    I32(ArrayView2<'a, i32>, usize),
    /// `float32` samples.
    F32(ArrayView2<'a, f32>, usize),
}

impl ColumnView<'_> {
    /// Writes the column's samples into `out` as little-endian bytes (`samples * size`).
    fn write_le(&self, out: &mut [u8]) {
        fn copy<T: Element + Copy, const N: usize>(
            view: &ArrayView2<'_, T>,
            channel: usize,
            out: &mut [u8],
            to_le: impl Fn(T) -> [u8; N],
        ) {
            for (bytes, &value) in out.chunks_exact_mut(N).zip(view.column(channel)) {
                bytes.copy_from_slice(&to_le(value));
            }
        }
        match self {
            Self::I16(view, c) => copy(view, *c, out, i16::to_le_bytes),
            Self::U16(view, c) => copy(view, *c, out, u16::to_le_bytes),
            Self::I32(view, c) => copy(view, *c, out, i32::to_le_bytes),
            Self::F32(view, c) => copy(view, *c, out, f32::to_le_bytes),
        }
    }
}

impl RecordingSource for PyTracesSource {
    fn info(&self) -> &RecordingInfo {
        &self.info
    }

    fn fill_stored(&self, request: &ReadRequest<'_>, out: &mut [u8]) -> dspk::Result<()> {
        let run = request.samples_per_channel() * self.info.stored_format.size();
        self.pull(request, |k, column| {
            column.write_le(&mut out[k * run..(k + 1) * run]);
        })
    }

    fn fill_scaled(&self, request: &ReadRequest<'_>, out: &mut [f32]) -> dspk::Result<()> {
        let n = request.samples_per_channel();
        let format = self.info.stored_format;
        let mut stored = vec![0u8; n * format.size()];
        self.pull(request, |k, column| {
            column.write_le(&mut stored);
            let channel: &ChannelInfo = &self.info.channels[request.channels()[k]];
            format.scale_into(
                &stored,
                channel.gain,
                channel.offset,
                &mut out[k * n..(k + 1) * n],
            );
        })
    }

    fn can_read_stored(&self) -> bool {
        true
    }
}
