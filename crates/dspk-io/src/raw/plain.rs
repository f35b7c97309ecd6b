//! A plain binary file read the way Kilosort reads one: interleaved little-endian samples of
//! one type, no header, described by a channel count, a sample rate and a dtype given by the
//! caller (Kilosort's `n_chan_bin`, `fs`, `data_dtype`) instead of a sidecar.

use std::path::{Path, PathBuf};

use dspk_core::{ChannelInfo, RecordingSource, SampleFormat, SampleRate};

use super::reader::{RawRecording, RawSpec, SampleOrder};
use super::sidecar::RawSidecar;
use super::writer::sidecar_path;
use crate::dtype::ByteOrder;
use crate::{Error, Result};

/// The most channels a [`PlainBinary`] may have (each gets a [`ChannelInfo`], so a count is
/// bounded before anything is allocated for it).
pub const MAX_PLAIN_CHANNELS: usize = 1 << 16;

/// How to read a plain binary file (a Kilosort `.bin`, SpikeGLX's `.bin` read without its
/// `.meta`, any headerless `.dat`): `num_channels` columns of `format`, interleaved (all
/// channels of sample 0, then of sample 1, ...), little-endian, no header; the sample count
/// follows from the file's length, which must hold a whole number of samples.
///
/// Channels are named by column (`"0"`, `"1"`, ...). Without gains they read as the stored
/// values (gain 1, offset 0, no unit), which is what Kilosort sorts; with
/// [`gains`](Self::gains), `read` returns values in [`unit`](Self::unit).
///
/// > defaults: `format` int16, no gains, unit `""`.
///
/// ```no_run
/// use dspk_io::{PlainBinary, RawRecording};
/// use dspk_core::{RecordingSource, SampleRate};
///
/// let mut plain = PlainBinary::new(385, SampleRate::from_hz(30_000)?);
/// plain.gains = vec![2.34375]; // one gain for every channel (µV per step)
/// plain.unit = "uV".into();
/// let recording = RawRecording::open_plain("data.bin", &plain)?;
/// println!("{} samples", recording.info().num_samples);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct PlainBinary {
    /// Values per sample in the file (Kilosort's `n_chan_bin`; 385 for a SpikeGLX Neuropixels
    /// 1.0 `.ap.bin`: 384 sites and the sync channel).
    pub num_channels: usize,
    /// Samples per second per channel (Kilosort's `fs`).
    pub sample_rate: SampleRate,
    /// The stored sample type (Kilosort's `data_dtype`).
    ///
    /// > default: [`SampleFormat::I16`]
    pub format: SampleFormat,
    /// Gains: none (stored values), one for every channel, or one per channel.
    ///
    /// > default: none
    pub gains: Vec<f64>,
    /// The unit of scaled values (`"uV"`), given with gains.
    ///
    /// > default: `""`
    pub unit: String,
}

impl PlainBinary {
    /// `num_channels` int16 channels at `sample_rate`, without gains.
    #[must_use]
    pub fn new(num_channels: usize, sample_rate: SampleRate) -> Self {
        Self {
            num_channels,
            sample_rate,
            format: SampleFormat::I16,
            gains: Vec::new(),
            unit: String::new(),
        }
    }

    /// The [`RawSpec`] of the file at `path` (named in errors), without touching it.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for no channels, more than [`MAX_PLAIN_CHANNELS`], a number of gains
    /// that is neither 0, 1 nor the channel count, or a gain that is not finite.
    pub fn spec(&self, path: &Path) -> Result<RawSpec> {
        let n = self.num_channels;
        if n == 0 || n > MAX_PLAIN_CHANNELS {
            return Err(Error::invalid(
                path,
                format!(
                    "a plain binary file of {n} channels: the channel count must be from 1 to \
                     {MAX_PLAIN_CHANNELS}"
                ),
            ));
        }
        let gain = |c: usize| match self.gains.len() {
            0 => Ok(1.0),
            1 => Ok(self.gains[0]),
            len if len == n => Ok(self.gains[c]),
            len => Err(Error::invalid(
                path,
                format!("{len} gains for {n} channels: give one gain, or one per channel"),
            )),
        };
        let mut channels = Vec::with_capacity(n);
        for c in 0..n {
            let g = gain(c)?;
            if !g.is_finite() {
                return Err(Error::invalid(
                    path,
                    format!("the gain of channel {c} is {g}: gains must be finite"),
                ));
            }
            channels.push(ChannelInfo::new(c.to_string(), g, 0.0, self.unit.clone()));
        }
        Ok(RawSpec {
            channels,
            sample_rate: self.sample_rate,
            format: self.format,
            byte_order: ByteOrder::Little,
            order: SampleOrder::Interleaved,
            header_bytes: 0,
            num_samples: None,
        })
    }
}

