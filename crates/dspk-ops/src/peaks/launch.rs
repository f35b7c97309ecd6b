//! Host side of peak detection: options, the detector's device buffers, checks, launches and
//! the download of the compacted peaks.

use std::ops::Range;

use cubecl::bytes::Bytes;
use cubecl::prelude::*;
use cubecl::server::Handle;

use super::kernel::{self, HeightMode};
use crate::array::download;
use crate::buffers::GrowingBuffer;
use crate::launch::{CUBE_DIM, cube_count};
use crate::{
    ChannelVector, DeviceArray, DeviceLimits, DeviceWindow, Error, PipelineWorkspace, Result,
};

/// Which deflections are peaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Polarity {
    /// Maxima of `x` (scipy's `find_peaks(x)`).
    #[default]
    Positive,
    /// Minima of `x`, i.e. maxima of `-x` (`find_peaks(-x)`): extracellular spikes are
    /// negative deflections.
    Negative,
}

/// The height a peak must reach, compared with `x` ([`Polarity::Positive`]) or `-x`
/// ([`Polarity::Negative`]) at the peak: scipy's `height` lower bound (inclusive).
#[derive(Debug, Clone, Default)]
pub enum Height {
    /// No threshold (scipy's `height=None`).
    #[default]
    Any,
    /// The same threshold on every channel.
    Value(f32),
    /// `scale * thresholds[c]` on channel `c`, one threshold per channel of the input: e.g.
    /// the [`mad_noise_into`](crate::mad_noise_into) vector with `scale = 5.0` for a 5-sigma
    /// threshold, without a round trip to the host.
    PerChannel {
        /// Per-channel thresholds on the device.
        thresholds: ChannelVector,
        /// The factor applied to each.
        scale: f32,
    },
}

/// What [`PeakDetector::detect`] looks for.
///
/// > default: [`Polarity::Positive`], [`Height::Any`], `distance = 1` (scipy's defaults).
#[derive(Debug, Clone)]
pub struct PeakOptions {
    /// Maxima of `x` or of `-x`.
    pub polarity: Polarity,
    /// The lowest peak height.
    pub height: Height,
    /// Minimum distance in samples between kept peaks of a channel (at least 1): a peak is
    /// dropped when another candidate closer than `distance` samples is higher (or as high and
    /// earlier).
    pub distance: usize,
}

impl Default for PeakOptions {
    fn default() -> Self {
        Self {
            polarity: Polarity::Positive,
            height: Height::Any,
            distance: 1,
        }
    }
}

/// One detected peak.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Peak {
    /// The channel (row of the window).
    pub channel: u32,
    /// The sample: in the recording for [`PeakDetector::detect_window`], else the index into
    /// the array's row.
    pub sample: u64,
    /// `x` at the peak (not negated for [`Polarity::Negative`]).
    pub value: f32,
}

