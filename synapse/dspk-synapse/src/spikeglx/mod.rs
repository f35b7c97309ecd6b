//! SpikeGLX recordings (`.bin` + `.meta`).
//!
//! A SpikeGLX run writes one headerless int16 little-endian `.bin` per stream, samples
//! interleaved (`[t][column]`), beside a `.meta` text file of `key=value` lines that says
//! what each column is (SpikeGLX Metadata guide, versions 2.0–3.0):
//!
//! - imec probe streams `*.imecN.ap.bin` / `*.imecN.lf.bin`: AP or LF channels then the `SY0`
//!   sync word;
//! - the NI-DAQ stream `*.nidq.bin`: MN, MA, XA channels then XD digital words.
//!
//! [`SpikeGlxRecording`] reads the analog columns as a [`RecordingSource`] (µV for
//! electrodes, V for NI auxiliary inputs) and keeps the `SY0`/`XD` words apart
//! ([`SpikeGlxRecording::read_sync`], [`SpikeGlxRecording::read_digital`]): they are bit
//! fields, not signals. [`Meta`] parses the metadata, [`Meta::stream`] derives each column's
//! type and gain (through `snsSaveChanSubset`, so subsets of channels get the right
//! `~imroTbl` rows), [`Meta::probe`] the geometry. [`SpikeGlxFormat`] is the format for
//! `dspk_io::open`. The mtscomp reader ([`crate::mtscomp`]) uses the same metadata.

mod geometry;
mod meta;
mod stream;

use std::ops::Range;
use std::path::{Path, PathBuf};

use dspk_core::{
    ChannelInfo, ConcurrentReads, ReadRequest, RecordingInfo, RecordingSource, SampleFormat,
};
use dspk_io::{ByteOrder, Detection, Format, RawRecording, RawSpec, SampleOrder};

pub use meta::{MAX_CHANNELS, Meta};
pub use stream::{Column, ColumnKind, Stream, StreamKind};

use crate::probe::Probe;
use crate::{Error, Result};

/// The `.meta` path of a data file (`x.ap.bin` / `x.ap.cbin` -> `x.ap.meta`).
#[must_use]
pub fn meta_path(data_path: &Path) -> PathBuf {
    data_path.with_extension("meta")
}

/// Reads the `.meta` beside `data_path` and derives its stream and probe.
pub(crate) fn read_companion_meta(data_path: &Path) -> Result<(Meta, Stream, Option<Probe>)> {
    let meta_path = meta_path(data_path);
    if !meta_path.is_file() {
        return Err(Error::missing(
            data_path,
            format!("its SpikeGLX metadata file {}", meta_path.display()),
        ));
    }
    let meta = Meta::read(&meta_path)?;
    let stream = meta.stream()?;
    let probe = meta.probe(&stream)?;
    Ok((meta, stream, probe))
}

/// The recording's description: the analog columns, the rate, the first sample's time and
/// the metadata's scalar keys (`spikeglx.<key>`).
pub(crate) fn recording_info(
    data_path: &Path,
    meta: &Meta,
    stream: &Stream,
    num_samples: u64,
) -> Result<RecordingInfo> {
    let mut info = RecordingInfo::new(
        stream.analog_channels(),
        num_samples,
        stream.sample_rate,
        SampleFormat::I16,
    )
    .map_err(|e| Error::core(data_path, e))?;
    info.start_time = stream.sample_rate.time_of_sample(stream.first_sample);
    for (key, value) in meta.entries() {
        // Tables (`~imroTbl`, ...) are long and parsed elsewhere; keep the scalar keys.
        if !value.starts_with('(') {
            info.metadata
                .insert(format!("spikeglx.{key}"), value.to_string());
        }
    }
    Ok(info)
}

