//! Views: the envelope of some channels over a range of samples at a pixel width, answered
//! from the coarsest pyramid level that is exact, from raw samples, or as the samples.

use std::ops::Range;

use dspk_core::{RecordingInfo, RecordingSource};

use crate::{Columns, Envelope, Error, Order, Pyramid, Result};

/// Values read per block when a view folds raw samples (memory stays bounded whatever the
/// view's length: one block of `channels x samples` values at a time).
pub const RAW_BLOCK_VALUES: usize = 1 << 22;

/// What a viewer asks for: these channels over these samples, drawn `width` pixels wide.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewRequest {
    /// The recording's channel indices, in the order wanted.
    pub channels: Vec<usize>,
    /// The samples to show.
    pub samples: Range<u64>,
    /// Pixel columns available (at most [`MAX_COLUMNS`](crate::MAX_COLUMNS)).
    pub width: usize,
}

/// Where a view's columns came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViewSource {
    /// A pyramid level: each column is whole buckets of `bucket` samples, its edges on the
    /// bucket grid, so the column's minimum and maximum are exact.
    Pyramid {
        /// The level.
        level: usize,
        /// Samples per bucket of that level.
        bucket: u64,
    },
    /// The raw samples, read in blocks and folded into [`Columns::even`] columns.
    Raw,
    /// Fewer samples than columns: one column per sample, its minimum and maximum the sample.
    Samples,
}

/// The answer to a [`ViewRequest`]: an envelope whose columns say which samples each one
/// covers (a pyramid answer widens the range to whole columns on its grid, within the
/// recording), where it came from, and whether every column is known.
#[derive(Clone, Debug, PartialEq)]
pub struct View {
    /// The channels' minima and maxima per column (`[channels, columns]`, the request's
    /// channel order).
    pub envelope: Envelope,
    /// Where the columns came from.
    pub source: ViewSource,
    /// `false` when part of a pyramid was not built yet: those columns are empty.
    pub complete: bool,
}

impl ViewRequest {
    /// Checks the request against a recording: known channels, at least one, the range
    /// non-empty inside the recording, a width from 1 to [`MAX_COLUMNS`](crate::MAX_COLUMNS).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] saying which part is wrong, [`Error::OverLimit`] for a width
    /// over the limit.
    pub fn check(&self, info: &RecordingInfo) -> Result<()> {
        if self.channels.is_empty() {
            return Err(Error::invalid("view: channels", "no channels requested"));
        }
        let count = info.num_channels();
        if let Some(&c) = self.channels.iter().find(|&&c| c >= count) {
            return Err(Error::invalid(
                "view: channels",
                format!("channel {c} of a recording with {count} channels"),
            ));
        }
        let Range { start, end } = self.samples;
        if start >= end || end > info.num_samples {
            return Err(Error::invalid(
                "view: samples",
                format!(
                    "{start}..{end} is not a non-empty range inside the recording's 0..{}",
                    info.num_samples
                ),
            ));
        }
        if self.width == 0 {
            return Err(Error::invalid("view: width", "zero columns"));
        }
        if self.width > crate::MAX_COLUMNS {
            return Err(Error::OverLimit {
                what: "view: width (columns)",
                requested: self.width as u64,
                limit: crate::MAX_COLUMNS as u64,
            });
        }
        Ok(())
    }
}

/// Answers `request` from `pyramid` when one of its levels is exact for it, else from the raw
/// samples of `source`:
/// - fewer samples than columns: the samples themselves ([`ViewSource::Samples`]);
/// - a pyramid level whose bucket is at most the samples per column: the coarsest such level,
///   columns of whole buckets on a grid anchored at sample 0 (the range widened to that grid,
///   within the recording), never more than `width` of them;
/// - otherwise (no pyramid, or columns narrower than its finest bucket), the raw samples
///   folded block by block into `width` even columns; also when the pyramid has not filled
///   every page the view needs and the range holds at most `raw_fallback_values` values.
///
/// # Errors
///
/// As [`ViewRequest::check`]; [`Error::InvalidRequest`] when the pyramid was built for a
/// recording of another shape; what the source or the pyramid report.
pub(crate) fn answer(
    source: &dyn RecordingSource,
    pyramid: Option<&Pyramid>,
    request: &ViewRequest,
    raw_fallback_values: u64,
) -> Result<View> {
    let info = source.info();
    request.check(info)?;
    let len = request.samples.end - request.samples.start;
    if len <= request.width as u64 {
        let columns = Columns::grid(request.samples.clone(), 1)?;
        return Ok(View {
            envelope: fold_raw(source, &request.channels, columns)?,
            source: ViewSource::Samples,
            complete: true,
        });
    }
    if let Some(pyramid) = pyramid {
        check_pyramid(pyramid, info)?;
        if let Some((level, step)) = pyramid_columns(pyramid, len, request) {
            let bucket = pyramid.bucket(level);
            let range = request.samples.start / step * step
                ..(request.samples.end.div_ceil(step) * step).min(info.num_samples);
            let columns = Columns::grid(range, step)?;
            let (mut envelope, complete) = pyramid.envelope(level, &request.channels, &columns)?;
            if envelope.columns().len() > request.width {
                envelope = merge_columns(&envelope)?;
            }
            let raw_values = len.saturating_mul(request.channels.len() as u64);
            if complete || raw_values > raw_fallback_values {
                return Ok(View {
                    envelope,
                    source: ViewSource::Pyramid { level, bucket },
                    complete,
                });
            }
        }
    }
    let columns = Columns::even(request.samples.clone(), request.width)?;
    Ok(View {
        envelope: fold_raw(source, &request.channels, columns)?,
        source: ViewSource::Raw,
        complete: true,
    })
}

