//! Harvesting single-channel clips on the device (Kilosort4 §4): the waveforms the universal
//! templates are learned from.

use cubecl::bytes::Bytes;
use cubecl::client::Client;
use cubecl::prelude::*;
use dspk_ops::launch::{CUBE_DIM, cube_count};
use dspk_ops::{DeviceArray, DeviceWindow};

use super::kernel::{self, ISOLATION_CHANNELS, ISOLATION_SAMPLES, POOL_SAMPLES};
use crate::{Error, Result};

/// The settings of a [`ClipHarvester`] (Kilosort4's names in brackets).
#[derive(Debug, Clone, PartialEq)]
pub struct ClipSettings {
    /// Smallest `|x|` a single-channel peak must exceed, in units of the whitened data
    /// (`Th_single_ch`). Default `[6]`. With several (EMUsort: `[6, 9, 12, 15]`), the peak
    /// and isolation rule runs once per threshold and the clips of every `(channel, sample)`
    /// found at any threshold are kept once each.
    pub thresholds: Vec<f32>,
    /// Samples per clip, odd (`nt`). Default 61.
    pub nt: usize,
    /// Index of the peak inside a clip (`nt0min`). Default 20.
    pub nt0min: usize,
    /// Most clips kept over all batches. Default 500 000.
    pub max_clips: usize,
    /// Recording samples per batch (`batch_size`): clips are kept, ordered and capped batch
    /// by batch, whatever the windows. Default 60 000.
    pub batch: u64,
    /// Clips come from batches `0, stride, 2 stride, ...` only (`clip_batch_stride`, as
    /// Kilosort4 harvests every 25th batch). Default 1: every batch.
    pub batch_stride: usize,
}

impl Default for ClipSettings {
    fn default() -> Self {
        Self {
            thresholds: vec![6.0],
            nt: 61,
            nt0min: 20,
            max_clips: 500_000,
            batch: 60_000,
            batch_stride: 1,
        }
    }
}

/// Collects the clips of isolated single-channel peaks from whitened windows on the device.
///
/// In each window `X` (`channels x samples`, `f32`), with `A = |X|`:
/// - a *peak* is a position `(c, t)` where `A[c, t] > th` and no value of `A` in
///   channels `c - 4 ..= c + 4` (adjacent rows of the array, not probe geometry) and samples
///   `t - 5 ..= t + 5` is larger (positions past the recording's ends are left out);
/// - a peak is *isolated* when it is the only peak in channels `c - 6 ..= c + 6` and samples
///   `t - 30 ..= t + 30`;
/// - an isolated peak is kept when the window owns `t` (owner rule) and its clip,
///   `X[c, t - nt0min .. t - nt0min + nt]` (signed samples, the peak at index `nt0min`), lies
///   inside the recording.
///
/// With windows read with at least [`halo`](Self::halo) samples each side (fewer only where the
/// recording ends), the clips found do not depend on how the recording is cut into windows:
/// each window's clips are those of the whole recording at its owned samples.
///
/// Clips are kept by Kilosort's batches (`batch` recording samples each), not by window: only
/// peaks in batches `0, batch_stride, 2 batch_stride, ...` are kept, and once every window
/// of a batch has been harvested (a later window arrives, or [`finish`](Self::finish)) its
/// clips are put in `(channel, sample)` order after those of the batches before it. A batch
/// whose clips would bring the total past `max_clips` adds none, and harvesting stops there
/// ([`is_full`](Self::is_full); later windows add nothing), as Kilosort drops the batch that
/// would overflow and stops. So the clips, their order and the cap do not depend on the
/// window length. Windows must be harvested in recording order; the caller may skip windows
/// that hold no harvested batch.
///
/// (Kilosort4, unlike this harvester, also drops peaks within `nt` samples of each batch's
/// padded edges.)
///
/// Per window: three kernel launches, a read-back of the count and the peak list, and (when
/// clips are kept) an upload of the sorted list, a gather and a read-back of the clips.
#[derive(Debug)]
pub struct ClipHarvester {
    channels: usize,
    settings: ClipSettings,
    /// `counters[0]`: isolated peaks found; `counters[1]`: non-finite values.
    counters: DeviceArray<u32>,
    /// Peak marks of the last window, grown as needed.
    marks: Option<DeviceArray<u32>>,
    /// Flat indices of the isolated peaks of the last window, grown as needed.
    list: Option<DeviceArray<u32>>,
    clips: Vec<f32>,
    positions: Vec<(usize, u64)>,
    /// Clips of complete batches (ordered and within the cap); those after are pending.
    settled: usize,
    full: bool,
}

