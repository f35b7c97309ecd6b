//! NWB files in HDF5, read with `hdf5_reader` (see the module docs of `nwb` for the choice).

use std::ops::Range;
use std::path::{Path, PathBuf};

use dspk_core::{ChannelInfo, SampleFormat, SampleRate};
use dspk_io::{ByteOrder, CacheStats, RawRecording, RawSpec, SampleOrder};
use hdf5_reader::messages::HdfMessage;
use hdf5_reader::messages::layout::DataLayout;
use hdf5_reader::{Attribute, Dataset, Datatype, Hdf5File, OpenOptions, SliceInfo, SliceInfoElem};

use super::{Data, MAX_CHUNK_BYTES, Tree};
use crate::{Error, Result};

/// What an object in the file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Group,
    Dataset,
}

/// An opened HDF5 file, as a [`Tree`].
pub(super) struct Hdf5Tree {
    file: Hdf5File,
    path: PathBuf,
}

/// Splits `/a/b/c` into `/a/b` and `c`; the root into `/` and an empty name.
fn split(object: &str) -> (&str, &str) {
    let trimmed = object.trim_end_matches('/');
    match trimmed.rsplit_once('/') {
        Some(("", name)) => ("/", name),
        Some((parent, name)) => (parent, name),
        None => ("/", trimmed),
    }
}

impl Hdf5Tree {
    /// Opens the HDF5 file at `path`.
    pub(super) fn open(path: &Path) -> Result<Self> {
        if !path.is_file() {
            return Err(Error::missing(path, "the NWB (HDF5) file"));
        }
        let options = OpenOptions::default().with_max_chunk_bytes(MAX_CHUNK_BYTES);
        let file = Hdf5File::open_with_options(path, options)
            .map_err(|e| Error::library(path, "opening the file as HDF5", e))?;
        Ok(Self {
            file,
            path: path.to_path_buf(),
        })
    }

    fn failed(&self, context: String) -> impl FnOnce(hdf5_reader::error::Error) -> Error + '_ {
        move |e| Error::library(&self.path, context, e)
    }

    /// What `object` is, `None` if nothing is there.
    fn kind(&self, object: &str) -> Result<Option<Kind>> {
        let (parent, name) = split(object);
        if name.is_empty() {
            return Ok(Some(Kind::Group));
        }
        if self.kind(parent)? != Some(Kind::Group) {
            return Ok(None);
        }
        let group = self
            .file
            .group(parent)
            .map_err(self.failed(format!("opening group `{parent}`")))?;
        let (groups, datasets) = group
            .member_names()
            .map_err(self.failed(format!("listing group `{parent}`")))?;
        Ok(if groups.iter().any(|g| g == name) {
            Some(Kind::Group)
        } else if datasets.iter().any(|d| d == name) {
            Some(Kind::Dataset)
        } else {
            None
        })
    }

    fn dataset(&self, dataset: &str) -> Result<Dataset> {
        self.file
            .dataset(dataset)
            .map_err(self.failed(format!("opening dataset `{dataset}`")))
    }

    /// The attribute `name` of `object`, `None` if the object has no such attribute.
    fn attribute(&self, object: &str, name: &str) -> Result<Option<Attribute>> {
        let attributes = match self.kind(object)? {
            Some(Kind::Group) => self
                .file
                .group(object)
                .and_then(|g| g.attributes())
                .map_err(self.failed(format!("reading the attributes of `{object}`")))?,
            Some(Kind::Dataset) => self.dataset(object)?.attributes(),
            None => return Err(Error::missing(&self.path, format!("`{object}`"))),
        };
        Ok(attributes.into_iter().find(|a| a.name == name))
    }

    /// Opens `dataset` and checks it has at most `limit` elements.
    fn bounded(&self, dataset: &str, limit: u64) -> Result<Dataset> {
        let ds = self.dataset(dataset)?;
        let elements = ds
            .num_elements()
            .map_err(self.failed(format!("reading the size of `{dataset}`")))?;
        if elements > limit {
            return Err(Error::invalid(
                &self.path,
                format!("`{dataset}` has {elements} elements, expected at most {limit}"),
            ));
        }
        Ok(ds)
    }

    fn type_error(&self, dataset: &str, expected: &str, actual: &Datatype) -> Error {
        Error::invalid(
            &self.path,
            format!("`{dataset}` has data type {actual:?}, expected {expected}"),
        )
    }
}

