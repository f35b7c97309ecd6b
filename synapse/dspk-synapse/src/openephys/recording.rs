//! One stream of an Open Ephys binary recording as a [`RecordingSource`].

use std::path::{Path, PathBuf};

use dspk_core::{
    ChannelInfo, ConcurrentReads, RationalTime, ReadRequest, RecordingInfo, RecordingSource,
    SampleFormat,
};
use dspk_io::{
    ByteOrder, DataFile, ElementKind, METADATA_LIMIT, NpyHeader, RawRecording, RawSpec,
    SampleOrder, read_small_file,
};

use super::oebin::{ContinuousStream, Oebin};
use crate::{Error, Result};

/// The name of the JSON file that describes a recording.
pub const OEBIN_FILE: &str = "structure.oebin";

/// The suffix of the stream that holds a continuous entry's ADC channels (as neo names it).
const ADC_SUFFIX: &str = "_ADC";

/// How deep below a given folder `structure.oebin` is looked for (session / Record Node /
/// experiment / recording).
const SEARCH_DEPTH: usize = 3;

/// One stream of an Open Ephys binary recording (GUI 0.6 and later): some columns of a
/// `continuous.dat` (int16, interleaved), scaled by each channel's `bit_volts` into the unit
/// `structure.oebin` states, starting at the time of the first entry of `sample_numbers.npy`.
///
/// A `continuous` entry of `structure.oebin` gives up to two streams, as neo's
/// `OpenEphysBinaryRawIO` splits it: `<folder>` with the channels whose name does not start
/// with `ADC` (headstage channels, µV) and `<folder>_ADC` with the `ADC*` channels (V), each
/// channel keeping its own unit. neo prefixes the Record Node's name (`"Record Node
/// 101#Acquisition_Board-100.Rhythm Data"`); these names are the part after `#`.
#[derive(Debug)]
pub struct OpenEphysRecording {
    info: RecordingInfo,
    raw: RawRecording,
    columns: Vec<usize>,
    name: String,
    first_sample_number: i64,
}

/// The stream names of a continuous entry: the non-ADC part (if any) and the ADC part (if any),
/// with the columns of each.
fn split_stream(stream: &ContinuousStream) -> Vec<(String, Vec<usize>)> {
    let (adc, main): (Vec<usize>, Vec<usize>) = (0..stream.channels.len())
        .partition(|&c| stream.channels[c].channel_name.starts_with("ADC"));
    let mut streams = Vec::new();
    if !main.is_empty() {
        streams.push((stream.folder_name.clone(), main));
    }
    if !adc.is_empty() {
        streams.push((format!("{}{ADC_SUFFIX}", stream.folder_name), adc));
    }
    streams
}

