//! The delay estimate: lagged correlations of normalised channel magnitudes on the device,
//! averaged over windows on the host, and the delays read off their peaks.

use std::ops::Range;

use cubecl::CubeElement;
use cubecl::prelude::*;
use dspk_ops::launch::{CUBE_DIM, cube_count, cube_count_for, cube_units};
use dspk_ops::{DeviceArray, DeviceLimits, DeviceWindow};

use super::kernel;
use crate::runner::buffers::{alloc, prefix};
use crate::{Error, Result};

/// EMUsort's largest delay at `sample_rate_hz`: `floor(fs / 500)` samples, 2 ms (60 samples at
/// 30 kHz).
#[must_use]
pub fn emusort_max_lag(sample_rate_hz: f64) -> usize {
    (sample_rate_hz / 500.0).floor().max(0.0) as usize
}

/// Accumulates EMUsort's channel-delay correlations (`docs/KILOSORT4.md` §10.1.1) window by
/// window on the device; [`finish`](Self::finish) reads the delays off them.
///
/// For each accumulated range of owned samples `T` (a whole window's, [`accumulate`]; or part
/// of one, [`accumulate_range`]):
///
/// 1. `s_c` = the unbiased standard deviation of channel `c` over `T` (`numpy.std(ddof=1)`,
///    `torch.std`);
/// 2. for every ordered pair `(a, b)` and lag `l` in `-D ..= D`:
///    `CC[a, b, l] = mean over t in T of |x_a(t - l)| * |x_b(t)| / (s_a * s_b)`, where
///    `x_a(t - l)` is read from the window's array (its halo beyond `T`): real neighbouring
///    samples, not a circular roll. A product whose `t - l` lies outside the window's read
///    range is left out, and the mean divides by the products actually summed; with a halo of
///    at least `D` this happens only where the recording ends and no sample exists.
///
/// The estimate is the mean of these per-range `CC` over the ranges (Kilosort's per-batch
/// means averaged over batches).
///
/// Differences from EMUsort 1.1.0, on purpose: EMUsort divides each padded batch by its
/// standard deviation over all its columns (the `nt` padding on each side included); here the
/// deviation is over the owned samples only, so it does not depend on padding. EMUsort shifts
/// by a circular roll of the padded batch; with `D < nt` (60 < 61 at 30 kHz) the own columns'
/// shifted samples come from the padding, the same real neighbours as here, except at the
/// recording's ends, where its padding repeats the first or last sample and here the products
/// without a sample are left out.
///
/// Cost: `C^2 (2D + 1) |T|` multiply-adds per range, and `C^2 (2D + 1) + C` values read back
/// per range (one device sync each): about 3e10 for 64 channels, `D = 60` and a 60 000-sample
/// batch, fine for EMG probes (at most 64 channels), quadratic in the channel count. One cube
/// per channel pair, block of 64 lags and chunk of the range; it stages 256 samples of both
/// channels at a time in shared memory, so each loaded sample serves up to 64 lags. Sums run
/// in `f32` in a fixed order (per lag: each tile's products in order, the tiles of a chunk,
/// then the chunks; no atomics); per-range results are scaled and averaged in `f64` on the
/// host, so the estimate is deterministic. The number of units per cube (taken from the device,
/// fewer on the cpu runtime) changes which unit computes what, not the order of any sum, so the
/// estimate does not depend on it.
///
/// [`accumulate`]: Self::accumulate
/// [`accumulate_range`]: Self::accumulate_range
#[derive(Debug)]
pub struct DelayEstimator {
    channels: usize,
    max_lag: usize,
    /// Sum over the accumulated ranges of their `CC`, `[a, b, l + D]`.
    total: Vec<f64>,
    ranges: usize,
    /// `[C]` standard deviations of the current range.
    deviation: DeviceArray<f32>,
    /// `[C, C, 2D + 1]` raw product sums of the current range.
    sums: DeviceArray<f32>,
    /// `[C, C, 2D + 1, chunks]` per-chunk partial sums, `partial_len` values.
    partial: DeviceArray<f32>,
    partial_len: usize,
    limits: DeviceLimits,
    /// Units per cube of the deviation kernel: a power of two, at most [`LANES`] and what the
    /// device allows.
    deviation_units: u32,
    /// Units per cube of the product kernel: a power of two, at most [`LAG_BLOCK`] and what the
    /// device allows.
    product_units: u32,
}

/// Lanes of the deviation kernel's sums (a power of two): its results are those of a cube of
/// this many units, whatever the device runs.
const LANES: usize = CUBE_DIM as usize;

/// Samples of `t` one cube of the product kernel stages in shared memory at a time.
const TILE: usize = 256;

/// Lags one cube of the product kernel covers (a power of two): one per unit where the device
/// allows cubes this large, else several per unit.
const LAG_BLOCK: usize = 64;

