//! The raw binary reader: stored values at computed offsets, read with `pread`.

use std::path::{Path, PathBuf};

use dspk_core::{
    ChannelInfo, ConcurrentReads, ReadRequest, RecordingInfo, RecordingSource, SampleFormat,
    SampleRate,
};

use crate::dtype::{ByteOrder, to_little_endian};
use crate::file::DataFile;
use crate::{Error, Result};

/// How samples are laid out in a raw file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SampleOrder {
    /// Sample-major: all channels of sample 0, then all channels of sample 1, ...
    /// (`[samples, channels]` in C order; SpikeGLX, Open Ephys, SpikeInterface `time_axis = 0`).
    Interleaved,
    /// Channel-major: all samples of channel 0, then channel 1, ...
    /// (`[channels, samples]` in C order, or `[samples, channels]` in Fortran order).
    ChannelMajor,
}

impl SampleOrder {
    /// The name used in sidecars: `"interleaved"` or `"channel-major"`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Interleaved => "interleaved",
            Self::ChannelMajor => "channel-major",
        }
    }
}

/// Everything needed to read a headerless or fixed-header raw file: what the samples mean
/// (channels, rate, stored format) and where they are (byte order, sample order, header).
#[derive(Debug, Clone, PartialEq)]
pub struct RawSpec {
    /// The channels, in file order, with their gains, offsets and units.
    pub channels: Vec<ChannelInfo>,
    /// Samples per second per channel.
    pub sample_rate: SampleRate,
    /// The stored sample type.
    pub format: SampleFormat,
    /// The byte order of stored values in the file.
    pub byte_order: ByteOrder,
    /// Interleaved or channel-major.
    pub order: SampleOrder,
    /// Bytes before the first sample.
    pub header_bytes: u64,
    /// Samples per channel; `None` derives it from the file length (which must then hold a
    /// whole number of samples after the header).
    pub num_samples: Option<u64>,
}

/// A recording stored as a raw binary file: one or more channels of one [`SampleFormat`],
/// interleaved or channel-major, in either byte order, after a fixed-size header.
///
/// Reads go straight from the file into the caller's buffer (channel-major layouts) or through
/// a scratch block of at most 4 MiB (interleaved layouts; each reading thread keeps its block
/// for its next reads), with positional reads (`pread`), so
/// reading a recording of any length window by window keeps memory flat and any number of
/// threads can read at once. The file is not memory-mapped: pages of a mapping that a reader
/// touches count in its resident set until the kernel reclaims them, so a pass over a large
/// recording would grow the process's RSS to the file's size.
///
/// For the [`WindowLoader`](dspk_core::WindowLoader)'s reader threads it allows concurrent
/// reads by sample range (interleaved) or by channel (channel-major), and turns the hint of
/// the next window ([`RecordingSource::will_read`]) into `posix_fadvise(WILLNEED)` on its
/// bytes (Linux and other Unix systems with `posix_fadvise`; elsewhere nothing). The file is
/// also advised as read sequentially when opened.
#[derive(Debug)]
pub struct RawRecording {
    info: RecordingInfo,
    file: DataFile,
    byte_order: ByteOrder,
    order: SampleOrder,
    header_bytes: u64,
}

/// Bytes of scratch a read uses at most (interleaved layouts, scaled reads).
const BLOCK_BYTES: usize = 4 << 20;