/// Peak detection on the device, per channel of a `[channels, samples]` `f32` window, after
/// `scipy.signal.find_peaks(x[c], height=..., distance=...)` (of `-x[c]` for negative peaks).
/// Only the peaks leave the device: kept peaks are appended to a compacted device buffer of
/// `max_peaks` entries through an atomic counter, and [`peaks`](Self::peaks) downloads the
/// count and the entries.
///
/// # What is a peak
///
/// 1. Local maxima exactly as scipy: a sample higher than its left neighbour and higher than
///    its right one; a flat run higher than both its neighbours is one peak at its middle
///    (`(left + right) / 2`, rounded down). The first and last sample of the window are never
///    peaks, nor is a flat run that reaches either end.
/// 2. `height`: kept when the (signed) value is at least the threshold.
/// 3. `distance`: kept when no other candidate (a sample passing 1 and 2) closer than
///    `distance` samples is higher, or as high and earlier. Every candidate is judged in
///    parallel against all others. scipy instead walks the candidates from the highest down
///    and lets only kept peaks remove others, so the results differ where a candidate is
///    beaten only by candidates scipy removes: in a chain `A > B > C` with `B` within
///    `distance` of both `A` and `C` but `A` and `C` farther apart, scipy keeps `A` and `C`,
///    this keeps only `A` (`C` is beaten by `B`, which `A` beats). For spikes (candidates
///    clustered within the distance, clusters farther apart) both agree; the tests check that
///    on spike-like data. Equal heights: scipy's order among them follows numpy's (unstable)
///    `argsort`; here the earliest wins.
///
/// Only peaks at samples `owned` (a range of the window) are reported, but all of the window
/// is read: windows processed with halos of at least `distance` plus the longest flat run of
/// the data on each side (`distance + 1` for data without repeated neighbours) report each
/// peak once and exactly as the whole recording processed at once.
///
/// # NaN
///
/// NaN samples compare false, so they are never peaks and hide the peaks beside them, as in
/// scipy; but a NaN in the owned samples, or a NaN per-channel threshold, makes
/// [`peaks`](Self::peaks) fail rather than return peaks missing silently.
#[derive(Debug)]
pub struct PeakDetector {
    capacity: usize,
    /// Candidate order keys, one per sample of the largest window seen.
    keys: GrowingBuffer<u32>,
    /// Added to the sample of every peak of the last detection (the window's first recording
    /// sample, or zero).
    start: u64,
    /// `[peaks found, NaN count]`.
    counters: Handle,
    /// `(channel, sample)` per slot.
    positions: Handle,
    /// `x` per slot.
    values: Handle,
}

impl PeakDetector {
    /// A detector reporting at most `max_peaks` peaks per [`detect`](Self::detect).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidParameter`] when `max_peaks` is zero, [`Error::OverLimit`] when its
    /// buffers exceed the device's limits.
    pub fn new(client: &Client, max_peaks: usize) -> Result<Self> {
        if max_peaks == 0 {
            return Err(Error::InvalidParameter {
                what: "find_peaks: max_peaks",
                reason: "must be at least 1".into(),
            });
        }
        DeviceLimits::of(client).check("find_peaks: peak positions", 2 * max_peaks as u64, 4)?;
        Ok(Self {
            capacity: max_peaks,
            keys: GrowingBuffer::default(),
            start: 0,
            counters: client.empty(8),
            positions: client.empty(8 * max_peaks),
            values: client.empty(4 * max_peaks),
        })
    }

    /// The most peaks one detection reports.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Queues peak detection on the window, reporting the peaks at the samples it owns with
    /// their recording sample; replaces the previous detection's peaks. Nothing is waited for.
    ///
    /// # Errors
    ///
    /// As [`detect`](Self::detect).
    pub fn detect_window(
        &mut self,
        client: &Client,
        window: &DeviceWindow,
        options: &PeakOptions,
    ) -> Result<()> {
        self.detect(client, window.array(), window.owned_local(), options)?;
        self.start = window.start();
        Ok(())
    }

