//! Recordings held in memory, and a procedural one for examples and tests.

use crate::recording::{
    ConcurrentReads, ReadRequest, RecordingInfo, RecordingSource, fill_scaled_by_runs,
    fill_stored_by_runs,
};
use crate::rng::SplitMix64;
use crate::sample::{StoredSample, scale};
use crate::{ChannelInfo, Error, Result, SampleFormat, SampleRate};

/// A recording whose stored samples are owned in memory (channel-major little-endian bytes),
/// in any [`SampleFormat`].
#[derive(Debug, Clone)]
pub struct MemoryRecording {
    info: RecordingInfo,
    stored: Vec<u8>,
}

impl MemoryRecording {
    /// A recording from its description and its stored bytes, channel-major
    /// (`num_channels * num_samples * stored_format.size()` bytes).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRecording`] if the byte count does not match the description.
    pub fn new(info: RecordingInfo, stored: Vec<u8>) -> Result<Self> {
        let expected = usize::try_from(info.num_samples)
            .ok()
            .and_then(|n| n.checked_mul(info.num_channels()))
            .and_then(|n| n.checked_mul(info.stored_format.size()));
        if expected != Some(stored.len()) {
            return Err(Error::InvalidRecording(format!(
                "{} channels x {} samples of {} need {} bytes, got {}",
                info.num_channels(),
                info.num_samples,
                info.stored_format,
                expected.map_or_else(|| "more than usize::MAX".to_string(), |n| n.to_string()),
                stored.len()
            )));
        }
        Ok(Self { info, stored })
    }

    /// A recording from typed samples, channel-major: `samples[c * n + s]` is sample `s` of
    /// channel `c`, with `n = samples.len() / channels.len()`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRecording`] if there are no channels, `samples.len()` is not a multiple
    /// of the channel count, or a gain or offset is not finite.
    pub fn from_samples<T: StoredSample>(
        channels: Vec<ChannelInfo>,
        sample_rate: SampleRate,
        samples: &[T],
    ) -> Result<Self> {
        let num_channels = channels.len();
        if num_channels == 0 || !samples.len().is_multiple_of(num_channels) {
            return Err(Error::InvalidRecording(format!(
                "{} samples cannot be split evenly over {num_channels} channels",
                samples.len()
            )));
        }
        let num_samples = (samples.len() / num_channels) as u64;
        let info = RecordingInfo::new(channels, num_samples, sample_rate, T::FORMAT)?;
        let mut stored = Vec::with_capacity(samples.len() * T::FORMAT.size());
        for &sample in samples {
            sample.extend_le(&mut stored);
        }
        Self::new(info, stored)
    }

    /// Mutable access to the description (e.g. to set a start time or metadata).
    pub fn info_mut(&mut self) -> &mut RecordingInfo {
        &mut self.info
    }

    /// The stored bytes of channel `channel` over a checked request's sample range.
    fn stored_run(&self, channel: usize, request: &ReadRequest<'_>) -> &[u8] {
        let size = self.info.stored_format.size();
        let n = self.info.num_samples as usize;
        let start = (channel * n + request.samples().start as usize) * size;
        &self.stored[start..start + request.samples_per_channel() * size]
    }
}

impl RecordingSource for MemoryRecording {
    fn info(&self) -> &RecordingInfo {
        &self.info
    }

    fn fill_scaled(&self, request: &ReadRequest<'_>, out: &mut [f32]) -> Result<()> {
        fill_scaled_by_runs(self, request, out)
    }

    fn fill_stored(&self, request: &ReadRequest<'_>, out: &mut [u8]) -> Result<()> {
        fill_stored_by_runs(self, request, out)
    }

    fn can_read_stored(&self) -> bool {
        true
    }

    /// Any sample range of the samples in memory can be copied by any thread.
    fn concurrent_reads(&self) -> ConcurrentReads {
        ConcurrentReads::ByTime { align: 1 }
    }

    fn fill_scaled_runs(&self, request: &ReadRequest<'_>, runs: &mut [&mut [f32]]) -> Result<()> {
        request.check_runs(runs, request.samples_per_channel(), "values")?;
        for (&channel, run) in request.channels().iter().zip(runs.iter_mut()) {
            let info = &self.info.channels[channel];
            self.info.stored_format.scale_into(
                self.stored_run(channel, request),
                info.gain,
                info.offset,
                run,
            );
        }
        Ok(())
    }

    fn fill_stored_runs(&self, request: &ReadRequest<'_>, runs: &mut [&mut [u8]]) -> Result<()> {
        let bytes = request.samples_per_channel() * self.info.stored_format.size();
        request.check_runs(runs, bytes, "bytes")?;
        for (&channel, run) in request.channels().iter().zip(runs.iter_mut()) {
            run.copy_from_slice(self.stored_run(channel, request));
        }
        Ok(())
    }
}

