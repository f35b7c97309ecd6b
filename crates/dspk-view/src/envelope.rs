//! Min/max envelopes: the smallest and largest sample of each column of each channel, folded
//! on the host.

use std::ops::Range;

use crate::{Columns, Error, Result};

/// How the values of a block of samples are laid out in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// `[channels, samples]`: each channel's samples together (dspk's device layout).
    ChannelMajor,
    /// `[samples, channels]`: each sample's channels together (interleaved raw files).
    Interleaved,
}

/// For each channel and each column, the smallest and largest sample, NaN skipped.
///
/// A column with no sample that is not NaN is *empty*: its minimum is `+inf` and its maximum
/// `-inf` (so `min > max`, and merging with another column is a plain min/max). Where the
/// envelope was folded from samples it also counts the NaN samples it skipped in each column;
/// an envelope read from a pyramid does not know them ([`nan_counts`](Self::nan_counts) is
/// `None`).
///
/// Values are stored `[channels, columns]`, channel-major.
#[derive(Clone, Debug, PartialEq)]
pub struct Envelope {
    channels: usize,
    columns: Columns,
    min: Vec<f32>,
    max: Vec<f32>,
    nan: Option<Vec<u32>>,
}

impl Envelope {
    /// An envelope of `channels` channels whose every column is empty and has skipped no NaN:
    /// what [`fold`](Self::fold) starts from.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] for zero channels; [`Error::OverLimit`] when
    /// `channels * columns` does not fit memory's index range.
    pub fn empty(channels: usize, columns: Columns) -> Result<Self> {
        let values = table_len(channels, &columns)?;
        Ok(Self {
            channels,
            columns,
            min: vec![f32::INFINITY; values],
            max: vec![f32::NEG_INFINITY; values],
            nan: Some(vec![0; values]),
        })
    }

    /// The envelope of `values`, which hold every sample of `columns` for `channels`
    /// channels in `order` (the host fold: what the device kernel must equal bit for bit).
    ///
    /// # Errors
    ///
    /// As [`empty`](Self::empty) and [`fold`](Self::fold).
    pub fn from_samples(
        values: &[f32],
        order: Order,
        channels: usize,
        columns: Columns,
    ) -> Result<Self> {
        let samples = columns.samples();
        let mut envelope = Self::empty(channels, columns)?;
        envelope.fold(values, order, samples)?;
        Ok(envelope)
    }

    /// An envelope from its parts (a device fold's download, a pyramid's levels, a message
    /// from the network): `min` and `max` `[channels, columns]`, `nan` the same shape where
    /// the NaN samples were counted.
    ///
    /// # Errors
    ///
    /// [`Error::Shape`] when a table's length is not `channels * columns.len()`; as
    /// [`empty`](Self::empty).
    pub fn from_parts(
        channels: usize,
        columns: Columns,
        min: Vec<f32>,
        max: Vec<f32>,
        nan: Option<Vec<u32>>,
    ) -> Result<Self> {
        let values = table_len(channels, &columns)?;
        for (what, actual) in [
            ("envelope: min", min.len()),
            ("envelope: max", max.len()),
            (
                "envelope: NaN counts",
                nan.as_ref().map_or(values, Vec::len),
            ),
        ] {
            if actual != values {
                return Err(Error::Shape {
                    what,
                    expected: values,
                    actual,
                });
            }
        }
        Ok(Self {
            channels,
            columns,
            min,
            max,
            nan,
        })
    }

