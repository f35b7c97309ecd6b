//! Host arithmetic shared by HDBSCAN's host path and the universal templates' k-means: exact
//! `f64` squared distances from one row to many, computed several rows at a time, and a
//! parallel map over threads whose result does not depend on the number of threads.

/// `sum_k (a_k - b_k)^2` in `f64`, `k` in increasing order: the sequential sum that
/// [`RowBlocks::squared_distances`] equals bit for bit.
pub(crate) fn squared_distance<S: Copy + Into<f64>>(a: &[S], b: &[S]) -> f64 {
    a.iter().zip(b).fold(0.0f64, |sum, (&x, &y)| {
        let t = x.into() - y.into();
        sum + t * t
    })
}

/// Rows of a [`RowBlocks`] block: the distances from one row to this many rows are summed side
/// by side (independent sums the compiler can keep in vector registers).
pub(crate) const LANES: usize = 8;

/// Rows of `d` values, stored as `S` (`f32` or `f64`: each widens to `f64` exactly) in blocks
/// of [`LANES`] rows, each block column by column (value `k` of the block's rows side by side),
/// the last block padded with zeros.
#[derive(Debug, Clone)]
pub(crate) struct RowBlocks<S> {
    d: usize,
    rows: usize,
    values: Vec<S>,
}

impl<S: Copy + Default + Into<f64>> RowBlocks<S> {
    /// The rows `rows` (indices, in that order) of the row-major matrix `x` of `d` values per
    /// row (`d >= 1`, every index a row of `x`).
    pub(crate) fn gather(x: &[S], d: usize, rows: impl ExactSizeIterator<Item = usize>) -> Self {
        let count = rows.len();
        let mut values = vec![S::default(); count.div_ceil(LANES) * LANES * d];
        for (r, i) in rows.enumerate() {
            let block = &mut values[(r / LANES) * LANES * d..][..LANES * d];
            for (k, &v) in x[i * d..(i + 1) * d].iter().enumerate() {
                block[k * LANES + r % LANES] = v;
            }
        }
        Self {
            d,
            rows: count,
            values,
        }
    }

    /// Number of rows.
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// `out[r] = sum_k (own[k] - row[k])^2` for the rows `first + r`, `r < out.len()`: the
    /// sum taken in `f64` coordinate by coordinate, `k` increasing, from 0, so each value is
    /// bit for bit the sequential sum of one pair (a difference's square does not depend on
    /// its sign). `own` holds `d` values, `first` is a multiple of [`LANES`] and
    /// `first + out.len()` at most [`rows`](Self::rows).
    pub(crate) fn squared_distances(&self, own: &[f64], first: usize, out: &mut [f64]) {
        let block_len = LANES * self.d;
        let blocks = self.values[first / LANES * block_len..].chunks_exact(block_len);
        for (out, block) in out.chunks_mut(LANES).zip(blocks) {
            let mut sums = [0.0f64; LANES];
            let (columns, _) = block.as_chunks::<LANES>();
            for (column, &v) in columns.iter().zip(own) {
                for (sum, &c) in sums.iter_mut().zip(column) {
                    let t = v - c.into();
                    *sum += t * t;
                }
            }
            out.copy_from_slice(&sums[..out.len()]);
        }
    }
}

/// Fills `out` row by row, `f(scratch, r, row)` writing row `r` (`out[r * row_len..][..row_len]`,
/// `row_len >= 1`, `out` whole rows): the rows are split over up to `threads` threads in
/// contiguous ranges of at least `min_rows_per_thread` (one `scratch()` per range). Each row
/// is written by one call alone, so the result does not depend on the number of threads.
pub(crate) fn fill_in_parallel<T: Send, S>(
    out: &mut [T],
    row_len: usize,
    threads: usize,
    min_rows_per_thread: usize,
    scratch: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, usize, &mut [T]) + Sync,
) {
    let count = out.len() / row_len;
    let threads = threads
        .min(count.div_ceil(min_rows_per_thread.max(1)))
        .max(1);
    let per_thread = count.div_ceil(threads).max(1);
    let (scratch, f) = (&scratch, &f);
    let run = move |first: usize, rows: &mut [T]| {
        let mut s = scratch();
        for (r, row) in rows.chunks_exact_mut(row_len).enumerate() {
            f(&mut s, first + r, row);
        }
    };
    if threads == 1 {
        run(0, out);
        return;
    }
    std::thread::scope(|scope| {
        for (t, rows) in out.chunks_mut(per_thread * row_len).enumerate() {
            scope.spawn(move || run(t * per_thread, rows));
        }
    });
}

/// `f(scratch, i)` for `i` in `0..count`, in order, computed as [`fill_in_parallel`] fills
/// rows of one value.
pub(crate) fn map_in_parallel<T: Send, S>(
    count: usize,
    threads: usize,
    min_per_thread: usize,
    scratch: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, usize) -> T + Sync,
) -> Vec<T> {
    let mut out: Vec<Option<T>> = (0..count).map(|_| None).collect();
    fill_in_parallel(
        &mut out,
        1,
        threads,
        min_per_thread,
        scratch,
        |s, i, slot| {
            slot[0] = Some(f(s, i));
        },
    );
    out.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use dspk_core::test_util::Rng;

    use super::*;

    #[test]
    fn blocked_distances_equal_sequential_sums_bit_for_bit() {
        let mut rng = Rng::new(4);
        for (n, d) in [(1, 1), (7, 3), (8, 61), (21, 61), (40, 2)] {
            let x: Vec<f32> = (0..n * d).map(|_| (rng.normal() * 3.0) as f32).collect();
            // Every other row, backwards: gathered rows keep the given order.
            let picked: Vec<usize> = (0..n).rev().step_by(2).collect();
            let blocks = RowBlocks::gather(&x, d, picked.iter().copied());
            assert_eq!(blocks.rows(), picked.len());
            for i in 0..n {
                let own: Vec<f64> = x[i * d..(i + 1) * d].iter().map(|&v| v.into()).collect();
                let mut out = vec![f64::NAN; picked.len()];
                blocks.squared_distances(&own, 0, &mut out);
                for (r, &j) in picked.iter().enumerate() {
                    let expected = squared_distance(&x[i * d..(i + 1) * d], &x[j * d..(j + 1) * d]);
                    assert_eq!(
                        out[r].to_bits(),
                        expected.to_bits(),
                        "n {n} d {d}: {i}, {j}"
                    );
                }
                // From a later block, fewer rows.
                if picked.len() > LANES + 1 {
                    let mut tail = vec![f64::NAN; picked.len() - LANES - 1];
                    blocks.squared_distances(&own, LANES, &mut tail);
                    assert_eq!(tail, out[LANES..picked.len() - 1]);
                }
            }
        }
    }

    #[test]
    fn parallel_map_keeps_order_and_scratch_per_range() {
        for (count, min) in [(0, 1), (1, 1), (5, 1), (1000, 7), (1000, 5000)] {
            let values = map_in_parallel(
                count,
                4,
                min,
                || 0usize,
                |calls, i| {
                    *calls += 1;
                    (i * i, *calls)
                },
            );
            assert_eq!(values.len(), count);
            for (i, &(v, calls)) in values.iter().enumerate() {
                assert_eq!(v, i * i);
                assert!(calls >= 1 && calls <= i + 1);
            }
        }
    }
}
