//! SpikeInterface's binary folder (`recording.save(format="binary")`): `binary.json` whose
//! `kwargs` describe one raw file per segment, plus `properties/*.npy`.

use std::path::{Path, PathBuf};

use dspk_core::ChannelInfo;
use serde::Deserialize;

use super::reader::{RawRecording, RawSpec, SampleOrder, sibling};
use super::sidecar::{parse_sample_dtype, parse_sample_rate, plain_file_name};
use crate::file::{METADATA_LIMIT, read_small_file};
use crate::npy::NpyArray;
use crate::{Error, Result};

/// The metadata file of a SpikeInterface binary folder.
pub const SI_BINARY_JSON: &str = "binary.json";

#[derive(Deserialize)]
struct BinaryJson {
    kwargs: Kwargs,
}

#[derive(Deserialize)]
struct Kwargs {
    file_paths: Vec<String>,
    sampling_frequency: serde_json::Value,
    num_channels: u64,
    dtype: String,
    #[serde(default)]
    channel_ids: Option<Vec<serde_json::Value>>,
    #[serde(default)]
    time_axis: u64,
    #[serde(default)]
    file_offset: u64,
    #[serde(default, rename = "gain_to_uV")]
    gain_to_uv: Option<Vec<f64>>,
    #[serde(default, rename = "offset_to_uV")]
    offset_to_uv: Option<Vec<f64>>,
}

/// A SpikeInterface binary folder's description, parsed from its `binary.json`: the data file
/// of segment 0 and how to read it.
#[derive(Debug, Clone, PartialEq)]
pub struct SiBinaryMeta {
    /// The raw file of segment 0, resolved against the folder.
    pub data_path: PathBuf,
    /// How to read it (gains and offsets from `kwargs`, else from `properties/*.npy` once
    /// opened, else 1 and 0).
    pub spec: RawSpec,
    /// Whether `kwargs` gave gains (in microvolts).
    pub has_gains: bool,
}

impl SiBinaryMeta {
    /// Parses `binary.json` (`json`, read from `json_path`). Touches no file.
    ///
    /// # Errors
    ///
    /// [`Error::Json`] for malformed JSON, a missing field or a negative size; [`Error::Invalid`]
    /// for several segments, a file path outside the folder, an unsupported dtype or
    /// `time_axis`, a bad sampling frequency, zero or absurdly many channels, or channel ids,
    /// gains or offsets whose count is not `num_channels`.
    pub fn parse(json: &[u8], json_path: &Path) -> Result<Self> {
        let path = json_path;
        let parsed: BinaryJson = serde_json::from_slice(json).map_err(|e| Error::Json {
            path: path.to_path_buf(),
            source: e.into(),
        })?;
        let kwargs = parsed.kwargs;
        let [file_name] = &kwargs.file_paths[..] else {
            return Err(Error::invalid(
                path,
                format!(
                    "{} segments (`file_paths`); only single-segment recordings are supported",
                    kwargs.file_paths.len()
                ),
            ));
        };
        let file_name = plain_file_name(path, file_name)?;
        let (format, byte_order) = parse_sample_dtype(path, &kwargs.dtype)?;
        let order = match kwargs.time_axis {
            0 => SampleOrder::Interleaved,
            1 => SampleOrder::ChannelMajor,
            other => {
                return Err(Error::invalid(
                    path,
                    format!("`time_axis` is {other}, expected 0 or 1"),
                ));
            }
        };
        let sample_rate = parse_sample_rate(path, &kwargs.sampling_frequency)?;
        // Each channel needs a name in the JSON or a sample in the data file; the JSON is at
        // most 16 MiB, and the count is checked against the data file when it is opened.
        let num_channels = usize::try_from(kwargs.num_channels)
            .ok()
            .filter(|&n| n > 0 && n <= (METADATA_LIMIT as usize))
            .ok_or_else(|| {
                Error::invalid(path, format!("`num_channels` is {}", kwargs.num_channels))
            })?;
        let count_check = |what: &str, len: usize| {
            if len == num_channels {
                Ok(())
            } else {
                Err(Error::invalid(
                    path,
                    format!("`{what}` has {len} entries for {num_channels} channels"),
                ))
            }
        };
        let names: Vec<String> = match kwargs.channel_ids {
            Some(ids) => {
                count_check("channel_ids", ids.len())?;
                ids.into_iter()
                    .map(|id| match id {
                        serde_json::Value::String(s) => s,
                        other => other.to_string(),
                    })
                    .collect()
            }
            None => (0..num_channels).map(|c| c.to_string()).collect(),
        };
        let has_gains = kwargs.gain_to_uv.is_some();
        let gains = kwargs.gain_to_uv.unwrap_or_else(|| vec![1.0; num_channels]);
        let offsets = kwargs
            .offset_to_uv
            .unwrap_or_else(|| vec![0.0; num_channels]);
        count_check("gain_to_uV", gains.len())?;
        count_check("offset_to_uV", offsets.len())?;
        let unit = if has_gains { "uV" } else { "" };
        let channels = names
            .into_iter()
            .zip(gains.iter().zip(&offsets))
            .map(|(name, (&gain, &offset))| ChannelInfo::new(name, gain, offset, unit))
            .collect();
        Ok(Self {
            data_path: sibling(path, file_name),
            spec: RawSpec {
                channels,
                sample_rate,
                format,
                byte_order,
                order,
                header_bytes: kwargs.file_offset,
                num_samples: None,
            },
            has_gains,
        })
    }
}

impl RawRecording {
    /// Opens a SpikeInterface binary folder (the folder, or its `binary.json`).
    ///
    /// Gains and offsets come from `binary.json`'s `kwargs`, or, when those are null, from
    /// `properties/gain_to_uV.npy` and `properties/offset_to_uV.npy` (unit `uV`); without
    /// either, gain 1 and offset 0.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if a file cannot be read; the errors of [`SiBinaryMeta::parse`]; those of
    /// [`RawRecording::new`] (a truncated data file); those of [`NpyArray::read`] for the
    /// property files.
    pub fn open_spikeinterface(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let json_path = if path.is_dir() {
            path.join(SI_BINARY_JSON)
        } else {
            path.to_path_buf()
        };
        let json = read_small_file(&json_path, METADATA_LIMIT)?;
        let mut meta = SiBinaryMeta::parse(&json, &json_path)?;
        if !meta.has_gains {
            let properties = sibling(&json_path, "properties");
            let gains = properties.join("gain_to_uV.npy");
            if gains.is_file() {
                let gains = NpyArray::read(&gains)?.to_f64()?;
                let offsets = properties.join("offset_to_uV.npy");
                let offsets = if offsets.is_file() {
                    NpyArray::read(&offsets)?.to_f64()?
                } else {
                    vec![0.0; gains.len()]
                };
                if gains.len() != meta.spec.channels.len() || offsets.len() != gains.len() {
                    return Err(Error::invalid(
                        &properties,
                        format!(
                            "{} gains and {} offsets for {} channels",
                            gains.len(),
                            offsets.len(),
                            meta.spec.channels.len()
                        ),
                    ));
                }
                for (channel, (gain, offset)) in meta
                    .spec
                    .channels
                    .iter_mut()
                    .zip(gains.into_iter().zip(offsets))
                {
                    channel.gain = gain;
                    channel.offset = offset;
                    channel.unit = "uV".into();
                }
            }
        }
        Self::new(&meta.data_path, meta.spec)
    }
}
