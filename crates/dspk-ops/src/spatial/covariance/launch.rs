//! Host side of the channel covariance: the accumulator, its buffers and launches.

use std::ops::Range;

use cubecl::prelude::*;
use cubecl::server::Handle;

use super::kernel;
use crate::array::{alloc, download, upload};
use crate::launch::UnitLayout;
use crate::{DeviceArray, DeviceWindow, Error, Result, Shape, Whitening, linalg};

/// Rows and columns of the block of products one unit accumulates (each loaded value serves
/// this many multiply-adds).
const TILE: usize = 8;
/// Most units sharing one block (each takes every `splits`-th sample): 256 fills an H200 for
/// 384 channels (measured 0.88 ms per 60 000-sample window, against 1.25 ms with 64 and
/// 0.96 ms with 128).
const MAX_SPLITS: usize = 256;
/// Most `f32` partial sums one window writes (84 MiB; 80 MB for 384 channels): fewer splits
/// for more channels.
const MAX_PARTIALS: usize = 21 << 20;
/// Fewest samples per unit: shorter windows use fewer splits.
const MIN_SAMPLES_PER_UNIT: usize = 16;

/// Channel second moments accumulated on the device over many windows: the sum over samples of
/// `x x^T` (and of `x`), read back once by [`finish`](Self::finish) as `X X^T / n`, the
/// uncentred covariance Kilosort whitens filtered data with, or by
/// [`finish_centered`](Self::finish_centered) as `numpy.cov(X, bias=True)`.
///
/// Each [`add`](Self::add) queues three or so launches and reads nothing back: one sums the
/// products of the window's owned samples in `f32`, one folds them into a `[channels + 1,
/// channels + 1]` window sum (the extra row and column hold the channel sums), and windows are
/// then combined pairwise like a binary counter (level `k` holds the sum of `2^k` windows), so a
/// total over `W` windows has `log2(W)` roundings rather than `W`. [`finish`](Self::finish)
/// downloads the occupied levels (at most `1 + log2(W)` matrices) and adds them in `f64`.
///
/// Device memory: the partial sums of one window (about `(channels + 9)^2 / 2 * 256` `f32`,
/// 80 MB for 384 channels, capped at 84 MiB) and `1 + log2(W)` matrices of `(channels + 1)^2`
/// `f32`, allocated as they are first needed and reused.
#[derive(Debug)]
pub struct CovarianceAccumulator {
    channels: usize,
    /// Most units sharing one block (the partial sums are sized for it).
    splits: usize,
    /// `(row block << 16) | column block` for each block of the upper triangle.
    pairs: Handle,
    tiles: usize,
    partials: Handle,
    /// `levels[k]`: the sum of `2^k` windows, if held.
    levels: Vec<Option<Handle>>,
    /// Matrices no longer holding a level, for reuse.
    spare: Vec<Handle>,
    samples: u64,
}

impl CovarianceAccumulator {
    /// An empty accumulator for windows of `channels` channels.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidParameter`] for zero channels, [`Error::OverLimit`] when a
    /// `(channels + 1)^2` matrix exceeds `u32::MAX` values.
    pub fn new(client: &Client, channels: usize) -> Result<Self> {
        if channels == 0 {
            return Err(Error::InvalidParameter {
                what: "covariance: channels",
                reason: "an accumulator needs at least one channel".into(),
            });
        }
        let dim = channels + 1;
        Shape::new(dim, dim).values("covariance matrix")?;
        let blocks = dim.div_ceil(TILE); // below 2^16: dim * dim fits in u32
        let pairs: Vec<u32> = (0..blocks)
            .flat_map(|i| (i..blocks).map(move |j| ((i << 16) | j) as u32))
            .collect();
        let tiles = pairs.len();
        let splits = (MAX_PARTIALS / (tiles * TILE * TILE)).clamp(1, MAX_SPLITS);
        let partial_count =
            Shape::new(tiles * TILE * TILE, splits).values("covariance partial sums")?;
        Ok(Self {
            channels,
            splits,
            pairs: upload(client, &pairs),
            tiles,
            partials: alloc::<f32>(client, partial_count),
            levels: Vec::new(),
            spare: Vec::new(),
            samples: 0,
        })
    }

    /// Channels of the windows this accumulates.
    #[must_use]
    pub fn channels(&self) -> usize {
        self.channels
    }

