//! NWB `ElectricalSeries` recordings, in HDF5 files (`.nwb`) and NWB-Zarr stores
//! (`.nwb.zarr`, as hdmf-zarr writes them: Zarr v2).
//!
//! What is read (NWB 2.x schema, `ElectricalSeries`):
//!
//! - `/acquisition/<series>/data`: int16, shape `[samples, channels]`, attributes `conversion`
//!   (default 1) and `offset` (default 0), volts;
//! - `/acquisition/<series>/channel_conversion` (optional): float64, one factor per channel;
//! - `/acquisition/<series>/starting_time` (a scalar, or a one-element array in NWB-Zarr)
//!   with attribute `rate`, or else `timestamps` (one per sample), from which the rate is
//!   derived when the spacing is uniform (relative deviation at most 1e-6) and refused
//!   otherwise;
//! - `/acquisition/<series>/electrodes`: int64 row indices into the electrodes table, whose
//!   attribute `table` references `/general/extracellular_ephys/electrodes`;
//! - the electrodes table's `id`, `channel_name` (optional), `rel_x`/`rel_y` or else `x`/`y`
//!   (optional) and `group_name` (optional) columns.
//!
//! Scaling follows SpikeInterface's `read_nwb_recording`: `gain_to_uV[c] = conversion *
//! channel_conversion[c] * 1e6` and `offset_to_uV = offset * 1e6`, computed in that order in
//! `f64`, so the gains are bit-identical to SpikeInterface's. `read_stored` returns the int16
//! data untouched. Channel names are the `channel_name` column where the table has one (as
//! SpikeInterface names channels), else the electrode ids. Positions become a [`Probe`]
//! (one contact per channel, contact `c` wired to channel `c`, shanks numbered by
//! `group_name` in order of first appearance); a table without positions, or with a
//! non-finite one (NWB writes NaN for unknown coordinates), gives no probe.
//!
//! The series is picked by name ([`NwbRecording::open_series`]) or is the first
//! `ElectricalSeries` in `/acquisition` in name order ([`NwbRecording::open`]);
//! [`list_electrical_series`] lists them.
//!
//! # Reading
//!
//! HDF5 files are read with [`hdf5_reader`] (pure Rust, read-only; why:
//! `docs/decisions/0001-hdf5-reader-for-nwb.md`). Contiguous data is read with positional
//! reads at its offset in the file through [`dspk_io::RawRecording`], straight into the
//! caller's buffer (`docs/decisions/0002-nwb-contiguous-data-positional-reads.md`). A window
//! of chunked data decodes only the chunks it overlaps (the library's chunk cache, 64 MiB,
//! keeps decoded chunks for the next window; [`NwbRecording::cache_stats`] counts decodes).
//! NWB-Zarr chunks are decoded with `zarrs` one chunk at a time through a
//! [`dspk_io::ChunkCache`].
//!
//! Sizes are checked before anything is allocated: at most 2^16 channels and 2^24 electrode
//! table rows, metadata datasets of exactly the expected length, chunks of at most
//! [`MAX_CHUNK_BYTES`] decoded.

mod hdf5;
mod zarr;

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use dspk_core::{
    ChannelInfo, RationalTime, ReadRequest, RecordingInfo, RecordingSource, SampleFormat,
    SampleRate,
};
use dspk_io::{CacheStats, Detection, Format, MissingChunks};

use crate::probe::{Contact, Probe};
use crate::{Error, Result};

/// The most channels a series may declare.
const MAX_CHANNELS: u64 = 1 << 16;
/// The most rows an electrodes table may have.
const MAX_TABLE_ROWS: u64 = 1 << 24;
/// The most bytes one decoded chunk of `data` (or of a metadata array) may take.
pub const MAX_CHUNK_BYTES: usize = 1 << 30;
/// Timestamps are read in blocks of this many values when checking their spacing.
const TIMESTAMP_BLOCK: u64 = 1 << 20;
/// The largest relative deviation of a timestamp step from the mean step that still counts as
/// a uniform rate.
const RATE_TOLERANCE: f64 = 1e-6;
/// Where NWB keeps the electrodes table.
const ELECTRODES_TABLE: &str = "/general/extracellular_ephys/electrodes";
/// The `neurodata_type` of the series this reader reads.
const ELECTRICAL_SERIES: &str = "ElectricalSeries";

