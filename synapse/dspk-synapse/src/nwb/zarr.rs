//! NWB-Zarr stores (hdmf-zarr, Zarr v2): one Zarr group per HDF5 group, HDF5 attributes in
//! `.zattrs`, object references as JSON `{"value": {"path": ..., "source": "."}}`, read with
//! `zarrs` (chunks decoded one at a time through a [`ChunkCache`]).

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dspk_io::{
    CacheStats, ChunkCache, ChunkKey, METADATA_LIMIT, MissingChunks, check_zarr_extent,
    read_small_file, retrieve_zarr_chunk,
};
use serde_json::Value;
use zarrs::array::data_type::{
    Float32DataType, Float64DataType, Int16DataType, Int32DataType, Int64DataType,
};
use zarrs::array::{Array, ArrayBytes, ArraySubset, ChunkGrid};
use zarrs::storage::{ReadableStorage, ReadableStorageTraits};

use super::{MAX_CHUNK_BYTES, Tree};
use crate::{Error, Result};

/// An NWB-Zarr store folder, as a [`Tree`].
pub(super) struct ZarrTree {
    store: ReadableStorage,
    path: PathBuf,
}

/// `object` (`/a/b`) relative to the store's folder (`a/b`).
fn relative(object: &str) -> &str {
    object.trim_matches('/')
}

impl ZarrTree {
    /// Opens the store folder at `path` (Zarr v2: `.zgroup` at its root).
    pub(super) fn open(path: &Path) -> Result<Self> {
        // A folder that cannot be listed would read as a folder without `.zgroup`.
        dspk_io::check_readable(path)?;
        if !path.join(".zgroup").is_file() {
            return Err(Error::missing(
                path,
                "`.zgroup` (the folder is not a Zarr v2 group, as hdmf-zarr writes NWB-Zarr)",
            ));
        }
        let store = zarrs::filesystem::FilesystemStore::new(path)
            .map_err(|e| Error::library(path, "opening the Zarr store", e))?;
        Ok(Self {
            store: Arc::new(store),
            path: path.to_path_buf(),
        })
    }

    /// The folder of `object`.
    fn folder(&self, object: &str) -> PathBuf {
        self.path.join(relative(object))
    }

    /// The `.zattrs` of `object` (an empty map if it has none).
    fn attributes(&self, object: &str) -> Result<serde_json::Map<String, Value>> {
        if !self.exists(object)? {
            return Err(Error::missing(&self.path, format!("`{object}`")));
        }
        let file = self.folder(object).join(".zattrs");
        if !file.is_file() {
            return Ok(serde_json::Map::new());
        }
        let bytes = read_small_file(&file, METADATA_LIMIT)?;
        match serde_json::from_slice(&bytes) {
            Ok(Value::Object(map)) => Ok(map),
            Ok(_) => Err(Error::invalid(&file, "`.zattrs` is not a JSON object")),
            Err(e) => Err(Error::library(&file, "parsing `.zattrs`", e)),
        }
    }

    /// Opens the array `dataset`.
    fn array(&self, dataset: &str) -> Result<Array<dyn ReadableStorageTraits>> {
        Array::open(self.store.clone(), &format!("/{}", relative(dataset)))
            .map_err(|e| Error::library(&self.path, format!("opening array `{dataset}`"), e))
    }

    /// Opens `dataset` and checks it has at most `limit` elements and a decodable chunk size.
    fn bounded(&self, dataset: &str, limit: u64) -> Result<Array<dyn ReadableStorageTraits>> {
        let array = self.array(dataset)?;
        let elements = array
            .shape()
            .iter()
            .fold(1u64, |acc, &d| acc.saturating_mul(d));
        if elements > limit {
            return Err(Error::invalid(
                &self.path,
                format!("`{dataset}` has {elements} elements, expected at most {limit}"),
            ));
        }
        check_chunk_size(&self.path, dataset, &array)?;
        Ok(array)
    }

    fn read_failed(&self, dataset: &str) -> impl FnOnce(zarrs::array::ArrayError) -> Error + '_ {
        let context = format!("reading `{dataset}`");
        move |e| Error::library(&self.path, context, e)
    }

    fn type_error(
        &self,
        dataset: &str,
        array: &Array<dyn ReadableStorageTraits>,
        expected: &str,
    ) -> Error {
        Error::invalid(
            &self.path,
            format!(
                "`{dataset}` has data type {}, expected {expected}",
                array
                    .data_type()
                    .name_v2()
                    .or_else(|| array.data_type().name_v3())
                    .unwrap_or_default()
            ),
        )
    }

    /// The float values of `subset` of `array`.
    fn floats(
        &self,
        dataset: &str,
        array: &Array<dyn ReadableStorageTraits>,
        subset: &ArraySubset,
    ) -> Result<Vec<f64>> {
        let data_type = array.data_type();
        if data_type.is::<Float64DataType>() {
            array
                .retrieve_array_subset::<Vec<f64>>(subset)
                .map_err(self.read_failed(dataset))
        } else if data_type.is::<Float32DataType>() {
            array
                .retrieve_array_subset::<Vec<f32>>(subset)
                .map(|v| v.into_iter().map(f64::from).collect())
                .map_err(self.read_failed(dataset))
        } else {
            Err(self.type_error(dataset, array, "float32 or float64"))
        }
    }
}