    /// Queues peak detection on `input`, reporting the peaks at samples `owned` of each
    /// channel (indices into its rows); replaces the previous detection's peaks. Nothing is
    /// waited for.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidParameter`] when `owned` is not within `0..samples`, `distance` is
    /// zero, or a `height` value or scale is NaN; [`Error::ShapeMismatch`] when per-channel
    /// thresholds are not one per channel of `input`.
    pub fn detect(
        &mut self,
        client: &Client,
        input: &DeviceArray,
        owned: Range<usize>,
        options: &PeakOptions,
    ) -> Result<()> {
        let (channels, samples, values) = (input.channels(), input.samples(), input.len());
        self.start = 0;
        if owned.start > owned.end || owned.end > samples {
            return Err(Error::InvalidParameter {
                what: "find_peaks: owned samples",
                reason: format!("{owned:?} is not within the window's 0..{samples}"),
            });
        }
        if options.distance == 0 {
            return Err(Error::InvalidParameter {
                what: "find_peaks: distance",
                reason: "must be at least 1".into(),
            });
        }
        let (mode, scale, thresholds) = match &options.height {
            Height::Any => (HeightMode::Any, 0.0, None),
            Height::Value(value) => (HeightMode::Uniform, *value, None),
            Height::PerChannel { thresholds, scale } => {
                thresholds.expect_channels("find_peaks: thresholds", channels)?;
                (HeightMode::PerChannel, *scale, Some(thresholds.handle()))
            }
        };
        if scale.is_nan() {
            return Err(Error::InvalidParameter {
                what: "find_peaks: height",
                reason: "is NaN".into(),
            });
        }
        client.write(&self.counters, Bytes::from_elems(vec![0u32; 2]));
        if values == 0 || owned.is_empty() {
            return Ok(());
        }
        let keys = self.keys.get(client, values);
        let input = input.handle();
        // A stand-in for the thresholds when there are none: the kernel reads it only for
        // `HeightMode::PerChannel`.
        let thresholds = thresholds.cloned().unwrap_or_else(|| self.values.clone());
        let thresholds_len = if mode == HeightMode::PerChannel {
            channels
        } else {
            1
        };
        let negative = options.polarity == Polarity::Negative;
        // Beyond the window, distance changes nothing; this keeps `s + reach` within 32 bits.
        let reach = (options.distance - 1).min(samples) as u32;
        let owned_len = owned.end - owned.start;
        let (start, end) = (owned.start as u32, owned.end as u32); // <= samples <= u32::MAX
        // SAFETY (all three launches): `input` and `keys` hold `values` values, `thresholds`
        // `thresholds_len` (typed arrays, their shapes checked above), `counters` 2, `positions` `2 * capacity` and
        // `values` `capacity` (allocated so). The kernels bound their unit index by the
        // counts passed as scalars (not by buffer lengths: a reused buffer may be longer), read within their channel's row, read `thresholds` only per channel
        // in `PerChannel` mode, and write a slot only below `capacity`.
        unsafe {
            kernel::clear::launch_unchecked(
                client,
                cube_count(values),
                CubeDim::new_1d(CUBE_DIM),
                BufferArg::from_raw_parts(keys.clone(), values),
                values as u32,
            );
            kernel::mark::launch_unchecked(
                client,
                cube_count(values),
                CubeDim::new_1d(CUBE_DIM),
                BufferArg::from_raw_parts(input.clone(), values),
                BufferArg::from_raw_parts(thresholds, thresholds_len),
                BufferArg::from_raw_parts(keys.clone(), values),
                BufferArg::from_raw_parts(self.counters.clone(), 2),
                values as u32,
                samples as u32,
                start,
                end,
                scale,
                negative,
                mode,
            );
            kernel::select::launch_unchecked(
                client,
                cube_count(channels * owned_len),
                CubeDim::new_1d(CUBE_DIM),
                BufferArg::from_raw_parts(input.clone(), values),
                BufferArg::from_raw_parts(keys, values),
                BufferArg::from_raw_parts(self.counters.clone(), 2),
                BufferArg::from_raw_parts(self.positions.clone(), 2 * self.capacity),
                BufferArg::from_raw_parts(self.values.clone(), self.capacity),
                self.capacity as u32,
                channels as u32,
                samples as u32,
                start,
                end,
                reach,
            );
        }
        Ok(())
    }

    /// Downloads the peaks of the last [`detect`](Self::detect) (waits for the device),
    /// sorted by channel then sample (the device appends them in no set order).
    ///
    /// # Errors
    ///
    /// [`Error::OverLimit`] when more than [`capacity`](Self::capacity) peaks were found
    /// (which ones fitted is arbitrary, so none are returned: detect on shorter windows or
    /// with a larger detector); [`Error::InvalidParameter`] when the owned samples held a NaN
    /// or a per-channel threshold was NaN; [`Error::Device`] when the device fails.
    pub fn peaks(&self, client: &Client) -> Result<Vec<Peak>> {
        let counters = download::<u32>(client, &self.counters, 2)?;
        let (found, nans) = (counters[0] as usize, counters[1]);
        if nans > 0 {
            return Err(Error::InvalidParameter {
                what: "find_peaks: input",
                reason: format!(
                    "{nans} NaN samples in the owned range or NaN per-channel thresholds"
                ),
            });
        }
        if found > self.capacity {
            return Err(Error::OverLimit {
                what: "find_peaks: peaks",
                requested: found as u64,
                limit: self.capacity as u64,
                unit: "peaks",
                reason: "the detector's max_peaks",
            });
        }
        if found == 0 {
            return Ok(Vec::new());
        }
        let positions = download::<u32>(client, &self.positions, 2 * found)?;
        let values = download::<f32>(client, &self.values, found)?;
        let mut peaks: Vec<Peak> = positions
            .chunks_exact(2)
            .zip(values)
            .map(|(position, value)| Peak {
                channel: position[0],
                sample: self.start + u64::from(position[1]),
                value,
            })
            .collect();
        peaks.sort_by_key(|peak| (peak.channel, peak.sample));
        Ok(peaks)
    }
}