/// The eight bytes every HDF5 file starts with (superblock signature at offset 0).
pub const HDF5_SIGNATURE: [u8; 8] = *b"\x89HDF\r\n\x1a\n";

/// Read access to the objects of an NWB file or store, by absolute path (`/a/b`), the same for
/// HDF5 and Zarr. Every method names `path` (the file) in its errors.
trait Tree {
    /// The file or store the tree is in.
    fn file(&self) -> &Path;
    /// Whether an object (group or dataset/array) exists at `object`.
    fn exists(&self, object: &str) -> Result<bool>;
    /// The names of the groups in `group`, sorted.
    fn child_groups(&self, group: &str) -> Result<Vec<String>>;
    /// A string attribute of `object`, `None` if it has none.
    fn attr_string(&self, object: &str, name: &str) -> Result<Option<String>>;
    /// A numeric scalar attribute of `object` as `f64`, `None` if it has none.
    fn attr_f64(&self, object: &str, name: &str) -> Result<Option<f64>>;
    /// The path of the object an object-reference attribute of `object` points to, `None` if
    /// it has no such attribute. HDF5 references hold addresses: they resolve only to
    /// `expected`, and another target is an error.
    fn attr_reference(&self, object: &str, name: &str, expected: &str) -> Result<Option<String>>;
    /// The shape of a dataset/array.
    fn shape(&self, dataset: &str) -> Result<Vec<u64>>;
    /// The values of a float dataset of at most `limit` elements, flattened.
    fn f64s(&self, dataset: &str, limit: u64) -> Result<Vec<f64>>;
    /// Elements `range` of a one-dimensional float dataset.
    fn f64_range(&self, dataset: &str, range: Range<u64>) -> Result<Vec<f64>>;
    /// The values of an integer dataset of at most `limit` elements, flattened.
    fn i64s(&self, dataset: &str, limit: u64) -> Result<Vec<i64>>;
    /// The values of a string dataset of at most `limit` elements.
    fn strings(&self, dataset: &str, limit: u64) -> Result<Vec<String>>;
}

/// Where the samples are read from.
enum Data {
    /// Contiguous HDF5 data: positional reads at its offset in the file.
    Contiguous(Box<dspk_io::RawRecording>),
    /// Chunked HDF5 data: hyperslab reads.
    Hdf5(Box<hdf5::Hdf5Data>),
    /// NWB-Zarr data: chunks through a cache.
    Zarr(Box<zarr::ZarrData>),
}

impl Data {
    fn layout(&self) -> &'static str {
        match self {
            Self::Contiguous(_) => "contiguous",
            Self::Hdf5(_) | Self::Zarr(_) => "chunked",
        }
    }

    fn cache_stats(&self) -> CacheStats {
        match self {
            Self::Contiguous(_) => CacheStats::default(),
            Self::Hdf5(data) => data.cache_stats(),
            Self::Zarr(data) => data.cache_stats(),
        }
    }
}

/// An NWB `ElectricalSeries` as a [`RecordingSource`]: int16 stored values, µV scaled values
/// (gains and offsets as SpikeInterface's `read_nwb_recording`), the electrodes' positions as a
/// [`Probe`].
pub struct NwbRecording {
    path: PathBuf,
    series: String,
    info: RecordingInfo,
    probe: Option<Probe>,
    data: Data,
}

impl std::fmt::Debug for NwbRecording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NwbRecording")
            .field("path", &self.path)
            .field("series", &self.series)
            .field("info", &self.info)
            .field("probe", &self.probe)
            .finish_non_exhaustive()
    }
}

/// Whether `path` is an NWB-Zarr store (a folder) rather than an HDF5 file.
fn is_zarr(path: &Path) -> bool {
    path.is_dir()
}