impl ClipHarvester {
    /// A harvester for windows of `channels` channels.
    ///
    /// # Errors
    ///
    /// [`Error::Setting`] when `th_single_ch` is not finite or not positive, `nt` is even or
    /// 0, `nt0min >= nt`, `max_clips`, `batch`, `batch_stride` or `channels` is 0;
    /// [`Error::Ops`] when the device
    /// refuses the counters.
    pub fn new(client: &Client, channels: usize, settings: ClipSettings) -> Result<Self> {
        check_settings(channels, &settings)?;
        Ok(Self {
            channels,
            settings,
            counters: DeviceArray::from_host(client, &[0u32; 2], 1, 2)?,
            marks: None,
            list: None,
            clips: Vec::new(),
            positions: Vec::new(),
            settled: 0,
            full: false,
        })
    }

    /// Samples a window must be read with on each side of its owned samples for the clips not
    /// to depend on the windowing: `max(30 + 5, nt0min, nt - 1 - nt0min)` (the isolation
    /// reach plus the max-pool reach, and the clip's extent each side of its peak; 40 for the
    /// defaults).
    #[must_use]
    pub fn halo(&self) -> usize {
        let pooled = (ISOLATION_SAMPLES + POOL_SAMPLES) as usize;
        let nt = self.settings.nt;
        let nt0min = self.settings.nt0min;
        pooled.max(nt0min).max(nt - 1 - nt0min)
    }

    /// The settings it was made with.
    #[must_use]
    pub fn settings(&self) -> &ClipSettings {
        &self.settings
    }

    /// Adds the clips of `window`'s owned samples in harvested batches (see [`ClipHarvester`]
    /// for the rule), after settling the batches that end before the window. Waits for the
    /// device. Does nothing once [`is_full`](Self::is_full).
    ///
    /// The array is taken to end where the recording does on a side where it holds fewer than
    /// [`halo`](Self::halo) samples past the owned ones and its read range ends there (at
    /// sample 0 on the left; on the right the window cannot tell, so a short right halo is
    /// taken as the recording's end).
    ///
    /// # Errors
    ///
    /// [`Error::Input`] when the array has another number of channels, when its left halo is
    /// shorter than [`halo`](Self::halo) but does not start at sample 0, or when the array holds
    /// a NaN or an infinity anywhere (nothing is added then: the peaks near it are not
    /// defined); [`Error::Ops`] when a device buffer would exceed the device's limits;
    /// [`Error::Device`] when the device fails.
    pub fn harvest(&mut self, client: &Client, window: &DeviceWindow) -> Result<()> {
        self.settle(window.window().valid().start / self.settings.batch);
        if self.full {
            return Ok(());
        }
        let array = window.array();
        let (channels, samples) = (array.channels(), array.samples());
        if channels != self.channels {
            return Err(Error::Input {
                what: "clip harvest: window",
                reason: format!(
                    "it has {channels} channels, the harvester was made for {}",
                    self.channels
                ),
            });
        }
        let owned = window.owned_local();
        if window.start() > 0 && owned.start < self.halo() {
            return Err(Error::Input {
                what: "clip harvest: window",
                reason: format!(
                    "it is read {} samples before its owned samples {:?}, fewer than the {} \
                     the clips need",
                    owned.start,
                    window.window().valid(),
                    self.halo()
                ),
            });
        }
        if owned.is_empty() || array.is_empty() {
            return Ok(());
        }
        let values = array.len();
        // At most one isolated peak in any block of 7 channels x 31 samples (two in one block
        // would each lie in the other's isolation neighbourhood), so the list cannot overflow.
        let block_c = ISOLATION_CHANNELS as usize + 1;
        let block_s = ISOLATION_SAMPLES as usize + 1;
        let capacity = channels.div_ceil(block_c) * owned.len().div_ceil(block_s);
        let marks = grown(client, &mut self.marks, values)?;
        let list = grown(client, &mut self.list, capacity)?;
        let mut peaks = Vec::new();
        for &threshold in &self.settings.thresholds {
            peaks.extend(self.isolated_peaks(client, window, &marks, &list, capacity, threshold)?);
        }
        // Flat indices `c * samples + t` sort in (channel, sample) order; a position isolated
        // at several thresholds is one clip (EMUsort keeps the wrong rows here:
        // `docs/KILOSORT4.md` §10.1.2). Only harvested batches, batch by batch.
        let start = window.start();
        let (batch, stride) = (self.settings.batch, self.settings.batch_stride);
        let batch_of = |p: u32| (start + (p as usize % samples) as u64) / batch;
        peaks.retain(|&p| (batch_of(p) as usize).is_multiple_of(stride));
        peaks.sort_unstable_by_key(|&p| (batch_of(p), p));
        peaks.dedup();
        let found = peaks.len();
        if found == 0 {
            return Ok(());
        }
        let settings = &self.settings;
        let sorted = DeviceArray::from_host(client, &peaks, 1, found)?;
        let out = DeviceArray::<f32>::empty(client, found, settings.nt)?;
        kernel::gather_clips::launch(
            client,
            cube_count(out.len()),
            CubeDim::new_1d(CUBE_DIM),
            array.arg(values),
            sorted.arg(found),
            out.arg(out.len()),
            found as u32,
            settings.nt as u32,
            settings.nt0min as u32,
        );
        self.clips.extend(out.to_host(client)?);
        self.positions.extend(
            peaks
                .iter()
                .map(|&p| (p as usize / samples, start + (p as usize % samples) as u64)),
        );
        Ok(())
    }

