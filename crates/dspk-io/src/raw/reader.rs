//! The raw binary reader: stored values at computed offsets, read with `pread`.

use std::path::{Path, PathBuf};

use dspk_core::{
    ChannelInfo, ConcurrentReads, LoaderOptions, ReadRequest, RecordingInfo, RecordingSource,
    SampleFormat, SampleRate,
};

use super::deinterleave::deinterleave;
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
/// a scratch block of at most 512 KiB that stays in a core's cache while its values are
/// de-interleaved (interleaved layouts; each reading thread keeps its block for its next
/// reads), with positional reads (`pread`), so reading a recording of any length window by
/// window keeps memory flat and any number of threads can read at once. Large reads of
/// interleaved files through [`RecordingSource::fill_stored`] and
/// [`RecordingSource::fill_scaled`] are shared by sample range among up to
/// [`LoaderOptions::machine_threads`] threads. The file is not memory-mapped: pages of a
/// mapping that a reader touches count in its resident set until the kernel reclaims them, so
/// a pass over a large recording would grow the process's RSS to the file's size.
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

/// Bytes of interleaved frames read at a time: small enough to stay in a core's L2 cache
/// (1 to 2 MiB on current x86 servers) while they are de-interleaved, large enough that a
/// `pread` costs little more than its copy.
const BLOCK_BYTES: usize = 512 << 10;

/// Frames per block are a multiple of this (when a block holds more), so only a read's last
/// block has frames left over from whole de-interleaving tiles (8 or 4 frames high).
const BLOCK_ROWS_MULTIPLE: usize = 8;

/// The alignment of the scratch block (a page, the unit the kernel copies from).
const SCRATCH_ALIGN: usize = 4096;

/// Bytes of stored values a scaled read converts at a time.
const SCALED_BLOCK_BYTES: usize = 4 << 20;

/// Bytes of interleaved frames a thread of a large read should have at least, so small reads
/// stay on one thread (starting a thread and faulting in its scratch cost tens of
/// microseconds).
const BYTES_PER_THREAD: usize = 2 << 20;

