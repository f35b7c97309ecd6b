//! The `.ch` JSON file and the decoding of one chunk.

use std::io::Read;
use std::ops::Range;
use std::path::Path;

use serde::Deserialize;

use crate::spikeglx::MAX_CHANNELS;
use crate::{Error, Result};

/// The largest decoded chunk accepted: 1 GiB (IBL files use one-second chunks, about 23 MB
/// for 385 channels at 30 kHz).
pub const MAX_CHUNK_BYTES: u64 = 1 << 30;

/// The most a zlib stream can expand: deflate's best ratio is about 1032:1; a chunk claiming
/// more decoded bytes than this times its compressed length (plus a small allowance) is
/// refused before inflating.
const MAX_ZLIB_RATIO: u64 = 1032;

/// The fields of a `.ch` file as mtscomp 1.0 writes them.
#[derive(Deserialize)]
struct ChJson {
    version: String,
    algorithm: String,
    dtype: String,
    #[serde(default)]
    chunk_order: Option<String>,
    n_channels: u64,
    sample_rate: f64,
    shape: Vec<u64>,
    chunk_bounds: Vec<u64>,
    chunk_offsets: Vec<u64>,
    do_time_diff: bool,
    do_spatial_diff: bool,
    #[serde(default)]
    sha1_compressed: Option<String>,
    #[serde(default)]
    sha1_uncompressed: Option<String>,
}

/// A parsed and checked mtscomp `.ch` file (format version 1.0): the shape of the original
/// array, the chunks (sample bounds and byte offsets into the `.cbin`) and the transforms
/// applied before compression.
///
/// Every chunk `k` holds samples `chunk_bounds[k]..chunk_bounds[k + 1]` of all channels,
/// stored as a zlib stream at bytes `chunk_offsets[k]..chunk_offsets[k + 1]` of the `.cbin`
/// that inflates to the chunk's int16 values in Fortran order (all samples of channel 0,
/// then channel 1, ...), differenced along channels (`do_spatial_diff`) after being
/// differenced along time (`do_time_diff`).
#[derive(Debug, Clone, PartialEq)]
pub struct ChFile {
    num_samples: u64,
    num_channels: usize,
    sample_rate: f64,
    chunk_bounds: Vec<u64>,
    chunk_offsets: Vec<u64>,
    do_time_diff: bool,
    do_spatial_diff: bool,
    sha1_compressed: Option<String>,
    sha1_uncompressed: Option<String>,
}