/// The names of the `ElectricalSeries` in `/acquisition` of the NWB file or NWB-Zarr store at
/// `path`, sorted (as h5py and pynwb list them).
///
/// # Errors
///
/// [`dspk_io::Error::Missing`] if the file or `/acquisition` does not exist, [`dspk_io::Error::Library`] if the
/// file is not HDF5 (or the folder not a Zarr store) or the library fails on it.
pub fn list_electrical_series(path: impl AsRef<Path>) -> Result<Vec<String>> {
    let path = path.as_ref();
    if is_zarr(path) {
        list_series(&zarr::ZarrTree::open(path)?)
    } else {
        list_series(&hdf5::Hdf5Tree::open(path)?)
    }
}

fn list_series(tree: &dyn Tree) -> Result<Vec<String>> {
    if !tree.exists("/acquisition")? {
        return Err(Error::missing(tree.file(), "the group `/acquisition`"));
    }
    let mut series = Vec::new();
    for name in tree.child_groups("/acquisition")? {
        let object = format!("/acquisition/{name}");
        if tree.attr_string(&object, "neurodata_type")?.as_deref() == Some(ELECTRICAL_SERIES) {
            series.push(name);
        }
    }
    Ok(series)
}

impl NwbRecording {
    /// Opens the first `ElectricalSeries` (in name order) in `/acquisition` of the NWB file or
    /// NWB-Zarr store at `path`, as SpikeInterface's `read_nwb_recording` does when given no
    /// `electrical_series_path` and the file holds one series.
    ///
    /// # Errors
    ///
    /// [`dspk_io::Error::Missing`] if there is no `ElectricalSeries`; otherwise as
    /// [`open_series`](Self::open_series).
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let series = list_electrical_series(path)?;
        let Some(first) = series.first() else {
            return Err(Error::missing(
                path,
                "an ElectricalSeries in `/acquisition`",
            ));
        };
        Self::open_series(path, first)
    }

    /// Opens the `ElectricalSeries` `/acquisition/<name>` of the NWB file or NWB-Zarr store at
    /// `path`.
    ///
    /// # Errors
    ///
    /// [`dspk_io::Error::Missing`] naming the series there are if `name` is not one of them, or a
    /// required member (`data`, `electrodes`, `starting_time`/`timestamps`, the electrodes
    /// table) is missing; [`dspk_io::Error::Invalid`] if `data` is not 2-D int16, `channel_conversion`,
    /// `electrodes` or `timestamps` disagree with the data's shape, an electrode index is
    /// outside the table, the rate is not positive or the timestamps are not uniform;
    /// [`dspk_io::Error::Library`] for files the HDF5/Zarr library cannot read (not HDF5, truncated).
    pub fn open_series(path: impl AsRef<Path>, name: &str) -> Result<Self> {
        Self::open_series_with(path, name, MissingChunks::Error)
    }

    /// Opens the `ElectricalSeries` `/acquisition/<name>` as
    /// [`open_series`](Self::open_series) does, with `missing` saying what a chunk of an
    /// NWB-Zarr store's `data` that its shape covers but the store lacks reads as: an error
    /// naming the chunk ([`MissingChunks::Error`], the default of the other openers) or the
    /// fill value. HDF5 files are read as HDF5 defines (unwritten chunks are the fill value).
    ///
    /// # Errors
    ///
    /// As [`open_series`](Self::open_series); with [`MissingChunks::Error`],
    /// [`dspk_io::Error::MissingChunk`] if the chunk holding the last sample is not in the
    /// store; [`dspk_io::Error::Invalid`] for more than
    /// [`MAX_ZARR_SAMPLES`](dspk_io::MAX_ZARR_SAMPLES) samples.
    pub fn open_series_with(
        path: impl AsRef<Path>,
        name: &str,
        missing: MissingChunks,
    ) -> Result<Self> {
        let path = path.as_ref();
        if is_zarr(path) {
            let tree = zarr::ZarrTree::open(path)?;
            let parts = read_series(&tree, name)?;
            let data = zarr::ZarrData::open(&tree, &parts.data_path, missing)?;
            Self::assemble(path, name, parts, Data::Zarr(Box::new(data)), "nwb-zarr")
        } else {
            let tree = hdf5::Hdf5Tree::open(path)?;
            let parts = read_series(&tree, name)?;
            let data = hdf5::open_data(&tree, &parts.data_path)?;
            Self::assemble(path, name, parts, data, "nwb-hdf5")
        }
    }

    fn assemble(
        path: &Path,
        name: &str,
        parts: SeriesParts,
        data: Data,
        container: &str,
    ) -> Result<Self> {
        let SeriesParts {
            num_samples,
            conversion,
            offset,
            channel_conversion,
            unit,
            rate,
            start,
            names,
            probe,
            ..
        } = parts;
        let offset_uv = offset * 1e6;
        let channels = names
            .into_iter()
            .enumerate()
            .map(|(c, channel)| {
                let factor = channel_conversion.as_ref().map_or(1.0, |cc| cc[c]);
                ChannelInfo::new(channel, conversion * factor * 1e6, offset_uv, "uV")
            })
            .collect();
        let mut info = RecordingInfo::new(channels, num_samples, rate, SampleFormat::I16)
            .map_err(|e| Error::core(path, e))?;
        info.start_time = start;
        info.metadata = BTreeMap::from([
            ("format".to_string(), container.to_string()),
            ("nwb_series".to_string(), name.to_string()),
            ("nwb_conversion".to_string(), conversion.to_string()),
            ("nwb_offset".to_string(), offset.to_string()),
            ("nwb_data_layout".to_string(), data.layout().to_string()),
        ]);
        if let Some(unit) = unit {
            info.metadata.insert("nwb_unit".into(), unit);
        }
        Ok(Self {
            path: path.to_path_buf(),
            series: name.to_string(),
            info,
            probe,
            data,
        })
    }

    /// The file or store.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The series' name in `/acquisition`.
    #[must_use]
    pub fn series_name(&self) -> &str {
        &self.series
    }

    /// The electrodes' positions, one contact per channel (contact `c` wired to channel `c`),
    /// or `None` if the electrodes table has no (finite) positions.
    #[must_use]
    pub fn probe(&self) -> Option<&Probe> {
        self.probe.as_ref()
    }

    /// Chunk-cache counters: `decodes` counts chunks read and decoded, `hits` those served from
    /// the cache. For HDF5 they are the file's (the chunked electrodes-table columns read while
    /// opening count too; contiguous data is read without chunks); for NWB-Zarr, the data's.
    #[must_use]
    pub fn cache_stats(&self) -> CacheStats {
        self.data.cache_stats()
    }

    /// Writes the stored values of a checked request into `out` (little-endian, channel-major).
    fn stored_into(&self, request: &ReadRequest<'_>, out: &mut [u8]) -> dspk_core::Result<()> {
        match &self.data {
            Data::Contiguous(raw) => raw.read_stored(request.channels(), request.samples(), out),
            Data::Hdf5(data) => scatter(request, out, |s, c, rows| data.read_rows(s, c, rows)),
            Data::Zarr(data) => scatter(request, out, |s, c, rows| data.read_rows(s, c, rows)),
        }
    }
}

