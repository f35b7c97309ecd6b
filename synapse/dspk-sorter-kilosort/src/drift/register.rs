//! Kilosort4 §3.3: registration of the batches' fingerprints to a common reference, rigid
//! (integer bins, iterated) then per block (sub-bin, smoothed and upsampled).

use super::fingerprint::COLUMNS;
use super::smooth::gaussian_filter;
use crate::{Error, Result};

/// The batch Kilosort4 takes as the first reference, when the recording is long enough.
const REFERENCE_BATCH: usize = 300;

/// The rigid search tries shifts `-15..=15` bins.
pub(super) const COARSE_REACH: isize = 15;

/// Rigid iterations whose shifts are applied. Kilosort4 runs a tenth whose shifts are not
/// applied, after which the reference is recomputed from unchanged fingerprints: it changes
/// nothing and is not run.
const COARSE_ITERATIONS: usize = 9;

/// The per-block search tries shifts `-5..=5` bins.
pub(super) const FINE_REACH: isize = 5;

/// Fine shifts tried per block.
const N_FINE: usize = (2 * FINE_REACH + 1) as usize;

/// Upsampled fine shifts `v_u = -5 + 0.1 u`, `u = 0..101`.
const UPSAMPLED: usize = 101;

/// The blocks of §3.3 step 3: `len = floor(n_bins / nblocks)` bins each, `2 nblocks - 1` of
/// them starting at `round_half_even(linspace(0, n_bins - len, 2 nblocks - 1))`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Blocks {
    pub(super) len: usize,
    pub(super) starts: Vec<usize>,
}

impl Blocks {
    /// The layout for `nblocks >= 1` over `n_bins` bins.
    ///
    /// # Errors
    ///
    /// [`Error::Setting`] (`nblocks`) when `nblocks` is 0, exceeds `n_bins`, or two blocks
    /// would start on the same bin (a probe only a few bins long).
    pub(super) fn new(n_bins: usize, nblocks: usize) -> Result<Self> {
        if nblocks == 0 || nblocks > n_bins {
            return Err(Error::Setting {
                name: "nblocks",
                reason: format!("{nblocks} blocks over {n_bins} depth bins (1..={n_bins})"),
            });
        }
        let len = n_bins / nblocks;
        let count = 2 * nblocks - 1;
        // numpy.linspace: i * step, the last value exactly the end.
        let end = (n_bins - len) as f64;
        let step = if count > 1 {
            end / (count - 1) as f64
        } else {
            0.0
        };
        let starts: Vec<usize> = (0..count)
            .map(|i| {
                if i + 1 == count && count > 1 {
                    end
                } else {
                    i as f64 * step
                }
            })
            .map(|s| s.round_ties_even() as usize)
            .collect();
        if starts.windows(2).any(|w| w[0] == w[1]) {
            return Err(Error::Setting {
                name: "nblocks",
                reason: format!("{nblocks} blocks over {n_bins} depth bins start on equal bins"),
            });
        }
        Ok(Self { len, starts })
    }
}

/// `mean over (row, column)` of `roll(f, s) * r` for two `rows x 20` row-major slices, the roll
/// circular over the rows: `numpy.roll(f, s, axis=0)` (positive `s` moves content to higher rows).
fn rolled_product(f: &[f64], r: &[f64], rows: usize, s: isize) -> f64 {
    let mut sum = 0.0;
    for (i, r_row) in r.chunks_exact(COLUMNS).enumerate() {
        let src = (i as isize - s).rem_euclid(rows as isize) as usize;
        let f_row = &f[src * COLUMNS..(src + 1) * COLUMNS];
        sum += f_row.iter().zip(r_row).map(|(a, b)| a * b).sum::<f64>();
    }
    sum / (rows * COLUMNS) as f64
}

/// The first shift in `-reach..=reach` with the largest [`rolled_product`] (first argmax).
fn best_shift(f: &[f64], r: &[f64], rows: usize, reach: isize) -> isize {
    let mut best = (-reach, f64::NEG_INFINITY);
    for s in -reach..=reach {
        let score = rolled_product(f, r, rows, s);
        if score > best.1 {
            best = (s, score);
        }
    }
    best.0
}

