//! Cutting one window into disjoint parts, and the pool of threads that reads them into the
//! same buffer at once (the [`WindowLoader`](crate::WindowLoader)'s readers).
//!
//! A window buffer is channel-major: `channels.len()` runs of `read_len * per_sample`
//! elements. A part is either a group of channels (contiguous runs: a plain read) or a range
//! of samples (one piece of every run: a read into per-channel runs). Parts never overlap, so
//! threads write disjoint elements of the buffer; the thread that cut the window waits for
//! every part before it touches the buffer again.

use std::ops::Range;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::thread::Scope;

use crossbeam_channel::{Receiver, Sender, unbounded};

use crate::loader::WindowElement;
use crate::recording::{ConcurrentReads, RecordingSource};
use crate::window::HaloWindow;
use crate::{Error, Result};

/// The fewest bytes a part holds: below a page a thread costs more than the read it does.
pub(crate) const MIN_PART_BYTES: usize = 4096;

/// One disjoint part of a window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Part {
    /// These entries of the loader's channel list, over all the window's samples.
    Channels(Range<usize>),
    /// These samples (counted from the recording's start), over all the loader's channels.
    Samples(Range<u64>),
}

/// Cuts a window reading samples `read` of `num_channels` channels, `sample_bytes` bytes per
/// sample of one channel in the buffer, into at most `threads` parts as `mode` allows, none
/// under [`MIN_PART_BYTES`] (unless the window is). A single part is always
/// `Part::Channels(0..num_channels)`, the whole window read as one.
pub(crate) fn plan(
    mode: ConcurrentReads,
    threads: usize,
    num_channels: usize,
    read: &Range<u64>,
    sample_bytes: usize,
) -> Vec<Part> {
    let whole = vec![Part::Channels(0..num_channels)];
    let len = read.end.saturating_sub(read.start);
    let bytes = (num_channels as u64)
        .saturating_mul(len)
        .saturating_mul(sample_bytes as u64);
    let by_size = usize::try_from(bytes / MIN_PART_BYTES as u64).unwrap_or(usize::MAX);
    let most = threads.min(by_size).max(1);
    match mode {
        ConcurrentReads::No => whole,
        _ if most == 1 => whole,
        ConcurrentReads::ByChannel => {
            let parts = most.min(num_channels);
            (0..parts)
                .map(|p| num_channels * p / parts..num_channels * (p + 1) / parts)
                .map(Part::Channels)
                .collect()
        }
        ConcurrentReads::ByTime { align } => {
            let align = align.max(1);
            let parts = most as u64;
            let mut cuts = vec![read.start];
            for p in 1..parts {
                let ideal =
                    read.start + (u128::from(len) * u128::from(p) / u128::from(parts)) as u64;
                // The multiple of `align` nearest the ideal cut.
                let cut = (ideal + align / 2) / align * align;
                let last = cuts.last().copied().unwrap_or(read.start);
                if cut > last && cut < read.end {
                    cuts.push(cut);
                }
            }
            if cuts.len() == 1 {
                return whole;
            }
            cuts.push(read.end);
            cuts.windows(2)
                .map(|pair| Part::Samples(pair[0]..pair[1]))
                .collect()
        }
    }
}

/// A window buffer shared by the threads reading its parts: its address and length.
///
/// Only [`read_part`] turns it back into slices, each over one part's elements.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SharedOut<T> {
    ptr: *mut T,
    len: usize,
}

// SAFETY: a `SharedOut` is only dereferenced by `read_part`, for disjoint parts of a buffer
// that its owner does not touch until every part has been reported done (`PartReaders::fill`).
unsafe impl<T: Send> Send for SharedOut<T> {}

impl<T> SharedOut<T> {
    /// Shares `buffer`; it must stay alive and untouched while parts of it are being read.
    pub(crate) fn new(buffer: &mut [T]) -> Self {
        Self {
            ptr: buffer.as_mut_ptr(),
            len: buffer.len(),
        }
    }
}

