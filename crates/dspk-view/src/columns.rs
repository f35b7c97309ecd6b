//! How a range of samples is cut into pixel columns.

use std::ops::Range;

use crate::{Error, Result};

/// The most columns one request may have: a 16k-pixel-wide screen with room to spare. It keeps
/// every envelope's memory bounded by the request, not by the recording.
pub const MAX_COLUMNS: usize = 1 << 16;

/// A range of samples cut into consecutive, non-empty, non-overlapping columns that cover it.
///
/// Two layouts:
/// - [`even`](Self::even): `width` columns splitting the range as evenly as integers allow;
///   column `k` holds samples `start + floor(k * len / width)` up to (excluding)
///   `start + floor((k + 1) * len / width)` (what `np.array_split` gives for the indices);
/// - [`grid`](Self::grid): the cells `[j * step, (j + 1) * step)` of a grid anchored at sample
///   0 that meet the range, each clipped to the range. Columns on a bucket grid are what a
///   pyramid answers exactly: a column never holds part of a bucket except at a clipped edge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Columns {
    samples: Range<u64>,
    layout: Layout,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    Even { width: u64 },
    Grid { step: u64 },
}

impl Columns {
    /// `width` columns splitting `samples` as evenly as integers allow.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] for an empty range or a width of zero or more than the range's
    /// length (a column would be empty); [`Error::OverLimit`] above [`MAX_COLUMNS`].
    pub fn even(samples: Range<u64>, width: usize) -> Result<Self> {
        let len = checked_len(&samples, "columns: samples")?;
        check_count(width as u64)?;
        if width == 0 || width as u64 > len {
            return Err(Error::invalid(
                "columns: width",
                format!("{width} columns for {len} samples (1 to {len} allowed)"),
            ));
        }
        Ok(Self {
            samples,
            layout: Layout::Even {
                width: width as u64,
            },
        })
    }

    /// The cells of a grid of `step` samples (anchored at sample 0) that meet `samples`, each
    /// clipped to the range.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] for an empty range or a zero step; [`Error::OverLimit`] for more
    /// than [`MAX_COLUMNS`] columns.
    pub fn grid(samples: Range<u64>, step: u64) -> Result<Self> {
        checked_len(&samples, "columns: samples")?;
        if step == 0 {
            return Err(Error::invalid("columns: step", "a grid step of 0 samples"));
        }
        let count = samples.end.div_ceil(step) - samples.start / step;
        check_count(count)?;
        Ok(Self {
            samples,
            layout: Layout::Grid { step },
        })
    }

    /// The samples the columns cover.
    #[must_use]
    pub fn samples(&self) -> Range<u64> {
        self.samples.clone()
    }

    /// Samples in the range.
    #[must_use]
    pub fn num_samples(&self) -> u64 {
        self.samples.end - self.samples.start
    }

    /// Number of columns (at least 1).
    #[must_use]
    pub fn len(&self) -> usize {
        let count = match self.layout {
            Layout::Even { width } => width,
            Layout::Grid { step } => self.samples.end.div_ceil(step) - self.samples.start / step,
        };
        // Bounded by MAX_COLUMNS where the columns were made.
        count as usize
    }

    /// Always `false`: columns cover a non-empty range.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The grid step, for columns made by [`grid`](Self::grid).
    #[must_use]
    pub fn grid_step(&self) -> Option<u64> {
        match self.layout {
            Layout::Grid { step } => Some(step),
            Layout::Even { .. } => None,
        }
    }

    /// The first sample of column `k`; `edge(len())` is the range's end.
    ///
    /// # Panics
    ///
    /// If `k > len()`.
    #[must_use]
    pub fn edge(&self, k: usize) -> u64 {
        assert!(k <= self.len(), "column edge {k} of {}", self.len());
        let Range { start, end } = self.samples;
        match self.layout {
            Layout::Even { width } => {
                let offset = u128::from(end - start) * k as u128 / u128::from(width);
                // offset <= end - start, so it fits a u64.
                start + offset as u64
            }
            Layout::Grid { step } => {
                if k == 0 {
                    start
                } else {
                    ((start / step + k as u64) * step).min(end)
                }
            }
        }
    }

    /// The samples of column `k`.
    ///
    /// # Panics
    ///
    /// If `k >= len()`.
    #[must_use]
    pub fn column(&self, k: usize) -> Range<u64> {
        assert!(k < self.len(), "column {k} of {}", self.len());
        self.edge(k)..self.edge(k + 1)
    }