/// Mean over the active batches of their fingerprints.
fn reference(fg: &[f64], per_batch: usize, active: &[bool]) -> Vec<f64> {
    let mut mean = vec![0.0; per_batch];
    let mut n = 0usize;
    for (f, _) in fg.chunks_exact(per_batch).zip(active).filter(|(_, a)| **a) {
        mean.iter_mut().zip(f).for_each(|(m, v)| *m += v);
        n += 1;
    }
    mean.iter_mut().for_each(|m| *m /= n as f64);
    mean
}

/// The first reference: batch `min(300, floor(Nb / 2))` if it has spikes, else the batch with
/// spikes nearest to it (the earlier of two equally near); `None` when no batch has spikes.
fn first_reference(active: &[bool]) -> Option<usize> {
    let wanted = REFERENCE_BATCH.min(active.len() / 2);
    (0..active.len())
        .filter(|&b| active[b])
        .min_by_key(|&b| (b.abs_diff(wanted), b))
}

/// The shift of every batch and block in bins (`n_batches x n_blocks` row-major) that
/// registers the fingerprints `f` (`n_batches x n_bins x 20`, consumed) of §3.2: steps 1, 2 and
/// 4 to 7 of §3.3 with `smoothing` = `drift_smoothing`. Batches not `active` (no spikes) take
/// no part: they keep shift 0 in the rigid search, stay out of the reference means, and get 0
/// for every block; their block scores are 0 (as upstream) and enter the smoothing along the
/// batch axis as zeros.
pub(super) fn register(
    mut f: Vec<f64>,
    n_bins: usize,
    active: &[bool],
    blocks: &Blocks,
    smoothing: [f64; 3],
    threads: usize,
) -> Vec<f64> {
    let n_batches = active.len();
    let n_blocks = blocks.starts.len();
    let per_batch = n_bins * COLUMNS;
    let mut shifts = vec![0.0; n_batches * n_blocks];
    let Some(first) = first_reference(active) else {
        return shifts;
    };

    // Step 1: remove the mean over depth of every (batch, column).
    for batch in f.chunks_exact_mut(per_batch) {
        let mut mean = [0.0; COLUMNS];
        for row in batch.chunks_exact(COLUMNS) {
            mean.iter_mut().zip(row).for_each(|(m, v)| *m += v);
        }
        mean.iter_mut().for_each(|m| *m /= n_bins as f64);
        for row in batch.chunks_exact_mut(COLUMNS) {
            row.iter_mut().zip(&mean).for_each(|(v, m)| *v -= m);
        }
    }

    // Step 2: rigid, integer bins, reference updated to the mean after every iteration.
    let mut r = f[first * per_batch..(first + 1) * per_batch].to_vec();
    let mut rigid = vec![0isize; n_batches];
    // Batches are searched independently within an iteration: they are shared among up to
    // `threads` threads (each batch's search is the same whatever the thread count).
    let per_thread = n_batches.div_ceil(threads.max(1)).max(1);
    for _ in 0..COARSE_ITERATIONS {
        let reference_now = &r;
        std::thread::scope(|scope| {
            for ((batches, totals), actives) in f
                .chunks_mut(per_thread * per_batch)
                .zip(rigid.chunks_mut(per_thread))
                .zip(active.chunks(per_thread))
            {
                scope.spawn(move || {
                    for ((batch, total), _) in batches
                        .chunks_exact_mut(per_batch)
                        .zip(totals)
                        .zip(actives)
                        .filter(|(_, a)| **a)
                    {
                        let s = best_shift(batch, reference_now, n_bins, COARSE_REACH);
                        batch.rotate_right(s.rem_euclid(n_bins as isize) as usize * COLUMNS);
                        *total += s;
                    }
                });
            }
        });
        r = reference(&f, per_batch, active);
    }

    // Step 4: per-block scores dcs[s, b, j], the roll circular within the block.
    let mut dcs = vec![0.0; N_FINE * n_batches * n_blocks];
    let block_values = blocks.len * COLUMNS;
    for (b, batch) in f.chunks_exact(per_batch).enumerate() {
        for (j, &start) in blocks.starts.iter().enumerate() {
            let range = start * COLUMNS..start * COLUMNS + block_values;
            for (k, s) in (-FINE_REACH..=FINE_REACH).enumerate() {
                let score = rolled_product(&batch[range.clone()], &r[range.clone()], blocks.len, s);
                dcs[(k * n_batches + b) * n_blocks + j] = score;
            }
        }
    }

    // Step 5: smoothing along (shift, batch, block).
    gaussian_filter(&mut dcs, &[N_FINE, n_batches, n_blocks], &smoothing);

    // Steps 6 and 7: upsampled argmax, added to the rigid shift.
    let weights: Vec<[f64; N_FINE]> = (0..UPSAMPLED)
        .map(|u| {
            let v = upsampled(u);
            std::array::from_fn(|k| (-0.5 * ((k as isize - FINE_REACH) as f64 - v).powi(2)).exp())
        })
        .collect();
    for (b, (row, _)) in shifts
        .chunks_exact_mut(n_blocks)
        .zip(active)
        .enumerate()
        .filter(|(_, (_, a))| **a)
    {
        for (j, shift) in row.iter_mut().enumerate() {
            let mut best = (0, f64::NEG_INFINITY);
            for (u, w) in weights.iter().enumerate() {
                let score: f64 = (0..N_FINE)
                    .map(|k| w[k] * dcs[(k * n_batches + b) * n_blocks + j])
                    .sum();
                if score > best.1 {
                    best = (u, score);
                }
            }
            *shift = rigid[b] as f64 + upsampled(best.0);
        }
    }
    shifts
}