/// Reads `part` of `window` (`channels`, `per_sample` elements per sample) into `out`.
///
/// # Safety
///
/// `out` must point at a live buffer of `channels.len() * window.read_len() * per_sample`
/// elements that nothing else reads or writes in the elements of `part` until this returns.
unsafe fn read_part<S, T>(
    source: &S,
    channels: &[usize],
    window: &HaloWindow,
    per_sample: usize,
    part: &Part,
    out: SharedOut<T>,
) -> Result<()>
where
    S: RecordingSource + ?Sized,
    T: WindowElement,
{
    let read = window.read();
    let run = window.read_len() * per_sample;
    debug_assert_eq!(out.len, channels.len() * run);
    match part {
        Part::Channels(group) => {
            // SAFETY: the runs of `group` lie inside the buffer (`group` is within `channels`)
            // and belong to this part alone.
            let slice = unsafe {
                std::slice::from_raw_parts_mut(out.ptr.add(group.start * run), group.len() * run)
            };
            let group = &channels[group.clone()];
            if source.concurrent_reads() == ConcurrentReads::No {
                // The whole window, read the source's own way.
                T::fill(source, group, read, slice)
            } else {
                // A part read, which starts no threads of the source's own: the loader's
                // thread count is the number of threads reading.
                let mut runs: Vec<&mut [T]> = Vec::with_capacity(group.len());
                let mut rest = slice;
                for _ in group {
                    let (own, tail) = std::mem::take(&mut rest).split_at_mut(run);
                    runs.push(own);
                    rest = tail;
                }
                T::fill_runs(source, group, read, &mut runs)
            }
        }
        Part::Samples(samples) => {
            let skip =
                usize::try_from(samples.start - read.start).unwrap_or(usize::MAX) * per_sample;
            let take =
                usize::try_from(samples.end - samples.start).unwrap_or(usize::MAX) * per_sample;
            let mut runs: Vec<&mut [T]> = (0..channels.len())
                .map(|k| {
                    // SAFETY: `samples` lies inside `read`, so each piece lies inside run `k`
                    // of the buffer, and the pieces of `samples` belong to this part alone.
                    unsafe { std::slice::from_raw_parts_mut(out.ptr.add(k * run + skip), take) }
                })
                .collect();
            T::fill_runs(source, channels, samples.clone(), &mut runs)
        }
    }
}

/// A part for a helper thread to read.
struct Job<T> {
    /// Its place among the window's parts (errors are reported by the first failed part).
    index: usize,
    part: Part,
    window: HaloWindow,
    out: SharedOut<T>,
}

/// The helper threads of one loader: scoped threads that read the parts handed to them, and
/// exit when the `PartReaders` is dropped (the scope then joins them).
pub(crate) struct PartReaders<T> {
    jobs: Option<Sender<Job<T>>>,
    done: Receiver<(usize, Result<()>)>,
    helpers: usize,
}

impl<T: WindowElement> PartReaders<T> {
    /// Starts up to `helpers` threads in `scope` reading parts of `source`'s `channels`
    /// (fewer if the system refuses a thread: the window is then read by those that started).
    pub(crate) fn start<'scope, 'env, S>(
        scope: &'scope Scope<'scope, 'env>,
        source: &'env S,
        channels: &'env [usize],
        per_sample: usize,
        helpers: usize,
    ) -> Self
    where
        S: RecordingSource + ?Sized,
    {
        let (jobs, jobs_rx) = unbounded::<Job<T>>();
        let (done_tx, done) = unbounded();
        let mut started = 0;
        for k in 0..helpers {
            let jobs_rx = jobs_rx.clone();
            let done_tx = done_tx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("dspk-window-loader-{}", k + 1))
                .spawn_scoped(scope, move || {
                    while let Ok(job) = jobs_rx.recv() {
                        let Job {
                            index,
                            part,
                            window,
                            out,
                        } = job;
                        let result = catch_unwind(AssertUnwindSafe(|| {
                            // SAFETY: `fill` hands each part to one thread and waits for all of
                            // them before it touches the buffer again.
                            unsafe { read_part(source, channels, &window, per_sample, &part, out) }
                        }))
                        .unwrap_or(Err(Error::LoaderStopped {
                            window: window.index(),
                        }));
                        if done_tx.send((index, result)).is_err() {
                            return;
                        }
                    }
                });
            // The scope joins the thread; a thread the system refuses is simply not there.
            if spawned.is_err() {
                break;
            }
            started += 1;
        }
        Self {
            jobs: Some(jobs),
            done,
            helpers: started,
        }
    }

    /// Threads reading each window: the helpers and the caller's own.
    pub(crate) fn threads(&self) -> usize {
        self.helpers + 1
    }

    /// Reads `parts` of `window` into `buffer` (all of it, `channels.len() * read_len *
    /// per_sample` elements): parts after the first go to the helpers, the first is read here,
    /// then this waits for every part. The error of the first failed part, in part order.
    pub(crate) fn fill<S>(
        &self,
        source: &S,
        channels: &[usize],
        window: &HaloWindow,
        per_sample: usize,
        parts: &[Part],
        buffer: &mut [T],
    ) -> Result<()>
    where
        S: RecordingSource + ?Sized,
    {
        let out = SharedOut::new(buffer);
        let mut results: Vec<Option<Result<()>>> = parts.iter().map(|_| None).collect();
        let mut sent = 0;
        if let Some(jobs) = &self.jobs {
            for (index, part) in parts.iter().enumerate().skip(1) {
                let job = Job {
                    index,
                    part: part.clone(),
                    window: window.clone(),
                    out,
                };
                if jobs.send(job).is_err() {
                    break;
                }
                sent += 1;
            }
        }
        // Parts no helper took (none started, or they are gone) are read here, first one first.
        for (index, part) in parts.iter().enumerate() {
            if index == 0 || index > sent {
                let result = catch_unwind(AssertUnwindSafe(|| {
                    // SAFETY: this part went to no helper; the others are disjoint from it.
                    unsafe { read_part(source, channels, window, per_sample, part, out) }
                }))
                .unwrap_or(Err(Error::LoaderStopped {
                    window: window.index(),
                }));
                results[index] = Some(result);
            }
        }
        // Every part handed out must be reported before the buffer is used (or freed) again.
        for _ in 0..sent {
            match self.done.recv() {
                Ok((index, result)) => results[index] = Some(result),
                // Every helper is gone, so none still writes into the buffer.
                Err(_) => break,
            }
        }
        results.into_iter().try_for_each(|r| {
            r.unwrap_or(Err(Error::LoaderStopped {
                window: window.index(),
            }))
        })
    }
}