/// Reads the rows of a checked request with `read` (samples, the columns from the lowest to the
/// highest requested channel, row-major output) and writes the requested channels into `out`
/// (little-endian, channel-major).
fn scatter(
    request: &ReadRequest<'_>,
    out: &mut [u8],
    read: impl FnOnce(Range<u64>, Range<usize>, &mut [i16]) -> Result<()>,
) -> dspk_core::Result<()> {
    let n = request.samples_per_channel();
    let channels = request.channels();
    let (Some(&first), Some(&last)) = (channels.iter().min(), channels.iter().max()) else {
        return Ok(());
    };
    if n == 0 {
        return Ok(());
    }
    let width = last - first + 1;
    let mut rows = vec![0i16; n * width];
    read(request.samples(), first..last + 1, &mut rows)?;
    for (k, &channel) in channels.iter().enumerate() {
        let out = &mut out[k * n * 2..(k + 1) * n * 2];
        let column = channel - first;
        for (s, bytes) in out.chunks_exact_mut(2).enumerate() {
            bytes.copy_from_slice(&rows[s * width + column].to_le_bytes());
        }
    }
    Ok(())
}

impl RecordingSource for NwbRecording {
    fn info(&self) -> &RecordingInfo {
        &self.info
    }

    fn fill_stored(&self, request: &ReadRequest<'_>, out: &mut [u8]) -> dspk_core::Result<()> {
        self.stored_into(request, out)
    }