/// The coarsest level whose bucket fits a column of `len / width` samples, and the column step
/// (a multiple of that bucket) that gives at most `max(width, 2)` grid columns over the
/// request.
fn pyramid_columns(pyramid: &Pyramid, len: u64, request: &ViewRequest) -> Option<(usize, u64)> {
    let width = request.width as u64;
    let level = (0..pyramid.levels())
        .rev()
        .find(|&level| pyramid.bucket(level) <= len / width)?;
    let bucket = pyramid.bucket(level);
    let Range { start, end } = request.samples;
    let count = |step: u64| end.div_ceil(step) - start / step;
    // The smallest multiple of the bucket that leaves at most `width` columns. A range meets at
    // most one more grid cell than it spans, so `ceil(len / (width - 1))` always does and the
    // search ends there; one column may need a cell as large as the recording, so width 1 is
    // searched as 2 (and the two columns merged by the caller).
    let most = width.max(2);
    let mut step = len.div_ceil(most).div_ceil(bucket) * bucket;
    while count(step) > most {
        step += bucket;
    }
    Some((level, step))
}

/// `envelope` folded into one column over its whole range (for a view one pixel wide).
fn merge_columns(envelope: &Envelope) -> Result<Envelope> {
    let width = envelope.columns().len();
    let columns = Columns::even(envelope.columns().samples(), 1)?;
    let channels = envelope.channels();
    let mut min = vec![f32::INFINITY; channels];
    let mut max = vec![f32::NEG_INFINITY; channels];
    for c in 0..channels {
        for k in 0..width {
            let at = c * width + k;
            // The fold's comparisons (the first of equal values kept, as in sample order).
            crate::pyramid::merge(
                &mut min[c],
                &mut max[c],
                envelope.min()[at],
                envelope.max()[at],
            );
        }
    }
    let nan = envelope.nan_counts().map(|nan| {
        nan.chunks(width)
            .map(|row| row.iter().fold(0u32, |a, &b| a.saturating_add(b)))
            .collect()
    });
    Envelope::from_parts(channels, columns, min, max, nan)
}

/// Refuses a pyramid built for a recording of another shape.
pub(crate) fn check_pyramid(pyramid: &Pyramid, info: &RecordingInfo) -> Result<()> {
    let layout = pyramid.layout();
    if layout.channels() != info.num_channels() || layout.samples() != info.num_samples {
        return Err(Error::invalid(
            "view: pyramid",
            format!(
                "built for {} channels x {} samples, the recording has {} x {}",
                layout.channels(),
                layout.samples(),
                info.num_channels(),
                info.num_samples
            ),
        ));
    }
    Ok(())
}

/// The envelope of `channels` over `columns`, folded from the source's scaled samples read in
/// blocks of at most [`RAW_BLOCK_VALUES`] values.
///
/// # Errors
///
/// What the source reports; as [`Envelope::empty`].
pub fn fold_raw(
    source: &dyn RecordingSource,
    channels: &[usize],
    columns: Columns,
) -> Result<Envelope> {
    let range = columns.samples();
    let mut envelope = Envelope::empty(channels.len(), columns)?;
    let block = (RAW_BLOCK_VALUES / channels.len()).max(1) as u64;
    let mut buffer = Vec::new();
    let mut at = range.start;
    while at < range.end {
        let end = (at + block).min(range.end);
        buffer.resize(channels.len() * (end - at) as usize, 0.0);
        source.read(channels, at..end, &mut buffer)?;
        envelope.fold(&buffer, Order::ChannelMajor, at..end)?;
        at = end;
    }
    Ok(envelope)
}