/// Cubes the product kernel aims for: with fewer `(pair, lag block)` cubes than this, each
/// range is cut into chunks of tiles summed by separate cubes (then added in chunk order).
const TARGET_CUBES: usize = 4096;

impl DelayEstimator {
    /// An estimator for windows of `channels` channels and lags `-max_lag ..= max_lag`
    /// samples ([`emusort_max_lag`] gives EMUsort's).
    ///
    /// # Errors
    ///
    /// [`Error::Input`] for fewer than 2 channels or a `max_lag` of 0; [`Error::Ops`] when the
    /// `C x C x (2D + 1)` correlations exceed the device's buffer limits.
    pub fn new(client: &Client, channels: usize, max_lag: usize) -> Result<Self> {
        if channels < 2 {
            return Err(Error::Input {
                what: "channel delays",
                reason: format!("{channels} channels: delays need at least 2"),
            });
        }
        if max_lag == 0 {
            return Err(Error::Input {
                what: "channel delays",
                reason: "a largest lag of 0 samples leaves no delay to estimate".to_string(),
            });
        }
        let values = lag_count(max_lag)
            .and_then(|lags| lags.checked_mul(channels))
            .and_then(|v| v.checked_mul(channels))
            .filter(|&v| u32::try_from(v).is_ok())
            .ok_or_else(|| Error::Input {
                what: "channel delays",
                reason: format!(
                    "{channels} channels x {channels} x (2 x {max_lag} + 1) lags do not fit 32-bit indices"
                ),
            })?;
        let limits = DeviceLimits::of(client);
        limits.check("channel delays: correlations", values as u64, 4)?;
        Ok(Self {
            channels,
            max_lag,
            total: vec![0.0; values],
            ranges: 0,
            deviation: alloc::<f32>(client, channels)?,
            sums: alloc::<f32>(client, values)?,
            partial: alloc::<f32>(client, values)?,
            partial_len: values,
            limits,
            deviation_units: cube_units(client, LANES as u32),
            product_units: cube_units(client, LAG_BLOCK as u32),
        })
    }

    /// The estimator with cubes of `deviation` units for the deviation kernel and `products`
    /// units for the product kernel (powers of two, at most [`LANES`] and [`LAG_BLOCK`] and
    /// within the device's limit), to test that results do not depend on them.
    #[cfg(test)]
    pub(super) fn with_units(mut self, deviation: u32, products: u32) -> Self {
        assert!(deviation.is_power_of_two() && deviation as usize <= LANES);
        assert!(products.is_power_of_two() && products as usize <= LAG_BLOCK);
        (self.deviation_units, self.product_units) = (deviation, products);
        self
    }

    /// Makes the partial sums hold `values` values (reallocated only when more than before).
    fn reserve_partials(&mut self, client: &Client, values: usize) -> Result<()> {
        if values > self.partial_len {
            self.limits
                .check("channel delays: partial sums", values as u64, 4)?;
            self.partial = alloc::<f32>(client, values)?;
            self.partial_len = values;
        }
        Ok(())
    }

    /// The largest lag `D`, in samples.
    #[must_use]
    pub fn max_lag(&self) -> usize {
        self.max_lag
    }

    /// Ranges accumulated so far.
    #[must_use]
    pub fn ranges(&self) -> usize {
        self.ranges
    }

    /// Adds `window`'s owned samples as one range (see the type's doc). Waits for the device.
    ///
    /// # Errors
    ///
    /// As [`accumulate_range`](Self::accumulate_range).
    pub fn accumulate(&mut self, client: &Client, window: &DeviceWindow) -> Result<()> {
        self.accumulate_range(client, window, window.owned_local())
    }