    /// Samples accumulated so far (the `n` the sums are divided by).
    #[must_use]
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Adds the samples `owned` (indices into its rows) of a `[channels, samples]` `f32`
    /// array on the device: queued, nothing read back. `0..samples` adds all of it; an empty
    /// range adds nothing. [`add_window`](Self::add_window) adds a window's owned samples.
    ///
    /// Each window's products are summed in `f32`, every `s`-th sample by one unit (`s` up to
    /// 256, at least 16 samples per unit) and then the `s` partial sums in order, so a window
    /// adds about `sqrt(samples / s) + sqrt(s)` roundings
    /// (relative to `sum |x_i x_j|`) before the pairwise combination across windows.
    /// A NaN or infinity in an owned sample makes the products involving its channel NaN or
    /// infinite (as numpy's `X @ X.T` would), never a wrong finite value.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidParameter`] when `owned` is not within `0..samples`,
    /// [`Error::ShapeMismatch`] when `window` does not have the accumulator's channels.
    pub fn add(
        &mut self,
        client: &Client,
        window: &DeviceArray,
        owned: Range<usize>,
    ) -> Result<()> {
        let samples = window.samples();
        if owned.start > owned.end || owned.end > samples {
            return Err(Error::InvalidParameter {
                what: "covariance: owned range",
                reason: format!("{owned:?} is not within the window's 0..{samples}"),
            });
        }
        window.expect_shape("covariance: window", Shape::new(self.channels, samples))?;
        let values = window.len();
        if owned.is_empty() {
            return Ok(());
        }
        let window = window.handle();
        let dim = self.channels + 1;
        let carry = match self.spare.pop() {
            Some(handle) => handle,
            None => alloc::<f32>(client, dim * dim),
        };
        let splits = self.splits.min(owned.len().div_ceil(MIN_SAMPLES_PER_UNIT));
        let block = TILE * TILE;
        let products = self.tiles * splits;
        let folds = self.tiles * block;
        let partial_count = folds * splits;
        let layout = UnitLayout::of(client);
        // All below the sizes checked by `new` and the typed window, so in u32.
        // SAFETY: `window` holds `channels * samples` values (a typed array) and each unit reads
        // rows clamped below `channels` at samples below `owned.end <= samples`; `pairs` holds
        // `tiles` blocks within `dim`, and each unit below `products` writes only its own
        // elements of `partials`, sized by `new` for `self.splits >= splits`.
        unsafe {
            kernel::tile_products::launch_unchecked(
                client,
                layout.cube_count(products),
                layout.cube_dim(),
                BufferArg::from_raw_parts(window.clone(), values),
                BufferArg::from_raw_parts(self.pairs.clone(), self.tiles),
                BufferArg::from_raw_parts(self.partials.clone(), partial_count),
                self.channels as u32,
                samples as u32,
                owned.start as u32,
                owned.len() as u32,
                splits as u32,
                products as u32,
                TILE,
                layout.blocked(),
            );
        }
        // SAFETY: units below `folds` read their `splits` partials within `partial_count` and
        // write elements `i, j < dim` of `carry`, which holds `dim * dim` values.
        unsafe {
            kernel::fold_partials::launch_unchecked(
                client,
                layout.cube_count(folds),
                layout.cube_dim(),
                BufferArg::from_raw_parts(self.partials.clone(), partial_count),
                BufferArg::from_raw_parts(self.pairs.clone(), self.tiles),
                BufferArg::from_raw_parts(carry.clone(), dim * dim),
                dim as u32,
                splits as u32,
                folds as u32,
                TILE,
                layout.blocked(),
            );
        }
        // Binary-counter carry: sums of equally many windows are added pairwise.
        let mut level = 0;
        loop {
            if level == self.levels.len() {
                self.levels.push(None);
            }
            match self.levels[level].take() {
                Some(held) => {
                    add_into(client, &carry, &held, dim * dim);
                    self.spare.push(held);
                    level += 1;
                }
                None => {
                    self.levels[level] = Some(carry);
                    break;
                }
            }
        }
        self.samples += owned.len() as u64;
        Ok(())
    }

    /// Adds the samples `window` owns ([`add`](Self::add) over its owned range): over a
    /// recording's windows, every sample once.
    ///
    /// # Errors
    ///
    /// As [`add`](Self::add).
    pub fn add_window(&mut self, client: &Client, window: &DeviceWindow) -> Result<()> {
        self.add(client, window.array(), window.owned_local())
    }

