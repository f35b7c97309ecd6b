//! mtscomp-compressed recordings (`.cbin` + `.ch`).
//!
//! mtscomp (the International Brain Laboratory's compressor for SpikeGLX data) cuts the
//! `[samples, channels]` int16 array into chunks of samples, differences each along time
//! (and optionally along channels) and zlib-compresses it into the `.cbin`; the `.ch` JSON
//! lists the chunks ([`ChFile`]). The SpikeGLX `.meta` of the original `.bin` sits beside
//! them and gives the gains, channel names and geometry.
//!
//! [`MtscompRecording`] decodes the chunks a read needs in parallel (`std::thread::scope`)
//! and keeps them in a [`ChunkCache`], so windows that straddle chunks decode each once.

mod ch;

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dspk_core::{ChannelInfo, ReadRequest, RecordingInfo, RecordingSource, SampleFormat};
use dspk_io::{
    CacheStats, ChunkCache, ChunkKey, DataFile, Detection, Format, METADATA_LIMIT, read_small_file,
};

pub use ch::{ChFile, MAX_CHUNK_BYTES};

use crate::probe::Probe;
use crate::spikeglx::{self, Meta, Stream, has_extension};
use crate::{Error, Result};

/// The columns of a `.cbin` decoded through the cache (all of them, words included).
#[derive(Debug)]
struct Columns {
    info: RecordingInfo,
    ch: ChFile,
    file: DataFile,
    cache: Arc<ChunkCache>,
    array: u64,
}