/// A SpikeGLX stream (`.bin` + `.meta`): the analog columns as a recording, the sync and
/// digital words apart, and the probe geometry.
///
/// The counterpart of neo's `SpikeGLXRawIO` / SpikeInterface's `read_spikeglx` (stream
/// `imecN.ap` without its `-SYNC` part), with the gain difference described at
/// [`Meta::stream`].
///
/// `read_stored` returns the int16 values untouched; `read` gives `stored * gain` with the
/// gains of [`Meta::stream`] (the SpikeGLX formula with the acquisition channel's
/// `~imroTbl` gain). Channel names are SpikeGLX's (`AP0`, `LF12`, `MN3`).
#[derive(Debug)]
pub struct SpikeGlxRecording {
    info: RecordingInfo,
    /// All saved columns (analog ones first, words after).
    raw: RawRecording,
    meta: Meta,
    stream: Stream,
    probe: Option<Probe>,
}

impl SpikeGlxRecording {
    /// Opens a SpikeGLX stream from its `.bin` (or its `.meta`; the other sits beside it with
    /// the same stem), or from a run folder (`*_g0/`) or probe folder (`*_g0_imec0/`) that
    /// holds one `ap` stream ([`folder_stream`]).
    ///
    /// # Errors
    ///
    /// [`dspk_io::Error::Missing`] if the `.meta` or the `.bin` is not there; the errors of
    /// [`Meta::stream`] and [`Meta::probe`]; [`dspk_io::Error::Truncated`] if the `.bin` is shorter
    /// than `fileSizeBytes`; [`dspk_io::Error::Invalid`] if it is longer, or if `fileSizeBytes` is not
    /// a whole number of samples of `nSavedChans` int16 values; [`Error::Io`] if the file
    /// cannot be read; for a folder, the errors of [`folder_stream`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let data_path = if path.is_dir() {
            folder_stream(path)?
        } else if has_extension(path, "meta") {
            path.with_extension("bin")
        } else {
            path.to_path_buf()
        };
        let (meta, stream, probe) = read_companion_meta(&data_path)?;
        if !data_path.is_file() {
            return Err(Error::missing(
                meta.path(),
                format!("its data file {}", data_path.display()),
            ));
        }
        let actual = dspk_io::DataFile::open(&data_path)?.len();
        let frame = stream.frame_bytes();
        let num_samples = match stream.file_size_bytes {
            Some(stated) => {
                if stated % frame != 0 {
                    return Err(Error::invalid(
                        meta.path(),
                        format!(
                            "`fileSizeBytes={stated}` is not a whole number of samples of \
                             {} int16 channels",
                            stream.columns.len()
                        ),
                    ));
                }
                if actual < stated {
                    return Err(Error::Io(dspk_io::Error::Truncated {
                        path: data_path,
                        what: format!("`fileSizeBytes` in {}", meta.path().display()),
                        needed: stated,
                        actual,
                    }));
                }
                if actual > stated {
                    return Err(Error::invalid(
                        &data_path,
                        format!(
                            "the file has {actual} bytes, `fileSizeBytes` in {} says {stated}",
                            meta.path().display()
                        ),
                    ));
                }
                stated / frame
            }
            None => {
                if actual % frame != 0 {
                    return Err(Error::Io(dspk_io::Error::Truncated {
                        path: data_path,
                        what: format!("whole samples of {} int16 channels", stream.columns.len()),
                        needed: actual.div_ceil(frame) * frame,
                        actual,
                    }));
                }
                actual / frame
            }
        };
        let columns = stream
            .columns
            .iter()
            .map(|c| ChannelInfo::new(c.name.clone(), c.gain, 0.0, c.unit))
            .collect();
        let raw = RawRecording::new(
            &data_path,
            RawSpec {
                channels: columns,
                sample_rate: stream.sample_rate,
                format: SampleFormat::I16,
                byte_order: ByteOrder::Little,
                order: SampleOrder::Interleaved,
                header_bytes: 0,
                num_samples: Some(num_samples),
            },
        )?;
        let info = recording_info(&data_path, &meta, &stream, num_samples)?;
        Ok(Self {
            info,
            raw,
            meta,
            stream,
            probe,
        })
    }

    /// The `.bin` file.
    #[must_use]
    pub fn data_path(&self) -> &Path {
        self.raw.data_path()
    }

    /// The parsed `.meta`.
    #[must_use]
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// Every saved column with its type, acquisition channel and gain.
    #[must_use]
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The probe geometry from the metadata (imec streams with a geometry or shank map), its
    /// contacts wired to this recording's channels.
    #[must_use]
    pub fn probe(&self) -> Option<&Probe> {
        self.probe.as_ref()
    }

    /// The number of digital words saved after the analog columns (`SY0` for imec streams,
    /// the XD words for NI-DAQ).
    #[must_use]
    pub fn num_digital(&self) -> usize {
        self.stream.columns.len() - self.info.num_channels()
    }

    /// Reads digital word `word` (0-based among the words after the analog columns) over
    /// `samples` into `out` (one `u16` of 16 lines per sample).
    ///
    /// # Errors
    ///
    /// [`Error::Argument`] if `word` does not exist or `out` is not `samples` long;
    /// [`dspk_io::Error::Core`] for a range past the end or a failed read.
    pub fn read_digital(&self, word: usize, samples: Range<u64>, out: &mut [u16]) -> Result<()> {
        read_words(
            &self.raw,
            self.data_path(),
            self.info.num_channels(),
            self.num_digital(),
            word,
            samples,
            out,
        )
    }

    /// Reads the imec sync word `SY0` over `samples` into `out` (word 0 of
    /// [`read_digital`](Self::read_digital)).
    ///
    /// # Errors
    ///
    /// [`dspk_io::Error::Missing`] if the stream saved no `SY0` column (NI-DAQ streams, or imec
    /// streams saved without it); otherwise as [`read_digital`](Self::read_digital).
    pub fn read_sync(&self, samples: Range<u64>, out: &mut [u16]) -> Result<()> {
        if !has_sync(&self.stream) {
            return Err(Error::missing(self.data_path(), "the SY0 sync column"));
        }
        self.read_digital(0, samples, out)
    }
}