impl ChFile {
    /// Parses and checks the JSON of a `.ch` file; `path` names it in errors.
    ///
    /// # Errors
    ///
    /// [`dspk_io::Error::Invalid`] for JSON that is not a `.ch`, a `shape` that disagrees with
    /// `n_channels`, chunk bounds or offsets that do not ascend from 0 (bounds to
    /// `shape[0]`), lists of different lengths, or a chunk over [`MAX_CHUNK_BYTES`] decoded;
    /// [`dspk_io::Error::Unsupported`] for a version other than 1.0, an algorithm other than zlib, a
    /// dtype other than int16 or a C chunk order.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Self> {
        let json: ChJson = serde_json::from_slice(bytes)
            .map_err(|e| Error::invalid(path, format!("not an mtscomp .ch file: {e}")))?;
        let invalid = |problem: String| Error::invalid(path, problem);
        if json.version != "1.0" {
            return Err(Error::unsupported(
                path,
                format!(
                    "mtscomp version `{}` (this reader knows 1.0)",
                    clip(&json.version)
                ),
            ));
        }
        if json.algorithm != "zlib" {
            return Err(Error::unsupported(
                path,
                format!("compression algorithm `{}`", clip(&json.algorithm)),
            ));
        }
        if !matches!(json.dtype.as_str(), "int16" | "<i2" | "i2") {
            return Err(Error::unsupported(
                path,
                format!("dtype `{}` (int16 only)", clip(&json.dtype)),
            ));
        }
        if let Some(order) = &json.chunk_order
            && order != "F"
        {
            return Err(Error::unsupported(
                path,
                format!("chunk order `{}` (Fortran order `F` only)", clip(order)),
            ));
        }
        let num_channels = usize::try_from(json.n_channels)
            .ok()
            .filter(|&n| (1..=MAX_CHANNELS).contains(&n))
            .ok_or_else(|| {
                invalid(format!(
                    "`n_channels` is {}, expected 1 to {MAX_CHANNELS}",
                    json.n_channels
                ))
            })?;
        let [num_samples, shape_channels] = json.shape[..] else {
            return Err(invalid(format!(
                "`shape` has {} dimensions, expected 2",
                json.shape.len()
            )));
        };
        if shape_channels != json.n_channels {
            return Err(invalid(format!(
                "`shape` says {shape_channels} channels, `n_channels` says {}",
                json.n_channels
            )));
        }
        if !(json.sample_rate.is_finite() && json.sample_rate > 0.0) {
            return Err(invalid(format!(
                "`sample_rate` is {}, expected a positive number",
                json.sample_rate
            )));
        }
        let bounds = json.chunk_bounds;
        let offsets = json.chunk_offsets;
        if bounds.len() < 2 || bounds.len() != offsets.len() {
            return Err(invalid(format!(
                "`chunk_bounds` has {} entries and `chunk_offsets` {}: expected the same \
                 number, at least 2",
                bounds.len(),
                offsets.len()
            )));
        }
        check_ascending(path, "chunk_bounds", &bounds)?;
        check_ascending(path, "chunk_offsets", &offsets)?;
        if bounds[bounds.len() - 1] != num_samples {
            return Err(invalid(format!(
                "`chunk_bounds` ends at {}, `shape` says {num_samples} samples",
                bounds[bounds.len() - 1]
            )));
        }
        let frame = 2 * json.n_channels;
        if let Some((k, w)) = bounds.windows(2).enumerate().find(|(_, w)| {
            (w[1] - w[0])
                .checked_mul(frame)
                .is_none_or(|bytes| bytes > MAX_CHUNK_BYTES)
        }) {
            return Err(invalid(format!(
                "chunk {k} has {} samples x {} channels, over the {MAX_CHUNK_BYTES}-byte \
                 limit of a decoded chunk",
                w[1] - w[0],
                json.n_channels
            )));
        }
        Ok(Self {
            num_samples,
            num_channels,
            sample_rate: json.sample_rate,
            chunk_bounds: bounds,
            chunk_offsets: offsets,
            do_time_diff: json.do_time_diff,
            do_spatial_diff: json.do_spatial_diff,
            sha1_compressed: json.sha1_compressed,
            sha1_uncompressed: json.sha1_uncompressed,
        })
    }

    /// Samples per channel of the whole array (`shape[0]`).
    #[must_use]
    pub fn num_samples(&self) -> u64 {
        self.num_samples
    }

    /// Columns of the array (for SpikeGLX files `nSavedChans`, the sync word included).
    #[must_use]
    pub fn num_channels(&self) -> usize {
        self.num_channels
    }

    /// The sample rate the `.ch` states, in Hz.
    #[must_use]
    pub fn sample_rate(&self) -> f64 {
        self.sample_rate
    }

    /// `num_chunks + 1` strictly ascending sample bounds, from 0 to `num_samples`.
    #[must_use]
    pub fn chunk_bounds(&self) -> &[u64] {
        &self.chunk_bounds
    }

    /// `num_chunks + 1` strictly ascending byte offsets into the `.cbin`, from 0.
    #[must_use]
    pub fn chunk_offsets(&self) -> &[u64] {
        &self.chunk_offsets
    }

    /// Whether each chunk was differenced along time (decoding takes a cumulative sum).
    #[must_use]
    pub fn do_time_diff(&self) -> bool {
        self.do_time_diff
    }

    /// Whether each chunk was differenced along channels.
    #[must_use]
    pub fn do_spatial_diff(&self) -> bool {
        self.do_spatial_diff
    }

    /// The SHA-1 of the `.cbin` (hex), if stated.
    #[must_use]
    pub fn sha1_compressed(&self) -> Option<&str> {
        self.sha1_compressed.as_deref()
    }

    /// The SHA-1 of the original uncompressed file (hex; SpikeGLX's `fileSHA1` in lower
    /// case), if stated.
    #[must_use]
    pub fn sha1_uncompressed(&self) -> Option<&str> {
        self.sha1_uncompressed.as_deref()
    }

    /// The number of chunks.
    #[must_use]
    pub fn num_chunks(&self) -> usize {
        self.chunk_bounds.len() - 1
    }

    /// The samples of chunk `chunk`.
    ///
    /// # Panics
    ///
    /// If `chunk >= num_chunks()`.
    #[must_use]
    pub fn chunk_samples(&self, chunk: usize) -> Range<u64> {
        self.chunk_bounds[chunk]..self.chunk_bounds[chunk + 1]
    }

    /// The bytes of the `.cbin` holding chunk `chunk`.
    ///
    /// # Panics
    ///
    /// If `chunk >= num_chunks()`.
    #[must_use]
    pub fn chunk_bytes(&self, chunk: usize) -> Range<u64> {
        self.chunk_offsets[chunk]..self.chunk_offsets[chunk + 1]
    }

    /// The chunk holding sample `sample` (the last chunk for `num_samples`).
    #[must_use]
    pub fn chunk_of(&self, sample: u64) -> usize {
        let after = self.chunk_bounds.partition_point(|&b| b <= sample);
        after.saturating_sub(1).min(self.num_chunks() - 1)
    }

    /// Checks the chunk offsets against the `.cbin`'s length `len`: the last offset must be
    /// the end of the file, and no chunk may claim more decoded bytes than zlib can expand
    /// its compressed bytes to.
    ///
    /// # Errors
    ///
    /// [`dspk_io::Error::Truncated`] naming `cbin` if it is shorter than the last offset;
    /// [`dspk_io::Error::Invalid`] if it is longer, or a chunk's sizes are impossible.
    pub fn check_file_length(&self, cbin: &Path, len: u64) -> Result<()> {
        let end = self.chunk_offsets[self.num_chunks()];
        if len < end {
            return Err(Error::Io(dspk_io::Error::Truncated {
                path: cbin.to_path_buf(),
                what: format!("{} compressed chunks", self.num_chunks()),
                needed: end,
                actual: len,
            }));
        }
        if len > end {
            return Err(Error::invalid(
                cbin,
                format!("the file has {len} bytes, the chunks of the .ch end at {end}"),
            ));
        }
        for chunk in 0..self.num_chunks() {
            let compressed = self.chunk_bytes(chunk);
            let compressed = compressed.end - compressed.start;
            let decoded = self.decoded_len(chunk) as u64;
            if decoded > compressed.saturating_mul(MAX_ZLIB_RATIO).saturating_add(64) {
                return Err(Error::invalid(
                    cbin,
                    format!(
                        "chunk {chunk} claims {decoded} decoded bytes from {compressed} \
                         compressed bytes, more than zlib can expand"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The decoded size of chunk `chunk` in bytes (at most [`MAX_CHUNK_BYTES`]).
    ///
    /// # Panics
    ///
    /// If `chunk >= num_chunks()`.
    #[must_use]
    pub fn decoded_len(&self, chunk: usize) -> usize {
        let samples = self.chunk_samples(chunk);
        // Checked at parse: at most MAX_CHUNK_BYTES, which fits in usize.
        (samples.end - samples.start) as usize * self.num_channels * 2
    }

    /// Decodes chunk `chunk` from its compressed bytes: zlib inflate (never more than the
    /// chunk's size plus one byte), int16 little-endian values in Fortran order, then a
    /// cumulative sum along channels if `do_spatial_diff`, then along time if
    /// `do_time_diff`, both with wrapping int16 additions (as numpy's int16 `cumsum` with
    /// `dtype=int16`). Returns the chunk channel-major (`[channel][sample]`) as little-endian
    /// int16 bytes.
    ///
    /// # Errors
    ///
    /// [`dspk_io::Error::Library`] naming `cbin` if the zlib stream is corrupt; [`dspk_io::Error::Invalid`] if
    /// it inflates to another size than the chunk's.
    ///
    /// # Panics
    ///
    /// If `chunk >= num_chunks()`.
    pub fn decode_chunk(&self, chunk: usize, compressed: &[u8], cbin: &Path) -> Result<Vec<u8>> {
        let expected = self.decoded_len(chunk);
        let mut bytes = Vec::with_capacity(expected + 1);
        flate2::read::ZlibDecoder::new(compressed)
            .take(expected as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::library(cbin, format!("inflating chunk {chunk}"), e))?;
        if bytes.len() != expected {
            return Err(Error::invalid(
                cbin,
                format!(
                    "chunk {chunk} inflates to {}{} bytes, its {} samples x {} channels need \
                     {expected}",
                    bytes.len(),
                    if bytes.len() > expected { "+" } else { "" },
                    expected / 2 / self.num_channels,
                    self.num_channels
                ),
            ));
        }
        let n = expected / 2 / self.num_channels;
        let mut values: Vec<i16> = bytes
            .chunks_exact(2)
            .map(|b| i16::from_le_bytes([b[0], b[1]]))
            .collect();
        if self.do_spatial_diff && n > 0 {
            for c in 1..self.num_channels {
                let (before, rest) = values.split_at_mut(c * n);
                let previous = &before[(c - 1) * n..];
                for (v, p) in rest[..n].iter_mut().zip(previous) {
                    *v = v.wrapping_add(*p);
                }
            }
        }
        if self.do_time_diff && n > 0 {
            for channel in values.chunks_exact_mut(n) {
                let mut sum = 0i16;
                for v in channel {
                    sum = sum.wrapping_add(*v);
                    *v = sum;
                }
            }
        }
        for (b, v) in bytes.chunks_exact_mut(2).zip(&values) {
            b.copy_from_slice(&v.to_le_bytes());
        }
        Ok(bytes)
    }
}

/// Checks that `values` starts at 0 and strictly ascends.
fn check_ascending(path: &Path, key: &str, values: &[u64]) -> Result<()> {
    if values[0] != 0 {
        return Err(Error::invalid(
            path,
            format!("`{key}` starts at {}, expected 0", values[0]),
        ));
    }
    if let Some((k, w)) = values.windows(2).enumerate().find(|(_, w)| w[1] <= w[0]) {
        return Err(Error::invalid(
            path,
            format!(
                "`{key}` is not strictly ascending: entry {} is {} after {}",
                k + 1,
                w[1],
                w[0]
            ),
        ));
    }
    Ok(())
}

/// A string shortened for an error message.
fn clip(text: &str) -> String {
    text.chars().take(40).collect()
}