/// Peaks of every channel of a whole `[channels, samples]` array (all samples owned), as
/// [`PeakDetector`] describes, with a detector of `max_peaks` made for the call: the one-shot
/// form of `scipy.signal.find_peaks` per channel. Waits for the device.
///
/// # Errors
///
/// As [`PeakDetector::new`], [`PeakDetector::detect`] and [`PeakDetector::peaks`].
pub fn find_peaks(
    client: &Client,
    input: &DeviceArray,
    options: &PeakOptions,
    max_peaks: usize,
) -> Result<Vec<Peak>> {
    let mut detector = PeakDetector::new(client, max_peaks)?;
    detector.detect(client, input, 0..input.samples(), options)?;
    detector.peaks(client)
}

/// Peaks beyond each channel's noise, window after window (the detection of a threshold
/// detector such as `detect`'s): on each window the channels' MAD noise
/// ([`mad_noise_into`](crate::mad_noise_into), measured on the whole window, halos included)
/// times `scale` is each channel's height, and the peaks of `polarity` at least `distance`
/// samples apart ([`PeakDetector`]) at the samples the window owns are downloaded, in
/// recording samples; nothing else leaves the device. With halos of at least `distance + 1`
/// (data without repeated neighbours) each peak is found once and as in the whole recording.
#[derive(Debug)]
pub struct NoisePeaks {
    noise: ChannelVector,
    detector: PeakDetector,
    options: PeakOptions,
}

impl NoisePeaks {
    /// A detector for the windows of `workspace` (its channels, its longest window), with room
    /// for the most peaks a window can hold: one per `distance` samples of each channel.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidParameter`] when `distance` is zero or `scale` is NaN; as
    /// [`PeakDetector::new`] (buffers over the device's limits).
    pub fn new(
        client: &Client,
        workspace: &PipelineWorkspace,
        polarity: Polarity,
        scale: f32,
        distance: usize,
    ) -> Result<Self> {
        if distance == 0 || scale.is_nan() {
            return Err(Error::InvalidParameter {
                what: "noise peaks: distance and scale",
                reason: format!(
                    "the distance must be at least 1 and the scale a number, got {distance} and \
                     {scale}"
                ),
            });
        }
        let channels = workspace.channels();
        let noise = ChannelVector::empty(client, channels)?;
        let per_channel = workspace.max_samples() / distance + 1;
        let detector = PeakDetector::new(client, channels.saturating_mul(per_channel))?;
        let options = PeakOptions {
            polarity,
            height: Height::PerChannel {
                thresholds: noise.clone(),
                scale,
            },
            distance,
        };
        Ok(Self {
            noise,
            detector,
            options,
        })
    }

    /// The peaks of `window` at the samples it owns, in recording samples, sorted by channel
    /// then sample (waits for the device).
    ///
    /// # Errors
    ///
    /// As [`mad_noise_into`](crate::mad_noise_into), [`PeakDetector::detect_window`] and
    /// [`PeakDetector::peaks`]: a window of another workspace (other channels, or longer: more
    /// peaks than room), a NaN in the owned samples.
    pub fn find(&mut self, client: &Client, window: &DeviceWindow) -> Result<Vec<Peak>> {
        crate::mad_noise_into(client, window.array(), &self.noise)?;
        self.detector.detect_window(client, window, &self.options)?;
        self.detector.peaks(client)
    }
}