    /// The flat indices `c * samples + t` of the isolated peaks above `threshold` that
    /// `window` owns and whose clips fit, in the device's (unordered) order.
    fn isolated_peaks(
        &self,
        client: &Client,
        window: &DeviceWindow,
        marks: &DeviceArray<u32>,
        list: &DeviceArray<u32>,
        capacity: usize,
        threshold: f32,
    ) -> Result<Vec<u32>> {
        let array = window.array();
        let (channels, samples, values) = (array.channels(), array.samples(), array.len());
        let owned = window.owned_local();
        client.write(self.counters.handle(), Bytes::from_elems(vec![0u32; 2]));
        // All counts below u32::MAX: `values` is a typed array's length and the others are
        // smaller.
        kernel::mark_peaks::launch(
            client,
            cube_count(values),
            CubeDim::new_1d(CUBE_DIM),
            array.arg(values),
            marks.arg(values),
            self.counters.arg(2),
            channels as u32,
            samples as u32,
            threshold,
        );
        kernel::select_isolated::launch(
            client,
            cube_count(channels * owned.len()),
            CubeDim::new_1d(CUBE_DIM),
            marks.arg(values),
            self.counters.arg(2),
            list.arg(capacity),
            capacity as u32,
            channels as u32,
            samples as u32,
            owned.start as u32,
            owned.end as u32,
            self.settings.nt as u32,
            self.settings.nt0min as u32,
        );
        let counters = self.counters.to_host(client)?;
        let (found, non_finite) = (counters[0] as usize, counters[1]);
        if non_finite > 0 {
            return Err(Error::Input {
                what: "clip harvest: window",
                reason: format!(
                    "{non_finite} NaN or infinite values in samples {:?}",
                    window.window().read()
                ),
            });
        }
        if found > capacity {
            return Err(Error::Input {
                what: "clip harvest: window",
                reason: format!("{found} isolated peaks, more than the {capacity} possible"),
            });
        }
        if found == 0 {
            return Ok(Vec::new());
        }
        let mut peaks = list.to_host(client)?;
        peaks.truncate(found);
        Ok(peaks)
    }

    /// Settles every batch harvested so far (the last windows were harvested): orders its
    /// clips and applies the cap (see [`ClipHarvester`]).
    pub fn finish(&mut self) {
        self.settle(u64::MAX);
    }