/// Refuses an array whose chunks decode to more than [`MAX_CHUNK_BYTES`].
fn check_chunk_size(
    path: &Path,
    dataset: &str,
    array: &Array<dyn ReadableStorageTraits>,
) -> Result<()> {
    let origin = vec![0; array.dimensionality()];
    let elements = array
        .chunk_grid()
        .subset(&origin)
        .ok()
        .flatten()
        .map_or(0, |s| {
            s.shape().iter().fold(1u64, |acc, &d| acc.saturating_mul(d))
        });
    let bytes = elements.saturating_mul(array.data_type().fixed_size().unwrap_or(16) as u64);
    if bytes > MAX_CHUNK_BYTES as u64 {
        return Err(Error::invalid(
            path,
            format!("`{dataset}` has chunks of {bytes} bytes decoded, more than {MAX_CHUNK_BYTES}"),
        ));
    }
    Ok(())
}

impl Tree for ZarrTree {
    fn file(&self) -> &Path {
        &self.path
    }

    fn exists(&self, object: &str) -> Result<bool> {
        let folder = self.folder(object);
        Ok(folder.join(".zgroup").is_file() || folder.join(".zarray").is_file())
    }

    fn child_groups(&self, group: &str) -> Result<Vec<String>> {
        let folder = self.folder(group);
        let io_error = |e: std::io::Error| {
            Error::from(dspk_io::Error::Io {
                path: folder.clone(),
                operation: "list the folder".into(),
                source: Arc::new(e),
            })
        };
        let entries = std::fs::read_dir(&folder).map_err(io_error)?;
        let mut groups = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io_error)?;
            if entry.path().join(".zgroup").is_file()
                && let Some(name) = entry.file_name().to_str()
            {
                groups.push(name.to_string());
            }
        }
        groups.sort();
        Ok(groups)
    }

    fn attr_string(&self, object: &str, name: &str) -> Result<Option<String>> {
        match self.attributes(object)?.get(name) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(other) => Err(Error::invalid(
                &self.path,
                format!("attribute `{name}` of `{object}` is {other}, not a string"),
            )),
        }
    }

    fn attr_f64(&self, object: &str, name: &str) -> Result<Option<f64>> {
        match self.attributes(object)?.get(name) {
            None => Ok(None),
            Some(Value::Number(number)) => number.as_f64().map(Some).ok_or_else(|| {
                Error::invalid(
                    &self.path,
                    format!("attribute `{name}` of `{object}` is {number}, not a number"),
                )
            }),
            Some(other) => Err(Error::invalid(
                &self.path,
                format!("attribute `{name}` of `{object}` is {other}, not a number"),
            )),
        }
    }

    fn attr_reference(&self, object: &str, name: &str, _expected: &str) -> Result<Option<String>> {
        let attributes = self.attributes(object)?;
        let Some(reference) = attributes.get(name) else {
            return Ok(None);
        };
        let value = reference.get("value").unwrap_or(reference);
        let bad = || {
            Error::invalid(
                &self.path,
                format!(
                    "attribute `{name}` of `{object}` is {reference}, not an object reference \
                     (`{{\"value\": {{\"path\": ..., \"source\": \".\"}}}}`)"
                ),
            )
        };
        let target = value.get("path").and_then(Value::as_str).ok_or_else(bad)?;
        match value.get("source").and_then(Value::as_str) {
            None | Some(".") => Ok(Some(target.to_string())),
            Some(source) => Err(Error::unsupported(
                &self.path,
                format!(
                    "attribute `{name}` of `{object}` refers to `{target}` in another store \
                     (`{source}`)"
                ),
            )),
        }
    }

    fn shape(&self, dataset: &str) -> Result<Vec<u64>> {
        let shape = self.array(dataset)?.shape().to_vec();
        Ok(shape)
    }

    fn f64s(&self, dataset: &str, limit: u64) -> Result<Vec<f64>> {
        let array = self.bounded(dataset, limit)?;
        self.floats(dataset, &array, &array.subset_all())
    }

    fn f64_range(&self, dataset: &str, range: Range<u64>) -> Result<Vec<f64>> {
        let array = self.array(dataset)?;
        check_chunk_size(&self.path, dataset, &array)?;
        self.floats(dataset, &array, &ArraySubset::new_with_ranges(&[range]))
    }

    fn i64s(&self, dataset: &str, limit: u64) -> Result<Vec<i64>> {
        let array = self.bounded(dataset, limit)?;
        let all = array.subset_all();
        let data_type = array.data_type();
        if data_type.is::<Int64DataType>() {
            array
                .retrieve_array_subset::<Vec<i64>>(&all)
                .map_err(self.read_failed(dataset))
        } else if data_type.is::<Int32DataType>() {
            array
                .retrieve_array_subset::<Vec<i32>>(&all)
                .map(|v| v.into_iter().map(i64::from).collect())
                .map_err(self.read_failed(dataset))
        } else {
            Err(self.type_error(dataset, &array, "int32 or int64"))
        }
    }

    fn strings(&self, dataset: &str, limit: u64) -> Result<Vec<String>> {
        let array = self.bounded(dataset, limit)?;
        array
            .retrieve_array_subset::<Vec<String>>(&array.subset_all())
            .map_err(self.read_failed(dataset))
    }
}

