//! Cutting a recording into windows with halos, and deciding which window owns an event.
//!
//! A stage that needs context (a filter settling, a waveform that straddles a boundary) reads
//! each window with a halo on both sides. Windows tile the recording without overlap in their
//! *valid* ranges, so an event found in a halo belongs to the neighbouring window and is
//! reported only there: the result does not depend on the window size.

use std::ops::Range;

use crate::{Error, Result};

/// How a recording of `num_samples` samples is cut into windows of `window` valid samples, each
/// read with `halo_left` samples before and `halo_right` after (clamped at the recording's
/// ends).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkSchedule {
    num_samples: u64,
    window: u64,
    halo_left: u64,
    halo_right: u64,
    len: usize,
}

impl ChunkSchedule {
    /// Windows of `window` valid samples with the given halos. An empty recording has no
    /// windows.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidSchedule`] if `window` is zero, [`Error::TooLarge`] if the number of
    /// windows does not fit in `usize`.
    pub fn new(num_samples: u64, window: u64, halo_left: u64, halo_right: u64) -> Result<Self> {
        if window == 0 {
            return Err(Error::InvalidSchedule { window });
        }
        let len = usize::try_from(num_samples.div_ceil(window)).map_err(|_| Error::TooLarge {
            what: "window schedule",
            detail: format!(
                "{} in windows of {}",
                crate::format_count(num_samples, "samples"),
                crate::format_count(window, "samples")
            ),
        })?;
        Ok(Self {
            num_samples,
            window,
            halo_left,
            halo_right,
            len,
        })
    }

    /// Windows with the same halo on both sides.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    pub fn symmetric(num_samples: u64, window: u64, halo: u64) -> Result<Self> {
        Self::new(num_samples, window, halo, halo)
    }

    /// The number of windows.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no windows (the recording is empty).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Samples in the recording.
    #[must_use]
    pub fn num_samples(&self) -> u64 {
        self.num_samples
    }

    /// The longest read range of any window: what a buffer for one window must hold per channel.
    #[must_use]
    pub fn max_read_len(&self) -> u64 {
        self.window
            .saturating_add(self.halo_left)
            .saturating_add(self.halo_right)
            .min(self.num_samples)
    }

    /// Window `index`, or `None` past the last.
    #[must_use]
    pub fn window(&self, index: usize) -> Option<HaloWindow> {
        (index < self.len).then(|| self.window_at(index))
    }

    /// Window `index`, which must be below `len`.
    fn window_at(&self, index: usize) -> HaloWindow {
        let start = index as u64 * self.window;
        let end = start.saturating_add(self.window).min(self.num_samples);
        HaloWindow {
            index,
            valid: start..end,
            read: start.saturating_sub(self.halo_left)
                ..end.saturating_add(self.halo_right).min(self.num_samples),
        }
    }

    /// All windows in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = HaloWindow> + '_ {
        (0..self.len).map(|i| self.window_at(i))
    }
}

/// One window of a [`ChunkSchedule`]: the samples it owns (`valid`) and the samples it reads
/// (`read`, the valid range widened by the halos and clamped to the recording).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HaloWindow {
    index: usize,
    valid: Range<u64>,
    read: Range<u64>,
}

impl HaloWindow {
    /// The window's position in its schedule.
    #[must_use]
    pub fn index(&self) -> usize {
        self.index
    }

    /// The samples this window owns (global indices); windows' valid ranges tile the recording.
    #[must_use]
    pub fn valid(&self) -> Range<u64> {
        self.valid.clone()
    }

    /// The samples this window reads (global indices): `valid` plus the halos.
    #[must_use]
    pub fn read(&self) -> Range<u64> {
        self.read.clone()
    }

    /// Samples per channel in the read range.
    #[must_use]
    pub fn read_len(&self) -> usize {
        (self.read.end - self.read.start) as usize
    }

    /// The valid range relative to the start of the read range (indices into a window buffer).
    #[must_use]
    pub fn valid_local(&self) -> Range<usize> {
        let start = (self.valid.start - self.read.start) as usize;
        start..start + (self.valid.end - self.valid.start) as usize
    }

    /// The owner-only rule: the global sample of an event found at `local` (an index into the
    /// read range) if this window owns it, else `None` (a halo sample belongs to a neighbour,
    /// which reports it).
    #[must_use]
    pub fn owned_global(&self, local: usize) -> Option<u64> {
        let global = self.read.start.checked_add(local as u64)?;
        self.valid.contains(&global).then_some(global)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sample_is_owned_exactly_once() {
        for num_samples in [0u64, 1, 2, 7, 100, 101, 1000, 1023] {
            for window in [1u64, 2, 3, 10, 64, 99, 100, 1000, 5000] {
                for (left, right) in [(0, 0), (1, 0), (0, 3), (5, 7), (64, 64), (3000, 10_000)] {
                    let schedule = ChunkSchedule::new(num_samples, window, left, right).unwrap();
                    let mut owners = vec![0u32; num_samples as usize];
                    let mut max_read = 0;
                    for (i, w) in schedule.iter().enumerate() {
                        assert_eq!(w.index(), i);
                        assert!(w.read().start <= w.valid().start && w.valid().end <= w.read().end);
                        assert!(w.read().end <= num_samples);
                        assert_eq!(w.valid().start - w.read().start, left.min(w.valid().start));
                        max_read = max_read.max(w.read_len() as u64);
                        // Walk the whole read range as a detector would and keep owned events.
                        for local in 0..w.read_len() {
                            if let Some(global) = w.owned_global(local) {
                                owners[global as usize] += 1;
                                assert!(w.valid_local().contains(&local));
                            } else {
                                assert!(!w.valid_local().contains(&local));
                            }
                        }
                    }
                    assert!(
                        owners.iter().all(|&n| n == 1),
                        "n={num_samples} w={window} halos=({left},{right}): {owners:?}"
                    );
                    assert!(max_read <= schedule.max_read_len());
                    assert_eq!(schedule.is_empty(), num_samples == 0);
                }
            }
        }
    }

    #[test]
    fn events_on_window_edges_are_counted_once() {
        let schedule = ChunkSchedule::symmetric(300, 100, 10).unwrap();
        // Events exactly on the boundaries between windows and on the halos' edges.
        let events = [0u64, 89, 90, 99, 100, 109, 110, 199, 200, 299];
        let mut found = Vec::new();
        for w in schedule.iter() {
            for &e in &events {
                if w.read().contains(&e) {
                    let local = (e - w.read().start) as usize;
                    found.extend(w.owned_global(local));
                }
            }
        }
        found.sort_unstable();
        assert_eq!(found, events);
    }

    #[test]
    fn halos_larger_than_the_recording_are_clamped() {
        let schedule = ChunkSchedule::symmetric(10, 4, 1000).unwrap();
        assert_eq!(schedule.len(), 3);
        assert_eq!(schedule.max_read_len(), 10);
        for w in schedule.iter() {
            assert_eq!(w.read(), 0..10);
        }
        assert_eq!(schedule.window(2).unwrap().valid(), 8..10);
        assert!(schedule.window(3).is_none());
    }

    #[test]
    fn zero_window_is_an_error() {
        assert!(matches!(
            ChunkSchedule::symmetric(10, 0, 0),
            Err(Error::InvalidSchedule { window: 0 })
        ));
    }
}