    /// Settles the pending clips of batches before `first_open`, batch by batch: each batch's
    /// clips put in `(channel, sample)` order, or, when they would bring the total past
    /// `max_clips`, dropped with every clip after them and harvesting stopped.
    fn settle(&mut self, first_open: u64) {
        let (nt, batch) = (self.settings.nt, self.settings.batch);
        // Pending clips come in recording order of their windows, each window's in batch
        // order: a batch's clips are contiguous, and the complete batches a prefix.
        while self.settled < self.positions.len() && !self.full {
            let b = self.positions[self.settled].1 / batch;
            if b >= first_open {
                break;
            }
            let end = self.settled
                + self.positions[self.settled..]
                    .iter()
                    .take_while(|p| p.1 / batch == b)
                    .count();
            if end > self.settings.max_clips {
                self.full = true;
                self.positions.truncate(self.settled);
                self.clips.truncate(self.settled * nt);
                break;
            }
            let mut order: Vec<usize> = (self.settled..end).collect();
            order.sort_by_key(|&i| self.positions[i]);
            let positions: Vec<(usize, u64)> = order.iter().map(|&i| self.positions[i]).collect();
            let clips: Vec<f32> = order
                .iter()
                .flat_map(|&i| self.clips[i * nt..(i + 1) * nt].iter().copied())
                .collect();
            self.positions[self.settled..end].copy_from_slice(&positions);
            self.clips[self.settled * nt..end * nt].copy_from_slice(&clips);
            self.settled = end;
        }
    }

    /// The clips kept so far, `len() x nt` row-major (in their final order and cap once
    /// [`finish`](Self::finish) has run).
    #[must_use]
    pub fn clips(&self) -> &[f32] {
        &self.clips
    }

    /// The channel and recording sample of each kept clip's peak, in the order of
    /// [`clips`](Self::clips).
    #[must_use]
    pub fn positions(&self) -> &[(usize, u64)] {
        &self.positions
    }

    /// Clips kept so far.
    #[must_use]
    pub fn len(&self) -> usize {
        self.positions.len()
    }

    /// Whether no clip was kept.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }

    /// Whether harvesting has stopped: a batch's clips would have brought the total past
    /// `max_clips`.
    #[must_use]
    pub fn is_full(&self) -> bool {
        self.full
    }
}

/// Checks a harvester's settings.
fn check_settings(channels: usize, settings: &ClipSettings) -> Result<()> {
    let setting = |name, reason: String| Err(Error::Setting { name, reason });
    if channels == 0 {
        return Err(Error::Input {
            what: "clip harvest: channels",
            reason: "a harvester needs at least one channel".into(),
        });
    }
    if settings.thresholds.is_empty()
        || settings
            .thresholds
            .iter()
            .any(|th| !th.is_finite() || *th <= 0.0)
    {
        return setting(
            "Th_single_ch",
            format!(
                "needs at least one threshold, each finite and positive, got {:?}",
                settings.thresholds
            ),
        );
    }
    if settings.nt == 0 || settings.nt.is_multiple_of(2) {
        return setting("nt", format!("must be odd, got {}", settings.nt));
    }
    if settings.nt0min >= settings.nt {
        return setting(
            "nt0min",
            format!(
                "{} is not inside the {} samples",
                settings.nt0min, settings.nt
            ),
        );
    }
    if settings.max_clips == 0 {
        return setting("max_clips", "must be at least 1".into());
    }
    if settings.batch == 0 {
        return setting("batch_size", "must be at least 1".into());
    }
    if settings.batch_stride == 0 {
        return setting("clip_batch_stride", "must be at least 1".into());
    }
    Ok(())
}

/// The buffer in `slot`, replaced by a larger one when it holds fewer than `len` values.
fn grown(
    client: &Client,
    slot: &mut Option<DeviceArray<u32>>,
    len: usize,
) -> Result<DeviceArray<u32>> {
    match slot {
        Some(array) if array.len() >= len => Ok(array.clone()),
        _ => {
            let array = DeviceArray::empty(client, 1, len.max(1))?;
            *slot = Some(array.clone());
            Ok(array)
        }
    }
}

#[cfg(test)]
mod tests {
    use dspk_core::test_util::{Rng, for_each_runtime};
    use dspk_core::{ChunkSchedule, HaloWindow};

    use super::*;

    const CHANNELS: usize = 17;
    const SAMPLES: usize = 2311;