thread_local! {
    /// The memory a thread reads interleaved frames into ([`BLOCK_BYTES`], or one frame when
    /// a frame is larger, plus room to align it), kept between reads.
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
    /// [`Threads::Machine`], large interleaved reads are shared among threads by sample range.
    fn stored_into(
        &self,
        channels: &[usize],
        start: u64,
        len: usize,
        runs: &mut [&mut [u8]],
        threads: Threads,
    ) -> Result<()> {
        let size = self.info.stored_format.size();
        if len == 0 || channels.is_empty() {
            return Ok(());
        }
        match self.order {
            SampleOrder::ChannelMajor => {
                let n = self.info.num_samples;
                for (&channel, out) in channels.iter().zip(runs.iter_mut()) {
                    // In range: channel < num_channels and start + len <= n, and the length
                    // check at open proved header + num_channels * n * size fits in the file.
                    let offset = self.header_bytes + (channel as u64 * n + start) * size as u64;
                    self.file.read_exact_at(offset, out)?;
                    to_little_endian(out, size, self.byte_order);
                }
                Ok(())
            }
            SampleOrder::Interleaved => {
                let threads = self.threads_for(len, threads);
                on_threads(threads, len, size, runs, |first, rows, runs| {
                    self.interleaved_into(channels, start + first as u64, rows, runs)
                })
            }
        }
    }

    /// Threads for a read of `len` samples: one unless `threads` allows more, the file is
    /// interleaved and each thread gets at least [`BYTES_PER_THREAD`] of frames.
    fn threads_for(&self, len: usize, threads: Threads) -> usize {
        match (threads, self.order) {
            (Threads::Machine, SampleOrder::Interleaved) => {
                let frame = self.info.num_channels() * self.info.stored_format.size();
                let by_size = len.saturating_mul(frame) / BYTES_PER_THREAD;
                LoaderOptions::machine_threads().min(by_size).max(1)
            }
            _ => 1,
        }
    }

    /// Writes the stored little-endian values of `channels` over `len` samples from `start` of
    /// an interleaved file into `runs`, one run of `len * size` bytes per channel, on this
    /// thread: blocks of at most [`BLOCK_BYTES`] of frames are read into the thread's scratch
    /// and de-interleaved while in the cache.
    fn interleaved_into(
        &self,
        channels: &[usize],
        start: u64,
        len: usize,
        runs: &mut [&mut [u8]],
    ) -> Result<()> {
        let size = self.info.stored_format.size();
        let frame = self.info.num_channels() * size;
        let mut rows_per_block = (BLOCK_BYTES / frame).max(1).min(len);
        if rows_per_block > BLOCK_ROWS_MULTIPLE {
            rows_per_block -= rows_per_block % BLOCK_ROWS_MULTIPLE;
        }
        SCRATCH.with_borrow_mut(|memory| {
            // Kept per thread (the loader's threads live as long as the loader): no fresh
            // pages to fault in and zero for every window.
            let needed = rows_per_block * frame + SCRATCH_ALIGN;
            if memory.len() < needed {
                memory.resize(needed, 0);
            }
            let skip = memory.as_ptr().align_offset(SCRATCH_ALIGN);
            let scratch = &mut memory[skip.min(SCRATCH_ALIGN)..];
            let mut row = 0;
            while row < len {
                let rows = rows_per_block.min(len - row);
                let block = &mut scratch[..rows * frame];
                let offset = self.header_bytes + (start + row as u64) * frame as u64;
                self.file.read_exact_at(offset, block)?;
                deinterleave(block, frame, size, channels, runs, row);
                if self.byte_order == ByteOrder::Big {
                    // The pieces just written, while they are still in the cache.
                    for out in runs.iter_mut() {
                        to_little_endian(
                            &mut out[row * size..(row + rows) * size],
                            size,
                            self.byte_order,
                        );
                    }
                }
                row += rows;
            }
            Ok(())
        })
    }

    /// Writes the scaled values of a checked request into `runs`, one per channel. With
    /// [`Threads::Machine`], large interleaved reads are shared among threads by sample range.
    fn scaled_into(
        &self,
        request: &ReadRequest<'_>,
        runs: &mut [&mut [f32]],
        threads: Threads,
    ) -> Result<()> {
        let channels = request.channels();
        let n = request.samples_per_channel();
        if n == 0 || channels.is_empty() {
            return Ok(());
        }
        let start = request.samples().start;
        let threads = self.threads_for(n, threads);
        on_threads(threads, n, 1, runs, |first, rows, runs| {
            self.scaled_part(channels, start + first as u64, rows, runs)
        })
    }

    /// Writes the scaled values of `channels` over `len` samples from `start` into `runs`, one
    /// per channel, on this thread, through blocks of at most [`SCALED_BLOCK_BYTES`] of stored
    /// values.
    fn scaled_part(
        &self,
        channels: &[usize],
        start: u64,
        len: usize,
        runs: &mut [&mut [f32]],
    ) -> Result<()> {
        let format = self.info.stored_format;
        let size = format.size();
        let rows_per_block = (SCALED_BLOCK_BYTES / (channels.len() * size))
            .max(1)
            .min(len);
        let mut stored = vec![0u8; channels.len() * rows_per_block * size];
        let mut row = 0;
        while row < len {
            let rows = rows_per_block.min(len - row);
            let block = &mut stored[..channels.len() * rows * size];
            let mut block_runs: Vec<&mut [u8]> = block.chunks_exact_mut(rows * size).collect();
            self.stored_into(
                channels,
                start + row as u64,
                rows,
                &mut block_runs,
                Threads::One,
            )?;
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

/// Whether a read may share its work among threads of its own: yes for a whole read, no for a
/// part read by one of the loader's threads (which already run in parallel).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Threads {
    Machine,
    One,
}

/// Runs `read(first, rows, pieces)` on `threads` threads, each for its own consecutive
/// samples `first..first + rows` of `len`, with `pieces` the parts of `runs` (one per channel,
/// `per_sample` elements a sample) for those samples; the calling thread reads the first
/// part. Returns the first error in sample order. With one thread, reads all of `runs` here.
fn on_threads<T: Send>(
    threads: usize,
    len: usize,
    per_sample: usize,
    runs: &mut [&mut [T]],
    read: impl Fn(usize, usize, &mut [&mut [T]]) -> Result<()> + Sync,
) -> Result<()> {
    if threads <= 1 {
        return read(0, len, runs);
    }
    let cuts: Vec<usize> = (0..=threads).map(|p| len * p / threads).collect();
    let mut parts: Vec<Vec<&mut [T]>> = (0..threads)
        .map(|_| Vec::with_capacity(runs.len()))
        .collect();
    for run in runs.iter_mut() {
        let mut rest: &mut [T] = run;
        for (part, cut) in parts.iter_mut().zip(cuts.windows(2)) {
            let (piece, tail) =
                std::mem::take(&mut rest).split_at_mut((cut[1] - cut[0]) * per_sample);
            part.push(piece);
            rest = tail;
        }
    }
    let read = &read;
    std::thread::scope(|scope| {
        let mut parts = parts.into_iter().zip(cuts.windows(2));
        let mine = parts.next();
        let others: Vec<_> = parts
            .map(|(mut pieces, cut)| {
                let (first, rows) = (cut[0], cut[1] - cut[0]);
                scope.spawn(move || read(first, rows, &mut pieces))
            })
            .collect();
        let mut result = match mine {
            Some((mut pieces, cut)) => read(cut[0], cut[1] - cut[0], &mut pieces),
            None => Ok(()),
        };
        for other in others {
            let done = other
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            result = result.and(done);
        }
        result
    })
}

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
            Threads::Machine,
        )?)
    }

    fn fill_scaled(&self, request: &ReadRequest<'_>, out: &mut [f32]) -> dspk_core::Result<()> {
        let n = request.samples_per_channel().max(1);
        let mut runs: Vec<&mut [f32]> = out.chunks_exact_mut(n).collect();
        Ok(self.scaled_into(request, &mut runs, Threads::Machine)?)
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
            Threads::One,
        )?)
    }

    fn fill_scaled_runs(
        &self,
        request: &ReadRequest<'_>,
        runs: &mut [&mut [f32]],
    ) -> dspk_core::Result<()> {
        request.check_runs(runs, request.samples_per_channel(), "values")?;
        Ok(self.scaled_into(request, runs, Threads::One)?)
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
