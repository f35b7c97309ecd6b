//! The linear assignment problem (Kuhn-Munkres), rectangular, in `f64`.

use crate::{Error, Result};

/// The assignment of rows to columns of a `rows x cols` cost matrix (row-major) with the least
/// total cost, each row and each column used at most once and `min(rows, cols)` pairs
/// assigned: what `scipy.optimize.linear_sum_assignment(cost)` computes.
///
/// Returns the pairs `(row, column)` sorted by row. Solved with the Hungarian method in its
/// shortest-augmenting-path form (one row added at a time, dual potentials kept so reduced
/// costs stay non-negative), `O(n^2 m)` for `n = min(rows, cols)`, `m = max(rows, cols)`.
/// When several assignments have the same least cost, which one is returned may differ from
/// scipy's.
///
/// # Errors
///
/// [`Error::Argument`] if `cost.len() != rows * cols` or a cost is not finite.
pub fn linear_sum_assignment(
    cost: &[f64],
    rows: usize,
    cols: usize,
) -> Result<Vec<(usize, usize)>> {
    if rows.checked_mul(cols) != Some(cost.len()) {
        return Err(Error::Argument(format!(
            "a {rows} x {cols} cost matrix needs {} values, got {}",
            rows.saturating_mul(cols),
            cost.len()
        )));
    }
    if let Some(k) = cost.iter().position(|c| !c.is_finite()) {
        return Err(Error::Argument(format!(
            "cost[{}][{}] is {}: costs must be finite",
            k / cols,
            k % cols,
            cost[k]
        )));
    }
    if rows == 0 || cols == 0 {
        return Ok(Vec::new());
    }
    let pairs = if rows <= cols {
        solve(rows, cols, |r, c| cost[r * cols + c])
    } else {
        let mut pairs: Vec<(usize, usize)> = solve(cols, rows, |r, c| cost[c * cols + r])
            .into_iter()
            .map(|(c, r)| (r, c))
            .collect();
        pairs.sort_unstable();
        pairs
    };
    Ok(pairs)
}

/// Assigns every one of `n` rows to a distinct one of `m >= n` columns at least total
/// `cost(row, col)`; pairs sorted by row.
fn solve(n: usize, m: usize, cost: impl Fn(usize, usize) -> f64) -> Vec<(usize, usize)> {
    // Index 0 of columns is a virtual column holding the row being inserted; rows and real
    // columns are 1-based. `row_of[j]` is the row assigned to column j (0 = free).
    let mut u = vec![0.0f64; n + 1];
    let mut v = vec![0.0f64; m + 1];
    let mut row_of = vec![0usize; m + 1];
    let mut previous = vec![0usize; m + 1];
    let mut min_reduced = vec![f64::INFINITY; m + 1];
    let mut visited = vec![false; m + 1];
    for row in 1..=n {
        row_of[0] = row;
        let mut column = 0;
        min_reduced.fill(f64::INFINITY);
        visited.fill(false);
        // Grow a tree of tight edges from `row` until it reaches a free column (Dijkstra on
        // reduced costs).
        loop {
            visited[column] = true;
            let current_row = row_of[column];
            let mut delta = f64::INFINITY;
            let mut next = 0;
            for j in 1..=m {
                if visited[j] {
                    continue;
                }
                let reduced = cost(current_row - 1, j - 1) - u[current_row] - v[j];
                if reduced < min_reduced[j] {
                    min_reduced[j] = reduced;
                    previous[j] = column;
                }
                if min_reduced[j] < delta {
                    delta = min_reduced[j];
                    next = j;
                }
            }
            for j in 0..=m {
                if visited[j] {
                    u[row_of[j]] += delta;
                    v[j] -= delta;
                } else {
                    min_reduced[j] -= delta;
                }
            }
            column = next;
            if row_of[column] == 0 {
                break;
            }
        }
        // Flip the alternating path back to the virtual column.
        while column != 0 {
            let before = previous[column];
            row_of[column] = row_of[before];
            column = before;
        }
    }
    let mut pairs: Vec<(usize, usize)> = (1..=m)
        .filter(|&j| row_of[j] != 0)
        .map(|j| (row_of[j] - 1, j - 1))
        .collect();
    pairs.sort_unstable();
    pairs
}