    /// A whitened-looking recording (`CHANNELS x SAMPLES`, unit noise) with spikes: isolated
    /// ones (a main channel and smaller copies on its neighbours), pairs close enough in
    /// channel and time that neither is isolated, and spikes near both ends.
    fn recording(seed: u64) -> Vec<f32> {
        let mut rng = Rng::new(seed);
        let mut x: Vec<f64> = (0..CHANNELS * SAMPLES).map(|_| rng.normal()).collect();
        let spike = |x: &mut Vec<f64>, c: usize, t: usize, amplitude: f64| {
            for (dc, scale) in [(-1i64, 0.45), (0, 1.0), (1, 0.45)] {
                let channel = c as i64 + dc;
                if !(0..CHANNELS as i64).contains(&channel) {
                    continue;
                }
                for j in -20i64..41 {
                    let s = t as i64 + j;
                    if (0..SAMPLES as i64).contains(&s) {
                        let j = j as f64;
                        let shape =
                            (-(j * j) / 6.0).exp() - 0.3 * (-(j - 9.0).powi(2) / 40.0).exp();
                        x[channel as usize * SAMPLES + s as usize] += scale * amplitude * shape;
                    }
                }
            }
        };
        // Isolated spikes on a grid with jitter, either sign.
        let mut t = 45;
        while t + 45 < SAMPLES {
            let c = rng.below(CHANNELS as u64) as usize;
            let sign = if rng.below(2) == 0 { -1.0 } else { 1.0 };
            spike(
                &mut x,
                c,
                t + rng.below(20) as usize,
                sign * rng.uniform(8.0, 16.0),
            );
            t += 110;
        }
        // Pairs: 3 channels and 12 samples apart (not isolated), or 8 channels apart (both
        // isolated if nothing else is near).
        for &(c, t, dc) in &[
            (2usize, 300usize, 3usize),
            (9, 1150, 3),
            (5, 1720, 8),
            (12, 1160, 2),
        ] {
            spike(&mut x, c, t, -12.0);
            if c + dc < CHANNELS {
                spike(&mut x, c + dc, t + 12, 11.0);
            }
        }
        // Near the ends: clips that do not fit.
        spike(&mut x, 4, 8, -14.0);
        spike(&mut x, 11, SAMPLES - 12, 14.0);
        x.into_iter().map(|v| v as f32).collect()
    }

    /// The rule of [`ClipHarvester`] on the whole recording, in `f64`: the `(channel, sample)`
    /// of each kept clip (isolated at any of the thresholds), sorted, the clips, and the
    /// number of peaks before isolation at the first threshold.
    fn reference(x: &[f32], settings: &ClipSettings) -> (Vec<(usize, u64)>, Vec<f32>, usize) {
        let a = |c: usize, t: usize| f64::from(x[c * SAMPLES + t]).abs();
        let mut kept = Vec::new();
        let mut first_peaks = None;
        for &th in &settings.thresholds {
            let th = f64::from(th);
            let mut peak = vec![false; CHANNELS * SAMPLES];
            for c in 0..CHANNELS {
                for t in 0..SAMPLES {
                    let mut largest = f64::NEG_INFINITY;
                    for other in c.saturating_sub(4)..=(c + 4).min(CHANNELS - 1) {
                        for s in t.saturating_sub(5)..=(t + 5).min(SAMPLES - 1) {
                            largest = largest.max(a(other, s));
                        }
                    }
                    peak[c * SAMPLES + t] = a(c, t) > th && a(c, t) == largest;
                }
            }
            first_peaks.get_or_insert(peak.iter().filter(|&&p| p).count());
            for c in 0..CHANNELS {
                for t in 0..SAMPLES {
                    if !peak[c * SAMPLES + t] {
                        continue;
                    }
                    let mut count = 0;
                    for other in c.saturating_sub(6)..=(c + 6).min(CHANNELS - 1) {
                        for s in t.saturating_sub(30)..=(t + 30).min(SAMPLES - 1) {
                            count += usize::from(peak[other * SAMPLES + s]);
                        }
                    }
                    let fits = t >= settings.nt0min && t - settings.nt0min + settings.nt <= SAMPLES;
                    if count == 1 && fits {
                        kept.push((c, t as u64));
                    }
                }
            }
        }
        kept.sort_unstable();
        kept.dedup();
        let mut clips = Vec::new();
        for &(c, t) in &kept {
            let first = c * SAMPLES + t as usize - settings.nt0min;
            clips.extend_from_slice(&x[first..first + settings.nt]);
        }
        (kept, clips, first_peaks.unwrap_or(0))
    }

    /// The device window of `window` over the recording `x`.
    fn device_window(client: &Client, x: &[f32], window: HaloWindow) -> DeviceWindow {
        let read = window.read();
        let values: Vec<f32> = (0..CHANNELS)
            .flat_map(|c| &x[c * SAMPLES + read.start as usize..c * SAMPLES + read.end as usize])
            .copied()
            .collect();
        let array = DeviceArray::from_host(client, &values, CHANNELS, window.read_len()).unwrap();
        DeviceWindow::new(array, window).unwrap()
    }

