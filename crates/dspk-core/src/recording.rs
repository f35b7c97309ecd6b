//! Recordings: what a multi-channel recording is, and the trait every reader implements.

use std::collections::BTreeMap;
use std::ops::Range;

use crate::{Error, RationalTime, Result, SampleFormat, SampleRate};

/// One channel of a recording: its name and how stored values become physical values.
///
/// `value = stored * gain + offset`, in [`unit`](Self::unit).
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelInfo {
    /// The channel's name or id as the source spells it (e.g. `"AP12"`, `"CH5"`).
    pub name: String,
    /// Multiplier from stored value to physical value.
    pub gain: f64,
    /// Added after the gain.
    pub offset: f64,
    /// The physical unit of scaled values (e.g. `"uV"`, `"V"`).
    pub unit: String,
}

impl ChannelInfo {
    /// A channel with this name, gain, offset and unit.
    #[must_use]
    pub fn new(name: impl Into<String>, gain: f64, offset: f64, unit: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            gain,
            offset,
            unit: unit.into(),
        }
    }
}

/// What a recording holds: its channels, length, rate, stored format, start time and free-form
/// metadata from the source.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordingInfo {
    /// The channels, in the order reads index them.
    pub channels: Vec<ChannelInfo>,
    /// Samples per channel.
    pub num_samples: u64,
    /// Samples per second per channel.
    pub sample_rate: SampleRate,
    /// How samples are stored (what [`RecordingSource::read_stored`] returns).
    pub stored_format: SampleFormat,
    /// The time of the first sample, relative to the source's reference (often zero).
    pub start_time: RationalTime,
    /// Source-specific key/value pairs (file format version, probe serial, ...).
    pub metadata: BTreeMap<String, String>,
}

impl RecordingInfo {
    /// A recording starting at time zero with no metadata.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRecording`] if there are no channels or a gain or offset is not finite.
    pub fn new(
        channels: Vec<ChannelInfo>,
        num_samples: u64,
        sample_rate: SampleRate,
        stored_format: SampleFormat,
    ) -> Result<Self> {
        if channels.is_empty() {
            return Err(Error::InvalidRecording(
                "a recording needs at least one channel".into(),
            ));
        }
        if let Some((index, channel)) = channels
            .iter()
            .enumerate()
            .find(|(_, c)| !c.gain.is_finite() || !c.offset.is_finite())
        {
            return Err(Error::InvalidRecording(format!(
                "channel {index} (`{}`) has gain {} and offset {}: both must be finite",
                channel.name, channel.gain, channel.offset
            )));
        }
        Ok(Self {
            channels,
            num_samples,
            sample_rate,
            stored_format,
            start_time: RationalTime::ZERO,
            metadata: BTreeMap::new(),
        })
    }

    /// The number of channels.
    #[must_use]
    pub fn num_channels(&self) -> usize {
        self.channels.len()
    }

    /// The indices of all channels, `0..num_channels`, for reads of the whole probe.
    #[must_use]
    pub fn all_channels(&self) -> Vec<usize> {
        (0..self.num_channels()).collect()
    }

    /// The exact duration, `num_samples / sample_rate`.
    #[must_use]
    pub fn duration(&self) -> RationalTime {
        self.sample_rate.time_of_sample(self.num_samples)
    }
}

/// A checked read request: channels that exist and a sample range inside the recording.
///
/// Only [`ReadRequest::new`] makes one, so an implementor of [`RecordingSource`] receives
/// arguments that were already checked. The output of a read is channel-major: the samples of
/// `channels()[0]`, then those of `channels()[1]`, and so on.
#[derive(Debug, Clone, Copy)]
pub struct ReadRequest<'a> {
    channels: &'a [usize],
    start: u64,
    len: usize,
}