    /// Folds a block of samples into the columns it overlaps: `block` holds samples
    /// `samples` (which must lie inside the columns' range) of every channel, in `order`.
    /// Folding all of a range's samples once, in blocks of any sizes taken in sample order,
    /// gives the same bits as [`from_samples`](Self::from_samples); in any other order the
    /// same values (only the sign of a zero extreme may differ: the first of equal values is
    /// kept).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] for samples outside the columns' range; [`Error::Shape`] when
    /// `block` is not `channels * samples.len()` long. Nothing is changed on error.
    pub fn fold(&mut self, block: &[f32], order: Order, samples: Range<u64>) -> Result<()> {
        let range = self.columns.samples();
        if samples.start > samples.end || samples.start < range.start || samples.end > range.end {
            return Err(Error::invalid(
                "envelope: fold",
                format!(
                    "samples {}..{} outside the columns' {}..{}",
                    samples.start, samples.end, range.start, range.end
                ),
            ));
        }
        let len = (samples.end - samples.start) as usize;
        let expected = self.channels * len;
        if block.len() != expected {
            return Err(Error::Shape {
                what: "envelope: fold block",
                expected,
                actual: block.len(),
            });
        }
        if len == 0 {
            return Ok(());
        }
        let width = self.columns.len();
        let first = self.columns.column_of(samples.start).unwrap_or(0);
        let last = self.columns.column_of(samples.end - 1).unwrap_or(0);
        // The part of each column inside the block, as offsets into the block.
        let parts: Vec<(usize, Range<usize>)> = (first..=last)
            .map(|k| {
                let column = self.columns.column(k);
                let from = (column.start.max(samples.start) - samples.start) as usize;
                let to = (column.end.min(samples.end) - samples.start) as usize;
                (k, from..to)
            })
            .collect();
        match order {
            // Row by row, each column's part a contiguous slice.
            Order::ChannelMajor => {
                for (c, row) in block.chunks_exact(len).enumerate() {
                    for (k, part) in &parts {
                        let at = c * width + k;
                        let mut fold = Fold {
                            min: self.min[at],
                            max: self.max[at],
                            nan: 0,
                        };
                        fold.push_slice(&row[part.clone()]);
                        self.store(at, &fold);
                    }
                }
            }
            // Column by column, all channels' running folds side by side, each sample's
            // channels a contiguous slice (the updates of one sample's channels vectorise).
            Order::Interleaved => {
                let channels = self.channels;
                let (mut min, mut max) = (vec![0.0; channels], vec![0.0; channels]);
                let mut nan = vec![0u32; channels];
                for (k, part) in &parts {
                    for c in 0..channels {
                        (min[c], max[c]) = (self.min[c * width + k], self.max[c * width + k]);
                    }
                    let rows = &block[part.start * channels..part.end * channels];
                    // At most SLICE_CHUNK samples at a time, so the NaN counts fit a u32.
                    for chunk in rows.chunks(SLICE_CHUNK.saturating_mul(channels)) {
                        nan.fill(0);
                        for row in chunk.chunks_exact(channels) {
                            for (((&v, lo), hi), n) in
                                row.iter().zip(&mut min).zip(&mut max).zip(&mut nan)
                            {
                                *lo = if v < *lo { v } else { *lo };
                                *hi = if v > *hi { v } else { *hi };
                                *n += u32::from(v.is_nan());
                            }
                        }
                        for c in 0..channels {
                            let fold = Fold {
                                min: min[c],
                                max: max[c],
                                nan: nan[c],
                            };
                            self.store(c * width + k, &fold);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes a column's running fold back (adding its NaN count, saturating).
    fn store(&mut self, at: usize, fold: &Fold) {
        self.min[at] = fold.min;
        self.max[at] = fold.max;
        if let Some(nan) = &mut self.nan {
            nan[at] = nan[at].saturating_add(fold.nan);
        }
    }

    /// Channels.
    #[must_use]
    pub fn channels(&self) -> usize {
        self.channels
    }

    /// The columns.
    #[must_use]
    pub fn columns(&self) -> &Columns {
        &self.columns
    }

    /// The minima, `[channels, columns]`.
    #[must_use]
    pub fn min(&self) -> &[f32] {
        &self.min
    }

    /// The maxima, `[channels, columns]`.
    #[must_use]
    pub fn max(&self) -> &[f32] {
        &self.max
    }

    /// The NaN samples skipped in each column, `[channels, columns]`, where they were counted
    /// (saturating at `u32::MAX`).
    #[must_use]
    pub fn nan_counts(&self) -> Option<&[u32]> {
        self.nan.as_deref()
    }

    /// The minimum and maximum of column `column` of channel `channel`, or `None` when the
    /// column is empty (every sample NaN).
    ///
    /// # Panics
    ///
    /// If the channel or column is out of range.
    #[must_use]
    pub fn get(&self, channel: usize, column: usize) -> Option<(f32, f32)> {
        assert!(channel < self.channels && column < self.columns.len());
        let at = channel * self.columns.len() + column;
        let (min, max) = (self.min[at], self.max[at]);
        (min <= max).then_some((min, max))
    }
}

/// A running minimum and maximum that skip NaN, with the NaN count: `v < min` and `v > max`
/// are false for NaN, and the first of equal values (0.0 and -0.0) is kept. The device kernel
/// compares in the same order, so both give the same bits.
struct Fold {
    min: f32,
    max: f32,
    nan: u32,
}

/// Independent running folds [`Fold::push_slice`] keeps, so the compiler can vectorise them.
const LANES: usize = 8;

/// Values [`Fold::push_slice`] folds at a time, so its NaN counts fit a `u32`.
const SLICE_CHUNK: usize = 1 << 28;

impl Fold {
    #[inline]
    fn push(&mut self, v: f32) {
        if v < self.min {
            self.min = v;
        }
        if v > self.max {
            self.max = v;
        }
        if v.is_nan() {
            self.nan = self.nan.saturating_add(1);
        }
    }

    /// [`push`](Self::push) of every value of `values` in order, with the same result.
    ///
    /// [`LANES`] running folds take every `LANES`-th value, then fold into one: its minimum
    /// has the value of the sequential fold's, and the same bits unless it is a zero (the only
    /// equal values with different bits). A zero minimum is the first value equal to zero, as
    /// the sequential fold keeps; then the slice's fold merges into the running one as one
    /// value would (only a smaller minimum replaces it).
    fn push_slice(&mut self, values: &[f32]) {
        if values.len() < 2 * LANES {
            let mut nan = 0;
            for &v in values {
                self.min = if v < self.min { v } else { self.min };
                self.max = if v > self.max { v } else { self.max };
                nan += u32::from(v.is_nan());
            }
            self.nan = self.nan.saturating_add(nan);
            return;
        }
        for chunk in values.chunks(SLICE_CHUNK) {
            let mut min = [f32::INFINITY; LANES];
            let mut max = [f32::NEG_INFINITY; LANES];
            let mut nan = [0u32; LANES];
            let groups = chunk.chunks_exact(LANES);
            let rest = groups.remainder();
            for group in groups {
                for j in 0..LANES {
                    let v = group[j];
                    min[j] = if v < min[j] { v } else { min[j] };
                    max[j] = if v > max[j] { v } else { max[j] };
                    nan[j] += u32::from(v.is_nan());
                }
            }
            let mut slice = Self {
                min: f32::INFINITY,
                max: f32::NEG_INFINITY,
                nan: 0,
            };
            for j in 0..LANES {
                if min[j] < slice.min {
                    slice.min = min[j];
                }
                if max[j] > slice.max {
                    slice.max = max[j];
                }
                slice.nan += nan[j];
            }
            for &v in rest {
                slice.push(v);
            }
            for extreme in [&mut slice.min, &mut slice.max] {
                if *extreme == 0.0 {
                    *extreme = chunk
                        .iter()
                        .copied()
                        .find(|&v| v == 0.0)
                        .unwrap_or(*extreme);
                }
            }
            if slice.min < self.min {
                self.min = slice.min;
            }
            if slice.max > self.max {
                self.max = slice.max;
            }
            self.nan = self.nan.saturating_add(slice.nan);
        }
    }
}

/// `channels * columns.len()`, refused for zero channels or past the address range.
fn table_len(channels: usize, columns: &Columns) -> Result<usize> {
    if channels == 0 {
        return Err(Error::invalid("envelope: channels", "zero channels"));
    }
    channels
        .checked_mul(columns.len())
        .filter(|&n| n <= isize::MAX as usize / 4)
        .ok_or(Error::OverLimit {
            what: "envelope: values",
            requested: channels as u64 * columns.len() as u64,
            limit: isize::MAX as u64 / 4,
        })
}