/// Whether a stream saved the imec `SY0` word.
pub(crate) fn has_sync(stream: &Stream) -> bool {
    stream.columns.iter().any(|c| c.kind == ColumnKind::Sync)
}

/// Reads word `word` of the words after `num_analog` columns of `source` into `out`.
pub(crate) fn read_words(
    source: &dyn RecordingSource,
    path: &Path,
    num_analog: usize,
    num_words: usize,
    word: usize,
    samples: Range<u64>,
    out: &mut [u16],
) -> Result<()> {
    if word >= num_words {
        return Err(Error::Argument(format!(
            "digital word {word} does not exist: the stream has {num_words}"
        )));
    }
    let len = samples.end.saturating_sub(samples.start);
    if out.len() as u64 != len {
        return Err(Error::Argument(format!(
            "the output holds {} values, the range {samples:?} has {len} samples",
            out.len()
        )));
    }
    let mut bytes = vec![0u8; out.len() * 2];
    source
        .read_stored(&[num_analog + word], samples, &mut bytes)
        .map_err(|e| Error::core(path, e))?;
    for (value, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        *value = u16::from_le_bytes([b[0], b[1]]);
    }
    Ok(())
}

impl RecordingSource for SpikeGlxRecording {
    fn info(&self) -> &RecordingInfo {
        &self.info
    }

    fn fill_scaled(&self, request: &ReadRequest<'_>, out: &mut [f32]) -> dspk_core::Result<()> {
        // The analog columns are the raw file's first columns, with the same gains, so a
        // request checked against `info` is valid for `raw`.
        self.raw.fill_scaled(request, out)
    }

    fn fill_stored(&self, request: &ReadRequest<'_>, out: &mut [u8]) -> dspk_core::Result<()> {
        self.raw.fill_stored(request, out)
    }

    fn can_read_stored(&self) -> bool {
        true
    }

    // Concurrent reads and read-ahead hints as the raw file's (same columns, as above).
    fn concurrent_reads(&self) -> ConcurrentReads {
        self.raw.concurrent_reads()
    }

    fn fill_scaled_runs(
        &self,
        request: &ReadRequest<'_>,
        runs: &mut [&mut [f32]],
    ) -> dspk_core::Result<()> {
        self.raw.fill_scaled_runs(request, runs)
    }

    fn fill_stored_runs(
        &self,
        request: &ReadRequest<'_>,
        runs: &mut [&mut [u8]],
    ) -> dspk_core::Result<()> {
        self.raw.fill_stored_runs(request, runs)
    }

