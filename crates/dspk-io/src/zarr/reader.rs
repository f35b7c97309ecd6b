//! SpikeInterface's Zarr recording layout, read through `zarrs` with decoded chunks cached.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dspk_core::{
    ChannelInfo, ConcurrentReads, ReadRequest, RecordingInfo, RecordingSource, SampleFormat,
};
use zarrs::array::data_type::{
    FixedLengthUTF32DataType, Float32DataType, Int16DataType, Int32DataType, UInt16DataType,
};
use zarrs::array::{
    Array, ArrayBytes, ArrayShardedExt, ArrayShardedReadableExt, ArrayShardedReadableExtCache,
    ChunkGrid, CodecOptions,
};
use zarrs::group::Group;
use zarrs::storage::{ReadableStorage, ReadableStorageTraits};

use super::chunks::{MissingChunks, check_zarr_extent, chunk_exists, missing_chunk};
use super::{DSPK_RATE_ATTR, DSPK_UNITS_ATTR, ZarrOptions, retrieve_zarr_chunk};
use crate::cache::{ChunkCache, ChunkKey};
use crate::dtype::{ByteOrder, to_little_endian};
use crate::file::check_readable;
use crate::raw::parse_sample_rate;
use crate::{Error, Result};

/// The most channels a Zarr recording may declare (the metadata alone sizes the channel list,
/// so it is bounded).
const MAX_CHANNELS: u64 = 1 << 20;

/// A recording in SpikeInterface's Zarr layout (v2 or v3): `traces_seg0` of shape
/// `[samples, channels]`, `channel_ids`, `properties/gain_to_uV` and `properties/offset_to_uV`,
/// and the root attribute `sampling_frequency`.
///
/// Any codecs compiled into this crate decode the chunks: blosc, zstd and sharding (with the
/// crc32c index checksum), as SpikeInterface and zarr-python write them. Decoded chunks go
/// through a [`ChunkCache`], so windows that straddle chunks decode each chunk once while it
/// stays in the cache's budget. A sharded array is read by inner chunks (its shard indexes are
/// kept), so a window decodes only the inner chunks it touches; "chunk" below and in errors
/// then means an inner chunk, indexed on the inner-chunk grid. A chunk larger than
/// [`ZarrOptions::max_chunk_bytes`] is refused before it is decoded.
///
/// A chunk inside the declared shape that the store lacks (deleted, or a shape larger than
/// the data) is an error naming its key, unless [`ZarrOptions::missing_chunks`] asks for the
/// fill value; a shape of more than [`MAX_ZARR_SAMPLES`](super::MAX_ZARR_SAMPLES) samples, or
/// whose last chunk is missing, is refused at open. For a sharded array a missing shard is
/// missing; an inner chunk absent from a present shard is the fill value (the sharding codec
/// stores all-fill inner chunks that way).
///
/// Gains are in microvolts (unit `uV`); a store without `properties/gain_to_uV` reads with gain
/// 1, offset 0 and no unit. Stores written by [`write_zarr`](super::write_zarr) also keep the
/// exact rate and the channels' units in root attributes.
pub struct ZarrRecording {
    info: RecordingInfo,
    traces: Array<dyn ReadableStorageTraits>,
    /// The grid reads are cut along: the chunks, or for a sharded array the inner chunks.
    grid: ChunkGrid,
    /// For a sharded array, the shard indexes read so far (inner chunks are decoded alone).
    shards: Option<ArrayShardedReadableExtCache>,
    path: PathBuf,
    array_id: u64,
    cache: Arc<ChunkCache>,
    max_chunk_bytes: usize,
    missing_chunks: MissingChunks,
}

impl std::fmt::Debug for ZarrRecording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZarrRecording")
            .field("path", &self.path)
            .field("info", &self.info)
            .field("cache", &self.cache.stats())
            .finish_non_exhaustive()
    }
}