impl<T> Drop for PartReaders<T> {
    fn drop(&mut self) {
        // Disconnects the helpers' queue: each finishes its part (if any) and exits.
        self.jobs.take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks that `parts` cover every (channel, sample) of the window exactly once.
    fn assert_tiles(parts: &[Part], channels: usize, read: &Range<u64>) {
        let n = (read.end - read.start) as usize;
        let mut covered = vec![0u8; channels * n];
        for part in parts {
            match part {
                Part::Channels(group) => {
                    for c in group.clone() {
                        covered[c * n..(c + 1) * n].iter_mut().for_each(|x| *x += 1);
                    }
                }
                Part::Samples(samples) => {
                    assert!(samples.start < samples.end, "{parts:?}");
                    for c in 0..channels {
                        for s in samples.clone() {
                            covered[c * n + (s - read.start) as usize] += 1;
                        }
                    }
                }
            }
        }
        assert!(covered.iter().all(|&x| x == 1), "{parts:?} over {read:?}");
    }

    #[test]
    fn parts_tile_the_window_whatever_the_cut() {
        for (mode, channels, read) in [
            (ConcurrentReads::ByTime { align: 1 }, 3, 1_000..8_001),
            (ConcurrentReads::ByTime { align: 1_000 }, 5, 1_500..9_321),
            (ConcurrentReads::ByTime { align: 7 }, 2, 13..10_000),
            (ConcurrentReads::ByChannel, 7, 0..4_000),
            (ConcurrentReads::ByChannel, 3, 5..6_005),
            (ConcurrentReads::No, 4, 0..50_000),
        ] {
            for threads in 1..=9 {
                let parts = plan(mode, threads, channels, &read, 2);
                assert!(!parts.is_empty() && parts.len() <= threads);
                assert_tiles(&parts, channels, &read);
                if mode == ConcurrentReads::No || threads == 1 {
                    assert_eq!(parts, [Part::Channels(0..channels)]);
                }
            }
        }
    }

    #[test]
    fn cuts_fall_on_the_alignment_and_small_windows_stay_whole() {
        let parts = plan(
            ConcurrentReads::ByTime { align: 1_000 },
            4,
            4,
            &(1_500..9_700),
            2,
        );
        let starts: Vec<u64> = parts
            .iter()
            .map(|p| match p {
                Part::Samples(s) => s.start,
                Part::Channels(_) => u64::MAX,
            })
            .collect();
        assert_eq!(starts, [1_500, 4_000, 6_000, 8_000]);
        // 8 KiB in all: two parts of a page at most.
        let parts = plan(ConcurrentReads::ByTime { align: 1 }, 8, 2, &(0..2_048), 2);
        assert_eq!(parts.len(), 2);
        // Under a page: one part, the whole window.
        let parts = plan(ConcurrentReads::ByChannel, 8, 2, &(0..1_000), 2);
        assert_eq!(parts, [Part::Channels(0..2)]);
        // An alignment longer than the window: no cut falls inside it.
        let parts = plan(
            ConcurrentReads::ByTime { align: 100_000 },
            8,
            4,
            &(1..50_000),
            2,
        );
        assert_eq!(parts, [Part::Channels(0..4)]);
    }
}