    fn fill_scaled(&self, request: &ReadRequest<'_>, out: &mut [f32]) -> dspk_core::Result<()> {
        let n = request.samples_per_channel();
        if n == 0 {
            return Ok(());
        }
        let mut stored = vec![0u8; out.len() * 2];
        self.stored_into(request, &mut stored)?;
        for ((&channel, stored), out) in request
            .channels()
            .iter()
            .zip(stored.chunks_exact(n * 2))
            .zip(out.chunks_exact_mut(n))
        {
            let info = &self.info.channels[channel];
            SampleFormat::I16.scale_into(stored, info.gain, info.offset, out);
        }
        Ok(())
    }

    fn can_read_stored(&self) -> bool {
        true
    }
}

/// What [`read_series`] gathers from the metadata, before the data is opened.
struct SeriesParts {
    data_path: String,
    num_samples: u64,
    conversion: f64,
    offset: f64,
    channel_conversion: Option<Vec<f64>>,
    unit: Option<String>,
    rate: SampleRate,
    start: RationalTime,
    names: Vec<String>,
    probe: Option<Probe>,
}

/// Reads everything about series `name` but the samples.
fn read_series(tree: &dyn Tree, name: &str) -> Result<SeriesParts> {
    let file = tree.file();
    let series = list_series(tree)?;
    if !series.iter().any(|s| s == name) {
        return Err(Error::missing(
            file,
            format!(
                "ElectricalSeries `{name}` in `/acquisition` (it has: {})",
                if series.is_empty() {
                    "none".to_string()
                } else {
                    series.join(", ")
                }
            ),
        ));
    }
    let base = format!("/acquisition/{name}");
    let data_path = format!("{base}/data");
    if !tree.exists(&data_path)? {
        return Err(Error::missing(file, format!("`{data_path}`")));
    }
    let shape = tree.shape(&data_path)?;
    let [num_samples, num_channels] = shape[..] else {
        return Err(Error::invalid(
            file,
            format!("`{data_path}` has shape {shape:?}, expected [samples, channels]"),
        ));
    };
    if num_channels == 0 || num_channels > MAX_CHANNELS {
        return Err(Error::invalid(
            file,
            format!("`{data_path}` has {num_channels} channels (1 to {MAX_CHANNELS} supported)"),
        ));
    }
    let n = num_channels as usize;
    let conversion = finite_attr(tree, &data_path, "conversion", 1.0)?;
    let offset = finite_attr(tree, &data_path, "offset", 0.0)?;
    let unit = tree.attr_string(&data_path, "unit")?;

    let cc_path = format!("{base}/channel_conversion");
    let channel_conversion = if tree.exists(&cc_path)? {
        let values = exact_f64s(tree, &cc_path, num_channels)?;
        if let Some((c, v)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(Error::invalid(
                file,
                format!("`{cc_path}`[{c}] is {v}, not a finite factor"),
            ));
        }
        Some(values)
    } else {
        None
    };

    let (rate, start) = read_timing(tree, &base, num_samples)?;

    let electrodes_path = format!("{base}/electrodes");
    if !tree.exists(&electrodes_path)? {
        return Err(Error::missing(file, format!("`{electrodes_path}`")));
    }
    let electrodes = exact_i64s(tree, &electrodes_path, num_channels)?;
    match tree.attr_reference(&electrodes_path, "table", ELECTRODES_TABLE)? {
        Some(target) if target.trim_end_matches('/') == ELECTRODES_TABLE => {}
        Some(target) => {
            return Err(Error::unsupported(
                file,
                format!("`{electrodes_path}` refers to table `{target}`, not `{ELECTRODES_TABLE}`"),
            ));
        }
        None => {
            return Err(Error::missing(
                file,
                format!("the `table` attribute of `{electrodes_path}`"),
            ));
        }
    }
    let (names, probe) = read_electrodes(tree, &electrodes, name)?;
    debug_assert_eq!(names.len(), n);
    Ok(SeriesParts {
        data_path,
        num_samples,
        conversion,
        offset,
        channel_conversion,
        unit,
        rate,
        start,
        names,
        probe,
    })
}