impl ZarrRecording {
    /// Opens the store at `path` (a folder) with default options (a fresh 256 MiB cache).
    ///
    /// # Errors
    ///
    /// As [`open_store`](Self::open_store).
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, ZarrOptions::default())
    }

    /// Opens the store at `path` (a folder) with `options`.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] if `path` does not exist; [`Error::Io`] if it or its
    /// `traces_seg0` folder cannot be listed (permission denied); [`Error::Invalid`] if it is
    /// a file; [`Error::Library`] if the folder cannot be opened as a store; otherwise as
    /// [`open_store`](Self::open_store).
    pub fn open_with(path: impl AsRef<Path>, options: ZarrOptions) -> Result<Self> {
        let path = path.as_ref();
        check_readable(path)?;
        if !path.is_dir() {
            return Err(Error::invalid(
                path,
                "is a file, expected a Zarr store folder",
            ));
        }
        // A folder that cannot be listed would read as an array that is missing.
        let traces = path.join("traces_seg0");
        if traces.is_dir() {
            check_readable(&traces)?;
        }
        let store = zarrs::filesystem::FilesystemStore::new(path)
            .map_err(|e| Error::library(path, "opening the store", e))?;
        Self::open_store(Arc::new(store), path, options)
    }

    /// Opens a recording from any readable `zarrs` store; `path` names it in errors.
    ///
    /// # Errors
    ///
    /// [`Error::Missing`] if `traces_seg0` is missing; [`Error::Library`] for metadata `zarrs`
    /// cannot read (malformed JSON, an unsupported codec or data type) and for unreadable
    /// `channel_ids` or properties; [`Error::Invalid`] if the root has no valid
    /// `sampling_frequency`, holds several segments, the traces are not two-dimensional or not
    /// int16/uint16/int32/float32, more than 2^20 channels are declared, or channel ids or
    /// properties have the wrong length or dtype, or more than
    /// [`MAX_ZARR_SAMPLES`](super::MAX_ZARR_SAMPLES) samples are declared;
    /// [`Error::MissingChunk`] if the chunk holding the last declared sample is not in the
    /// store (unless [`ZarrOptions::missing_chunks`] is [`MissingChunks::FillValue`]).
    pub fn open_store(store: ReadableStorage, path: &Path, options: ZarrOptions) -> Result<Self> {
        let root = Group::open(store.clone(), "/")
            .map_err(|e| Error::library(path, "reading the root group's metadata", e))?;
        let attributes = root.attributes();
        let sample_rate = match (
            attributes.get(DSPK_RATE_ATTR),
            attributes.get("sampling_frequency"),
        ) {
            (Some(exact), _) => parse_sample_rate(path, exact)?,
            (None, Some(value)) => parse_sample_rate(path, value)?,
            (None, None) => {
                return Err(Error::invalid(
                    path,
                    "the root attributes have no `sampling_frequency`",
                ));
            }
        };
        match attributes
            .get("num_segments")
            .map(serde_json::Value::as_u64)
        {
            None | Some(Some(1)) => {}
            Some(other) => {
                return Err(Error::invalid(
                    path,
                    format!(
                        "`num_segments` is {other:?}; only single-segment recordings are supported"
                    ),
                ));
            }
        }
        if !node_exists(&store, "traces_seg0")? {
            return Err(Error::Missing {
                path: path.to_path_buf(),
                what: "array `traces_seg0`".into(),
            });
        }
        let traces = Array::open(store.clone(), "/traces_seg0")
            .map_err(|e| Error::library(path, "reading the metadata of `traces_seg0`", e))?;
        let [num_samples, num_channels] = traces.shape()[..] else {
            return Err(Error::invalid(
                path,
                format!(
                    "`traces_seg0` has shape {:?}, expected [samples, channels]",
                    traces.shape()
                ),
            ));
        };
        check_zarr_extent(&traces, path, "traces_seg0", options.missing_chunks)?;
        let data_type = traces.data_type();
        let format = if data_type.is::<Int16DataType>() {
            SampleFormat::I16
        } else if data_type.is::<UInt16DataType>() {
            SampleFormat::U16
        } else if data_type.is::<Int32DataType>() {
            SampleFormat::I32
        } else if data_type.is::<Float32DataType>() {
            SampleFormat::F32
        } else {
            return Err(Error::invalid(
                path,
                format!(
                    "`traces_seg0` has data type {:?}, not a recording sample type (int16, uint16, int32, float32)",
                    data_type.name_v3().unwrap_or_default()
                ),
            ));
        };
        if num_channels == 0 || num_channels > MAX_CHANNELS {
            return Err(Error::invalid(
                path,
                format!(
                    "`traces_seg0` declares {num_channels} channels (1 to {MAX_CHANNELS} supported)"
                ),
            ));
        }
        let n = num_channels as usize;
        let ids = if node_exists(&store, "channel_ids")? {
            let names = read_names(&store, path, "channel_ids", n, options.max_chunk_bytes)?;
            if names.len() != n {
                return Err(Error::invalid(
                    path,
                    format!("`channel_ids` has {} entries for {n} channels", names.len()),
                ));
            }
            names
        } else {
            (0..n).map(|c| c.to_string()).collect()
        };
        let gains = read_property(
            &store,
            path,
            "properties/gain_to_uV",
            n,
            options.max_chunk_bytes,
        )?;
        let offsets = read_property(
            &store,
            path,
            "properties/offset_to_uV",
            n,
            options.max_chunk_bytes,
        )?;
        let units: Option<Vec<String>> = attributes
            .get(DSPK_UNITS_ATTR)
            .and_then(|units| serde_json::from_value(units.clone()).ok())
            .filter(|units: &Vec<String>| units.len() == n);
        let channels = ids
            .into_iter()
            .enumerate()
            .map(|(c, name)| {
                let unit = match (&units, &gains) {
                    (Some(units), _) => units[c].clone(),
                    (None, Some(_)) => "uV".to_string(),
                    (None, None) => String::new(),
                };
                ChannelInfo::new(
                    name,
                    gains.as_ref().map_or(1.0, |g| g[c]),
                    offsets.as_ref().map_or(0.0, |o| o[c]),
                    unit,
                )
            })
            .collect();
        let mut info = RecordingInfo::new(channels, num_samples, sample_rate, format)
            .map_err(|e| Error::core(path, e))?;
        info.metadata
            .insert("zarr_format".into(), zarr_format(&traces).into());
        // A sharded array is read inner chunk by inner chunk, so a window decodes only the
        // inner chunks it touches, not whole shards.
        let (grid, shards) = if traces.is_exclusively_sharded() {
            (
                traces.subchunk_grid(),
                Some(ArrayShardedReadableExtCache::new(&traces)),
            )
        } else {
            (traces.chunk_grid().clone(), None)
        };
        Ok(Self {
            info,
            grid,
            shards,
            traces,
            path: path.to_path_buf(),
            array_id: ChunkCache::new_array_id(),
            cache: options.cache,
            max_chunk_bytes: options.max_chunk_bytes,
            missing_chunks: options.missing_chunks,
        })
    }

    /// The store's folder (or the name given to [`open_store`](Self::open_store)).
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The chunk cache this recording decodes through.
    #[must_use]
    pub fn cache(&self) -> &Arc<ChunkCache> {
        &self.cache
    }

    /// The decoded chunk `chunk` (C order, its full chunk shape), from the cache or decoded now.
    fn chunk(&self, chunk: [u64; 2], elements: u64) -> Result<Arc<[u8]>> {
        let size = self.info.stored_format.size();
        let bytes = elements.saturating_mul(size as u64);
        if bytes > self.max_chunk_bytes as u64 {
            return Err(Error::TooLarge {
                path: self.path.clone(),
                what: format!("chunk {chunk:?} of `traces_seg0` (decoded)"),
                size: bytes,
                limit: self.max_chunk_bytes as u64,
            });
        }
        let key = ChunkKey {
            array: self.array_id,
            chunk,
        };
        self.cache.get_or_decode(key, || {
            let decoded: ArrayBytes<'static> = match &self.shards {
                Some(shards) => {
                    self.check_shard_of(chunk)?;
                    self.traces
                        .retrieve_subchunk_opt(shards, &chunk, &CodecOptions::default())
                        .map_err(|e| {
                            Error::library(
                                &self.path,
                                format!("decoding chunk {chunk:?} of `traces_seg0`"),
                                e,
                            )
                        })?
                }
                None => retrieve_zarr_chunk(
                    &self.traces,
                    &chunk,
                    &self.path,
                    "traces_seg0",
                    self.missing_chunks,
                )?,
            };
            let mut decoded = decoded
                .into_fixed()
                .map_err(|e| {
                    Error::library(&self.path, format!("chunk {chunk:?} of `traces_seg0`"), e)
                })?
                .into_owned();
            if decoded.len() as u64 != bytes {
                return Err(Error::invalid(
                    &self.path,
                    format!(
                        "chunk {chunk:?} of `traces_seg0` decoded to {} bytes, expected {bytes}",
                        decoded.len()
                    ),
                ));
            }
            // zarrs decodes to this machine's byte order; stored values are little-endian.
            to_little_endian(&mut decoded, size, ByteOrder::NATIVE);
            Ok(decoded)
        })
    }

    /// Writes stored little-endian values of a checked request into `runs`, one per channel.
    fn stored_into(&self, request: &ReadRequest<'_>, runs: &mut [&mut [u8]]) -> Result<()> {
        let size = self.info.stored_format.size();
        let range = request.samples();
        let grid = &self.grid;
        for (&channel, out) in request.channels().iter().zip(runs.iter_mut()) {
            let mut t = range.start;
            while t < range.end {
                let Some(indices) = grid.chunk_indices(&[t, channel as u64]).ok().flatten() else {
                    return Err(self.grid_error(t, channel));
                };
                let Some(subset) = grid.subset(&indices).ok().flatten() else {
                    return Err(self.grid_error(t, channel));
                };
                let chunk = [indices[0], indices[1]];
                let (start, shape) = (subset.start(), subset.shape());
                let elements = shape[0].saturating_mul(shape[1]);
                let data = self.chunk(chunk, elements)?;
                let width = shape[1] as usize;
                let column = (channel as u64 - start[1]) as usize;
                let chunk_end = (start[0] + shape[0]).min(range.end);
                for s in t..chunk_end {
                    let row = (s - start[0]) as usize;
                    let from = (row * width + column) * size;
                    let to = (s - range.start) as usize * size;
                    out[to..to + size].copy_from_slice(&data[from..from + size]);
                }
                t = chunk_end;
            }
        }
        Ok(())
    }

    /// With [`MissingChunks::Error`], checks that the shard holding inner chunk `chunk` is in
    /// the store (`zarrs` reads a missing shard as the fill value).
    fn check_shard_of(&self, chunk: [u64; 2]) -> Result<()> {
        if self.missing_chunks == MissingChunks::FillValue {
            return Ok(());
        }
        let no_shard = || {
            Error::invalid(
                &self.path,
                format!("the shard grid of `traces_seg0` has no shard for inner chunk {chunk:?}"),
            )
        };
        let origin = self
            .grid
            .subset(&chunk)
            .ok()
            .flatten()
            .map(|subset| subset.start().to_vec())
            .ok_or_else(no_shard)?;
        let shard = self
            .traces
            .chunk_grid()
            .chunk_indices(&origin)
            .ok()
            .flatten()
            .ok_or_else(no_shard)?;
        if chunk_exists(&self.traces, &shard, &self.path)? {
            Ok(())
        } else {
            Err(missing_chunk(
                &self.traces,
                &shard,
                "traces_seg0",
                &self.path,
            ))
        }
    }

    fn grid_error(&self, t: u64, channel: usize) -> Error {
        Error::invalid(
            &self.path,
            format!(
                "the chunk grid of `traces_seg0` has no chunk for sample {t} of channel {channel}"
            ),
        )
    }
}