impl Tree for Hdf5Tree {
    fn file(&self) -> &Path {
        &self.path
    }

    fn exists(&self, object: &str) -> Result<bool> {
        Ok(self.kind(object)?.is_some())
    }

    fn child_groups(&self, group: &str) -> Result<Vec<String>> {
        let (mut groups, _) = self
            .file
            .group(group)
            .and_then(|g| g.member_names())
            .map_err(self.failed(format!("listing group `{group}`")))?;
        groups.sort();
        Ok(groups)
    }

    fn attr_string(&self, object: &str, name: &str) -> Result<Option<String>> {
        self.attribute(object, name)?
            .map(|a| {
                a.read_string().map_err(self.failed(format!(
                    "reading attribute `{name}` of `{object}` as a string"
                )))
            })
            .transpose()
    }

    fn attr_f64(&self, object: &str, name: &str) -> Result<Option<f64>> {
        self.attribute(object, name)?
            .map(|a| {
                a.read_as_f64().map_err(self.failed(format!(
                    "reading attribute `{name}` of `{object}` as a number"
                )))
            })
            .transpose()
    }

    fn attr_reference(&self, object: &str, name: &str, expected: &str) -> Result<Option<String>> {
        let Some(attribute) = self.attribute(object, name)? else {
            return Ok(None);
        };
        if !matches!(attribute.datatype, Datatype::Reference { .. }) {
            return Err(Error::invalid(
                &self.path,
                format!(
                    "attribute `{name}` of `{object}` has data type {:?}, expected an object reference",
                    attribute.datatype
                ),
            ));
        }
        let address = hdf5_reader::reference::resolve_object_reference(
            &attribute.raw_data,
            self.file.superblock().offset_size,
        )
        .map_err(self.failed(format!("reading reference `{name}` of `{object}`")))?;
        if self.kind(expected)? != Some(Kind::Group) {
            return Err(Error::missing(
                &self.path,
                format!("the group `{expected}`"),
            ));
        }
        let target = self
            .file
            .group(expected)
            .map_err(self.failed(format!("opening group `{expected}`")))?;
        if target.address() == address {
            Ok(Some(expected.to_string()))
        } else {
            Err(Error::unsupported(
                &self.path,
                format!(
                    "attribute `{name}` of `{object}` refers to the object at address {address}, \
                     not to `{expected}`"
                ),
            ))
        }
    }

    fn shape(&self, dataset: &str) -> Result<Vec<u64>> {
        Ok(self.dataset(dataset)?.shape().to_vec())
    }

    fn f64s(&self, dataset: &str, limit: u64) -> Result<Vec<f64>> {
        let ds = self.bounded(dataset, limit)?;
        let failed = self.failed(format!("reading `{dataset}`"));
        match ds.dtype() {
            Datatype::FloatingPoint { size: 8, .. } => ds
                .read_array::<f64>()
                .map(|a| a.iter().copied().collect())
                .map_err(failed),
            Datatype::FloatingPoint { size: 4, .. } => ds
                .read_array::<f32>()
                .map(|a| a.iter().map(|&v| f64::from(v)).collect())
                .map_err(failed),
            other => Err(self.type_error(dataset, "float32 or float64", other)),
        }
    }