/// A numeric attribute that must be finite, `default` if absent.
fn finite_attr(tree: &dyn Tree, object: &str, name: &str, default: f64) -> Result<f64> {
    let value = tree.attr_f64(object, name)?.unwrap_or(default);
    if value.is_finite() {
        Ok(value)
    } else {
        Err(Error::invalid(
            tree.file(),
            format!("attribute `{name}` of `{object}` is {value}, not a finite number"),
        ))
    }
}

/// A float dataset that must have exactly `n` elements.
fn exact_f64s(tree: &dyn Tree, dataset: &str, n: u64) -> Result<Vec<f64>> {
    check_length(tree, dataset, n)?;
    tree.f64s(dataset, n)
}

/// An integer dataset that must have exactly `n` elements.
fn exact_i64s(tree: &dyn Tree, dataset: &str, n: u64) -> Result<Vec<i64>> {
    check_length(tree, dataset, n)?;
    tree.i64s(dataset, n)
}

/// Checks that `dataset` is one-dimensional with `n` elements.
fn check_length(tree: &dyn Tree, dataset: &str, n: u64) -> Result<()> {
    let shape = tree.shape(dataset)?;
    if shape != [n] {
        return Err(Error::invalid(
            tree.file(),
            format!("`{dataset}` has shape {shape:?}, expected [{n}] (one per channel or row)"),
        ));
    }
    Ok(())
}

/// The rate and start time: `starting_time` + `rate`, or uniform `timestamps`.
fn read_timing(
    tree: &dyn Tree,
    base: &str,
    num_samples: u64,
) -> Result<(SampleRate, RationalTime)> {
    let file = tree.file();
    let starting = format!("{base}/starting_time");
    if tree.exists(&starting)? {
        let value = tree.f64s(&starting, 1)?;
        let [start] = value[..] else {
            return Err(Error::invalid(
                file,
                format!("`{starting}` holds {} values, expected one", value.len()),
            ));
        };
        let Some(rate) = tree.attr_f64(&starting, "rate")? else {
            return Err(Error::missing(
                file,
                format!("the `rate` attribute of `{starting}`"),
            ));
        };
        return Ok((exact_rate(file, rate)?, time_from_secs(file, start)?));
    }
    let stamps = format!("{base}/timestamps");
    if !tree.exists(&stamps)? {
        return Err(Error::missing(
            file,
            format!("`{starting}` or `{base}/timestamps`"),
        ));
    }
    check_length(tree, &stamps, num_samples)?;
    let (first, rate) = rate_from_timestamps(file, &stamps, num_samples, |range| {
        tree.f64_range(&stamps, range)
    })?;
    Ok((rate, time_from_secs(file, first)?))
}

/// The first timestamp and the rate of uniformly spaced timestamps (`n` values, read in blocks
/// by `read`): rate = `(n - 1) / (last - first)`, rounded to µHz, and every step within
/// [`RATE_TOLERANCE`] (relative) of `1 / rate`.
fn rate_from_timestamps(
    file: &Path,
    dataset: &str,
    n: u64,
    mut read: impl FnMut(Range<u64>) -> Result<Vec<f64>>,
) -> Result<(f64, SampleRate)> {
    if n < 2 {
        return Err(Error::invalid(
            file,
            format!("`{dataset}` has {n} values: a rate needs at least two"),
        ));
    }
    let first_value = read(0..1)?;
    let last_value = read(n - 1..n)?;
    let (Some(&first), Some(&last)) = (first_value.first(), last_value.first()) else {
        return Err(Error::invalid(file, format!("`{dataset}` is empty")));
    };
    let step = (last - first) / (n - 1) as f64;
    if !(step.is_finite() && step > 0.0) {
        return Err(Error::invalid(
            file,
            format!("`{dataset}` runs from {first} to {last}: no positive rate"),
        ));
    }
    let mut previous = first;
    let mut start = 0;
    while start < n {
        let end = (start + TIMESTAMP_BLOCK).min(n);
        let block = read(start..end)?;
        if block.len() as u64 != end - start {
            return Err(Error::invalid(
                file,
                format!("`{dataset}` gave {} values for {start}..{end}", block.len()),
            ));
        }
        for (i, &t) in block.iter().enumerate() {
            let index = start + i as u64;
            if index > 0 && ((t - previous) - step).abs() > RATE_TOLERANCE * step {
                return Err(Error::invalid(
                    file,
                    format!(
                        "`{dataset}` is not uniformly spaced: step {} at sample {index} differs \
                         from the mean step {step} by more than {RATE_TOLERANCE} (relative)",
                        t - previous
                    ),
                ));
            }
            previous = t;
        }
        start = end;
    }
    let micro_hz = (1e6 / step).round();
    if !(micro_hz >= 1.0 && micro_hz < u64::MAX as f64) {
        return Err(Error::invalid(
            file,
            format!("`{dataset}` gives a rate of {} Hz", 1.0 / step),
        ));
    }
    let rate = SampleRate::new(micro_hz as u64, 1_000_000).map_err(|e| Error::core(file, e))?;
    Ok((first, rate))
}