thread_local! {
    /// The block of interleaved frames a thread reads into (at most [`BLOCK_BYTES`], or one
    /// frame when a frame is larger), kept between reads.
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl RawRecording {
    /// Opens the raw file `data_path` as `spec` describes it, checking the file's length.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the file cannot be opened; [`Error::Truncated`] if it is shorter than
    /// the header plus `num_samples` samples (or, with `num_samples` unset, does not hold a
    /// whole number of samples); [`Error::TooLarge`] if the sizes overflow; [`Error::Core`] if
    /// there are no channels or a gain or offset is not finite.
    pub fn new(data_path: impl AsRef<Path>, spec: RawSpec) -> Result<Self> {
        let path = data_path.as_ref();
        let file = DataFile::open(path)?;
        let num_samples = check_length(
            path,
            file.len(),
            spec.channels.len(),
            spec.format,
            spec.header_bytes,
            spec.num_samples,
        )?;
        let info = RecordingInfo::new(spec.channels, num_samples, spec.sample_rate, spec.format)
            .map_err(|e| Error::core(path, e))?;
        file.advise_sequential();
        Ok(Self {
            info,
            file,
            byte_order: spec.byte_order,
            order: spec.order,
            header_bytes: spec.header_bytes,
        })
    }

    /// The data file.
    #[must_use]
    pub fn data_path(&self) -> &Path {
        self.file.path()
    }

    /// Interleaved or channel-major.
    #[must_use]
    pub fn order(&self) -> SampleOrder {
        self.order
    }

    /// The byte order of stored values in the file.
    #[must_use]
    pub fn byte_order(&self) -> ByteOrder {
        self.byte_order
    }

    /// Bytes before the first sample.
    #[must_use]
    pub fn header_bytes(&self) -> u64 {
        self.header_bytes
    }

    /// Mutable access to the description (to set a start time or metadata after opening).
    pub fn info_mut(&mut self) -> &mut RecordingInfo {
        &mut self.info
    }

    /// Writes the stored little-endian values of `channels` over `len` samples from `start`
    /// into `runs`, one run of `len * size` bytes per channel. Arguments are checked. With
    /// `threads`, interleaved blocks are transposed on several threads when large.
    fn stored_into(
        &self,
        channels: &[usize],
        start: u64,
        len: usize,
        runs: &mut [&mut [u8]],
        threads: Gather,
    ) -> Result<()> {
        let size = self.info.stored_format.size();
        let run = len * size;
        if run == 0 || channels.is_empty() {
            return Ok(());
        }
        let num_channels = self.info.num_channels();
        match self.order {
            SampleOrder::ChannelMajor => {
                let n = self.info.num_samples;
                for (&channel, out) in channels.iter().zip(runs.iter_mut()) {
                    // In range: channel < num_channels and start + len <= n, and the length
                    // check at open proved header + num_channels * n * size fits in the file.
                    let offset = self.header_bytes + (channel as u64 * n + start) * size as u64;
                    self.file.read_exact_at(offset, out)?;
                }
            }
            SampleOrder::Interleaved => {
                let frame = num_channels * size;
                let rows_per_block = (BLOCK_BYTES / frame).max(1).min(len);
                SCRATCH.with_borrow_mut(|scratch| {
                    // Kept per thread (the loader's threads live as long as the loader): no
                    // fresh pages to fault in and zero for every window.
                    if scratch.len() < rows_per_block * frame {
                        scratch.resize(rows_per_block * frame, 0);
                    }
                    let mut row = 0;
                    while row < len {
                        let rows = rows_per_block.min(len - row);
                        let block = &mut scratch[..rows * frame];
                        let offset = self.header_bytes + (start + row as u64) * frame as u64;
                        self.file.read_exact_at(offset, block)?;
                        gather_in_parallel(
                            block,
                            frame,
                            size,
                            channels,
                            runs,
                            row..row + rows,
                            threads,
                        );
                        row += rows;
                    }
                    Ok::<(), Error>(())
                })?;
            }
        }
        for out in runs.iter_mut() {
            to_little_endian(out, size, self.byte_order);
        }
        Ok(())
    }

    /// Writes the scaled values of a checked request into `runs`, one per channel, through
    /// blocks of stored values of at most [`BLOCK_BYTES`].
    fn scaled_into(
        &self,
        request: &ReadRequest<'_>,
        runs: &mut [&mut [f32]],
        threads: Gather,
    ) -> Result<()> {
        let channels = request.channels();
        let n = request.samples_per_channel();
        if n == 0 || channels.is_empty() {
            return Ok(());
        }
        let format = self.info.stored_format;
        let size = format.size();
        let widest = channels.len().max(self.info.num_channels());
        let rows_per_block = (BLOCK_BYTES / (widest * size)).max(1).min(n);
        let mut stored = vec![0u8; channels.len() * rows_per_block * size];
        let start = request.samples().start;
        let mut row = 0;
        while row < n {
            let rows = rows_per_block.min(n - row);
            let block = &mut stored[..channels.len() * rows * size];
            let mut block_runs: Vec<&mut [u8]> = block.chunks_exact_mut(rows * size).collect();
            self.stored_into(channels, start + row as u64, rows, &mut block_runs, threads)?;
            for ((&channel, stored), out) in channels
                .iter()
                .zip(block.chunks_exact(rows * size))
                .zip(runs.iter_mut())
            {
                let info = &self.info.channels[channel];
                format.scale_into(stored, info.gain, info.offset, &mut out[row..row + rows]);
            }
            row += rows;
        }
        Ok(())
    }
}

/// Whether a read may transpose interleaved blocks on threads of its own: yes for a whole
/// read, no for a part read by one of the loader's threads (which already run in parallel).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gather {
    Parallel,
    OneThread,
}