    fn f64_range(&self, dataset: &str, range: Range<u64>) -> Result<Vec<f64>> {
        let ds = self.dataset(dataset)?;
        let selection = SliceInfo {
            selections: vec![SliceInfoElem::Slice {
                start: range.start,
                end: range.end,
                step: 1,
            }],
        };
        let failed = self.failed(format!("reading elements {range:?} of `{dataset}`"));
        match ds.dtype() {
            Datatype::FloatingPoint { size: 8, .. } => ds
                .read_slice::<f64>(&selection)
                .map(|a| a.iter().copied().collect())
                .map_err(failed),
            Datatype::FloatingPoint { size: 4, .. } => ds
                .read_slice::<f32>(&selection)
                .map(|a| a.iter().map(|&v| f64::from(v)).collect())
                .map_err(failed),
            other => Err(self.type_error(dataset, "float32 or float64", other)),
        }
    }

    fn i64s(&self, dataset: &str, limit: u64) -> Result<Vec<i64>> {
        let ds = self.bounded(dataset, limit)?;
        let failed = self.failed(format!("reading `{dataset}`"));
        match ds.dtype() {
            Datatype::FixedPoint {
                size: 8,
                signed: true,
                ..
            } => ds
                .read_array::<i64>()
                .map(|a| a.iter().copied().collect())
                .map_err(failed),
            Datatype::FixedPoint {
                size: 4,
                signed: true,
                ..
            } => ds
                .read_array::<i32>()
                .map(|a| a.iter().map(|&v| i64::from(v)).collect())
                .map_err(failed),
            Datatype::FixedPoint {
                size: 4,
                signed: false,
                ..
            } => ds
                .read_array::<u32>()
                .map(|a| a.iter().map(|&v| i64::from(v)).collect())
                .map_err(failed),
            other => Err(self.type_error(dataset, "int32, uint32 or int64", other)),
        }
    }

    fn strings(&self, dataset: &str, limit: u64) -> Result<Vec<String>> {
        self.bounded(dataset, limit)?
            .read_strings()
            .map_err(self.failed(format!("reading `{dataset}` as strings")))
    }
}

/// Chunked (or compact) int16 `data` of a series, read by hyperslabs.
pub(super) struct Hdf5Data {
    file: Hdf5File,
    dataset: Dataset,
    path: PathBuf,
    name: String,
}

/// The file offset of `dataset`'s values if they are stored contiguously in the file itself.
fn contiguous_offset(tree: &Hdf5Tree, dataset: &Dataset, name: &str) -> Result<Option<(u64, u64)>> {
    let header = tree
        .file
        .get_or_parse_header(dataset.address())
        .map_err(tree.failed(format!("reading the object header of `{name}`")))?;
    let mut layout = None;
    for message in &header.messages {
        match message {
            HdfMessage::ExternalFiles(_) => return Ok(None),
            HdfMessage::DataLayout(message) => layout = Some(&message.layout),
            _ => {}
        }
    }
    Ok(match layout {
        Some(DataLayout::Contiguous { address, size })
            if !hdf5_reader::io::Cursor::is_undefined_offset(
                *address,
                tree.file.superblock().offset_size,
            ) =>
        {
            Some((*address, *size))
        }
        _ => None,
    })
}

