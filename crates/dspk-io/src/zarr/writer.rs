//! Writing any recording as a Zarr v3 store in SpikeInterface's layout.

use std::path::Path;
use std::sync::Arc;

use dspk_core::{RecordingSource, SampleFormat};
use zarrs::array::{ArrayBuilder, DataType, data_type};
use zarrs::group::GroupBuilder;

use super::{DSPK_RATE_ATTR, DSPK_UNITS_ATTR};
use crate::raw::rate_text;
use crate::{Error, Result};

/// How [`write_zarr`] chunks and compresses the traces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZarrWriteOptions {
    /// Samples per chunk (chunks span all channels).
    ///
    /// > default: 30 000 (one second at 30 kHz).
    pub chunk_samples: u64,
    /// The zstd level of the traces, or `None` for no compression.
    ///
    /// > default: `Some(3)`.
    pub zstd_level: Option<i32>,
}

impl Default for ZarrWriteOptions {
    fn default() -> Self {
        Self {
            chunk_samples: 30_000,
            zstd_level: Some(3),
        }
    }
}

/// Writes `source` as a Zarr v3 store at `path` (a new folder) in SpikeInterface's layout:
/// `traces_seg0` `[samples, channels]` of the stored format, `channel_ids` (strings),
/// `properties/gain_to_uV` and `properties/offset_to_uV` (float64), root attributes
/// `sampling_frequency` and `num_segments`, plus the exact rate and the channels' units for
/// [`ZarrRecording`](super::ZarrRecording). Memory stays at one chunk.
///
/// # Errors
///
/// [`Error::Invalid`] if `source` cannot return stored values or `chunk_samples` is zero;
/// [`Error::Library`] if `zarrs` cannot create or write the store; what `source` reports
/// when a read fails (as [`Error::Core`]).
pub fn write_zarr(
    source: &dyn RecordingSource,
    path: impl AsRef<Path>,
    options: ZarrWriteOptions,
) -> Result<()> {
    let path = path.as_ref();
    if !source.can_read_stored() {
        return Err(Error::invalid(
            path,
            "the recording cannot return stored values",
        ));
    }
    if options.chunk_samples == 0 {
        return Err(Error::invalid(path, "chunks need at least one sample"));
    }
    let info = source.info();
    let num_channels = info.num_channels();
    let n = info.num_samples;
    let zarr_error = |what: &str| {
        let what = what.to_string();
        move |e: zarrs::array::ArrayCreateError| Error::library(path, what.clone(), e)
    };
    std::fs::create_dir_all(path).map_err(|e| Error::io(path, "create folder", e))?;
    let store = Arc::new(
        zarrs::filesystem::FilesystemStore::new(path)
            .map_err(|e| Error::library(path, "opening the store", e))?,
    );

    let mut attributes = serde_json::Map::new();
    attributes.insert("sampling_frequency".into(), info.sample_rate.as_hz().into());
    attributes.insert("num_segments".into(), 1.into());
    attributes.insert(DSPK_RATE_ATTR.into(), rate_text(info.sample_rate).into());
    attributes.insert(
        DSPK_UNITS_ATTR.into(),
        info.channels
            .iter()
            .map(|c| c.unit.clone())
            .collect::<Vec<_>>()
            .into(),
    );
    let root = GroupBuilder::new()
        .attributes(attributes)
        .build(store.clone(), "/")
        .map_err(|e| Error::library(path, "creating the root group", e))?;
    root.store_metadata()
        .map_err(|e| Error::library(path, "writing the root group", e))?;

    let sample_type: DataType = match info.stored_format {
        SampleFormat::I16 => data_type::int16(),
        SampleFormat::U16 => data_type::uint16(),
        SampleFormat::I32 => data_type::int32(),
        SampleFormat::F32 => data_type::float32(),
        other => {
            return Err(Error::invalid(
                path,
                format!("cannot write {other} samples to Zarr"),
            ));
        }
    };
    let fill = vec![0u8; info.stored_format.size()];
    let chunk_samples = options.chunk_samples.min(n.max(1));
    let mut builder = ArrayBuilder::new(
        vec![n, num_channels as u64],
        vec![chunk_samples, num_channels as u64],
        sample_type,
        zarrs::array::FillValue::new(fill),
    );
    if let Some(level) = options.zstd_level {
        builder.bytes_to_bytes_codecs(vec![Arc::new(zarrs::array::codec::ZstdCodec::new(
            level, false,
        ))]);
    }
    let traces = builder
        .build(store.clone(), "/traces_seg0")
        .map_err(zarr_error("creating `traces_seg0`"))?;
    traces
        .store_metadata()
        .map_err(|e| Error::library(path, "writing the metadata of `traces_seg0`", e))?;
    let size = info.stored_format.size();
    let channels = info.all_channels();
    let mut stored = Vec::new();
    let mut rows = Vec::new();
    for (index, start) in (0..n).step_by(chunk_samples as usize).enumerate() {
        let end = (start + chunk_samples).min(n);
        let m = (end - start) as usize;
        stored.resize(num_channels * m * size, 0);
        source
            .read_stored(&channels, start..end, &mut stored)
            .map_err(|e| Error::core(path, e))?;
        // A full chunk, C order [chunk_samples, channels]; rows past the end keep the fill.
        rows.clear();
        rows.resize(chunk_samples as usize * num_channels * size, 0);
        for (c, run) in stored.chunks_exact(m * size).enumerate() {
            for (s, value) in run.chunks_exact(size).enumerate() {
                let at = (s * num_channels + c) * size;
                rows[at..at + size].copy_from_slice(value);
            }
        }
        // zarrs takes values in this machine's byte order.
        crate::dtype::to_little_endian(&mut rows, size, crate::ByteOrder::NATIVE);
        traces
            .store_chunk(
                &[index as u64, 0],
                zarrs::array::ArrayBytes::new_flen(rows.as_slice()),
            )
            .map_err(|e| {
                Error::library(path, format!("writing chunk {index} of `traces_seg0`"), e)
            })?;
    }

    let vector = |name: &str, data_type: DataType, fill: zarrs::array::FillValue| {
        ArrayBuilder::new(
            vec![num_channels as u64],
            vec![num_channels.max(1) as u64],
            data_type,
            fill,
        )
        .build(store.clone(), name)
        .map_err(zarr_error(name))
    };
    let ids = vector(
        "/channel_ids",
        data_type::string(),
        zarrs::array::FillValue::from(""),
    )?;
    ids.store_metadata()
        .map_err(|e| Error::library(path, "writing the metadata of `channel_ids`", e))?;
    let names: Vec<&str> = info.channels.iter().map(|c| c.name.as_str()).collect();
    ids.store_chunk(&[0], names.as_slice())
        .map_err(|e| Error::library(path, "writing `channel_ids`", e))?;
    GroupBuilder::new()
        .build(store.clone(), "/properties")
        .map_err(|e| Error::library(path, "creating `properties`", e))?
        .store_metadata()
        .map_err(|e| Error::library(path, "writing `properties`", e))?;
    for (name, values) in [
        (
            "/properties/gain_to_uV",
            info.channels.iter().map(|c| c.gain).collect::<Vec<_>>(),
        ),
        (
            "/properties/offset_to_uV",
            info.channels.iter().map(|c| c.offset).collect(),
        ),
    ] {
        let array = vector(
            name,
            data_type::float64(),
            zarrs::array::FillValue::from(0.0f64),
        )?;
        array
            .store_metadata()
            .map_err(|e| Error::library(path, format!("writing the metadata of `{name}`"), e))?;
        array
            .store_chunk(&[0], values.as_slice())
            .map_err(|e| Error::library(path, format!("writing `{name}`"), e))?;
    }
    Ok(())
}