    /// Harvests every window of `schedule`, then finishes.
    fn harvest_all(
        client: &Client,
        x: &[f32],
        schedule: &ChunkSchedule,
        settings: ClipSettings,
    ) -> ClipHarvester {
        let mut harvester = ClipHarvester::new(client, CHANNELS, settings).unwrap();
        for window in schedule.iter() {
            harvester
                .harvest(client, &device_window(client, x, window))
                .unwrap();
        }
        harvester.finish();
        harvester
    }

    /// The positions and clips of `harvester`, sorted by position.
    fn sorted(harvester: &ClipHarvester) -> (Vec<(usize, u64)>, Vec<f32>) {
        let nt = harvester.settings().nt;
        let mut order: Vec<usize> = (0..harvester.len()).collect();
        order.sort_by_key(|&i| harvester.positions()[i]);
        let positions = order.iter().map(|&i| harvester.positions()[i]).collect();
        let clips = order
            .iter()
            .flat_map(|&i| &harvester.clips()[i * nt..(i + 1) * nt])
            .copied()
            .collect();
        (positions, clips)
    }

    #[test]
    fn universal_harvest_matches_the_reference() {
        let x = recording(11);
        let settings = ClipSettings::default();
        let (expected, clips, peaks) = reference(&x, &settings);
        // The data exercise every part of the rule.
        assert!(expected.len() >= 15, "{} clips", expected.len());
        assert!(
            peaks >= expected.len() + 6,
            "{peaks} peaks, {} isolated",
            expected.len()
        );
        for window in [SAMPLES, 1157, 800] {
            let schedule = ChunkSchedule::symmetric(SAMPLES as u64, window as u64, 40).unwrap();
            for_each_runtime(|_, client| {
                let harvester = harvest_all(client, &x, &schedule, settings.clone());
                assert_eq!(harvester.halo(), 40);
                assert_eq!(harvester.len(), expected.len());
                assert_eq!(harvester.clips().len(), expected.len() * settings.nt);
                // One batch: in (channel, sample) order, whatever the windows.
                assert_eq!(harvester.positions(), &expected[..], "windows of {window}");
                let (positions, found) = sorted(&harvester);
                assert_eq!(positions, expected, "windows of {window}");
                assert_eq!(found, clips, "windows of {window}");
            });
        }
    }

    #[test]
    fn universal_harvest_then_learn_finds_the_injected_waveform() {
        let x = recording(11);
        let schedule = ChunkSchedule::symmetric(SAMPLES as u64, 1000, 40).unwrap();
        // The injected main-channel waveform, unit norm, peak at index 20.
        let shape: Vec<f64> = (-20..41)
            .map(|j| {
                let j = f64::from(j);
                (-(j * j) / 6.0).exp() - 0.3 * (-(j - 9.0).powi(2) / 40.0).exp()
            })
            .collect();
        let norm = shape.iter().map(|v| v * v).sum::<f64>().sqrt();
        for_each_runtime(|_, client| {
            let harvester = harvest_all(client, &x, &schedule, ClipSettings::default());
            // Spikes of either sign: two templates, one per sign.
            let templates =
                crate::detection::universal::learn_templates(harvester.clips(), 61, 20, 2, 3, 1, 2)
                    .unwrap();
            let mut signs: Vec<f64> = templates
                .wtemp()
                .chunks_exact(61)
                .map(|t| {
                    t.iter()
                        .zip(&shape)
                        .map(|(&a, b)| f64::from(a) * b)
                        .sum::<f64>()
                        / norm
                })
                .collect();
            signs.sort_by(f64::total_cmp);
            assert!(signs[0] < -0.97 && signs[1] > 0.97, "{signs:?}");
        });
    }

    #[test]
    fn universal_harvest_keeps_the_densest_isolated_peaks() {
        // Single-sample spikes every 7 channels and 31 samples: all isolated, as many as the
        // isolation rule allows.
        let mut x = vec![0.0f32; CHANNELS * SAMPLES];
        for c in (0..CHANNELS).step_by(7) {
            for t in (0..SAMPLES).step_by(31) {
                x[c * SAMPLES + t] = if t % 2 == 0 { 10.0 } else { -10.0 };
            }
        }
        let settings = ClipSettings::default();
        let (expected, clips, peaks) = reference(&x, &settings);
        assert_eq!(peaks, 3 * SAMPLES.div_ceil(31));
        assert!(expected.len() > 3 * 70, "{}", expected.len());
        let schedule = ChunkSchedule::symmetric(SAMPLES as u64, SAMPLES as u64, 0).unwrap();
        for_each_runtime(|_, client| {
            let harvester = harvest_all(client, &x, &schedule, settings.clone());
            assert_eq!(sorted(&harvester), (expected.clone(), clips.clone()));
        });
    }