/// Finds the `structure.oebin` of `path`: the file itself, or one in the folder, or the only
/// one up to three folders below (a Record Node or experiment folder).
///
/// # Errors
///
/// [`dspk_io::Error::Missing`] if there is none; [`dspk_io::Error::Invalid`] if the folder holds several
/// recordings (they are listed, to open one of them).
pub fn find_oebin(path: &Path) -> Result<PathBuf> {
    if path.is_file() {
        return Ok(path.to_path_buf());
    }
    let found = search_oebins(path, SEARCH_DEPTH);
    match found.as_slice() {
        [] => Err(Error::missing(
            path,
            format!("{OEBIN_FILE} (in the folder or up to {SEARCH_DEPTH} folders below)"),
        )),
        [one] => Ok(one.clone()),
        many => Err(Error::invalid(
            path,
            format!(
                "the folder holds {} Open Ephys recordings; open one of them: {}",
                many.len(),
                many.iter()
                    .map(|p| p.parent().unwrap_or(p).display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// The `structure.oebin` files in `folder` or up to `depth` folders below it, sorted.
pub(super) fn search_oebins(folder: &Path, depth: usize) -> Vec<PathBuf> {
    let here = folder.join(OEBIN_FILE);
    if here.is_file() {
        return vec![here];
    }
    if depth == 0 {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    let mut subfolders: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    subfolders.sort();
    subfolders
        .iter()
        .flat_map(|sub| search_oebins(sub, depth - 1))
        .collect()
}

/// Reads and parses the `structure.oebin` of `path` (see [`find_oebin`]).
fn read_oebin(path: &Path) -> Result<(PathBuf, Oebin)> {
    let oebin_path = find_oebin(path)?;
    let bytes = read_small_file(&oebin_path, METADATA_LIMIT)?;
    let oebin = Oebin::parse(&bytes, &oebin_path)?;
    Ok((oebin_path, oebin))
}

impl OpenEphysRecording {
    /// The names of the streams of the recording at `path` (a `structure.oebin`, the recording
    /// folder holding it, or a Record Node / experiment folder holding exactly one), in file
    /// order: for each continuous entry its folder name, then `<folder>_ADC` if it has ADC
    /// channels.
    ///
    /// # Errors
    ///
    /// As [`find_oebin`], [`read_small_file`] and [`Oebin::parse`].
    pub fn streams(path: impl AsRef<Path>) -> Result<Vec<String>> {
        let (_, oebin) = read_oebin(path.as_ref())?;
        Ok(oebin
            .continuous
            .iter()
            .flat_map(split_stream)
            .map(|(name, _)| name)
            .collect())
    }

    /// Opens the first stream (see [`streams`](Self::streams)): the headstage channels of the
    /// first continuous entry, or its ADC channels if it has no others.
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open).
    pub fn open_first(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let (oebin_path, oebin) = read_oebin(path)?;
        let first = oebin
            .continuous
            .first()
            .and_then(|s| split_stream(s).into_iter().next())
            .map(|(name, _)| name)
            .ok_or_else(|| Error::invalid(&oebin_path, "the recording has no continuous stream"))?;
        Self::open_parsed(&oebin_path, &oebin, &first)
    }

    /// Opens the stream named `stream` (one of [`streams`](Self::streams)) of the recording at
    /// `path`.
    ///
    /// Checks that `continuous.dat` holds a whole number of frames of all the entry's
    /// channels, and that `sample_numbers.npy` is a 1-D int64 array with one entry per frame;
    /// its first entry over the sample rate is the start time.
    ///
    /// # Errors
    ///
    /// [`dspk_io::Error::Invalid`] for an unknown stream name or a `sample_numbers.npy` that disagrees;
    /// [`dspk_io::Error::Missing`] for a missing `continuous.dat` or `sample_numbers.npy`;
    /// [`Error::Io`] (truncated) for a `continuous.dat` that ends inside a frame; and as
    /// [`find_oebin`] and [`Oebin::parse`].
    pub fn open(path: impl AsRef<Path>, stream: &str) -> Result<Self> {
        let (oebin_path, oebin) = read_oebin(path.as_ref())?;
        Self::open_parsed(&oebin_path, &oebin, stream)
    }

    fn open_parsed(oebin_path: &Path, oebin: &Oebin, stream: &str) -> Result<Self> {
        let found = oebin.continuous.iter().find_map(|entry| {
            split_stream(entry)
                .into_iter()
                .find(|(name, _)| name == stream)
                .map(|(_, columns)| (entry, columns))
        });
        let Some((entry, columns)) = found else {
            let known: Vec<String> = oebin
                .continuous
                .iter()
                .flat_map(split_stream)
                .map(|(name, _)| name)
                .collect();
            return Err(Error::invalid(
                oebin_path,
                format!(
                    "no stream `{stream}` (streams: {})",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ),
            ));
        };
        let recording_folder = oebin_path.parent().unwrap_or_else(|| Path::new(""));
        let folder = recording_folder.join("continuous").join(&entry.folder_name);
        let dat_path = folder.join("continuous.dat");
        if !dat_path.is_file() {
            return Err(Error::missing(&folder, "continuous.dat"));
        }
        let all_channels: Vec<ChannelInfo> = entry
            .channels
            .iter()
            .map(|c| ChannelInfo::new(&c.channel_name, c.bit_volts, 0.0, &c.units))
            .collect();
        let raw = RawRecording::new(
            &dat_path,
            RawSpec {
                channels: all_channels.clone(),
                sample_rate: entry.sample_rate,
                format: SampleFormat::I16,
                byte_order: ByteOrder::Little,
                order: SampleOrder::Interleaved,
                header_bytes: 0,
                num_samples: None,
            },
        )?;
        let num_samples = raw.info().num_samples;
        let first_sample_number =
            read_first_sample_number(&folder.join("sample_numbers.npy"), num_samples)?;
        let channels: Vec<ChannelInfo> = columns.iter().map(|&c| all_channels[c].clone()).collect();
        let mut info =
            RecordingInfo::new(channels, num_samples, entry.sample_rate, SampleFormat::I16)
                .map_err(|e| Error::core(oebin_path, e))?;
        info.start_time = start_time(oebin_path, first_sample_number, entry)?;
        let metadata = [
            ("format", "openephys-binary".to_string()),
            ("gui_version", oebin.gui_version.clone()),
            ("stream", stream.to_string()),
            ("stream_name", entry.stream_name.clone()),
            ("source_processor_name", entry.source_processor_name.clone()),
            ("first_sample_number", first_sample_number.to_string()),
            ("data_file", dat_path.display().to_string()),
        ];
        info.metadata
            .extend(metadata.into_iter().map(|(k, v)| (k.to_string(), v)));
        Ok(Self {
            info,
            raw,
            columns,
            name: stream.to_string(),
            first_sample_number,
        })
    }

    /// The stream's name (a folder name, `_ADC` appended for the ADC stream).
    #[must_use]
    pub fn stream_name(&self) -> &str {
        &self.name
    }

    /// The columns of `continuous.dat` this stream reads, in channel order.
    #[must_use]
    pub fn columns(&self) -> &[usize] {
        &self.columns
    }

    /// The first entry of `sample_numbers.npy` (the acquisition board's sample counter at the
    /// first frame; `0` for an empty recording).
    #[must_use]
    pub fn first_sample_number(&self) -> i64 {
        self.first_sample_number
    }

    /// The `continuous.dat` file.
    #[must_use]
    pub fn data_path(&self) -> &Path {
        self.raw.data_path()
    }
}

/// `first / sample_rate` seconds, exactly.
fn start_time(path: &Path, first: i64, entry: &ContinuousStream) -> Result<RationalTime> {
    let rate = entry.sample_rate;
    let num = i64::try_from(rate.denominator())
        .ok()
        .and_then(|den| first.checked_mul(den));
    let time = num.map(|num| RationalTime::new(num, rate.numerator()));
    match time {
        Some(Ok(time)) => Ok(time),
        _ => Err(Error::invalid(
            path,
            format!("start time of sample number {first} at {rate} does not fit a 64-bit fraction"),
        )),
    }
}

/// Checks `sample_numbers.npy` (1-D int64, `num_samples` long) and returns its first entry
/// (`0` when empty), reading only the header and that entry.
fn read_first_sample_number(path: &Path, num_samples: u64) -> Result<i64> {
    if !path.is_file() {
        let folder = path.parent().unwrap_or_else(|| Path::new(""));
        return Err(Error::missing(folder, "sample_numbers.npy"));
    }
    let file = DataFile::open(path)?;
    let mut first = [0u8; 12];
    let available = file.len().min(12) as usize;
    file.read_exact_at(0, &mut first[..available])?;
    let header_len = NpyHeader::header_len(&first[..available], path)?;
    if header_len as u64 > file.len() {
        return Err(Error::Io(dspk_io::Error::Truncated {
            path: path.to_path_buf(),
            what: "the .npy header".into(),
            needed: header_len as u64,
            actual: file.len(),
        }));
    }
    // Bounded by NpyHeader's 1 MiB limit and by the file's length.
    let mut bytes = vec![0u8; header_len];
    file.read_exact_at(0, &mut bytes)?;
    let header = NpyHeader::parse(&bytes, path)?;
    let is_int64 = header.dtype.kind == ElementKind::Int && header.dtype.size == 8;
    if !is_int64 || header.shape.len() != 1 {
        return Err(Error::invalid(
            path,
            format!(
                "sample numbers must be a 1-D int64 array, found {} of shape {:?}",
                header.dtype, header.shape
            ),
        ));
    }
    if header.shape[0] != num_samples {
        return Err(Error::invalid(
            path,
            format!(
                "{} sample numbers for the {num_samples} frames of continuous.dat",
                header.shape[0]
            ),
        ));
    }
    let needed = header.data_offset + num_samples * 8;
    if needed > file.len() {
        return Err(Error::Io(dspk_io::Error::Truncated {
            path: path.to_path_buf(),
            what: format!("{num_samples} int64 sample numbers"),
            needed,
            actual: file.len(),
        }));
    }
    if num_samples == 0 {
        return Ok(0);
    }
    let mut value = [0u8; 8];
    file.read_exact_at(header.data_offset, &mut value)?;
    Ok(match header.dtype.order {
        ByteOrder::Big => i64::from_be_bytes(value),
        ByteOrder::Little => i64::from_le_bytes(value),
    })
}

impl OpenEphysRecording {
    /// The request's channels as columns of `continuous.dat`.
    fn file_columns(&self, request: &ReadRequest<'_>) -> Vec<usize> {
        request
            .channels()
            .iter()
            .map(|&c| self.columns[c])
            .collect()
    }
}

impl RecordingSource for OpenEphysRecording {
    fn info(&self) -> &RecordingInfo {
        &self.info
    }

    fn fill_scaled(&self, request: &ReadRequest<'_>, out: &mut [f32]) -> dspk_core::Result<()> {
        self.raw
            .read(&self.file_columns(request), request.samples(), out)
    }

    fn fill_stored(&self, request: &ReadRequest<'_>, out: &mut [u8]) -> dspk_core::Result<()> {
        self.raw
            .read_stored(&self.file_columns(request), request.samples(), out)
    }

    fn can_read_stored(&self) -> bool {
        true
    }

    // Concurrent reads and read-ahead hints as the raw file's, on the file's columns.
    fn concurrent_reads(&self) -> ConcurrentReads {
        self.raw.concurrent_reads()
    }

    fn fill_scaled_runs(
        &self,
        request: &ReadRequest<'_>,
        runs: &mut [&mut [f32]],
    ) -> dspk_core::Result<()> {
        let columns = self.file_columns(request);
        let file_request = ReadRequest::new(self.raw.info(), &columns, request.samples())?;
        self.raw.fill_scaled_runs(&file_request, runs)
    }

    fn fill_stored_runs(
        &self,
        request: &ReadRequest<'_>,
        runs: &mut [&mut [u8]],
    ) -> dspk_core::Result<()> {
        let columns = self.file_columns(request);
        let file_request = ReadRequest::new(self.raw.info(), &columns, request.samples())?;
        self.raw.fill_stored_runs(&file_request, runs)
    }

    fn will_read(&self, channels: &[usize], samples: std::ops::Range<u64>) {
        let columns: Vec<usize> = channels
            .iter()
            .filter_map(|&c| self.columns.get(c).copied())
            .collect();
        self.raw.will_read(&columns, samples);
    }
}
