//! A recording played several times end to end ([`RepeatedRecording`]): hours of signal for
//! benchmarks and long-run tests without hours of generation or storage.

use std::ops::Range;
use std::sync::Arc;

use crate::recording::{
    ConcurrentReads, ReadRequest, RecordingInfo, RecordingSource, fill_scaled_by_runs,
    fill_stored_by_runs,
};
use crate::{Error, Result};

/// `inner` played `repeats` times in a row: sample `s` of channel `c` is sample
/// `s % inner.num_samples` of the same channel of `inner`. The description is `inner`'s with
/// `repeats` times its samples (channels, rate, format, start time and metadata unchanged).
///
/// Reads that cross a block boundary are split there and each piece is read from `inner`
/// straight into the caller's buffer (no copy of the block is held). Stored reads work when
/// `inner` says they do ([`RecordingSource::can_read_stored`]); concurrent reads as `inner`'s,
/// by time only when the block length is a multiple of `inner`'s alignment.
#[derive(Clone)]
pub struct RepeatedRecording {
    inner: Arc<dyn RecordingSource>,
    repeats: u64,
    info: RecordingInfo,
}

impl std::fmt::Debug for RepeatedRecording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RepeatedRecording")
            .field("block_samples", &self.block_samples())
            .field("repeats", &self.repeats)
            .finish_non_exhaustive()
    }
}

impl RepeatedRecording {
    /// `inner` played `repeats` times.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRecording`] when `repeats` is zero, `inner` has no samples, or the total
    /// length does not fit in `u64`.
    pub fn new(inner: Arc<dyn RecordingSource>, repeats: u64) -> Result<Self> {
        let block = inner.info().num_samples;
        if repeats == 0 || block == 0 {
            return Err(Error::InvalidRecording(format!(
                "a repeated recording needs at least one repeat of at least one sample \
                 ({repeats} repeats of {block} samples)"
            )));
        }
        let total = block.checked_mul(repeats).ok_or_else(|| {
            Error::InvalidRecording(format!(
                "{repeats} repeats of {block} samples overflow a sample count"
            ))
        })?;
        let mut info = inner.info().clone();
        info.num_samples = total;
        Ok(Self {
            inner,
            repeats,
            info,
        })
    }

    /// Samples per channel of one repeat (the inner recording's length).
    #[must_use]
    pub fn block_samples(&self) -> u64 {
        self.inner.info().num_samples
    }

    /// How many times the inner recording is played.
    #[must_use]
    pub fn repeats(&self) -> u64 {
        self.repeats
    }

    /// [`Error::Unsupported`] unless the inner recording reads stored values.
    fn stored_supported(&self) -> Result<()> {
        if self.inner.can_read_stored() {
            Ok(())
        } else {
            Err(Error::Unsupported {
                source_name: std::any::type_name::<Self>(),
            })
        }
    }

    /// The pieces of `samples` that lie in one block each: `(offset in the request, the
    /// range in the inner recording)`, in order.
    fn pieces(&self, samples: Range<u64>) -> Vec<(usize, Range<u64>)> {
        let block = self.block_samples();
        let mut pieces = Vec::new();
        let mut at = samples.start;
        while at < samples.end {
            let within = at % block;
            let len = (block - within).min(samples.end - at);
            pieces.push(((at - samples.start) as usize, within..within + len));
            at += len;
        }
        pieces
    }
}

impl RecordingSource for RepeatedRecording {
    fn info(&self) -> &RecordingInfo {
        &self.info
    }

    fn fill_scaled(&self, request: &ReadRequest<'_>, out: &mut [f32]) -> Result<()> {
        fill_scaled_by_runs(self, request, out)
    }

    fn fill_stored(&self, request: &ReadRequest<'_>, out: &mut [u8]) -> Result<()> {
        self.stored_supported()?;
        fill_stored_by_runs(self, request, out)
    }

    fn can_read_stored(&self) -> bool {
        self.inner.can_read_stored()
    }

    fn concurrent_reads(&self) -> ConcurrentReads {
        match self.inner.concurrent_reads() {
            ConcurrentReads::ByTime { align }
                if align > 0 && self.block_samples().is_multiple_of(align) =>
            {
                ConcurrentReads::ByTime { align }
            }
            ConcurrentReads::ByTime { .. } => ConcurrentReads::No,
            other => other,
        }
    }

    fn fill_scaled_runs(&self, request: &ReadRequest<'_>, runs: &mut [&mut [f32]]) -> Result<()> {
        let n = request.samples_per_channel();
        request.check_runs(runs, n, "values")?;
        for (offset, range) in self.pieces(request.samples()) {
            let len = (range.end - range.start) as usize;
            let piece = ReadRequest::new(self.inner.info(), request.channels(), range)?;
            let mut parts: Vec<&mut [f32]> = runs
                .iter_mut()
                .map(|run| &mut run[offset..offset + len])
                .collect();
            self.inner.fill_scaled_runs(&piece, &mut parts)?;
        }
        Ok(())
    }

    fn fill_stored_runs(&self, request: &ReadRequest<'_>, runs: &mut [&mut [u8]]) -> Result<()> {
        self.stored_supported()?;
        let size = self.info.stored_format.size();
        request.check_runs(runs, request.samples_per_channel() * size, "bytes")?;
        for (offset, range) in self.pieces(request.samples()) {
            let len = (range.end - range.start) as usize;
            let piece = ReadRequest::new(self.inner.info(), request.channels(), range)?;
            let mut parts: Vec<&mut [u8]> = runs
                .iter_mut()
                .map(|run| &mut run[offset * size..(offset + len) * size])
                .collect();
            self.inner.fill_stored_runs(&piece, &mut parts)?;
        }
        Ok(())
    }
}