/// Copies the values of `channels` out of a block of interleaved frames into their `runs`
/// (one per channel), at rows `rows`, with the channels shared among up to
/// [`GATHER_THREADS`] threads when the block is large and `threads` allows (the
/// transposition, not the read, bounds a single thread: about 1.1 GB/s of int16 for 384
/// channels on a development machine). Each thread writes its own channels' runs, so the
/// result is the same.
fn gather_in_parallel(
    block: &[u8],
    frame: usize,
    size: usize,
    channels: &[usize],
    runs: &mut [&mut [u8]],
    rows: std::ops::Range<usize>,
    threads: Gather,
) {
    let values = channels.len() * rows.len();
    let threads = match threads {
        Gather::Parallel => std::thread::available_parallelism().map_or(1, usize::from),
        Gather::OneThread => 1,
    }
    .min(GATHER_THREADS)
    .min(values.div_ceil(GATHER_VALUES_PER_THREAD))
    .min(channels.len())
    .max(1);
    let per = channels.len().div_ceil(threads);
    std::thread::scope(|scope| {
        for (channels, runs) in channels.chunks(per).zip(runs.chunks_mut(per)) {
            let rows = rows.clone();
            let work = move || match size {
                2 => gather(block, frame, 2, channels, runs, rows),
                4 => gather(block, frame, 4, channels, runs, rows),
                _ => gather(block, frame, size, channels, runs, rows),
            };
            if threads == 1 {
                work();
            } else {
                scope.spawn(work);
            }
        }
    });
}

/// Threads [`gather_in_parallel`] uses at most.
const GATHER_THREADS: usize = 8;
/// Values a gather thread should have at least, so small reads stay on one thread.
const GATHER_VALUES_PER_THREAD: usize = 1 << 18;

/// Copies the values of `channels` out of a block of interleaved frames into their `runs`
/// (one per channel), at rows `rows`, `size` bytes each. The block is walked in tiles of about
/// [`TILE_BYTES`] that stay in the core's cache while every channel takes its values from
/// them (channel by channel over the whole 4 MiB block re-read it from memory once per
/// channel: about 2x slower for 384 channels). Always inlined, so a call with a constant
/// `size` compiles each copy to one load and store.
#[inline(always)]
fn gather(
    block: &[u8],
    frame: usize,
    size: usize,
    channels: &[usize],
    runs: &mut [&mut [u8]],
    rows: std::ops::Range<usize>,
) {
    let tile = (TILE_BYTES / frame).max(8);
    let mut start = rows.start;
    while start < rows.end {
        let end = (start + tile).min(rows.end);
        let frames = &block[(start - rows.start) * frame..(end - rows.start) * frame];
        for (&channel, out) in channels.iter().zip(runs.iter_mut()) {
            let out = &mut out[start * size..end * size];
            let column = channel * size;
            for (value, frame_bytes) in out.chunks_exact_mut(size).zip(frames.chunks_exact(frame)) {
                value.copy_from_slice(&frame_bytes[column..column + size]);
            }
        }
        start = end;
    }
}

/// Bytes of interleaved frames [`gather`] transposes at a time (in a core's L2 cache).
const TILE_BYTES: usize = 64 << 10;

/// Checks that a file of `file_len` bytes holds `header + num_channels * num_samples * size`
/// bytes and returns the number of samples (derived from the length when not given).
pub(crate) fn check_length(
    path: &Path,
    file_len: u64,
    num_channels: usize,
    format: SampleFormat,
    header_bytes: u64,
    num_samples: Option<u64>,
) -> Result<u64> {
    if num_channels == 0 {
        return Err(Error::invalid(path, "the recording has no channels"));
    }
    let frame = (num_channels as u64)
        .checked_mul(format.size() as u64)
        .ok_or_else(|| Error::TooLarge {
            path: path.to_path_buf(),
            what: format!("one sample of {num_channels} channels"),
            size: u64::MAX,
            limit: u64::MAX,
        })?;
    let describe = |n: String| {
        format!(
            "{n} samples x {num_channels} channels of {format} after a {header_bytes}-byte header"
        )
    };
    match num_samples {
        Some(n) => {
            let needed = n
                .checked_mul(frame)
                .and_then(|bytes| bytes.checked_add(header_bytes))
                .unwrap_or(u64::MAX);
            if needed > file_len {
                return Err(Error::Truncated {
                    path: path.to_path_buf(),
                    what: describe(n.to_string()),
                    needed,
                    actual: file_len,
                });
            }
            Ok(n)
        }
        None => {
            let Some(data) = file_len.checked_sub(header_bytes) else {
                return Err(Error::Truncated {
                    path: path.to_path_buf(),
                    what: format!("a {header_bytes}-byte header"),
                    needed: header_bytes,
                    actual: file_len,
                });
            };
            if data % frame != 0 {
                let n = data / frame;
                return Err(Error::Truncated {
                    path: path.to_path_buf(),
                    what: format!(
                        "{} (the file ends {} bytes into a sample)",
                        describe((n + 1).to_string()),
                        data % frame
                    ),
                    needed: header_bytes + (n + 1) * frame,
                    actual: file_len,
                });
            }
            Ok(data / frame)
        }
    }
}