    /// Adds the samples `range` of `window` (indices into its array, within its owned samples:
    /// a batch's part of a longer window, say) as one range; lags read up to `D` samples past
    /// either end of `range`, into the rest of the array. A window whose array ends less than
    /// `D` samples after `range` is taken to end where the recording does (the products past it
    /// are left out); before `range`, a gap of less than `D` samples is an error unless the
    /// window starts at the recording's first sample. With the symmetric halos of
    /// [`ChunkSchedule`](dspk_core::ChunkSchedule), a halo shorter than `D` is caught at the
    /// second window. Waits for the device. On an error nothing is added.
    ///
    /// # Errors
    ///
    /// [`Error::Input`] when the window does not have the estimator's channels; `range` is not
    /// within the owned samples or holds `D` samples or fewer; fewer than `D` samples precede
    /// `range` in a window that does not start the recording; a channel is constant over
    /// `range` (zero standard deviation, an all-zero channel say: naming it); a sample of
    /// `range`, or one within `D` samples of it, is NaN or infinite. [`Error::Device`] when the
    /// device fails.
    pub fn accumulate_range(
        &mut self,
        client: &Client,
        window: &DeviceWindow,
        range: Range<usize>,
    ) -> Result<()> {
        let array = window.array();
        let (channels, n, d) = (self.channels, array.samples(), self.max_lag);
        let recording = |r: &Range<usize>| {
            let start = window.start();
            format!("{}..{}", start + r.start as u64, start + r.end as u64)
        };
        if array.channels() != channels {
            return Err(Error::Input {
                what: "channel delays",
                reason: format!(
                    "a window of {} channels, the estimator was built for {channels}",
                    array.channels()
                ),
            });
        }
        let owned = window.owned_local();
        if range.start < owned.start || range.end > owned.end || range.start > range.end {
            return Err(Error::Input {
                what: "channel delays",
                reason: format!(
                    "local samples {range:?} are not within the window's owned samples {owned:?}"
                ),
            });
        }
        if range.len() <= d {
            return Err(Error::Input {
                what: "channel delays",
                reason: format!(
                    "lags of up to {d} samples need more than {d} samples, samples {} hold {}",
                    recording(&range),
                    range.len()
                ),
            });
        }
        if range.start < d && window.start() > 0 {
            return Err(Error::Input {
                what: "channel delays",
                reason: format!(
                    "lags of up to {d} samples need {d} samples of halo before samples {}, the window has {}",
                    recording(&range),
                    range.start
                ),
            });
        }
        if n.checked_add(2 * d + 1)
            .is_none_or(|end| end > u32::MAX as usize)
        {
            return Err(Error::Input {
                what: "channel delays",
                reason: format!("a window of {n} samples does not fit 32-bit indices"),
            });
        }
        let lags = 2 * d + 1;
        let values = channels * channels * lags;
        let units = self.deviation_units;
        kernel::range_deviation::launch(
            client,
            cube_count_for(channels * units as usize, units),
            CubeDim::new_1d(units),
            array.arg(array.len()),
            self.deviation.arg(channels),
            channels as u32,
            n as u32,
            range.start as u32,
            range.len() as u32,
            LANES,
        );
        let blocks = lags.div_ceil(LAG_BLOCK);
        let chunks =
            (TARGET_CUBES / (channels * channels * blocks)).clamp(1, range.len().div_ceil(TILE));
        self.reserve_partials(client, values * chunks)?;
        let units = self.product_units;
        kernel::lagged_products::launch(
            client,
            cube_count_for(
                channels * channels * blocks * chunks * units as usize,
                units,
            ),
            CubeDim::new_1d(units),
            array.arg(array.len()),
            self.partial.arg(values * chunks),
            channels as u32,
            n as u32,
            range.start as u32,
            range.len() as u32,
            d as u32,
            chunks as u32,
            TILE,
            LAG_BLOCK,
            units as usize,
        );
        kernel::sum_chunks::launch(
            client,
            cube_count(values),
            CubeDim::new_1d(CUBE_DIM),
            self.partial.arg(values * chunks),
            self.sums.arg(values),
            values as u32,
            chunks as u32,
        );
        let bytes = client.read(vec![
            prefix(&self.deviation, channels),
            prefix(&self.sums, values),
        ])?;
        let deviation = f32::from_bytes(&bytes[0]);
        let sums = f32::from_bytes(&bytes[1]);
        if let Some(c) = deviation.iter().position(|s| !s.is_finite()) {
            return Err(Error::Input {
                what: "channel delays",
                reason: format!(
                    "channel {c} holds NaN or infinite samples in samples {}",
                    recording(&range)
                ),
            });
        }
        if let Some(c) = deviation.iter().position(|&s| s == 0.0) {
            return Err(Error::Input {
                what: "channel delays",
                reason: format!(
                    "channel {c} is constant (all zero, say) over samples {}: its standard deviation is 0",
                    recording(&range)
                ),
            });
        }
        let counts = lag_products(&range, n, d);
        let mut cc = vec![0.0f64; values];
        for (i, value) in cc.iter_mut().enumerate() {
            let (a, b, k) = (i / (channels * lags), (i / lags) % channels, i % lags);
            *value = f64::from(sums[i])
                / (counts[k] as f64 * f64::from(deviation[a]) * f64::from(deviation[b]));
            if !value.is_finite() {
                let near = (range.start.saturating_sub(d))..(range.end + d).min(n);
                return Err(Error::Input {
                    what: "channel delays",
                    reason: format!(
                        "the correlation of channels {a} and {b} at lag {} is {value}: samples {} hold NaN or infinite values",
                        k as i64 - d as i64,
                        recording(&near)
                    ),
                });
            }
        }
        for (total, value) in self.total.iter_mut().zip(&cc) {
            *total += value;
        }
        self.ranges += 1;
        Ok(())
    }