    /// The second moment `X X^T / n` over every sample added, `channels x channels` row-major,
    /// without mean removal (Kilosort's whitening covariance of filtered data; numpy:
    /// `x @ x.T / n` over the concatenated owned samples). Downloads the accumulated sums
    /// (waits for the device) and divides in `f64`; the accumulator is left as it was, so more
    /// windows can follow.
    ///
    /// Precision: within about `(sqrt(samples per window / 256) + 16 + log2(windows)) * 2^-24`
    /// of `sum |x_i x_j| / n` (tested within `1e-5` of `sqrt(S_ii S_jj)` over 128 windows).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidParameter`] when no sample was added, [`Error::Device`] when the device
    /// fails.
    pub fn finish(&self, client: &Client) -> Result<Vec<f64>> {
        let (sums, n) = self.sums(client)?;
        let (c, dim) = (self.channels, self.channels + 1);
        Ok((0..c * c)
            .map(|k| sums[(k / c) * dim + k % c] / n)
            .collect())
    }

    /// Kilosort4's local whitening of what was accumulated, as a pipeline stage on `client`'s
    /// device: the uncentred covariance [`finish`](Self::finish) gives (read back once), each
    /// channel whitened from its `nearest` channels by `positions` (`(x, y)` in um, one per
    /// channel) regularised by `eps` ([`linalg::local_zca`]; Kilosort4 uses 32 channels and
    /// `1e-6`), uploaded as a [`Whitening`] ([`Whitening::from_matrix`]). Accumulating the
    /// samples each window of a stream owns ([`add_window`](Self::add_window)) and then this
    /// gives the same whitening whatever the window size.
    ///
    /// # Errors
    ///
    /// As [`finish`](Self::finish) (no sample added); [`linalg::local_zca`]'s (positions not
    /// one per channel or not finite, `nearest` zero); [`Whitening::from_matrix`]'s (a weight
    /// not finite in `f32`).
    pub fn local_whitening(
        &self,
        client: &Client,
        positions: &[(f64, f64)],
        nearest: usize,
        eps: f64,
    ) -> Result<Whitening> {
        let matrix = linalg::local_zca(&self.finish(client)?, positions, nearest, eps)?;
        Whitening::from_matrix(client, &matrix)
    }

    /// The covariance with the mean removed, `X X^T / n - mu mu^T` with `mu` the channel means
    /// (numpy: `np.cov(x, bias=True)`), `channels x channels` row-major, from the same sums as
    /// [`finish`](Self::finish) (channel sums ride along as a row of ones). The subtraction is in
    /// `f64`, but the sums were accumulated in `f32`: with means much larger than the standard
    /// deviations the result loses about `(mean / std)^2` times the precision of
    /// [`finish`](Self::finish); filter (or subtract a per-channel offset) first.
    ///
    /// # Errors
    ///
    /// As [`finish`](Self::finish).
    pub fn finish_centered(&self, client: &Client) -> Result<Vec<f64>> {
        let (sums, n) = self.sums(client)?;
        let (c, dim) = (self.channels, self.channels + 1);
        Ok((0..c * c)
            .map(|k| {
                let (i, j) = (k / c, k % c);
                sums[i * dim + j] / n - (sums[i * dim + c] / n) * (sums[j * dim + c] / n)
            })
            .collect())
    }

    /// Forgets every window added (keeps the device buffers for reuse).
    pub fn reset(&mut self) {
        for level in self.levels.drain(..).flatten() {
            self.spare.push(level);
        }
        self.samples = 0;
    }

    /// The `[channels + 1, channels + 1]` sums over all windows, in `f64`, and the sample count.
    fn sums(&self, client: &Client) -> Result<(Vec<f64>, f64)> {
        if self.samples == 0 {
            return Err(Error::InvalidParameter {
                what: "covariance: samples",
                reason: "no sample was added".into(),
            });
        }
        let dim = self.channels + 1;
        let mut total = vec![0.0f64; dim * dim];
        for level in self.levels.iter().flatten() {
            for (sum, value) in total
                .iter_mut()
                .zip(download::<f32>(client, level, dim * dim)?)
            {
                *sum += f64::from(value);
            }
        }
        Ok((total, self.samples as f64))
    }
}

/// Queues `total += other` over `len` values; both buffers were allocated by the accumulator
/// with `len` values.
fn add_into(client: &Client, total: &Handle, other: &Handle, len: usize) {
    let layout = UnitLayout::of(client);
    // SAFETY: both buffers hold `len` values (allocated so by `CovarianceAccumulator::add`);
    // units at or past `len` do nothing.
    unsafe {
        kernel::add_into::launch_unchecked(
            client,
            layout.cube_count(len),
            layout.cube_dim(),
            BufferArg::from_raw_parts(total.clone(), len),
            BufferArg::from_raw_parts(other.clone(), len),
            len as u32,
            layout.blocked(),
        );
    }
}