impl<'a> ReadRequest<'a> {
    /// Checks `channels` and `samples` against `info`.
    ///
    /// # Errors
    ///
    /// [`Error::ChannelOutOfRange`], [`Error::ReversedSampleRange`], [`Error::SamplesPastEnd`],
    /// or [`Error::TooLarge`] when `channels.len() * samples` (times the widest sample size)
    /// does not fit in `usize`.
    pub fn new(info: &RecordingInfo, channels: &'a [usize], samples: Range<u64>) -> Result<Self> {
        let num_channels = info.num_channels();
        if let Some(&channel) = channels.iter().find(|&&c| c >= num_channels) {
            return Err(Error::ChannelOutOfRange {
                channel,
                num_channels,
            });
        }
        if samples.end < samples.start {
            return Err(Error::ReversedSampleRange { range: samples });
        }
        if samples.end > info.num_samples {
            return Err(Error::SamplesPastEnd {
                range: samples,
                num_samples: info.num_samples,
            });
        }
        let too_large = || Error::TooLarge {
            what: "read request",
            detail: format!(
                "{} x {} does not fit in memory addresses",
                crate::format_count(channels.len() as u64, "channels"),
                crate::format_count(samples.end - samples.start, "samples")
            ),
        };
        let len = usize::try_from(samples.end - samples.start).map_err(|_| too_large())?;
        // Every later length (values, bytes) must be computable without overflow.
        channels
            .len()
            .checked_mul(len)
            .and_then(|n| n.checked_mul(8))
            .ok_or_else(too_large)?;
        Ok(Self {
            channels,
            start: samples.start,
            len,
        })
    }

    /// The channels to read, in output order.
    #[must_use]
    pub fn channels(&self) -> &'a [usize] {
        self.channels
    }

    /// The sample range to read.
    #[must_use]
    pub fn samples(&self) -> Range<u64> {
        self.start..self.start + self.len as u64
    }

    /// Samples per channel.
    #[must_use]
    pub fn samples_per_channel(&self) -> usize {
        self.len
    }

    /// Values in the output (`channels * samples`).
    #[must_use]
    pub fn num_values(&self) -> usize {
        self.channels.len() * self.len
    }

    /// Checks that `runs` holds one run per channel of the request, each `run` elements of
    /// `unit` (for implementors of the `fill_*_runs` methods of [`RecordingSource`]).
    ///
    /// # Errors
    ///
    /// [`Error::OutputLength`] for a wrong number of runs or a run of the wrong length.
    pub fn check_runs<T>(&self, runs: &[&mut [T]], run: usize, unit: &'static str) -> Result<()> {
        Self::check_output(self.channels.len(), runs.len(), "channel runs")?;
        runs.iter()
            .try_for_each(|r| Self::check_output(run, r.len(), unit))
    }

    /// Checks that an output buffer of `actual` elements of `unit` has the length `expected`.
    fn check_output(expected: usize, actual: usize, unit: &'static str) -> Result<()> {
        if expected == actual {
            Ok(())
        } else {
            Err(Error::OutputLength {
                expected,
                actual,
                unit,
            })
        }
    }
}

/// Whether a source's reads of one window may be shared among threads reading at once, and
/// how to cut the window into parts ([`RecordingSource::concurrent_reads`]).
///
/// The [`WindowLoader`](crate::WindowLoader) fills each window with a small pool of threads,
/// each reading one disjoint part into the same buffer, when the source allows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConcurrentReads {
    /// One thread reads each window whole (the default: sources with a shared cursor or a
    /// stream decoder, and those not checked for concurrent reads).
    #[default]
    No,
    /// Threads may read disjoint sample ranges of a window at once (interleaved files,
    /// compressed stores chunked in time); parts are cut at multiples of `align` samples
    /// counted from the recording's start (a chunk's length, so no chunk is decoded by two
    /// threads; 1 for any sample). Parts are read with the `fill_*_runs` methods.
    ByTime {
        /// Part boundaries fall on multiples of this many samples (at least 1).
        align: u64,
    },
    /// Threads may read disjoint groups of channels of a window at once (channel-major files);
    /// parts are read with [`RecordingSource::read`] and [`RecordingSource::read_stored`].
    ByChannel,
}

/// A multi-channel recording that can be read window by window, from any thread.
///
/// Callers use [`read`](Self::read) (scaled `f32` values) and [`read_stored`](Self::read_stored)
/// (the stored little-endian bytes, untouched). Both check their arguments the same way for
/// every source and then call the implementor's [`fill_scaled`](Self::fill_scaled) /
/// [`fill_stored`](Self::fill_stored); implementors provide those and [`info`](Self::info), and
/// should not override `read` or `read_stored`.
///
/// A source that can return stored values says so with [`can_read_stored`](Self::can_read_stored)
/// (callers ask once, up front, and pick the stored or the scaled path for the whole run).
/// Scaled values must equal `stored * gain + offset` computed as
/// [`SampleFormat::scale_into`] does.
pub trait RecordingSource: Send + Sync {
    /// What the recording holds.
    fn info(&self) -> &RecordingInfo;