    /// The mean `CC` over the ranges accumulated so far, `[a, b, l + D]` row-major
    /// (`C x C x (2D + 1)`); zeros before the first.
    #[must_use]
    pub fn correlation(&self) -> Vec<f64> {
        let ranges = self.ranges.max(1) as f64;
        self.total.iter().map(|v| v / ranges).collect()
    }

    /// The delays read off the mean correlations ([`ChannelDelays::from_correlation`]).
    ///
    /// # Errors
    ///
    /// [`Error::Input`] when nothing was accumulated.
    pub fn finish(&self) -> Result<ChannelDelays> {
        if self.ranges == 0 {
            return Err(Error::Input {
                what: "channel delays",
                reason: "no window was accumulated".to_string(),
            });
        }
        ChannelDelays::from_correlation(&self.correlation(), self.channels, self.max_lag)
    }
}

/// `2 * max_lag + 1`, when it fits.
fn lag_count(max_lag: usize) -> Option<usize> {
    max_lag.checked_mul(2)?.checked_add(1)
}

/// For each lag `l = k - d`, how many `t` in `range` have `t - l` in `0 .. n`.
pub(super) fn lag_products(range: &Range<usize>, n: usize, d: usize) -> Vec<usize> {
    (0..2 * d + 1)
        .map(|k| {
            // `t - l = t + d - k` in `0 .. n`  <=>  `k <= t + d < n + k`.
            let low = range.start.max(k.saturating_sub(d));
            let high = range.end.min((n + k).saturating_sub(d));
            high.saturating_sub(low)
        })
        .collect()
}

/// Per-channel delays: row `b` aligns with the reference channel when read `delays[b]`
/// samples later (`out[b, t] = x[b, t + delays[b]]`, [`DelayAligner`](super::DelayAligner)).
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelDelays {
    /// `d_b = lag*[reference, b]`, one per channel, within `-max_lag ..= max_lag`.
    pub delays: Vec<i32>,
    /// The reference channel `r = argmax_b sum_a peak[a, b]` (the first on ties).
    pub reference: usize,
    /// The largest lag `D` searched.
    pub max_lag: usize,
    /// `peak[a * C + b]` = the largest mean correlation of the pair over the lags.
    pub peak: Vec<f64>,
    /// `lag[a * C + b]` = the first lag (lowest, scanning `-D ..= D`) reaching `peak[a * C + b]`.
    pub lag: Vec<i32>,
}

impl ChannelDelays {
    /// The delays of `channels` channels from mean correlations `cc[a, b, l + D]`
    /// (`C x C x (2D + 1)` row-major, as [`DelayEstimator::correlation`]): per pair the peak
    /// and its first lag, the reference channel with the largest column sum of peaks (the
    /// first on ties), and its row of lags.
    ///
    /// # Errors
    ///
    /// [`Error::Input`] when `cc` does not hold `C x C x (2D + 1)` values, there are fewer than
    /// 2 channels, or a value is not finite.
    pub fn from_correlation(cc: &[f64], channels: usize, max_lag: usize) -> Result<Self> {
        let lags = lag_count(max_lag).unwrap_or(usize::MAX);
        if channels < 2
            || i32::try_from(max_lag).is_err()
            || Some(cc.len())
                != channels
                    .checked_mul(channels)
                    .and_then(|v| v.checked_mul(lags))
        {
            return Err(Error::Input {
                what: "channel delays",
                reason: format!(
                    "{} correlations for {channels} channels and lags up to {max_lag} (at least 2 channels)",
                    cc.len()
                ),
            });
        }
        if let Some(i) = cc.iter().position(|v| !v.is_finite()) {
            return Err(Error::Input {
                what: "channel delays",
                reason: format!("correlation {i} is {}", cc[i]),
            });
        }
        let mut peak = Vec::with_capacity(channels * channels);
        let mut lag = Vec::with_capacity(channels * channels);
        for row in cc.chunks_exact(lags) {
            let mut best = 0;
            for (k, &v) in row.iter().enumerate() {
                if v > row[best] {
                    best = k;
                }
            }
            peak.push(row[best]);
            lag.push(best as i32 - max_lag as i32);
        }
        let column = |b: usize| (0..channels).map(|a| peak[a * channels + b]).sum::<f64>();
        let mut reference = 0;
        let mut best = column(0);
        for b in 1..channels {
            let sum = column(b);
            if sum > best {
                (reference, best) = (b, sum);
            }
        }
        Ok(Self {
            delays: lag[reference * channels..(reference + 1) * channels].to_vec(),
            reference,
            max_lag,
            peak,
            lag,
        })
    }

    /// The largest `|d_b|`: the halo a [`DelayAligner`](super::DelayAligner) needs.
    #[must_use]
    pub fn max_abs(&self) -> usize {
        self.delays
            .iter()
            .map(|d| d.unsigned_abs() as usize)
            .max()
            .unwrap_or(0)
    }
}