    #[test]
    fn universal_harvest_other_settings_and_longer_halos() {
        let x = recording(5);
        let settings = ClipSettings {
            thresholds: vec![7.5],
            nt: 31,
            nt0min: 3,
            max_clips: 1000,
            ..ClipSettings::default()
        };
        let (expected, clips, _) = reference(&x, &settings);
        assert!(!expected.is_empty());
        for_each_runtime(|_, client| {
            let halo = ClipHarvester::new(client, CHANNELS, settings.clone())
                .unwrap()
                .halo();
            assert_eq!(halo, 35);
            for (window, halo) in [(700, halo), (1000, 97)] {
                let schedule =
                    ChunkSchedule::symmetric(SAMPLES as u64, window, halo as u64).unwrap();
                let harvester = harvest_all(client, &x, &schedule, settings.clone());
                assert_eq!(sorted(&harvester), (expected.clone(), clips.clone()));
            }
        });
    }

    #[test]
    fn universal_harvest_pools_several_thresholds_once_each() {
        // EMUsort's thresholds: a peak crowded at 6 can be isolated at 9 or 12; one isolated
        // at several thresholds is one clip.
        let x = recording(11);
        let settings = ClipSettings {
            thresholds: vec![6.0, 9.0, 12.0, 15.0],
            ..ClipSettings::default()
        };
        let (pooled, clips, _) = reference(&x, &settings);
        let (single, _, _) = reference(&x, &ClipSettings::default());
        let (at_nine, _, _) = reference(
            &x,
            &ClipSettings {
                thresholds: vec![9.0],
                ..ClipSettings::default()
            },
        );
        assert!(
            pooled.len() > single.len(),
            "{} {}",
            pooled.len(),
            single.len()
        );
        let both = at_nine.iter().filter(|p| single.contains(p)).count();
        assert!(both > 0, "no position isolated at both 6 and 9");
        assert!(pooled.len() < single.len() + at_nine.len());
        let schedule = ChunkSchedule::symmetric(SAMPLES as u64, 900, 40).unwrap();
        for_each_runtime(|_, client| {
            let harvester = harvest_all(client, &x, &schedule, settings.clone());
            assert_eq!(sorted(&harvester), (pooled.clone(), clips.clone()));
        });
    }

    #[test]
    fn universal_harvest_drops_the_batch_that_overflows_whatever_the_windows() {
        let x = recording(11);
        let (expected, _, _) = reference(&x, &ClipSettings::default());
        let first = expected.iter().filter(|&&(_, t)| t < 800).count();
        let second = expected
            .iter()
            .filter(|&&(_, t)| (800..1600).contains(&t))
            .count();
        assert!(first > 0 && second > 1);
        // Batches of 800: windows of a batch, half a batch, and across batches.
        for window in [800, 400, 1157] {
            let schedule = ChunkSchedule::symmetric(SAMPLES as u64, window, 40).unwrap();
            for_each_runtime(|_, client| {
                // Room for the first batch and the first two batches exactly.
                for (max_clips, kept, full) in [
                    (first + second - 1, first, true),
                    (first + second, first + second, true),
                    (expected.len(), expected.len(), false),
                ] {
                    let settings = ClipSettings {
                        max_clips,
                        batch: 800,
                        ..ClipSettings::default()
                    };
                    let harvester = harvest_all(client, &x, &schedule, settings.clone());
                    let what = format!("windows of {window}, max_clips {max_clips}");
                    assert_eq!(harvester.len(), kept, "{what}");
                    assert_eq!(harvester.is_full(), full && kept < expected.len(), "{what}");
                    assert_eq!(
                        harvester.positions(),
                        &expected_in_batch_order(&expected, 800)[..kept],
                        "{what}"
                    );
                }
            });
        }
    }

