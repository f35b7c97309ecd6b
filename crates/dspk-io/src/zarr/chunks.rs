//! Chunks a Zarr array's shape covers but its store lacks: an error by default, the fill value
//! on request; and shapes no store could hold, refused at open.
//!
//! Zarr libraries read a missing chunk as the array's fill value, so a deleted chunk file, or
//! a `shape` larger than the data written, silently reads as zeros. A recording reader wants
//! the opposite default: these functions are what [`ZarrRecording`](super::ZarrRecording) and
//! other crates' Zarr readers (NWB-Zarr) call instead of `zarrs`' plain retrieval.

use std::path::Path;

use zarrs::array::{Array, ArrayBytes};
use zarrs::storage::ReadableStorageTraits;

use crate::{Error, Result};

/// What a Zarr reader does with a chunk inside the array's declared shape that the store does
/// not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissingChunks {
    /// Refuse it: reading it is [`Error::MissingChunk`] naming the chunk's key, and opening
    /// checks that the chunk holding the last declared sample exists.
    #[default]
    Error,
    /// Read it as the array's fill value, as Zarr libraries do (for stores written without
    /// their all-fill chunks, e.g. zarr-python 3's default `write_empty_chunks=False`).
    FillValue,
}

/// The most samples a Zarr recording may declare: 2^53 (about 9.0e15; 9.5 years of
/// 30 kHz samples would need 2^43). A larger shape is refused at open whatever
/// [`MissingChunks`] says.
pub const MAX_ZARR_SAMPLES: u64 = 1 << 53;

/// Checks the declared length of `array` (`name`, shape `[samples, ...]`, in the store at
/// `path`) when a recording opens: at most [`MAX_ZARR_SAMPLES`] samples and, with
/// [`MissingChunks::Error`], the chunk (or shard) holding the last declared sample present in
/// the store, so a shape larger than the data written is refused before any read.
///
/// # Errors
///
/// [`Error::Invalid`] for more than [`MAX_ZARR_SAMPLES`] samples or a chunk grid without a
/// chunk for the last sample; [`Error::MissingChunk`] if that chunk is not in the store;
/// [`Error::Library`] if the store fails to say.
pub fn check_zarr_extent(
    array: &Array<dyn ReadableStorageTraits>,
    path: &Path,
    name: &str,
    missing: MissingChunks,
) -> Result<()> {
    let shape = array.shape();
    let Some(&samples) = shape.first() else {
        return Ok(());
    };
    if samples > MAX_ZARR_SAMPLES {
        return Err(Error::invalid(
            path,
            format!(
                "`{name}` declares {}, more than the {} a recording may have",
                dspk_core::format_count(samples, "samples"),
                dspk_core::format_count(MAX_ZARR_SAMPLES, "")
            ),
        ));
    }
    if missing == MissingChunks::FillValue || shape.contains(&0) {
        return Ok(());
    }
    let mut last = vec![0; shape.len()];
    last[0] = samples - 1;
    let chunk = array
        .chunk_grid()
        .chunk_indices(&last)
        .ok()
        .flatten()
        .ok_or_else(|| {
            Error::invalid(
                path,
                format!(
                    "the chunk grid of `{name}` has no chunk for its last sample {}",
                    samples - 1
                ),
            )
        })?;
    if chunk_exists(array, &chunk, path)? {
        Ok(())
    } else {
        Err(missing_chunk(array, &chunk, name, path))
    }
}

/// Decodes chunk `chunk` of `array` (`name` in the store at `path`); a chunk the store does
/// not hold is an error or the fill value, as `missing` says.
///
/// # Errors
///
/// [`Error::MissingChunk`] with [`MissingChunks::Error`] if the store has no such chunk;
/// [`Error::Library`] if it fails to decode.
pub fn retrieve_zarr_chunk(
    array: &Array<dyn ReadableStorageTraits>,
    chunk: &[u64],
    path: &Path,
    name: &str,
    missing: MissingChunks,
) -> Result<ArrayBytes<'static>> {
    let decoding = |e| Error::library(path, format!("decoding chunk {chunk:?} of `{name}`"), e);
    match missing {
        MissingChunks::FillValue => array.retrieve_chunk(chunk).map_err(decoding),
        MissingChunks::Error => array
            .retrieve_chunk_if_exists(chunk)
            .map_err(decoding)?
            .ok_or_else(|| missing_chunk(array, chunk, name, path)),
    }
}

/// Whether the store holds chunk (or shard) `chunk` of `array`.
///
/// # Errors
///
/// [`Error::Library`] if the store fails to say.
pub(crate) fn chunk_exists(
    array: &Array<dyn ReadableStorageTraits>,
    chunk: &[u64],
    path: &Path,
) -> Result<bool> {
    let key = array.chunk_key(chunk);
    let size = array
        .storage()
        .size_key(&key)
        .map_err(|e| Error::library(path, format!("looking up `{}`", key.as_str()), e))?;
    Ok(size.is_some())
}

/// The [`Error::MissingChunk`] for chunk (or shard) `chunk` of `array`.
pub(crate) fn missing_chunk(
    array: &Array<dyn ReadableStorageTraits>,
    chunk: &[u64],
    name: &str,
    path: &Path,
) -> Error {
    let samples = array
        .chunk_grid()
        .subset(chunk)
        .ok()
        .flatten()
        .map_or(0..0, |subset| {
            let start = subset.start().first().copied().unwrap_or(0);
            let len = subset.shape().first().copied().unwrap_or(0);
            start..start.saturating_add(len).min(array.shape()[0])
        });
    Error::MissingChunk {
        path: path.to_path_buf(),
        key: array.chunk_key(chunk).as_str().to_string(),
        array: name.to_string(),
        samples,
        shape: array.shape().to_vec(),
    }
}