    /// Writes the scaled values of a checked request into `out`
    /// (`request.num_values()` long, channel-major).
    ///
    /// # Errors
    ///
    /// Whatever the source's storage reports (I/O, decoding), as [`Error::Source`].
    fn fill_scaled(&self, request: &ReadRequest<'_>, out: &mut [f32]) -> Result<()>;

    /// Writes the stored little-endian values of a checked request into `out`
    /// (`request.num_values() * stored_format.size()` bytes, channel-major).
    ///
    /// The default says [`Error::Unsupported`]; sources that override it also override
    /// [`can_read_stored`](Self::can_read_stored).
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`], or what the storage reports, as [`Error::Source`].
    fn fill_stored(&self, request: &ReadRequest<'_>, out: &mut [u8]) -> Result<()> {
        let _ = (request, out);
        Err(Error::Unsupported {
            source_name: std::any::type_name::<Self>(),
        })
    }

    /// Whether [`read_stored`](Self::read_stored) works for this source.
    fn can_read_stored(&self) -> bool {
        false
    }

    /// How reads of one window may be shared among threads reading at once. The default,
    /// [`ConcurrentReads::No`], keeps one thread per window; a source that answers otherwise
    /// must give the same bytes whichever way a window is cut into parts.
    fn concurrent_reads(&self) -> ConcurrentReads {
        ConcurrentReads::No
    }

    /// Writes the scaled values of a checked request into per-channel runs: `runs[k]` receives
    /// the `request.samples_per_channel()` values of `request.channels()[k]` (the runs are
    /// disjoint pieces of a larger channel-major window, so threads can fill disjoint sample
    /// ranges of it). Called from several threads at once only when
    /// [`concurrent_reads`](Self::concurrent_reads) says [`ConcurrentReads::ByTime`]; it should
    /// not start threads of its own (the caller already reads in parallel).
    ///
    /// The default reads through a scratch buffer with [`fill_scaled`](Self::fill_scaled);
    /// sources override it to write straight into the runs.
    ///
    /// # Errors
    ///
    /// As [`fill_scaled`](Self::fill_scaled); [`Error::OutputLength`] if the runs do not
    /// match the request.
    fn fill_scaled_runs(&self, request: &ReadRequest<'_>, runs: &mut [&mut [f32]]) -> Result<()> {
        let n = request.samples_per_channel();
        request.check_runs(runs, n, "values")?;
        let mut scratch = vec![0f32; request.num_values()];
        self.fill_scaled(request, &mut scratch)?;
        copy_into_runs(&scratch, n, runs);
        Ok(())
    }

    /// As [`fill_scaled_runs`](Self::fill_scaled_runs), for the stored little-endian bytes:
    /// `runs[k]` receives `request.samples_per_channel() * stored_format.size()` bytes.
    ///
    /// The default reads through a scratch buffer with [`fill_stored`](Self::fill_stored).
    ///
    /// # Errors
    ///
    /// As [`fill_stored`](Self::fill_stored); [`Error::OutputLength`] if the runs do not
    /// match the request.
    fn fill_stored_runs(&self, request: &ReadRequest<'_>, runs: &mut [&mut [u8]]) -> Result<()> {
        let run = request.samples_per_channel() * self.info().stored_format.size();
        request.check_runs(runs, run, "bytes")?;
        let mut scratch = vec![0u8; request.channels().len() * run];
        self.fill_stored(request, &mut scratch)?;
        copy_into_runs(&scratch, run, runs);
        Ok(())
    }

    /// A hint that `channels` over `samples` will be read soon (the loader gives the next
    /// window while it reads the current one): a file-backed source may ask the system to
    /// start reading those bytes into the page cache. It changes no result, reports nothing,
    /// and ignores arguments out of range. The default does nothing.
    fn will_read(&self, channels: &[usize], samples: Range<u64>) {
        let _ = (channels, samples);
    }

    /// Reads scaled values of `channels` over `samples` into `out`, channel-major
    /// (`out[k * n + s]` is sample `samples.start + s` of `channels[k]`, `n` the range length).
    ///
    /// # Errors
    ///
    /// A channel out of range, a sample range reversed or past the end, `out` not
    /// `channels.len() * n` long ([`Error::OutputLength`]), or what the source reports.
    fn read(&self, channels: &[usize], samples: Range<u64>, out: &mut [f32]) -> Result<()> {
        let request = ReadRequest::new(self.info(), channels, samples)?;
        ReadRequest::check_output(request.num_values(), out.len(), "values")?;
        self.fill_scaled(&request, out)
    }

    /// Reads the stored values of `channels` over `samples` into `out` as little-endian bytes,
    /// untouched, channel-major; `out` is `channels.len() * n * stored_format.size()` bytes.
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`] for sources without stored access; otherwise as
    /// [`read`](Self::read), with the output length counted in bytes.
    fn read_stored(&self, channels: &[usize], samples: Range<u64>, out: &mut [u8]) -> Result<()> {
        let request = ReadRequest::new(self.info(), channels, samples)?;
        let expected = request.num_values() * self.info().stored_format.size();
        ReadRequest::check_output(expected, out.len(), "bytes")?;
        self.fill_stored(&request, out)
    }
}