    fn will_read(&self, channels: &[usize], samples: std::ops::Range<u64>) {
        self.raw.will_read(channels, samples);
    }
}

/// Whether `path`'s extension is `ext` (ASCII case-insensitive).
pub(crate) fn has_extension(path: &Path, ext: &str) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case(ext))
}

/// The SpikeGLX streams (`.bin` files with their `.meta` beside them) in `folder` and in its
/// subfolders one level down (a run folder holds probe folders), sorted by path.
fn streams_in(folder: &Path) -> Vec<PathBuf> {
    let entries = |dir: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default()
    };
    let mut streams = Vec::new();
    for entry in entries(folder) {
        let files = if entry.is_dir() {
            entries(&entry)
        } else {
            vec![entry]
        };
        streams.extend(
            files
                .into_iter()
                .filter(|f| has_extension(f, "bin") && meta_path(f).is_file()),
        );
    }
    streams.sort();
    streams
}

/// The `.bin` of the stream a run folder (`*_g0/`) or probe folder (`*_g0_imec0/`) holds: its
/// one `ap` stream, or its one stream of any kind when it has no `ap` stream. The streams are
/// looked for in the folder and in its subfolders one level down.
///
/// # Errors
///
/// [`dspk_io::Error::Missing`] if the folder holds no stream (a `.bin` with its `.meta`);
/// [`dspk_io::Error::Invalid`] listing them if it holds several candidates (several probes, or
/// several streams and no `ap` one): open one of them.
pub fn folder_stream(folder: &Path) -> Result<PathBuf> {
    let streams = streams_in(folder);
    let ap: Vec<&PathBuf> = streams
        .iter()
        .filter(|s| has_extension(&s.with_extension(""), "ap"))
        .collect();
    let candidates = if ap.is_empty() {
        streams.iter().collect()
    } else {
        ap
    };
    match candidates.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(Error::missing(
            folder,
            "a SpikeGLX stream (a `.bin` with its `.meta`, in the folder or a probe folder in it)",
        )),
        several => {
            let names: Vec<String> = several
                .iter()
                .map(|s| s.strip_prefix(folder).unwrap_or(s).display().to_string())
                .collect();
            Err(Error::invalid(
                folder,
                format!(
                    "holds {} SpikeGLX streams ({}); open one of them",
                    names.len(),
                    names.join(", ")
                ),
            ))
        }
    }
}

/// Whether a file name's stem ends in a SpikeGLX stream suffix (`.ap`, `.lf`, `.nidq`).
fn names_stream(path: &Path) -> bool {
    let stem = path.with_extension("");
    ["ap", "lf", "nidq"]
        .iter()
        .any(|suffix| has_extension(&stem, suffix))
}

/// The SpikeGLX format for a [`dspk_io::Registry`]: `*.ap.bin`, `*.lf.bin`, `*.nidq.bin` (or
/// their `.meta`), and run or probe folders holding them, read with [`SpikeGlxRecording`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SpikeGlxFormat;

impl Format for SpikeGlxFormat {
    fn name(&self) -> &str {
        "spikeglx"
    }

    /// [`Detection::ByMetadata`] for a `.bin` with its `.meta` beside it (or a `.meta` with
    /// its `.bin`); [`Detection::ByName`] for a stream-named `.bin` without one (opening it
    /// then says the `.meta` is missing), and for a folder holding streams, in it or in its
    /// subfolders (a run or probe folder; a format that knows the folder by its metadata wins).
    fn detect(&self, path: &Path) -> Detection {
        if path.is_dir() {
            if streams_in(path).is_empty() {
                Detection::No
            } else {
                Detection::ByName
            }
        } else if has_extension(path, "bin") {
            if meta_path(path).is_file() {
                Detection::ByMetadata
            } else if names_stream(path) {
                Detection::ByName
            } else {
                Detection::No
            }
        } else if has_extension(path, "meta") && path.with_extension("bin").is_file() {
            Detection::ByMetadata
        } else {
            Detection::No
        }
    }

    fn open(&self, path: &Path) -> dspk_io::Result<Box<dyn RecordingSource>> {
        Ok(Box::new(SpikeGlxRecording::open(path)?))
    }
}