impl Columns {
    /// The decoded chunks `chunks` (channel-major int16 bytes each), decoded in parallel
    /// where they are not cached.
    fn chunks(&self, chunks: Range<usize>) -> Result<Vec<Arc<[u8]>>> {
        let count = chunks.len();
        let threads = std::thread::available_parallelism()
            .map_or(1, std::num::NonZeroUsize::get)
            .min(count);
        if threads <= 1 {
            return chunks.map(|k| self.chunk(k)).collect();
        }
        let mut results: Vec<Option<Result<Arc<[u8]>>>> = vec![None; count];
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|worker| {
                    let chunks = chunks.clone();
                    scope.spawn(move || {
                        chunks
                            .clone()
                            .enumerate()
                            .skip(worker)
                            .step_by(threads)
                            .map(|(i, k)| (i, self.chunk(k)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            for worker in workers {
                // A decoder that panicked is reported as a failed chunk below.
                if let Ok(done) = worker.join() {
                    for (i, result) in done {
                        results[i] = Some(result);
                    }
                }
            }
        });
        results
            .into_iter()
            .zip(chunks)
            .map(|(result, k)| {
                result.unwrap_or_else(|| {
                    Err(Error::invalid(
                        self.file.path(),
                        format!("decoding chunk {k} panicked"),
                    ))
                })
            })
            .collect()
    }

    /// Chunk `chunk`, from the cache or read and decoded.
    fn chunk(&self, chunk: usize) -> Result<Arc<[u8]>> {
        let key = ChunkKey {
            array: self.array,
            chunk: [chunk as u64, 0],
        };
        self.cache.get_or_decode(key, || {
            let range = self.ch.chunk_bytes(chunk);
            // Within the file: `check_file_length` proved the last offset is its length.
            let mut compressed = vec![0u8; (range.end - range.start) as usize];
            self.file.read_exact_at(range.start, &mut compressed)?;
            self.ch.decode_chunk(chunk, &compressed, self.file.path())
        })
    }

    /// The stored values of a checked request, channel-major little-endian bytes.
    fn stored(&self, request: &ReadRequest<'_>, out: &mut [u8]) -> Result<()> {
        let samples = request.samples();
        let len = request.samples_per_channel();
        if len == 0 || request.channels().is_empty() {
            return Ok(());
        }
        let first = self.ch.chunk_of(samples.start);
        let last = self.ch.chunk_of(samples.end - 1);
        let decoded = self.chunks(first..last + 1)?;
        for (k, data) in (first..=last).zip(&decoded) {
            let bounds = self.ch.chunk_samples(k);
            let n = (bounds.end - bounds.start) as usize;
            let lo = samples.start.max(bounds.start);
            let hi = samples.end.min(bounds.end);
            let count = (hi - lo) as usize;
            let src_start = (lo - bounds.start) as usize;
            let dst_start = (lo - samples.start) as usize;
            for (j, &channel) in request.channels().iter().enumerate() {
                let src = (channel * n + src_start) * 2;
                let dst = (j * len + dst_start) * 2;
                out[dst..dst + count * 2].copy_from_slice(&data[src..src + count * 2]);
            }
        }
        Ok(())
    }
}

impl RecordingSource for Columns {
    fn info(&self) -> &RecordingInfo {
        &self.info
    }

    fn fill_scaled(&self, request: &ReadRequest<'_>, out: &mut [f32]) -> dspk_core::Result<()> {
        let mut stored = vec![0u8; request.num_values() * 2];
        self.stored(request, &mut stored)?;
        let len = request.samples_per_channel();
        if len == 0 {
            return Ok(());
        }
        for ((&channel, values), bytes) in request
            .channels()
            .iter()
            .zip(out.chunks_exact_mut(len))
            .zip(stored.chunks_exact(len * 2))
        {
            let info = &self.info.channels[channel];
            SampleFormat::I16.scale_into(bytes, info.gain, info.offset, values);
        }
        Ok(())
    }

    fn fill_stored(&self, request: &ReadRequest<'_>, out: &mut [u8]) -> dspk_core::Result<()> {
        Ok(self.stored(request, out)?)
    }

    fn can_read_stored(&self) -> bool {
        true
    }
}

/// An mtscomp-compressed recording: the `.cbin`'s analog columns as a recording, decoded
/// chunk by chunk through a [`ChunkCache`].
///
/// Reads what `mtscomp.Reader` decompresses and what SpikeInterface's `read_cbin_ibl` scales.
/// With the SpikeGLX `.meta` beside the `.cbin` (IBL's layout), channels, gains, the
/// geometry and the sync column are those of [`spikeglx::SpikeGlxRecording`]: `read_stored`
/// gives the decoded int16 of the neural channels, `SY0` is read apart with
/// [`read_sync`](Self::read_sync). Without a `.meta`, every column is a channel `ch<i>` with
/// gain 1 and no unit.
#[derive(Debug)]
pub struct MtscompRecording {
    info: RecordingInfo,
    columns: Columns,
    meta: Option<(Meta, Stream)>,
    probe: Option<Probe>,
}

impl MtscompRecording {
    /// Opens `path` (the `.cbin`, or the `.ch` beside it) with its own cache of
    /// [`ChunkCache::DEFAULT_BUDGET`] bytes.
    ///
    /// # Errors
    ///
    /// As [`open_with_cache`](Self::open_with_cache).
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with_cache(path, Arc::new(ChunkCache::default()))
    }

    /// Opens `path` (the `.cbin`, or the `.ch` beside it), keeping decoded chunks in `cache`
    /// (which may be shared with other readers).
    ///
    /// # Errors
    ///
    /// [`dspk_io::Error::Missing`] if the `.ch` or the `.cbin` is missing; the errors of
    /// [`ChFile::parse`] and [`ChFile::check_file_length`]; with a `.meta`, those of
    /// [`Meta::stream`] and [`Meta::probe`], and [`dspk_io::Error::Invalid`] if its `nSavedChans` or
    /// `fileSizeBytes` disagree with the `.ch`'s shape; [`Error::Io`] if a file cannot be
    /// read.
    pub fn open_with_cache(path: impl AsRef<Path>, cache: Arc<ChunkCache>) -> Result<Self> {
        let path = path.as_ref();
        let cbin: PathBuf = if has_extension(path, "ch") {
            path.with_extension("cbin")
        } else {
            path.to_path_buf()
        };
        let ch_path = cbin.with_extension("ch");
        if !ch_path.is_file() {
            return Err(Error::missing(
                &cbin,
                format!("its mtscomp index {}", ch_path.display()),
            ));
        }
        let ch = ChFile::parse(&read_small_file(&ch_path, METADATA_LIMIT)?, &ch_path)?;
        if !cbin.is_file() {
            return Err(Error::missing(
                &ch_path,
                format!("its compressed data file {}", cbin.display()),
            ));
        }
        let file = DataFile::open(&cbin)?;
        ch.check_file_length(&cbin, file.len())?;

        let (meta, probe) = if spikeglx::meta_path(&cbin).is_file() {
            let (meta, stream, probe) = spikeglx::read_companion_meta(&cbin)?;
            check_meta(&meta, &stream, &ch)?;
            (Some((meta, stream)), probe)
        } else {
            (None, None)
        };
        let (all, info) = match &meta {
            Some((meta, stream)) => {
                let all = stream
                    .columns
                    .iter()
                    .map(|c| ChannelInfo::new(c.name.clone(), c.gain, 0.0, c.unit))
                    .collect();
                let info = spikeglx::recording_info(&cbin, meta, stream, ch.num_samples())?;
                (all, info)
            }
            None => {
                let all: Vec<ChannelInfo> = (0..ch.num_channels())
                    .map(|c| ChannelInfo::new(format!("ch{c}"), 1.0, 0.0, ""))
                    .collect();
                let rate = format!("{}", ch.sample_rate()).parse().map_err(|_| {
                    Error::invalid(
                        &ch_path,
                        format!("`sample_rate` {} is not an exact rate", ch.sample_rate()),
                    )
                })?;
                let info =
                    RecordingInfo::new(all.clone(), ch.num_samples(), rate, SampleFormat::I16)
                        .map_err(|e| Error::core(&cbin, e))?;
                (all, info)
            }
        };
        let mut all_info = info.clone();
        all_info.channels = all;
        Ok(Self {
            info,
            columns: Columns {
                info: all_info,
                ch,
                file,
                cache,
                array: ChunkCache::new_array_id(),
            },
            meta,
            probe,
        })
    }

    /// The `.cbin` file.
    #[must_use]
    pub fn data_path(&self) -> &Path {
        self.columns.file.path()
    }

    /// The parsed `.ch`.
    #[must_use]
    pub fn ch(&self) -> &ChFile {
        &self.columns.ch
    }

    /// The SpikeGLX metadata beside the `.cbin`, if there is one.
    #[must_use]
    pub fn meta(&self) -> Option<&Meta> {
        self.meta.as_ref().map(|(meta, _)| meta)
    }

    /// The SpikeGLX stream layout (column types and gains), if there is a `.meta`.
    #[must_use]
    pub fn stream(&self) -> Option<&Stream> {
        self.meta.as_ref().map(|(_, stream)| stream)
    }

    /// The probe geometry from the `.meta`, if any.
    #[must_use]
    pub fn probe(&self) -> Option<&Probe> {
        self.probe.as_ref()
    }

    /// What the chunk cache has done (decodes, hits, evictions) and holds.
    #[must_use]
    pub fn cache_stats(&self) -> CacheStats {
        self.columns.cache.stats()
    }

    /// The number of digital words after the analog columns (`SY0` for imec streams).
    #[must_use]
    pub fn num_digital(&self) -> usize {
        self.columns.info.num_channels() - self.info.num_channels()
    }

    /// Reads digital word `word` over `samples` into `out` (as
    /// [`SpikeGlxRecording::read_digital`](spikeglx::SpikeGlxRecording::read_digital)).
    ///
    /// # Errors
    ///
    /// [`Error::Argument`] if `word` does not exist or `out` is not `samples` long;
    /// [`dspk_io::Error::Core`] for a range past the end or a failed decode.
    pub fn read_digital(&self, word: usize, samples: Range<u64>, out: &mut [u16]) -> Result<()> {
        spikeglx::read_words(
            &self.columns,
            self.data_path(),
            self.info.num_channels(),
            self.num_digital(),
            word,
            samples,
            out,
        )
    }

    /// Reads the imec sync word `SY0` over `samples` into `out`.
    ///
    /// # Errors
    ///
    /// [`dspk_io::Error::Missing`] without a `.meta` or a saved `SY0` column; otherwise as
    /// [`read_digital`](Self::read_digital).
    pub fn read_sync(&self, samples: Range<u64>, out: &mut [u16]) -> Result<()> {
        if !self.stream().is_some_and(spikeglx::has_sync) {
            return Err(Error::missing(self.data_path(), "the SY0 sync column"));
        }
        self.read_digital(0, samples, out)
    }
}

/// Checks that the `.meta` describes the array the `.ch` holds.
fn check_meta(meta: &Meta, stream: &Stream, ch: &ChFile) -> Result<()> {
    if stream.columns.len() != ch.num_channels() {
        return Err(Error::invalid(
            meta.path(),
            format!(
                "`nSavedChans={}` disagrees with the .ch's {} channels",
                stream.columns.len(),
                ch.num_channels()
            ),
        ));
    }
    if let Some(size) = stream.file_size_bytes {
        let needed = ch.num_samples().checked_mul(stream.frame_bytes());
        if needed != Some(size) {
            return Err(Error::invalid(
                meta.path(),
                format!(
                    "`fileSizeBytes={size}` disagrees with the .ch's {} samples x {} channels",
                    ch.num_samples(),
                    ch.num_channels()
                ),
            ));
        }
    }
    Ok(())
}

impl RecordingSource for MtscompRecording {
    fn info(&self) -> &RecordingInfo {
        &self.info
    }

    fn fill_scaled(&self, request: &ReadRequest<'_>, out: &mut [f32]) -> dspk_core::Result<()> {
        // The analog columns come first with the same gains, so the request is valid for
        // all columns.
        self.columns.fill_scaled(request, out)
    }

    fn fill_stored(&self, request: &ReadRequest<'_>, out: &mut [u8]) -> dspk_core::Result<()> {
        self.columns.fill_stored(request, out)
    }

    fn can_read_stored(&self) -> bool {
        true
    }
}

/// The mtscomp format for `dspk_io::open`: a `.cbin` (or `.ch`) with its companion, read
/// with [`MtscompRecording`].
#[derive(Debug, Clone, Copy, Default)]
pub struct MtscompFormat;

impl Format for MtscompFormat {
    fn name(&self) -> &str {
        "mtscomp"
    }

    /// [`Detection::ByMetadata`] for a `.cbin` with its `.ch` (or a `.ch` with its `.cbin`),
    /// [`Detection::ByName`] for a `.cbin` alone.
    fn detect(&self, path: &Path) -> Detection {
        if has_extension(path, "cbin") {
            if path.with_extension("ch").is_file() {
                Detection::ByMetadata
            } else {
                Detection::ByName
            }
        } else if has_extension(path, "ch") && path.with_extension("cbin").is_file() {
            Detection::ByMetadata
        } else {
            Detection::No
        }
    }

    fn open(&self, path: &Path) -> dspk_io::Result<Box<dyn RecordingSource>> {
        Ok(Box::new(MtscompRecording::open(path)?))
    }
}