/// A rate stored as `f64`, kept exact through its shortest decimal form (`30000.0` ->
/// 30000 Hz, `30000.12` -> 750003/25 Hz).
fn exact_rate(file: &Path, rate: f64) -> Result<SampleRate> {
    if !(rate.is_finite() && rate > 0.0) {
        return Err(Error::invalid(
            file,
            format!("the sample rate is {rate}, not a positive number"),
        ));
    }
    if let Ok(exact) = format!("{rate}").parse::<SampleRate>() {
        return Ok(exact);
    }
    // Too many digits for an exact decimal: keep µHz.
    SampleRate::new((rate * 1e6).round().max(1.0) as u64, 1_000_000)
        .map_err(|e| Error::core(file, e))
}

/// Seconds stored as `f64` as an exact time: its shortest decimal form when that fits,
/// else rounded to nanoseconds.
fn time_from_secs(file: &Path, secs: f64) -> Result<RationalTime> {
    if !secs.is_finite() || secs.abs() > 1e12 {
        return Err(Error::invalid(file, format!("the start time is {secs} s")));
    }
    let text = format!("{}", secs.abs());
    let (whole, frac) = text.split_once('.').unwrap_or((&text, ""));
    let sign = if secs < 0.0 { -1 } else { 1 };
    if frac.len() <= 9
        && let Ok(num) = format!("{whole}{frac}").parse::<i64>()
    {
        return RationalTime::new(sign * num, 10u64.pow(frac.len() as u32))
            .map_err(|e| Error::core(file, e));
    }
    RationalTime::new((secs * 1e9).round() as i64, 1_000_000_000).map_err(|e| Error::core(file, e))
}