/// The int16 `data` array of a series, read chunk by chunk through a [`ChunkCache`].
pub(super) struct ZarrData {
    array: Array<dyn ReadableStorageTraits>,
    grid: ChunkGrid,
    path: PathBuf,
    name: String,
    cache: ChunkCache,
    array_id: u64,
    missing: MissingChunks,
}

impl ZarrData {
    /// Opens `dataset` (2-D, checked by the caller) and checks that it holds int16 values in
    /// chunks of at most [`MAX_CHUNK_BYTES`], and that its shape fits the store
    /// ([`check_zarr_extent`]); `missing` says what a chunk the store lacks reads as.
    pub(super) fn open(tree: &ZarrTree, dataset: &str, missing: MissingChunks) -> Result<Self> {
        let array = tree.array(dataset)?;
        if !array.data_type().is::<Int16DataType>() {
            return Err(tree.type_error(dataset, &array, "int16"));
        }
        check_chunk_size(&tree.path, dataset, &array)?;
        check_zarr_extent(&array, &tree.path, dataset, missing)?;
        Ok(Self {
            missing,
            grid: array.chunk_grid().clone(),
            array,
            path: tree.path.clone(),
            name: dataset.to_string(),
            cache: ChunkCache::default(),
            array_id: ChunkCache::new_array_id(),
        })
    }

    fn grid_error(&self, t: u64, c: u64) -> Error {
        Error::invalid(
            &self.path,
            format!(
                "the chunk grid of `{}` has no chunk for sample {t} of channel {c}",
                self.name
            ),
        )
    }

    /// Reads rows `rows` of columns `columns` into `out` (row-major), decoding each chunk the
    /// selection overlaps once (or taking it from the cache).
    pub(super) fn read_rows(
        &self,
        rows: Range<u64>,
        columns: Range<usize>,
        out: &mut [i16],
    ) -> Result<()> {
        let width = columns.len();
        let mut t = rows.start;
        while t < rows.end {
            let mut c = columns.start as u64;
            let mut next_t = rows.end;
            while c < columns.end as u64 {
                let Some(indices) = self.grid.chunk_indices(&[t, c]).ok().flatten() else {
                    return Err(self.grid_error(t, c));
                };
                let Some(subset) = self.grid.subset(&indices).ok().flatten() else {
                    return Err(self.grid_error(t, c));
                };
                let (start, shape) = (subset.start(), subset.shape());
                let chunk =
                    self.chunk([indices[0], indices[1]], shape[0].saturating_mul(shape[1]))?;
                let chunk_width = shape[1] as usize;
                let t_end = (start[0] + shape[0]).min(rows.end);
                let c_end = (start[1] + shape[1]).min(columns.end as u64);
                for s in t..t_end {
                    let row = (s - start[0]) as usize;
                    let out_row = (s - rows.start) as usize * width;
                    for ch in c..c_end {
                        let from = (row * chunk_width + (ch - start[1]) as usize) * 2;
                        out[out_row + ch as usize - columns.start] =
                            i16::from_ne_bytes([chunk[from], chunk[from + 1]]);
                    }
                }
                next_t = next_t.min(t_end);
                c = c_end;
            }
            t = next_t;
        }
        Ok(())
    }

    /// The decoded chunk `chunk` (native-endian, C order, `elements` values).
    fn chunk(&self, chunk: [u64; 2], elements: u64) -> Result<Arc<[u8]>> {
        let bytes = elements.saturating_mul(2);
        let key = ChunkKey {
            array: self.array_id,
            chunk,
        };
        self.cache.get_or_decode(key, || {
            let decoded: ArrayBytes<'static> =
                retrieve_zarr_chunk(&self.array, &chunk, &self.path, &self.name, self.missing)?;
            let decoded = decoded
                .into_fixed()
                .map_err(|e| {
                    Error::library(&self.path, format!("chunk {chunk:?} of `{}`", self.name), e)
                })?
                .into_owned();
            if decoded.len() as u64 != bytes {
                return Err(Error::invalid(
                    &self.path,
                    format!(
                        "chunk {chunk:?} of `{}` decoded to {} bytes, expected {bytes}",
                        self.name,
                        decoded.len()
                    ),
                ));
            }
            Ok(decoded)
        })
    }

    /// The chunk cache's counters.
    pub(super) fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }
}
