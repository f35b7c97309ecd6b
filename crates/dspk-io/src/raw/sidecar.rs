//! The JSON sidecar that describes a raw binary file.
//!
//! ```json
//! {
//!   "format": "dspk-raw",
//!   "version": 1,
//!   "data_file": "traces.bin",
//!   "dtype": "<i2",
//!   "order": "interleaved",
//!   "header_bytes": 0,
//!   "num_samples": 3000,
//!   "sample_rate": "30000",
//!   "channels": [{"name": "A0", "gain": 0.195, "offset": 0.0, "unit": "uV"}]
//! }
//! ```
//!
//! `num_samples` may be left out (it is then derived from the file length); `sample_rate` is a
//! number or an exact string (`"30000.12"`, `"750003/25"`); `order` is `"interleaved"` or
//! `"channel-major"`; `dtype` is a numpy dtype string whose kind and size are one of the
//! [`SampleFormat`]s, in either byte order.

use std::path::{Path, PathBuf};

use dspk_core::{ChannelInfo, SampleFormat, SampleRate};
use serde::{Deserialize, Serialize};

use super::reader::{RawSpec, SampleOrder};
use crate::dtype::Dtype;
use crate::{Error, Result};

/// The `format` value of a dspk raw sidecar.
pub const SIDECAR_FORMAT: &str = "dspk-raw";

/// The sidecar version this crate writes and reads.
const SIDECAR_VERSION: u32 = 1;

