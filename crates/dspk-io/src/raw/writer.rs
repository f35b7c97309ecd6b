//! Writing any recording as a raw binary file with its sidecar.

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use dspk_core::RecordingSource;

use super::reader::{RawSpec, SampleOrder};
use super::sidecar::RawSidecar;
use crate::dtype::{ByteOrder, to_little_endian};
use crate::{Error, Result};

/// How [`write_raw`] lays out the file.
///
/// > default: interleaved, little-endian (the layout of SpikeGLX, Open Ephys and SpikeInterface).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawWriteOptions {
    /// Interleaved or channel-major.
    pub order: SampleOrder,
    /// The byte order of stored values.
    pub byte_order: ByteOrder,
}

impl Default for RawWriteOptions {
    fn default() -> Self {
        Self {
            order: SampleOrder::Interleaved,
            byte_order: ByteOrder::Little,
        }
    }
}

/// Samples per window when copying a recording (bounded further to 4 MiB of stored values).
const WINDOW_BYTES: usize = 4 << 20;

/// Writes the stored values of `source` to `data_path` (no header) and its sidecar to
/// `data_path` + `.json`, window by window (memory stays at one window of at most 4 MiB);
/// returns the sidecar's path. [`RawRecording::open`](super::RawRecording::open) on either path
/// reads it back with the same stored values, channels, gains, offsets, units and rate.
///
/// # Errors
///
/// [`Error::Invalid`] if `data_path` has no file name or `source` cannot return stored values;
/// [`Error::Io`] if a file cannot be written; what `source` reports when a read fails (as
/// [`Error::Core`]).
pub fn write_raw(
    source: &dyn RecordingSource,
    data_path: impl AsRef<Path>,
    options: RawWriteOptions,
) -> Result<PathBuf> {
    let path = data_path.as_ref();
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Error::invalid(path, "the data path needs a UTF-8 file name"))?;
    if !source.can_read_stored() {
        return Err(Error::invalid(
            path,
            "the recording cannot return stored values; only recordings with `read_stored` can be written",
        ));
    }
    let info = source.info();
    let size = info.stored_format.size();
    let num_channels = info.num_channels();
    let n = info.num_samples;
    let channels = info.all_channels();
    let window = (WINDOW_BYTES / (num_channels * size)).max(1);
    let window_u64 = window as u64;

    let file = File::create(path).map_err(|e| Error::io(path, "create", e))?;
    let mut out = BufWriter::new(file);
    let mut stored = Vec::new();
    let mut frames = Vec::new();
    let mut start = 0u64;
    while start < n {
        let end = (start + window_u64).min(n);
        let m = (end - start) as usize;
        stored.resize(num_channels * m * size, 0);
        source
            .read_stored(&channels, start..end, &mut stored)
            .map_err(|e| Error::core(path, e))?;
        if options.byte_order == ByteOrder::Big {
            // Swapping is its own inverse.
            to_little_endian(&mut stored, size, ByteOrder::Big);
        }
        match options.order {
            SampleOrder::Interleaved => {
                frames.resize(stored.len(), 0);
                for (c, run) in stored.chunks_exact(m * size).enumerate() {
                    for (s, value) in run.chunks_exact(size).enumerate() {
                        let at = (s * num_channels + c) * size;
                        frames[at..at + size].copy_from_slice(value);
                    }
                }
                out.write_all(&frames)
                    .map_err(|e| Error::io(path, "write", e))?;
            }
            SampleOrder::ChannelMajor => {
                for (c, run) in stored.chunks_exact(m * size).enumerate() {
                    let offset = (c as u64 * n + start) * size as u64;
                    out.seek(SeekFrom::Start(offset))
                        .map_err(|e| Error::io(path, "seek", e))?;
                    out.write_all(run)
                        .map_err(|e| Error::io(path, "write", e))?;
                }
            }
        }
        start = end;
    }
    out.into_inner()
        .map_err(|e| Error::io(path, "flush", e.into_error()))?
        .sync_all()
        .map_err(|e| Error::io(path, "sync", e))?;

    let spec = RawSpec {
        channels: info.channels.clone(),
        sample_rate: info.sample_rate,
        format: info.stored_format,
        byte_order: options.byte_order,
        order: options.order,
        header_bytes: 0,
        num_samples: Some(n),
    };
    let sidecar = sidecar_path(path);
    std::fs::write(&sidecar, RawSidecar::to_json(name, &spec, n))
        .map_err(|e| Error::io(&sidecar, "write", e))?;
    Ok(sidecar)
}

/// The sidecar of a data file: its path with `.json` appended (`traces.bin` -> `traces.bin.json`).
#[must_use]
pub fn sidecar_path(data_path: &Path) -> PathBuf {
    let mut name = data_path.as_os_str().to_owned();
    name.push(".json");
    PathBuf::from(name)
}
