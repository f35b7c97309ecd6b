//! De-interleaving: the values of chosen channels copied out of a block of interleaved frames
//! into one run per channel (a transposition).
//!
//! Values of 2 and 4 bytes (every [`SampleFormat`](dspk_core::SampleFormat)) move in square
//! tiles of 16-byte rows (8 x 8 two-byte or 4 x 4 four-byte values) transposed in SIMD
//! registers by [`wide`] (SSE2 on `x86_64`, NEON on `aarch64`, plain code elsewhere): a tile's
//! rows are 16 consecutive bytes of a frame when its channels are consecutive in the file (a
//! channel list like `0..384` or any ascending range), else its values are picked one by one.
//! Other sizes, and the channels and frames left over from whole tiles, move one value at a
//! time.
//!
//! A block is walked one tile's group of channels at a time over all its frames, so each run
//! receives one contiguous piece per block: few runs are written at once, each sequentially.
//! Walking all channels a few frames at a time instead writes a few bytes to every run in
//! turn; in a microbenchmark on a (shared, noisy) development machine that was up to half as
//! fast once the runs no longer fit in the cache. Walking 2 or 4 groups side by side (so
//! each frame's cache line is read once per block rather than once per group), or blocks of
//! 1 MiB or 256 KiB rather than 512 KiB, were slower there too (384 channels of `int16`, one
//! thread, median of 7: 2 groups 9-20 %, 4 groups 40-65 %, 1 MiB blocks 3-17 %, 256 KiB
//! blocks about 30 %). So the copies are not limited by reading the block from L2; the wider
//! passes write more runs at once and likely spill tile registers (2 tiles fill the 16 SSE
//! registers).

use bytemuck::cast;
use wide::{u16x8, u32x4};

/// Copies the values of `channels` out of `frames` (whole interleaved frames of `frame`
/// bytes, values of `size` bytes) into `runs`, one per channel: the value of channel
/// `channels[k]` in frame `r` goes to `runs[k][(at + r) * size..][..size]`, bytes as stored.
///
/// Callers guarantee that every channel lies inside a frame (`(channel + 1) * size <= frame`)
/// and that every run holds `at + frames.len() / frame` values; indexing panics otherwise.
pub(super) fn deinterleave(
    frames: &[u8],
    frame: usize,
    size: usize,
    channels: &[usize],
    runs: &mut [&mut [u8]],
    at: usize,
) {
    if frame == 0 {
        return;
    }
    let block = Block { frames, frame, at };
    match size {
        2 => block.tiled::<2, 8>(channels, runs),
        4 => block.tiled::<4, 4>(channels, runs),
        _ => block.by_value(size, channels, runs, 0..block.rows()),
    }
}

/// The rows of one tile of values of `S` bytes: `N = 16 / S` rows of 16 bytes.
trait Tile<const N: usize> {
    /// The tile with rows and columns swapped: value `j` of row `i` becomes value `i` of
    /// row `j`.
    fn transpose(rows: [[u8; 16]; N]) -> [[u8; 16]; N];
}

/// Values of `S` bytes.
struct Values<const S: usize>;

impl Tile<8> for Values<2> {
    #[inline(always)]
    fn transpose(rows: [[u8; 16]; 8]) -> [[u8; 16]; 8] {
        cast(u16x8::transpose(cast(rows)))
    }
}

impl Tile<4> for Values<4> {
    #[inline(always)]
    fn transpose(rows: [[u8; 16]; 4]) -> [[u8; 16]; 4] {
        cast(u32x4::transpose(cast(rows)))
    }
}

/// A block of interleaved frames and where its first frame goes in the runs.
struct Block<'a> {
    frames: &'a [u8],
    frame: usize,
    at: usize,
}