    #[test]
    fn universal_harvest_keeps_every_strideth_batch_whatever_the_windows() {
        let x = recording(11);
        let (expected, _, _) = reference(&x, &ClipSettings::default());
        let kept: Vec<(usize, u64)> = expected_in_batch_order(&expected, 500)
            .into_iter()
            .filter(|&(_, t)| (t / 500).is_multiple_of(2))
            .collect();
        assert!(!kept.is_empty() && kept.len() < expected.len());
        for window in [500, 250, 1157, SAMPLES as u64] {
            let schedule = ChunkSchedule::symmetric(SAMPLES as u64, window, 40).unwrap();
            for_each_runtime(|_, client| {
                let settings = ClipSettings {
                    batch: 500,
                    batch_stride: 2,
                    ..ClipSettings::default()
                };
                let harvester = harvest_all(client, &x, &schedule, settings);
                assert_eq!(harvester.positions(), &kept[..], "windows of {window}");
            });
        }
    }

    /// `positions` (sorted by channel, sample) in the harvester's order: by batch of `batch`
    /// samples, then channel and sample.
    fn expected_in_batch_order(positions: &[(usize, u64)], batch: u64) -> Vec<(usize, u64)> {
        let mut order = positions.to_vec();
        order.sort_by_key(|&(c, t)| (t / batch, c, t));
        order
    }

    #[test]
    fn universal_harvest_refuses_non_finite_samples() {
        let clean = recording(11);
        let schedule = ChunkSchedule::symmetric(SAMPLES as u64, 1200, 40).unwrap();
        for_each_runtime(|_, client| {
            for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
                let mut x = clean.clone();
                x[5 * SAMPLES + 1500] = bad;
                let mut harvester =
                    ClipHarvester::new(client, CHANNELS, ClipSettings::default()).unwrap();
                let windows: Vec<HaloWindow> = schedule.iter().collect();
                harvester
                    .harvest(client, &device_window(client, &x, windows[0].clone()))
                    .unwrap();
                let kept = harvester.len();
                assert!(kept > 0);
                let error = harvester
                    .harvest(client, &device_window(client, &x, windows[1].clone()))
                    .unwrap_err();
                assert!(matches!(error, Error::Input { .. }), "{error}");
                assert!(error.to_string().contains("1 NaN or infinite"), "{error}");
                assert_eq!(harvester.len(), kept);
                assert!(harvester.clips().iter().all(|v| v.is_finite()));
            }
        });
    }

    #[test]
    fn universal_harvest_refuses_bad_settings_and_windows() {
        let x = recording(11);
        for_each_runtime(|_, client| {
            let bad = [
                ClipSettings {
                    thresholds: vec![f32::NAN],
                    ..ClipSettings::default()
                },
                ClipSettings {
                    thresholds: vec![6.0, 0.0],
                    ..ClipSettings::default()
                },
                ClipSettings {
                    thresholds: Vec::new(),
                    ..ClipSettings::default()
                },
                ClipSettings {
                    nt: 60,
                    ..ClipSettings::default()
                },
                ClipSettings {
                    nt0min: 61,
                    ..ClipSettings::default()
                },
                ClipSettings {
                    max_clips: 0,
                    ..ClipSettings::default()
                },
                ClipSettings {
                    batch: 0,
                    ..ClipSettings::default()
                },
                ClipSettings {
                    batch_stride: 0,
                    ..ClipSettings::default()
                },
            ];
            for settings in bad {
                let error = ClipHarvester::new(client, CHANNELS, settings).unwrap_err();
                assert!(matches!(error, Error::Setting { .. }), "{error}");
            }
            assert!(ClipHarvester::new(client, 0, ClipSettings::default()).is_err());
            let mut harvester =
                ClipHarvester::new(client, CHANNELS, ClipSettings::default()).unwrap();
            // A left halo shorter than 40 that does not start the recording.
            let short = ChunkSchedule::symmetric(SAMPLES as u64, 1000, 39).unwrap();
            harvester
                .harvest(client, &device_window(client, &x, short.window(0).unwrap()))
                .unwrap();
            let error = harvester
                .harvest(client, &device_window(client, &x, short.window(1).unwrap()))
                .unwrap_err();
            assert!(error.to_string().contains("fewer than the 40"), "{error}");
            let mut other =
                ClipHarvester::new(client, CHANNELS + 1, ClipSettings::default()).unwrap();
            let error = other
                .harvest(client, &device_window(client, &x, short.window(0).unwrap()))
                .unwrap_err();
            assert!(error.to_string().contains("17 channels"), "{error}");
        });
    }
}
