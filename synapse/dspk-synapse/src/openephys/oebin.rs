//! `structure.oebin`: the JSON description of one Open Ephys binary recording.

use std::path::Path;

use dspk_core::SampleRate;
use serde_json::Value;

use crate::{Error, Result};

/// The most continuous streams and channels per stream accepted: far above any real rig, low
/// enough that a count from the file bounds what is built from it.
const MAX_STREAMS: usize = 4096;
const MAX_CHANNELS: usize = 1 << 16;

/// The Open Ephys GUI versions whose binary layout this reader knows: 0.6 and later
/// (`sample_numbers.npy` + `timestamps.npy`), before 2.
const FIRST_VERSION: (u64, u64) = (0, 6);
const LAST_MAJOR: u64 = 1;

/// A parsed `structure.oebin`: the GUI version and the continuous streams of one recording
/// (event and spike entries are not read).
#[derive(Debug, Clone, PartialEq)]
pub struct Oebin {
    /// `"GUI version"` as written (`"0.6.7"`).
    pub gui_version: String,
    /// The `continuous` entries, in file order.
    pub continuous: Vec<ContinuousStream>,
}

/// One `continuous` entry: a `continuous.dat` of int16 samples, interleaved, in the folder
/// `continuous/<folder_name>`.
#[derive(Debug, Clone, PartialEq)]
pub struct ContinuousStream {
    /// The folder under `continuous/`, without the trailing `/` the GUI writes.
    pub folder_name: String,
    /// Samples per second, exact from the decimal the file states.
    pub sample_rate: SampleRate,
    /// `stream_name` (`"Rhythm Data"`); empty if absent.
    pub stream_name: String,
    /// `source_processor_name` (`"Acquisition Board"`); empty if absent.
    pub source_processor_name: String,
    /// The channels, in the column order of `continuous.dat` (`num_channels` of them).
    pub channels: Vec<OebinChannel>,
}

/// One channel of a continuous stream: stored int16 times `bit_volts` is a value in `units`.
#[derive(Debug, Clone, PartialEq)]
pub struct OebinChannel {
    /// `channel_name` (`"CH1"`, `"ADC1"`).
    pub channel_name: String,
    /// `bit_volts`: the gain from stored value to `units` (despite the name, not always volts).
    pub bit_volts: f64,
    /// `units` (`"uV"` for headstage channels, `"V"` for ADC channels).
    pub units: String,
    /// `description` (`"Headstage data channel"`); empty if absent.
    pub description: String,
}

impl Oebin {
    /// Parses the bytes of a `structure.oebin` (`path` names it in errors).
    ///
    /// Checks the GUI version (0.6 to 1.x: the layout with `sample_numbers.npy`), that every
    /// continuous stream has a plain `folder_name`, a positive `sample_rate`, `num_channels`
    /// equal to the length of `channels`, and that every channel has a name, a finite
    /// `bit_volts` and `units`.
    ///
    /// # Errors
    ///
    /// [`dspk_io::Error::Invalid`] for text that is not a JSON object, a missing or mistyped field, or
    /// counts that disagree; [`dspk_io::Error::Unsupported`] for a GUI version before 0.6 or from 2 on.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Self> {
        let root: Value = serde_json::from_slice(bytes)
            .map_err(|e| Error::invalid(path, format!("not valid JSON: {e}")))?;
        let Some(root) = root.as_object() else {
            return Err(Error::invalid(path, "the top level is not a JSON object"));
        };
        let gui_version = root
            .get("GUI version")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::invalid(path, "`GUI version` is missing or not a string"))?;
        check_version(path, gui_version)?;
        let entries = root
            .get("continuous")
            .and_then(Value::as_array)
            .ok_or_else(|| Error::invalid(path, "`continuous` is missing or not a list"))?;
        if entries.len() > MAX_STREAMS {
            return Err(Error::invalid(
                path,
                format!(
                    "{} continuous streams (at most {MAX_STREAMS} accepted)",
                    entries.len()
                ),
            ));
        }
        let continuous = entries
            .iter()
            .enumerate()
            .map(|(index, entry)| parse_stream(path, index, entry))
            .collect::<Result<Vec<_>>>()?;
        for (index, stream) in continuous.iter().enumerate() {
            if continuous[..index]
                .iter()
                .any(|s| s.folder_name == stream.folder_name)
            {
                return Err(Error::invalid(
                    path,
                    format!(
                        "continuous[{index}]: folder `{}` is listed twice",
                        stream.folder_name
                    ),
                ));
            }
        }
        Ok(Self {
            gui_version: gui_version.to_string(),
            continuous,
        })
    }
}