/// Opens the int16 `data` dataset of a series (2-D `[samples, channels]`, checked by the
/// caller), stored in chunks of at most [`MAX_CHUNK_BYTES`] or in one contiguous block inside
/// the file.
///
/// Contiguous data (no external files) is read with positional reads straight from the file
/// through [`RawRecording`] into the caller's buffer: `hdf5_reader`'s hyperslab reads reached
/// only 173 MB/s on a 73 MB contiguous dataset (release build). Chunked data goes through
/// `hdf5_reader`'s hyperslab reads ([`Hdf5Data`]), which decode only the chunks a window
/// overlaps.
pub(super) fn open_data(tree: &Hdf5Tree, dataset: &str) -> Result<Data> {
    let ds = tree.dataset(dataset)?;
    let Datatype::FixedPoint {
        size: 2,
        signed: true,
        byte_order,
    } = *ds.dtype()
    else {
        return Err(tree.type_error(dataset, "int16", ds.dtype()));
    };
    if let Some(chunks) = ds.chunks() {
        let bytes = chunks
            .iter()
            .fold(2u64, |acc, &c| acc.saturating_mul(u64::from(c)));
        if bytes > MAX_CHUNK_BYTES as u64 {
            return Err(Error::invalid(
                &tree.path,
                format!(
                    "`{dataset}` has chunks {chunks:?} ({bytes} bytes decoded), more than \
                         {MAX_CHUNK_BYTES} bytes"
                ),
            ));
        }
    }
    if let Some((offset, size)) = contiguous_offset(tree, &ds, dataset)? {
        let [samples, channels] = ds.shape()[..] else {
            return Err(Error::invalid(
                &tree.path,
                format!(
                    "`{dataset}` has shape {:?}, expected [samples, channels]",
                    ds.shape()
                ),
            ));
        };
        let values = samples.saturating_mul(channels);
        if size != values.saturating_mul(2) {
            return Err(Error::invalid(
                &tree.path,
                format!(
                    "`{dataset}` stores {size} bytes contiguously for shape \
                         [{samples}, {channels}] of int16 ({} bytes)",
                    values.saturating_mul(2)
                ),
            ));
        }
        let spec = RawSpec {
            // Placeholder channels: only stored values are read through this.
            channels: (0..channels)
                .map(|c| ChannelInfo::new(c.to_string(), 1.0, 0.0, ""))
                .collect(),
            sample_rate: SampleRate::from_hz(1).map_err(|e| Error::core(&tree.path, e))?,
            format: SampleFormat::I16,
            byte_order: match byte_order {
                hdf5_reader::ByteOrder::BigEndian => ByteOrder::Big,
                hdf5_reader::ByteOrder::LittleEndian => ByteOrder::Little,
            },
            order: SampleOrder::Interleaved,
            header_bytes: offset,
            num_samples: Some(samples),
        };
        return Ok(Data::Contiguous(Box::new(RawRecording::new(
            &tree.path, spec,
        )?)));
    }
    Ok(Data::Hdf5(Box::new(Hdf5Data {
        file: tree.file.clone(),
        dataset: ds,
        path: tree.path.clone(),
        name: dataset.to_string(),
    })))
}

impl Hdf5Data {
    /// Reads rows `rows` of columns `columns` into `out` (row-major), decoding only the chunks
    /// the selection overlaps.
    pub(super) fn read_rows(
        &self,
        rows: Range<u64>,
        columns: Range<usize>,
        out: &mut [i16],
    ) -> Result<()> {
        let (dataset, path, name) = (&self.dataset, &self.path, &self.name);
        let selection = SliceInfo {
            selections: vec![
                SliceInfoElem::Slice {
                    start: rows.start,
                    end: rows.end,
                    step: 1,
                },
                SliceInfoElem::Slice {
                    start: columns.start as u64,
                    end: columns.end as u64,
                    step: 1,
                },
            ],
        };
        let values = dataset.read_slice::<i16>(&selection).map_err(|e| {
            Error::library(
                path,
                format!("reading samples {rows:?} of channels {columns:?} of `{name}`"),
                e,
            )
        })?;
        if values.len() != out.len() {
            return Err(Error::invalid(
                path,
                format!(
                    "`{name}` returned {} values for samples {rows:?} of channels {columns:?}, \
                     expected {}",
                    values.len(),
                    out.len()
                ),
            ));
        }
        for (o, &v) in out.iter_mut().zip(values.iter()) {
            *o = v;
        }
        Ok(())
    }

    /// The file's chunk-cache counters (misses are chunk decodes).
    pub(super) fn cache_stats(&self) -> CacheStats {
        let stats = self.file.chunk_cache_stats();
        CacheStats {
            hits: stats.hits,
            decodes: stats.misses,
            evictions: stats.evictions,
            bytes: stats.current_bytes,
            chunks: stats.entries,
        }
    }
}