impl RecordingSource for RawRecording {
    fn info(&self) -> &RecordingInfo {
        &self.info
    }

    fn fill_stored(&self, request: &ReadRequest<'_>, out: &mut [u8]) -> dspk_core::Result<()> {
        let run = request.samples_per_channel() * self.info.stored_format.size();
        let mut runs: Vec<&mut [u8]> = out.chunks_exact_mut(run.max(1)).collect();
        Ok(self.stored_into(
            request.channels(),
            request.samples().start,
            request.samples_per_channel(),
            &mut runs,
            Gather::Parallel,
        )?)
    }

    fn fill_scaled(&self, request: &ReadRequest<'_>, out: &mut [f32]) -> dspk_core::Result<()> {
        let n = request.samples_per_channel().max(1);
        let mut runs: Vec<&mut [f32]> = out.chunks_exact_mut(n).collect();
        Ok(self.scaled_into(request, &mut runs, Gather::Parallel)?)
    }

    fn can_read_stored(&self) -> bool {
        true
    }

    /// By sample range for interleaved files (a part is one contiguous byte range), by channel
    /// for channel-major ones (a channel's samples are contiguous).
    fn concurrent_reads(&self) -> ConcurrentReads {
        match self.order {
            SampleOrder::Interleaved => ConcurrentReads::ByTime { align: 1 },
            SampleOrder::ChannelMajor => ConcurrentReads::ByChannel,
        }
    }

    fn fill_stored_runs(
        &self,
        request: &ReadRequest<'_>,
        runs: &mut [&mut [u8]],
    ) -> dspk_core::Result<()> {
        let run = request.samples_per_channel() * self.info.stored_format.size();
        request.check_runs(runs, run, "bytes")?;
        Ok(self.stored_into(
            request.channels(),
            request.samples().start,
            request.samples_per_channel(),
            runs,
            Gather::OneThread,
        )?)
    }

    fn fill_scaled_runs(
        &self,
        request: &ReadRequest<'_>,
        runs: &mut [&mut [f32]],
    ) -> dspk_core::Result<()> {
        request.check_runs(runs, request.samples_per_channel(), "values")?;
        Ok(self.scaled_into(request, runs, Gather::OneThread)?)
    }

    /// Advises the system that the bytes of `channels` over `samples` will be needed
    /// (`posix_fadvise(WILLNEED)`: the kernel starts reading them into the page cache).
    fn will_read(&self, channels: &[usize], samples: std::ops::Range<u64>) {
        let n = self.info.num_samples;
        if samples.start >= samples.end || samples.end > n {
            return;
        }
        let size = self.info.stored_format.size() as u64;
        let len = samples.end - samples.start;
        match self.order {
            SampleOrder::Interleaved => {
                let frame = self.info.num_channels() as u64 * size;
                let offset = self.header_bytes + samples.start * frame;
                self.file.advise_will_need(offset, len * frame);
            }
            SampleOrder::ChannelMajor => {
                for &channel in channels.iter().filter(|&&c| c < self.info.num_channels()) {
                    let offset = self.header_bytes + (channel as u64 * n + samples.start) * size;
                    self.file.advise_will_need(offset, len * size);
                }
            }
        }
    }
}

/// The path of a file named `name` in the folder of `base` (a sidecar's data file).
pub(crate) fn sibling(base: &Path, name: &str) -> PathBuf {
    base.parent().unwrap_or_else(|| Path::new("")).join(name)
}