/// Checks `"major.minor[.patch]"` against the versions whose layout is known.
fn check_version(path: &Path, version: &str) -> Result<()> {
    let mut parts = version.trim().split('.').map(str::parse::<u64>);
    let (Some(Ok(major)), Some(Ok(minor))) = (parts.next(), parts.next()) else {
        return Err(Error::invalid(
            path,
            format!(
                "`GUI version` `{}` is not `major.minor[.patch]`",
                version.escape_debug()
            ),
        ));
    };
    if parts.any(|p| p.is_err()) {
        return Err(Error::invalid(
            path,
            format!(
                "`GUI version` `{}` is not `major.minor[.patch]`",
                version.escape_debug()
            ),
        ));
    }
    if (major, minor) < FIRST_VERSION {
        return Err(Error::unsupported(
            path,
            format!(
                "Open Ephys GUI version {version}: binary recordings before 0.6 keep sample \
                 numbers in timestamps.npy; this reader reads the 0.6 and later layout"
            ),
        ));
    }
    if major > LAST_MAJOR {
        return Err(Error::unsupported(
            path,
            format!("Open Ephys GUI version {version} (versions 0.6 to 1.x are known)"),
        ));
    }
    Ok(())
}

/// A string field of `object`, or an error naming `what`.
fn string<'a>(
    path: &Path,
    object: &'a serde_json::Map<String, Value>,
    key: &str,
    what: &str,
) -> Result<&'a str> {
    object
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| Error::invalid(path, format!("{what}: `{key}` is missing or not a string")))
}

/// A string field that may be absent (empty then).
fn optional_string(object: &serde_json::Map<String, Value>, key: &str) -> String {
    object
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn parse_stream(path: &Path, index: usize, entry: &Value) -> Result<ContinuousStream> {
    let what = format!("continuous[{index}]");
    let object = entry
        .as_object()
        .ok_or_else(|| Error::invalid(path, format!("{what} is not an object")))?;
    let folder = string(path, object, "folder_name", &what)?;
    let folder_name = folder.strip_suffix('/').unwrap_or(folder);
    let plain = !folder_name.is_empty()
        && folder_name != "."
        && folder_name != ".."
        && !folder_name.contains(['/', '\\', '\0']);
    if !plain {
        return Err(Error::invalid(
            path,
            format!(
                "{what}: `folder_name` `{}` is not a plain folder name",
                folder.escape_debug()
            ),
        ));
    }
    let sample_rate = parse_rate(path, object.get("sample_rate"), &what)?;
    let num_channels = object
        .get("num_channels")
        .and_then(Value::as_u64)
        .ok_or_else(|| {
            Error::invalid(
                path,
                format!("{what}: `num_channels` is missing or not a non-negative integer"),
            )
        })?;
    let channels = object
        .get("channels")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            Error::invalid(path, format!("{what}: `channels` is missing or not a list"))
        })?;
    if channels.len() > MAX_CHANNELS {
        return Err(Error::invalid(
            path,
            format!(
                "{what}: {} channels (at most {MAX_CHANNELS} accepted)",
                channels.len()
            ),
        ));
    }
    if num_channels != channels.len() as u64 {
        return Err(Error::invalid(
            path,
            format!(
                "{what}: `num_channels` is {num_channels} but `channels` lists {}",
                channels.len()
            ),
        ));
    }
    if channels.is_empty() {
        return Err(Error::invalid(path, format!("{what} has no channels")));
    }
    let channels = channels
        .iter()
        .enumerate()
        .map(|(c, channel)| parse_channel(path, &format!("{what}.channels[{c}]"), channel))
        .collect::<Result<Vec<_>>>()?;
    Ok(ContinuousStream {
        folder_name: folder_name.to_string(),
        sample_rate,
        stream_name: optional_string(object, "stream_name"),
        source_processor_name: optional_string(object, "source_processor_name"),
        channels,
    })
}

/// `sample_rate` as an exact rational from the number's decimal text (`30000.0` -> 30000).
fn parse_rate(path: &Path, value: Option<&Value>, what: &str) -> Result<SampleRate> {
    let text = match value {
        Some(Value::Number(n)) => n.to_string(),
        _ => {
            return Err(Error::invalid(
                path,
                format!("{what}: `sample_rate` is missing or not a number"),
            ));
        }
    };
    text.parse().map_err(|_| {
        Error::invalid(
            path,
            format!("{what}: `sample_rate` {text} is not a positive rate in Hz"),
        )
    })
}

fn parse_channel(path: &Path, what: &str, channel: &Value) -> Result<OebinChannel> {
    let object = channel
        .as_object()
        .ok_or_else(|| Error::invalid(path, format!("{what} is not an object")))?;
    let channel_name = string(path, object, "channel_name", what)?.to_string();
    let bit_volts = object
        .get("bit_volts")
        .and_then(Value::as_f64)
        .filter(|v| v.is_finite())
        .ok_or_else(|| {
            Error::invalid(
                path,
                format!("{what} (`{channel_name}`): `bit_volts` is missing or not a finite number"),
            )
        })?;
    let units = string(path, object, "units", what)?.to_string();
    Ok(OebinChannel {
        channel_name,
        bit_volts,
        units,
        description: optional_string(object, "description"),
    })
}