impl Block<'_> {
    /// Whole frames in the block.
    fn rows(&self) -> usize {
        self.frames.len() / self.frame
    }

    /// Frame `row` of the block.
    #[inline(always)]
    fn row(&self, row: usize) -> &[u8] {
        &self.frames[row * self.frame..(row + 1) * self.frame]
    }

    /// De-interleaves values of `S` bytes in tiles of `N` channels by `N` frames.
    fn tiled<const S: usize, const N: usize>(&self, channels: &[usize], runs: &mut [&mut [u8]])
    where
        Values<S>: Tile<N>,
    {
        let rows = self.rows();
        let whole_rows = rows - rows % N;
        let grouped = channels.len() - channels.len() % N;
        for (group, outs) in channels[..grouped]
            .chunks_exact(N)
            .zip(runs.chunks_exact_mut(N))
        {
            let first = group[0];
            if group.iter().enumerate().all(|(k, &c)| c == first + k) {
                self.tiles::<S, N>(outs, whole_rows, |row| {
                    let mut values = [0; 16];
                    values.copy_from_slice(&row[first * S..first * S + 16]);
                    values
                });
            } else {
                self.tiles::<S, N>(outs, whole_rows, |row| {
                    let mut values = [0; 16];
                    for (value, &c) in values.chunks_exact_mut(S).zip(group) {
                        value.copy_from_slice(&row[c * S..(c + 1) * S]);
                    }
                    values
                });
            }
        }
        self.by_value(S, &channels[grouped..], &mut runs[grouped..], 0..whole_rows);
        self.by_value(S, channels, runs, whole_rows..rows);
    }

    /// Fills `outs` (the runs of one group of `N` channels) over the first `whole_rows`
    /// frames, a multiple of `N`, with the tiles `load` makes of each frame.
    #[inline(always)]
    fn tiles<const S: usize, const N: usize>(
        &self,
        outs: &mut [&mut [u8]],
        whole_rows: usize,
        load: impl Fn(&[u8]) -> [u8; 16],
    ) where
        Values<S>: Tile<N>,
    {
        for first_row in (0..whole_rows).step_by(N) {
            let tile: [[u8; 16]; N] = std::array::from_fn(|r| load(self.row(first_row + r)));
            let at = (self.at + first_row) * S;
            for (out, column) in outs.iter_mut().zip(Values::<S>::transpose(tile)) {
                out[at..at + 16].copy_from_slice(&column);
            }
        }
    }

    /// Copies the values of `channels` (`size` bytes each) in the frames `rows` one at a time.
    fn by_value(
        &self,
        size: usize,
        channels: &[usize],
        runs: &mut [&mut [u8]],
        rows: std::ops::Range<usize>,
    ) {
        if rows.is_empty() {
            return;
        }
        let frames = &self.frames[rows.start * self.frame..rows.end * self.frame];
        for (&channel, out) in channels.iter().zip(runs.iter_mut()) {
            let out = &mut out[(self.at + rows.start) * size..(self.at + rows.end) * size];
            let column = channel * size;
            for (value, frame) in out
                .chunks_exact_mut(size)
                .zip(frames.chunks_exact(self.frame))
            {
                value.copy_from_slice(&frame[column..column + size]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dspk_core::rng::SplitMix64;

    /// The runs `deinterleave` must write, one value at a time.
    fn naive(
        frames: &[u8],
        frame: usize,
        size: usize,
        channels: &[usize],
        at: usize,
    ) -> Vec<Vec<u8>> {
        let rows = frames.len() / frame;
        channels
            .iter()
            .map(|&c| {
                let mut run = vec![0xEE; at * size];
                for r in 0..rows {
                    run.extend_from_slice(&frames[r * frame + c * size..][..size]);
                }
                run
            })
            .collect()
    }

    /// De-interleaves random frames of `num_channels` channels, `rows` frames and values of
    /// `size` bytes, for `channels`, into runs that start `at` values in, and compares them
    /// with the naive copy.
    fn check(num_channels: usize, rows: usize, size: usize, channels: &[usize], at: usize) {
        let frame = num_channels * size;
        let mut rng = SplitMix64::new((num_channels * 1000 + rows * 10 + size) as u64);
        let frames: Vec<u8> = (0..frame * rows).map(|_| rng.next_u64() as u8).collect();
        let mut runs: Vec<Vec<u8>> = vec![vec![0xEE; (at + rows) * size]; channels.len()];
        let mut slices: Vec<&mut [u8]> = runs.iter_mut().map(Vec::as_mut_slice).collect();
        deinterleave(&frames, frame, size, channels, &mut slices, at);
        let expected = naive(&frames, frame, size, channels, at);
        for (k, (ours, theirs)) in runs.iter().zip(&expected).enumerate() {
            assert!(
                ours == theirs,
                "{num_channels} channels, {rows} rows, size {size}, at {at}: channel {} \
                 (entry {k}) differs",
                channels[k]
            );
        }
    }

    #[test]
    fn every_size_and_shape_equals_the_naive_copy() {
        for size in [1, 2, 3, 4, 8] {
            for num_channels in [1, 3, 7, 8, 16, 17, 385] {
                for rows in [0, 1, 5, 8, 17, 33, 100] {
                    let all: Vec<usize> = (0..num_channels).collect();
                    check(num_channels, rows, size, &all, 0);
                    check(num_channels, rows, size, &all, 3);
                }
            }
        }
    }

    #[test]
    fn channel_subsets_equal_the_naive_copy() {
        let mut rng = SplitMix64::new(18);
        for size in [1, 2, 3, 4, 8] {
            let num_channels = 385;
            // A contiguous middle range, an unsorted list with repeats, a descending list,
            // contiguous runs broken by one channel, and the last channels alone.
            let middle: Vec<usize> = (37..300).collect();
            let unsorted: Vec<usize> = (0..200)
                .map(|_| (rng.next_u64() % num_channels as u64) as usize)
                .collect();
            let descending: Vec<usize> = (0..num_channels).rev().collect();
            let broken: Vec<usize> = (0..40).chain(41..90).chain([3]).chain(90..140).collect();
            let last: Vec<usize> = (377..385).collect();
            for channels in [middle, unsorted, descending, broken, last] {
                for rows in [1, 9, 64, 131] {
                    check(num_channels, rows, size, &channels, 2);
                }
            }
        }
    }
}