/// Whether the node `name` (a child of the root) has metadata, v2 or v3.
fn node_exists(store: &ReadableStorage, name: &str) -> Result<bool> {
    for file in ["zarr.json", ".zarray", ".zgroup"] {
        let key = zarrs::storage::StoreKey::new(format!("{name}/{file}"))
            .map_err(|e| Error::library(Path::new(name), "building a store key", e))?;
        let size = store
            .size_key(&key)
            .map_err(|e| Error::library(Path::new(name), "looking up metadata", e))?;
        if size.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Opens a small one-dimensional array of `n` entries, refusing one whose chunks are too large.
fn open_vector(
    store: &ReadableStorage,
    path: &Path,
    name: &str,
    n: usize,
    max_bytes: usize,
) -> Result<Array<dyn ReadableStorageTraits>> {
    let array = Array::open(store.clone(), &format!("/{name}"))
        .map_err(|e| Error::library(path, format!("reading the metadata of `{name}`"), e))?;
    if array.shape() != [n as u64] {
        return Err(Error::invalid(
            path,
            format!("`{name}` has shape {:?}, expected [{n}]", array.shape()),
        ));
    }
    let chunk_elements = array
        .chunk_grid()
        .subset(&vec![0; array.dimensionality()])
        .ok()
        .flatten()
        .map_or(u64::MAX, |s| s.shape().iter().product::<u64>());
    let element = array.data_type().fixed_size().unwrap_or(16) as u64;
    if chunk_elements.saturating_mul(element) > max_bytes as u64 {
        return Err(Error::TooLarge {
            path: path.to_path_buf(),
            what: format!("a chunk of `{name}`"),
            size: chunk_elements.saturating_mul(element),
            limit: max_bytes as u64,
        });
    }
    Ok(array)
}

/// Reads channel ids: strings (v3 `string`, v2 `<U`/`|O`) or integers.
fn read_names(
    store: &ReadableStorage,
    path: &Path,
    name: &str,
    n: usize,
    max_bytes: usize,
) -> Result<Vec<String>> {
    let array = open_vector(store, path, name, n, max_bytes)?;
    let all = array.subset_all();
    let failed = |e: zarrs::array::ArrayError| Error::library(path, format!("reading `{name}`"), e);
    if let Ok(names) = array.retrieve_array_subset::<Vec<String>>(&all) {
        return Ok(names);
    }
    let data_type = array.data_type();
    if data_type.is::<FixedLengthUTF32DataType>() {
        let width = data_type.fixed_size().unwrap_or(4).max(4);
        let bytes: ArrayBytes<'static> = array.retrieve_array_subset(&all).map_err(failed)?;
        let bytes = bytes
            .into_fixed()
            .map_err(|e| Error::library(path, format!("reading `{name}`"), e))?;
        return bytes
            .chunks_exact(width)
            .map(|text| {
                text.chunks_exact(4)
                    .map(|unit| {
                        char::from_u32(u32::from_ne_bytes([unit[0], unit[1], unit[2], unit[3]]))
                    })
                    .collect::<Option<String>>()
                    .map(|s| s.trim_end_matches('\0').to_string())
                    .ok_or_else(|| {
                        Error::invalid(path, format!("`{name}` holds an invalid code point"))
                    })
            })
            .collect();
    }
    array
        .retrieve_array_subset::<Vec<i64>>(&all)
        .map(|ids| ids.iter().map(i64::to_string).collect())
        .map_err(failed)
}

/// Reads a float64 property of `n` entries, or `None` if the store has none.
fn read_property(
    store: &ReadableStorage,
    path: &Path,
    name: &str,
    n: usize,
    max_bytes: usize,
) -> Result<Option<Vec<f64>>> {
    if !node_exists(store, name)? {
        return Ok(None);
    }
    let array = open_vector(store, path, name, n, max_bytes)?;
    let values = array
        .retrieve_array_subset::<Vec<f64>>(&array.subset_all())
        .map_err(|e| Error::library(path, format!("reading `{name}` as float64"), e))?;
    if let Some((c, v)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(Error::invalid(path, format!("`{name}`[{c}] is {v}")));
    }
    Ok(Some(values))
}

/// `"2"` or `"3"`, from the array's metadata.
fn zarr_format(array: &Array<impl ReadableStorageTraits + ?Sized>) -> &'static str {
    match array.metadata() {
        zarrs::array::ArrayMetadata::V2(_) => "2",
        _ => "3",
    }
}

impl RecordingSource for ZarrRecording {
    fn info(&self) -> &RecordingInfo {
        &self.info
    }

    fn fill_stored(&self, request: &ReadRequest<'_>, out: &mut [u8]) -> dspk_core::Result<()> {
        let run = request.samples_per_channel() * self.info.stored_format.size();
        let mut runs: Vec<&mut [u8]> = out.chunks_exact_mut(run.max(1)).collect();
        Ok(self.stored_into(request, &mut runs)?)
    }

    fn fill_scaled(&self, request: &ReadRequest<'_>, out: &mut [f32]) -> dspk_core::Result<()> {
        dspk_core::fill_scaled_by_runs(self, request, out)
    }

    fn can_read_stored(&self) -> bool {
        true
    }

    /// By sample range, cut at the chunks' length in time (so no chunk is decoded by two of
    /// the loader's threads; a grid without a first chunk cuts anywhere).
    fn concurrent_reads(&self) -> ConcurrentReads {
        let align = self
            .grid
            .subset(&[0, 0])
            .ok()
            .flatten()
            .map_or(1, |chunk| chunk.shape()[0].max(1));
        ConcurrentReads::ByTime { align }
    }

    fn fill_stored_runs(
        &self,
        request: &ReadRequest<'_>,
        runs: &mut [&mut [u8]],
    ) -> dspk_core::Result<()> {
        let run = request.samples_per_channel() * self.info.stored_format.size();
        request.check_runs(runs, run, "bytes")?;
        Ok(self.stored_into(request, runs)?)
    }

    fn fill_scaled_runs(
        &self,
        request: &ReadRequest<'_>,
        runs: &mut [&mut [f32]],
    ) -> dspk_core::Result<()> {
        let n = request.samples_per_channel();
        request.check_runs(runs, n, "values")?;
        let format = self.info.stored_format;
        let size = format.size();
        if n == 0 {
            return Ok(());
        }
        let mut stored = vec![0u8; request.num_values() * size];
        let mut stored_runs: Vec<&mut [u8]> = stored.chunks_exact_mut(n * size).collect();
        self.stored_into(request, &mut stored_runs)?;
        for ((&channel, stored), out) in request
            .channels()
            .iter()
            .zip(stored.chunks_exact(n * size))
            .zip(runs.iter_mut())
        {
            let info = &self.info.channels[channel];
            format.scale_into(stored, info.gain, info.offset, out);
        }
        Ok(())
    }
}