/// The fine shift of upsampled index `u`: `-5 + 0.1 u` bins.
fn upsampled(u: usize) -> f64 {
    -(FINE_REACH as f64) + 0.1 * u as f64
}

#[cfg(test)]
mod tests {
    use super::{Blocks, best_shift, first_reference, rolled_product};

    #[test]
    fn drift_block_starts_of_neuropixels_1() {
        let blocks = Blocks::new(766, 5).unwrap();
        assert_eq!(blocks.len, 153);
        assert_eq!(blocks.starts, [0, 77, 153, 230, 306, 383, 460, 536, 613]);
        let rigid = Blocks::new(766, 1).unwrap();
        assert_eq!((rigid.len, rigid.starts), (766, vec![0]));
        assert!(Blocks::new(766, 0).is_err());
        assert!(Blocks::new(4, 5).is_err());
        // 2 blocks over 2 bins: linspace(0, 1, 3) rounds to 0, 0, 1.
        assert!(Blocks::new(2, 2).is_err());
    }

    #[test]
    fn drift_roll_moves_content_to_higher_rows() {
        // One column carries a bump at row 2; the reference has it at row 4: shift +2.
        let rows = 8;
        let mut f = vec![0.0; rows * 20];
        let mut r = vec![0.0; rows * 20];
        f[2 * 20 + 3] = 1.0;
        r[4 * 20 + 3] = 1.0;
        assert_eq!(best_shift(&f, &r, rows, 3), 2);
        assert_eq!(rolled_product(&f, &r, rows, 2), 1.0 / 160.0);
        // Circular: a bump at row 7 reaches row 1 by +2.
        let mut g = vec![0.0; rows * 20];
        g[7 * 20 + 3] = 1.0;
        let mut q = vec![0.0; rows * 20];
        q[20 + 3] = 1.0;
        assert_eq!(best_shift(&g, &q, rows, 3), 2);
        // All tied: the first shift.
        assert_eq!(best_shift(&vec![0.0; rows * 20], &r, rows, 3), -3);
    }

    #[test]
    fn drift_first_reference_skips_empty_batches() {
        assert_eq!(first_reference(&[true; 30]), Some(15));
        assert_eq!(first_reference(&vec![true; 1000]), Some(300));
        let mut active = [true; 30];
        active[13..17].fill(false);
        assert_eq!(first_reference(&active), Some(17));
        active[17] = false;
        assert_eq!(
            first_reference(&active),
            Some(12),
            "the earlier of two equally near"
        );
        assert_eq!(first_reference(&[false; 4]), None);
    }
}