/// A procedural int16 recording computed on demand: per channel a sinusoid (a different
/// frequency on each channel) plus deterministic hashed noise, so any length can be streamed
/// without holding it in memory, and any window can be recomputed to check what was read.
///
/// Gains are 2.34375 uV per step (a Neuropixels 1.0 AP channel at gain 500), offsets zero.
#[derive(Debug, Clone)]
pub struct SyntheticRecording {
    info: RecordingInfo,
    seed: u64,
    /// One period of the sinusoid, `PERIOD` entries, amplitude 400 steps.
    tone: Vec<f64>,
}

/// Length of the sinusoid period table; a power of two so the phase wraps with a mask.
const PERIOD: usize = 4096;

impl SyntheticRecording {
    /// Gain of every channel, in microvolts per stored step.
    pub const GAIN_UV: f64 = 2.343_75;

    /// `num_channels` channels of `num_samples` samples at `sample_rate`, from `seed`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRecording`] if `num_channels` is zero.
    pub fn new(
        num_channels: usize,
        num_samples: u64,
        sample_rate: SampleRate,
        seed: u64,
    ) -> Result<Self> {
        let channels = (0..num_channels)
            .map(|c| ChannelInfo::new(format!("CH{c}"), Self::GAIN_UV, 0.0, "uV"))
            .collect();
        let info = RecordingInfo::new(channels, num_samples, sample_rate, SampleFormat::I16)?;
        let tone = (0..PERIOD)
            .map(|i| 400.0 * (std::f64::consts::TAU * i as f64 / PERIOD as f64).sin())
            .collect();
        Ok(Self { info, seed, tone })
    }

    /// The stored value of sample `sample` of channel `channel`.
    #[must_use]
    pub fn stored_value(&self, channel: usize, sample: u64) -> i16 {
        // Phase step per sample differs per channel: channel c cycles (c % 61 + 1) times
        // per PERIOD samples.
        let step = (channel % 61 + 1) as u64;
        let phase = (sample.wrapping_mul(step) as usize) & (PERIOD - 1);
        let tone = self.tone[phase];
        let hash = SplitMix64::at(self.seed ^ ((channel as u64) << 40) ^ sample, 0);
        let noise = ((hash >> 53) as i64 - 512) as f64; // uniform in [-512, 512)
        (tone + noise).round() as i16
    }
}

impl SyntheticRecording {
    /// Fills `out`, one run of `run` elements per requested channel, with `fill(channel, run)`,
    /// spread over the machine's cores for large requests (computing samples is what limits
    /// this source; a real file's read is a copy).
    fn for_each_channel<T: Send>(
        request: &ReadRequest<'_>,
        out: &mut [T],
        run: usize,
        fill: impl Fn(usize, &mut [T]) + Sync,
    ) {
        /// Below this many elements threads cost more than they save.
        const PARALLEL_MIN: usize = 1 << 18;
        if run == 0 {
            return;
        }
        let channels = request.channels();
        let threads = if out.len() < PARALLEL_MIN {
            1
        } else {
            std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
        };
        let per_thread = channels.len().div_ceil(threads).max(1);
        std::thread::scope(|scope| {
            for (channels, out) in channels
                .chunks(per_thread)
                .zip(out.chunks_mut(per_thread * run))
            {
                let fill = &fill;
                scope.spawn(move || {
                    for (&channel, out) in channels.iter().zip(out.chunks_exact_mut(run)) {
                        fill(channel, out);
                    }
                });
            }
        });
    }
}

impl RecordingSource for SyntheticRecording {
    fn info(&self) -> &RecordingInfo {
        &self.info
    }

    fn fill_scaled(&self, request: &ReadRequest<'_>, out: &mut [f32]) -> Result<()> {
        let start = request.samples().start;
        Self::for_each_channel(
            request,
            out,
            request.samples_per_channel(),
            |channel, out| {
                let info = &self.info.channels[channel];
                for (s, value) in out.iter_mut().enumerate() {
                    let stored = f64::from(self.stored_value(channel, start + s as u64));
                    *value = scale(stored, info.gain, info.offset);
                }
            },
        );
        Ok(())
    }

    fn fill_stored(&self, request: &ReadRequest<'_>, out: &mut [u8]) -> Result<()> {
        let start = request.samples().start;
        Self::for_each_channel(
            request,
            out,
            2 * request.samples_per_channel(),
            |channel, out| {
                for (s, bytes) in out.chunks_exact_mut(2).enumerate() {
                    bytes.copy_from_slice(
                        &self.stored_value(channel, start + s as u64).to_le_bytes(),
                    );
                }
            },
        );
        Ok(())
    }

    fn can_read_stored(&self) -> bool {
        true
    }
}