impl RawRecording {
    /// Opens the plain binary file `data_path` as `plain` describes it (no sidecar is read).
    ///
    /// # Errors
    ///
    /// As [`PlainBinary::spec`]; [`Error::Io`] if the file cannot be opened;
    /// [`Error::Invalid`] when its length is not a whole number of samples of
    /// `num_channels` values (the message gives the arithmetic, and channel counts near the
    /// one given that would fit: a wrong `n_chan_bin` is the usual cause).
    pub fn open_plain(data_path: impl AsRef<Path>, plain: &PlainBinary) -> Result<Self> {
        let path = data_path.as_ref();
        let spec = plain.spec(path)?;
        let file_len = std::fs::metadata(path)
            .map_err(|e| Error::io(path, "open", e))?
            .len();
        check_whole_samples(path, file_len, plain.num_channels, plain.format)?;
        Self::new(path, spec)
    }

    /// Writes the dspk sidecar of this recording beside its data file (`<data file>.json`,
    /// replacing one that is there), so that later runs open the data file by its path alone;
    /// returns the sidecar's path. The data file is not touched.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] if the data file's name is not UTF-8; [`Error::Io`] if the sidecar
    /// cannot be written.
    pub fn write_sidecar(&self) -> Result<PathBuf> {
        let path = self.data_path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| Error::invalid(path, "a sidecar needs a data file with a UTF-8 name"))?;
        let info = self.info();
        let spec = RawSpec {
            channels: info.channels.clone(),
            sample_rate: info.sample_rate,
            format: info.stored_format,
            byte_order: self.byte_order(),
            order: self.order(),
            header_bytes: self.header_bytes(),
            num_samples: Some(info.num_samples),
        };
        let sidecar = sidecar_path(path);
        std::fs::write(&sidecar, RawSidecar::to_json(name, &spec, info.num_samples))
            .map_err(|e| Error::io(&sidecar, "write", e))?;
        Ok(sidecar)
    }
}

/// Refuses a file whose `file_len` bytes are not a whole number of samples of `num_channels`
/// values of `format`, with the arithmetic and up to three channel counts near it that would
/// fit.
fn check_whole_samples(
    path: &Path,
    file_len: u64,
    num_channels: usize,
    format: SampleFormat,
) -> Result<()> {
    let size = format.size() as u64;
    // num_channels <= MAX_PLAIN_CHANNELS, so the product cannot overflow.
    let frame = num_channels as u64 * size;
    if file_len.is_multiple_of(frame) {
        return Ok(());
    }
    let fits: Vec<String> = if file_len.is_multiple_of(size) {
        let values = file_len / size;
        // Within a factor of two of the count given: a typo or a missing sync channel, not a
        // different probe.
        let n = num_channels as u64;
        let mut near: Vec<u64> = (n.div_ceil(2)..=(2 * n).min(MAX_PLAIN_CHANNELS as u64))
            .filter(|&c| values.is_multiple_of(c))
            .collect();
        near.sort_by_key(|&c| c.abs_diff(num_channels as u64));
        near.truncate(3);
        near.sort_unstable();
        near.iter().map(u64::to_string).collect()
    } else {
        Vec::new()
    };
    let hint = if !file_len.is_multiple_of(size) {
        format!(
            "the file is not even a whole number of {format} values ({size} bytes each): check \
             the dtype"
        )
    } else if fits.is_empty() {
        "check the channel count (n_chan_bin)".to_string()
    } else {
        format!(
            "check the channel count (n_chan_bin); counts near {num_channels} that fit: {}",
            fits.join(", ")
        )
    };
    Err(Error::invalid(
        path,
        format!(
            "{file_len} bytes is not a whole number of samples of {num_channels} channels of \
             {format} ({frame} bytes per sample): {file_len} = {} x {frame} + {}; {hint}",
            file_len / frame,
            file_len % frame
        ),
    ))
}