    /// The column that holds `sample`, or `None` outside the range.
    #[must_use]
    pub fn column_of(&self, sample: u64) -> Option<usize> {
        let Range { start, end } = self.samples;
        if !(start..end).contains(&sample) {
            return None;
        }
        let k = match self.layout {
            Layout::Even { width } => {
                // The largest k with floor(k * len / width) <= sample - start.
                let len = u128::from(end - start);
                let offset = u128::from(sample - start);
                (((offset + 1) * u128::from(width) - 1) / len) as usize
            }
            Layout::Grid { step } => (sample / step - start / step) as usize,
        };
        Some(k)
    }

    /// Every column's first sample and the range's end: `len() + 1` edges.
    #[must_use]
    pub fn edges(&self) -> Vec<u64> {
        (0..=self.len()).map(|k| self.edge(k)).collect()
    }
}

/// The length of a non-empty range.
fn checked_len(samples: &Range<u64>, what: &'static str) -> Result<u64> {
    if samples.start >= samples.end {
        return Err(Error::invalid(
            what,
            format!("empty range {}..{}", samples.start, samples.end),
        ));
    }
    Ok(samples.end - samples.start)
}

fn check_count(count: u64) -> Result<()> {
    if count > MAX_COLUMNS as u64 {
        return Err(Error::OverLimit {
            what: "columns",
            requested: count,
            limit: MAX_COLUMNS as u64,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every sample lies in exactly the column `column_of` names, columns are non-empty and
    /// tile the range.
    fn check_tiling(columns: &Columns) {
        let edges = columns.edges();
        assert_eq!(edges[0], columns.samples().start);
        assert_eq!(*edges.last().unwrap(), columns.samples().end);
        for k in 0..columns.len() {
            let range = columns.column(k);
            assert!(range.start < range.end, "column {k} empty: {range:?}");
            for s in [
                range.start,
                range.end - 1,
                range.start + (range.end - range.start) / 2,
            ] {
                assert_eq!(columns.column_of(s), Some(k), "sample {s}");
            }
        }
        assert_eq!(columns.column_of(columns.samples().end), None);
        if columns.samples().start > 0 {
            assert_eq!(columns.column_of(columns.samples().start - 1), None);
        }
    }

    #[test]
    fn even_matches_array_split() {
        // np.array_split(np.arange(3, 13), 4) -> [3 4 5] [6 7 8] [9 10] [11 12]: lengths
        // 3, 3, 2, 2. Our floors give 2, 3, 2, 3 (the same count of long columns, spread).
        let columns = Columns::even(3..13, 4).unwrap();
        assert_eq!(columns.edges(), vec![3, 5, 8, 10, 13]);
        for (len, width) in [(10u64, 4usize), (7, 7), (1000, 3), (12_345, 1999), (5, 1)] {
            for start in [0u64, 1, 29_999, u64::MAX / 2] {
                check_tiling(&Columns::even(start..start + len, width).unwrap());
            }
        }
    }

    #[test]
    fn grid_cells_clip_to_the_range() {
        let columns = Columns::grid(5..37, 8).unwrap();
        assert_eq!(columns.edges(), vec![5, 8, 16, 24, 32, 37]);
        assert_eq!(columns.grid_step(), Some(8));
        check_tiling(&columns);
        let aligned = Columns::grid(16..48, 16).unwrap();
        assert_eq!(aligned.edges(), vec![16, 32, 48]);
        check_tiling(&Columns::grid(3..4, 1000).unwrap());
    }

    #[test]
    fn bad_columns_are_refused() {
        assert!(matches!(
            Columns::even(0..10, 0),
            Err(Error::InvalidRequest { .. })
        ));
        assert!(matches!(
            Columns::even(0..10, 11),
            Err(Error::InvalidRequest { .. })
        ));
        assert!(matches!(
            Columns::even(4..4, 1),
            Err(Error::InvalidRequest { .. })
        ));
        assert!(matches!(
            Columns::grid(0..10, 0),
            Err(Error::InvalidRequest { .. })
        ));
        assert!(matches!(
            Columns::even(0..1 << 40, MAX_COLUMNS + 1),
            Err(Error::OverLimit { .. })
        ));
        assert!(matches!(
            Columns::grid(0..1 << 40, 2),
            Err(Error::OverLimit { .. })
        ));
    }
}