/// A whole channel-major request filled through `source`'s
/// [`fill_scaled_runs`](RecordingSource::fill_scaled_runs), one run per channel: the
/// [`fill_scaled`](RecordingSource::fill_scaled) of sources whose reading path is their runs.
///
/// # Errors
///
/// As the source's `fill_scaled_runs`.
pub fn fill_scaled_by_runs<S: RecordingSource + ?Sized>(
    source: &S,
    request: &ReadRequest<'_>,
    out: &mut [f32],
) -> Result<()> {
    let n = request.samples_per_channel();
    if n == 0 {
        return Ok(());
    }
    let mut runs: Vec<&mut [f32]> = out.chunks_exact_mut(n).collect();
    source.fill_scaled_runs(request, &mut runs)
}

/// As [`fill_scaled_by_runs`], for the stored bytes and
/// [`fill_stored_runs`](RecordingSource::fill_stored_runs).
///
/// # Errors
///
/// As the source's `fill_stored_runs`.
pub fn fill_stored_by_runs<S: RecordingSource + ?Sized>(
    source: &S,
    request: &ReadRequest<'_>,
    out: &mut [u8],
) -> Result<()> {
    let bytes = request.samples_per_channel() * source.info().stored_format.size();
    if bytes == 0 {
        return Ok(());
    }
    let mut runs: Vec<&mut [u8]> = out.chunks_exact_mut(bytes).collect();
    source.fill_stored_runs(request, &mut runs)
}

/// Copies channel-major `values` (`run` per channel) into one run per channel.
fn copy_into_runs<T: Copy>(values: &[T], run: usize, runs: &mut [&mut [T]]) {
    if run == 0 {
        return;
    }
    for (out, values) in runs.iter_mut().zip(values.chunks_exact(run)) {
        out.copy_from_slice(values);
    }
}

impl<S: RecordingSource + ?Sized> RecordingSource for std::sync::Arc<S> {
    fn info(&self) -> &RecordingInfo {
        (**self).info()
    }
    fn fill_scaled(&self, request: &ReadRequest<'_>, out: &mut [f32]) -> Result<()> {
        (**self).fill_scaled(request, out)
    }
    fn fill_stored(&self, request: &ReadRequest<'_>, out: &mut [u8]) -> Result<()> {
        (**self).fill_stored(request, out)
    }
    fn can_read_stored(&self) -> bool {
        (**self).can_read_stored()
    }
    fn concurrent_reads(&self) -> ConcurrentReads {
        (**self).concurrent_reads()
    }
    fn fill_scaled_runs(&self, request: &ReadRequest<'_>, runs: &mut [&mut [f32]]) -> Result<()> {
        (**self).fill_scaled_runs(request, runs)
    }
    fn fill_stored_runs(&self, request: &ReadRequest<'_>, runs: &mut [&mut [u8]]) -> Result<()> {
        (**self).fill_stored_runs(request, runs)
    }
    fn will_read(&self, channels: &[usize], samples: Range<u64>) {
        (**self).will_read(channels, samples);
    }
}

/// A source with [`read_stored`](RecordingSource::read_stored) hidden: it forwards scaled reads
/// and says [`Error::Unsupported`] for stored ones.
///
/// For tests and benchmarks that must take the `f32` path on a source that has stored values
/// (e.g. to check that both paths give the same result).
#[derive(Debug, Clone)]
pub struct ScaledOnly<S>(pub S);

impl<S: RecordingSource> RecordingSource for ScaledOnly<S> {
    fn info(&self) -> &RecordingInfo {
        self.0.info()
    }
    fn fill_scaled(&self, request: &ReadRequest<'_>, out: &mut [f32]) -> Result<()> {
        self.0.fill_scaled(request, out)
    }
    fn concurrent_reads(&self) -> ConcurrentReads {
        self.0.concurrent_reads()
    }
    fn fill_scaled_runs(&self, request: &ReadRequest<'_>, runs: &mut [&mut [f32]]) -> Result<()> {
        self.0.fill_scaled_runs(request, runs)
    }
    fn will_read(&self, channels: &[usize], samples: Range<u64>) {
        self.0.will_read(channels, samples);
    }
}