/// A parsed and checked raw-binary sidecar: the data file it names and how to read it.
#[derive(Debug, Clone, PartialEq)]
pub struct RawSidecar {
    /// The data file, resolved against the sidecar's folder.
    pub data_path: PathBuf,
    /// How to read it.
    pub spec: RawSpec,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SidecarJson {
    format: String,
    version: u32,
    data_file: String,
    dtype: String,
    order: String,
    #[serde(default)]
    header_bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    num_samples: Option<u64>,
    sample_rate: serde_json::Value,
    channels: Vec<ChannelJson>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChannelJson {
    name: String,
    #[serde(default = "one")]
    gain: f64,
    #[serde(default)]
    offset: f64,
    #[serde(default)]
    unit: String,
}

const fn one() -> f64 {
    1.0
}

impl RawSidecar {
    /// Parses and checks the sidecar `json`, read from `sidecar_path` (which names the file in
    /// errors and locates the data file). Touches no file.
    ///
    /// # Errors
    ///
    /// [`Error::Json`] for malformed JSON, a missing field or a negative size;
    /// [`Error::Invalid`] for a wrong `format` or `version`, a data file name that leaves the
    /// sidecar's folder, an unsupported dtype or order, a bad sample rate, no channels, or a
    /// gain or offset that is not finite.
    pub fn parse(json: &[u8], sidecar_path: &Path) -> Result<Self> {
        let path = sidecar_path;
        let raw: SidecarJson = serde_json::from_slice(json).map_err(|e| Error::Json {
            path: path.to_path_buf(),
            source: e.into(),
        })?;
        if raw.format != SIDECAR_FORMAT {
            return Err(Error::invalid(
                path,
                format!(
                    "`format` is `{}`, expected `{SIDECAR_FORMAT}`",
                    raw.format.escape_debug()
                ),
            ));
        }
        if raw.version != SIDECAR_VERSION {
            return Err(Error::invalid(
                path,
                format!(
                    "sidecar version {} is not supported (this reader reads {SIDECAR_VERSION})",
                    raw.version
                ),
            ));
        }
        let data_name = plain_file_name(path, &raw.data_file)?;
        let (format, byte_order) = parse_sample_dtype(path, &raw.dtype)?;
        let order = match raw.order.as_str() {
            "interleaved" => SampleOrder::Interleaved,
            "channel-major" => SampleOrder::ChannelMajor,
            other => {
                return Err(Error::invalid(
                    path,
                    format!(
                        "`order` is `{}`, expected `interleaved` or `channel-major`",
                        other.escape_debug()
                    ),
                ));
            }
        };
        let sample_rate = parse_sample_rate(path, &raw.sample_rate)?;
        if raw.channels.is_empty() {
            return Err(Error::invalid(path, "`channels` is empty"));
        }
        let mut channels = Vec::with_capacity(raw.channels.len());
        for (index, channel) in raw.channels.into_iter().enumerate() {
            if !channel.gain.is_finite() || !channel.offset.is_finite() {
                return Err(Error::invalid(
                    path,
                    format!(
                        "channel {index} has gain {} and offset {}: both must be finite",
                        channel.gain, channel.offset
                    ),
                ));
            }
            channels.push(ChannelInfo::new(
                channel.name,
                channel.gain,
                channel.offset,
                channel.unit,
            ));
        }
        Ok(Self {
            data_path: super::reader::sibling(path, data_name),
            spec: RawSpec {
                channels,
                sample_rate,
                format,
                byte_order,
                order,
                header_bytes: raw.header_bytes,
                num_samples: raw.num_samples,
            },
        })
    }

    /// The sidecar's JSON text for `spec`, naming `data_file` (a file name in the same folder).
    pub(crate) fn to_json(data_file: &str, spec: &RawSpec, num_samples: u64) -> String {
        let dtype = Dtype {
            order: spec.byte_order,
            ..Dtype::from_format(spec.format)
        };
        let json = SidecarJson {
            format: SIDECAR_FORMAT.into(),
            version: SIDECAR_VERSION,
            data_file: data_file.into(),
            dtype: dtype.to_string(),
            order: spec.order.name().into(),
            header_bytes: spec.header_bytes,
            num_samples: Some(num_samples),
            sample_rate: serde_json::Value::String(rate_text(spec.sample_rate)),
            channels: spec
                .channels
                .iter()
                .map(|c| ChannelJson {
                    name: c.name.clone(),
                    gain: c.gain,
                    offset: c.offset,
                    unit: c.unit.clone(),
                })
                .collect(),
        };
        // Serialising plain strings and finite numbers cannot fail.
        serde_json::to_string_pretty(&json).unwrap_or_default()
    }
}

/// An exact text form of a rate that [`SampleRate`]'s parser reads back (`"30000"`, `"750003/25"`).
pub(crate) fn rate_text(rate: SampleRate) -> String {
    if rate.denominator() == 1 {
        rate.numerator().to_string()
    } else {
        format!("{}/{}", rate.numerator(), rate.denominator())
    }
}

/// A dtype string that must be one of the recording sample formats.
pub(crate) fn parse_sample_dtype(
    path: &Path,
    text: &str,
) -> Result<(SampleFormat, crate::ByteOrder)> {
    let dtype: Dtype = text.parse().map_err(|e: String| Error::invalid(path, e))?;
    let format = dtype.sample_format().ok_or_else(|| {
        Error::invalid(
            path,
            format!(
                "dtype `{dtype}` is not a recording sample type (int16, uint16, int32, float32)"
            ),
        )
    })?;
    Ok((format, dtype.order))
}

/// A sample rate given as a JSON number or string.
pub(crate) fn parse_sample_rate(path: &Path, value: &serde_json::Value) -> Result<SampleRate> {
    let text = match value {
        serde_json::Value::Number(n) => n.to_string(),
        serde_json::Value::String(s) => s.clone(),
        other => {
            return Err(Error::invalid(
                path,
                format!("sample rate {other} is not a number or a string"),
            ));
        }
    };
    text.parse().map_err(|e| Error::core(path, e))
}

/// Checks that `name` is a plain file name (no folder part), so metadata cannot point a reader
/// at files outside its own folder.
pub(crate) fn plain_file_name<'a>(path: &Path, name: &'a str) -> Result<&'a str> {
    let plain = !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\', '\0'])
        && Path::new(name).file_name().is_some();
    if plain {
        Ok(name)
    } else {
        Err(Error::invalid(
            path,
            format!(
                "data file `{}` is not a plain file name in the metadata's folder",
                name.escape_debug()
            ),
        ))
    }
}