/// The channel names and the probe of the electrodes `rows` of the electrodes table.
fn read_electrodes(
    tree: &dyn Tree,
    rows: &[i64],
    series: &str,
) -> Result<(Vec<String>, Option<Probe>)> {
    let file = tree.file();
    let table = ELECTRODES_TABLE;
    let id_path = format!("{table}/id");
    if !tree.exists(&id_path)? {
        return Err(Error::missing(file, format!("`{id_path}`")));
    }
    let shape = tree.shape(&id_path)?;
    let [num_rows] = shape[..] else {
        return Err(Error::invalid(
            file,
            format!("`{id_path}` has shape {shape:?}, expected [rows]"),
        ));
    };
    if num_rows > MAX_TABLE_ROWS {
        return Err(Error::invalid(
            file,
            format!(
                "the electrodes table has {num_rows} rows (at most {MAX_TABLE_ROWS} supported)"
            ),
        ));
    }
    let ids = tree.i64s(&id_path, num_rows)?;
    let rows: Vec<usize> = rows
        .iter()
        .enumerate()
        .map(|(c, &row)| {
            usize::try_from(row)
                .ok()
                .filter(|&r| (r as u64) < num_rows)
                .ok_or_else(|| {
                    Error::invalid(
                        file,
                        format!(
                            "`/acquisition/{series}/electrodes`[{c}] is {row}, outside the \
                             electrodes table's {num_rows} rows"
                        ),
                    )
                })
        })
        .collect::<Result<_>>()?;
    let column = |name: &str| format!("{table}/{name}");
    let names: Vec<String> = if tree.exists(&column("channel_name"))? {
        let names = exact_strings(tree, &column("channel_name"), num_rows)?;
        rows.iter().map(|&r| names[r].clone()).collect()
    } else {
        rows.iter().map(|&r| ids[r].to_string()).collect()
    };
    let coordinates = if tree.exists(&column("rel_x"))? && tree.exists(&column("rel_y"))? {
        Some(("rel_x", "rel_y"))
    } else if tree.exists(&column("x"))? && tree.exists(&column("y"))? {
        Some(("x", "y"))
    } else {
        None
    };
    let Some((x_name, y_name)) = coordinates else {
        return Ok((names, None));
    };
    let x = exact_f64s(tree, &column(x_name), num_rows)?;
    let y = exact_f64s(tree, &column(y_name), num_rows)?;
    if rows
        .iter()
        .any(|&r| !(x[r].is_finite() && y[r].is_finite()))
    {
        return Ok((names, None));
    }
    let groups = if tree.exists(&column("group_name"))? {
        Some(exact_strings(tree, &column("group_name"), num_rows)?)
    } else {
        None
    };
    let mut shanks: Vec<&str> = Vec::new();
    let contacts = rows
        .iter()
        .enumerate()
        .map(|(c, &r)| {
            let shank = groups.as_ref().map_or(0, |groups| {
                let group = groups[r].as_str();
                shanks.iter().position(|&g| g == group).unwrap_or_else(|| {
                    shanks.push(group);
                    shanks.len() - 1
                })
            });
            Contact {
                id: names[c].clone(),
                position: [x[r], y[r]],
                shank: u32::try_from(shank).unwrap_or(u32::MAX),
                device_channel: Some(c),
            }
        })
        .collect();
    let probe = Probe::from_file(file, format!("{series} electrodes"), contacts)?;
    Ok((names, Some(probe)))
}

/// A string dataset that must have exactly `n` elements.
fn exact_strings(tree: &dyn Tree, dataset: &str, n: u64) -> Result<Vec<String>> {
    check_length(tree, dataset, n)?;
    let values = tree.strings(dataset, n)?;
    if values.len() as u64 != n {
        return Err(Error::invalid(
            tree.file(),
            format!("`{dataset}` holds {} strings, expected {n}", values.len()),
        ));
    }
    Ok(values)
}

/// NWB files (`.nwb`, HDF5) and NWB-Zarr stores (`.nwb.zarr` folders, or Zarr groups whose root
/// `.zattrs` has NWB's `neurodata_type`/`namespace`), for [`dspk_io::open`]; opens the first
/// `ElectricalSeries` ([`NwbRecording::open`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct NwbFormat;

impl Format for NwbFormat {
    fn name(&self) -> &str {
        "nwb"
    }

    fn detect(&self, path: &Path) -> Detection {
        if path.is_dir() {
            let attrs = dspk_io::read_small_file(&path.join(".zattrs"), dspk_io::METADATA_LIMIT)
                .ok()
                .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok());
            let nwb = attrs.is_some_and(|attrs| {
                attrs.get("neurodata_type").and_then(|v| v.as_str()) == Some("NWBFile")
                    || attrs.get("namespace").and_then(|v| v.as_str()) == Some("core")
                        && attrs.get("nwb_version").is_some()
            });
            return if nwb {
                Detection::ByMetadata
            } else if path.to_string_lossy().ends_with(".nwb.zarr") {
                Detection::ByName
            } else {
                Detection::No
            };
        }
        if !path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("nwb"))
        {
            return Detection::No;
        }
        let mut signature = [0u8; 8];
        let signed = dspk_io::DataFile::open(path)
            .and_then(|file| file.read_exact_at(0, &mut signature))
            .is_ok()
            && signature == HDF5_SIGNATURE;
        if signed {
            Detection::ByMetadata
        } else {
            Detection::ByName
        }
    }

    fn open(&self, path: &Path) -> dspk_io::Result<Box<dyn RecordingSource>> {
        Ok(Box::new(NwbRecording::open(path)?))
    }
}
