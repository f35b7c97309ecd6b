//! Host side of universal-template detection: the detector, its device buffers and launches.

use cubecl::CubeElement;
use cubecl::prelude::*;
use dspk_ops::launch::{CUBE_DIM, UnitLayout, cube_count};
use dspk_ops::{DeviceArray, DeviceLimits, DeviceWindow};

use super::DetectedSpikes;
use super::kernel::{self, LANES};
use crate::algorithms::projection::Projection;
use crate::detection::centres::TemplateCentres;
use crate::detection::universal::UniversalTemplates;
use crate::runner::buffers::{alloc, prefix, read_counters, reset_counters, upload};
use crate::{Error, Result};

/// Consecutive centres one cube of the scoring kernel covers (`CUBE_DIM / LANES`): they share
/// most of their channels, so the projections one loads serve the others from the cache.
const SCORE_BLOCK: usize = CUBE_DIM as usize / LANES;

/// Spike slots allocated before the first window (grown to the most spikes one window had).
const INITIAL_CAPACITY: usize = 1 << 12;

/// The largest `sum_i bt[iC[g, i], k, t]^2` below which no score `|sum_i w[s, g, i] *
/// bt[iC[g, i], k, t]|` can exceed `threshold` (Cauchy-Schwarz over the `nc` weights of each
/// centre and size, `weights` as [`TemplateCentres::weights`]): `(threshold / largest weight
/// norm)^2`, lowered by 1e-4 of itself so that f32 rounding of the sums (relative error about
/// `nc * 2^-24`) cannot carry a score past the threshold. Zero when a weight is not finite or
/// every norm is zero (nothing is skipped).
fn skip_below(threshold: f32, weights: &[f32], nc: usize) -> f32 {
    let largest = weights
        .chunks(nc.max(1))
        .map(|w| w.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>())
        .fold(0.0f64, f64::max);
    if !(largest.is_finite() && largest > 0.0) {
        return 0.0;
    }
    let limit = f64::from(threshold).powi(2) / largest * (1.0 - 1e-4);
    // Rounded towards zero, so never above the f64 limit.
    let rounded = limit as f32;
    if f64::from(rounded) > limit {
        rounded.next_down()
    } else {
        rounded
    }
}

/// Universal-template spike detection (Kilosort4 §5.2-5.3) on whitened windows, on the device.
///
/// Built once per probe and set of templates (uploads the templates, the centres' nearest
/// lists and weights); [`detect`](Self::detect) then runs on each window:
///
/// 1. `Bt[c, k, t] = sum_j X[c, t + j - nt / 2] * wTEMP[k, j]` over the window's array
///    (samples outside it read as zero);
/// 2. `A[s, k] = sum_i w[s, i, g] * Bt[iC[i, g], k, t]`; `Amax[g, t] = max |A|` over the
///    combos `s * K + k`, the first (lowest) combo on ties, with the sign of its `A`;
/// 3. `Nb[g, t]` = the largest `Amax` of the `nn` centres nearest `g`, and `Np[g, t]` the
///    largest `Nb[g, t']` for `t'` within `nt0min` samples of `t` (and within the array);
/// 4. a spike at every owned column `t` with `Amax[g, t] == Np[g, t]` (exact equality: two
///    equal maxima both fire) and `Amax[g, t] > threshold`. Steps 3 and 4 run as one kernel
///    that, only where `Amax > threshold`, looks for a larger `Amax` among the neighbours and
///    columns the two max-pools span (the same test; `Nb` and `Np` are never stored);
/// 5. per spike, the position (channel positions weighted by `relu(sign * Bt[iC[i, g], k, t])`)
///    and the PC features `sum_j X[iC[i, g], t - nt / 2 + j] * wPCA[p, j]` of the raw window.
///
/// Unlike Kilosort, which zeroes `Nb` in the padding of each batch, the max-pools see every
/// sample the array holds and only owned columns report spikes. With [`halo`](Self::halo)
/// samples of real data on each side of the owned range (or the recording's end), every owned
/// column sees exactly the values it would see in one array holding the whole recording, so
/// the spikes do not depend on how the recording is cut into windows.
///
/// All sums run in a fixed order and no float atomics are used: results do not depend on
/// thread scheduling. Device memory: `channels * (K + 1) + 2 * G` 4-byte values per window
/// sample (the projections and their energies, and each centre's best score and combo),
/// allocated for the longest window seen and reused, plus `nc * P + 5` values per spike slot
/// (grown to the most spikes one window had).
#[derive(Debug)]
pub struct UniversalDetector {
    channels: usize,
    centres: usize,
    nc: usize,
    nn: usize,
    sizes: usize,
    nt: usize,
    nt0min: usize,
    templates: usize,
    pcs: usize,
    threshold: f32,
    /// `score_centres`' `skip_below`: see [`skip_below`].
    skip_below: f32,
    limits: DeviceLimits,
    layout: UnitLayout,
    wtemp: DeviceArray<f32>,
    wpca: DeviceArray<f32>,
    nearest_channels: DeviceArray<u32>,
    nearest_centres: DeviceArray<u32>,
    weights: DeviceArray<f32>,
    /// `[x, y]` per channel.
    positions: DeviceArray<f32>,
    /// `[FOUND, FIRST_BAD]`.
    counters: DeviceArray<u32>,
    /// One value the projection is given in place of the copy of the window it does not make
    /// (a kernel binds every buffer; none may be bound twice).
    no_copy: DeviceArray<f32>,
    scratch: Scratch,
    slots: Slots,
}

/// Per-sample buffers, sized for `samples` samples per channel.
#[derive(Debug)]
struct Scratch {
    samples: usize,
    /// `[channels, K, samples]`.
    bt: DeviceArray<f32>,
    /// `[channels, samples]`: each sample's `sum_k bt^2`.
    energy: DeviceArray<f32>,
    /// `[G, samples]` each.
    amax: DeviceArray<f32>,
    codes: DeviceArray<u32>,
}

/// Per-spike buffers, sized for `capacity` spikes.
#[derive(Debug)]
struct Slots {
    capacity: usize,
    /// `g * samples + t` of each spike.
    found: DeviceArray<u32>,
    /// `[capacity, nc, P]`.
    features: DeviceArray<f32>,
    /// `[capacity, 3]`: amplitude, x, y.
    props: DeviceArray<f32>,
    /// The spikes' codes (`combo * 2 + negative`).
    codes: DeviceArray<u32>,
}

impl UniversalDetector {
    /// A detector for windows of `channels` channels at `channel_positions` (`[x, y]` um),
    /// scoring at `centres` with `templates`, reporting scores above `threshold`
    /// (Kilosort's `Th_universal`, 9 by default).
    ///
    /// # Errors
    ///
    /// [`Error::Input`] when `channels`, `channel_positions` and the channels `centres` were
    /// built for disagree, or a position is not finite; [`Error::Setting`] when `threshold` is
    /// not finite and positive or there are more than 65535 combos (`S * K`);
    /// [`Error::Ops`] when a table exceeds the device's buffer limits.
    pub fn new(
        client: &Client,
        channels: usize,
        channel_positions: &[[f32; 2]],
        centres: &TemplateCentres,
        templates: &UniversalTemplates,
        threshold: f32,
    ) -> Result<Self> {
        if channel_positions.len() != channels || centres.channels() != channels {
            return Err(Error::Input {
                what: "detection probe",
                reason: format!(
                    "{channels} channels, {} channel positions, centres built for {} channels",
                    channel_positions.len(),
                    centres.channels()
                ),
            });
        }
        if let Some(c) = channel_positions
            .iter()
            .position(|p| !p.iter().all(|v| v.is_finite()))
        {
            return Err(Error::Input {
                what: "detection probe",
                reason: format!("channel {c} has position {:?}", channel_positions[c]),
            });
        }
        if !(threshold.is_finite() && threshold > 0.0) {
            return Err(Error::Setting {
                name: "Th_universal",
                reason: format!("must be finite and positive, got {threshold}"),
            });
        }
        let combos = centres.sizes() * templates.k();
        if combos > usize::from(u16::MAX) {
            return Err(Error::Setting {
                name: "template_sizes",
                reason: format!(
                    "{} sizes x {} templates = {combos} combos, more than 65535",
                    centres.sizes(),
                    templates.k()
                ),
            });
        }
        let limits = DeviceLimits::of(client);
        let tables = [
            (
                "detection: nearest channels",
                centres.nearest_channels().len(),
            ),
            (
                "detection: nearest centres",
                centres.nearest_centres().len(),
            ),
            ("detection: spatial weights", centres.weights().len()),
        ];
        for (what, values) in tables {
            limits.check(what, values as u64, 4)?;
        }
        let positions: Vec<f32> = channel_positions.iter().flatten().copied().collect();
        let mut detector = Self {
            channels,
            centres: centres.count(),
            nc: centres.nc(),
            nn: centres.nn(),
            sizes: centres.sizes(),
            nt: templates.nt(),
            nt0min: templates.nt0min(),
            templates: templates.k(),
            pcs: templates.p(),
            threshold,
            skip_below: skip_below(threshold, centres.weights(), centres.nc()),
            limits,
            layout: UnitLayout::of(client),
            wtemp: upload(client, templates.wtemp())?,
            wpca: upload(client, templates.wpca())?,
            nearest_channels: upload(client, centres.nearest_channels())?,
            nearest_centres: upload(client, centres.nearest_centres())?,
            weights: upload(client, centres.weights())?,
            positions: upload(client, &positions)?,
            counters: alloc::<u32>(client, 2)?,
            no_copy: alloc::<f32>(client, 1)?,
            scratch: Scratch {
                samples: 0,
                bt: alloc::<f32>(client, 0)?,
                energy: alloc::<f32>(client, 0)?,
                amax: alloc::<f32>(client, 0)?,
                codes: alloc::<u32>(client, 0)?,
            },
            slots: Slots {
                capacity: 0,
                found: alloc::<u32>(client, 0)?,
                features: alloc::<f32>(client, 0)?,
                props: alloc::<f32>(client, 0)?,
                codes: alloc::<u32>(client, 0)?,
            },
        };
        detector.reserve_slots(client, INITIAL_CAPACITY)?;
        Ok(detector)
    }

    /// Samples of real data needed on each side of a window's owned range: `nt / 2 + nt0min`
    /// (50 by default). The time max-pool reaches `nt0min` columns either side of a spike's
    /// column and each column's projections `nt / 2` samples further; the spatial max-pool
    /// (over neighbouring centres) and the features (`nt / 2` either side) add no more.
    #[must_use]
    pub fn halo(&self) -> usize {
        self.nt / 2 + self.nt0min
    }

    /// An empty [`DetectedSpikes`] shaped for this detector (`nc` channels, `P` components).
    #[must_use]
    pub fn new_spikes(&self) -> DetectedSpikes {
        DetectedSpikes::new(self.nc, self.pcs)
    }

    /// Detects the spikes of `window` (whitened data, `channels x read` samples) at the
    /// columns it owns and appends them to `spikes`, sorted by `(sample, centre)`. Waits for
    /// the device (two read-backs: the spike count, then the spikes).
    ///
    /// # Errors
    ///
    /// [`Error::Input`] when the window does not have the detector's channels, `spikes` holds
    /// spikes of another `nc` or `P` (empty spikes, such as `DetectedSpikes::default()`, take the
    /// detector's), or a sample of the window's array (halos included) is NaN
    /// or infinite (naming the first one; no spike is added); [`Error::Ops`] when the
    /// window's buffers exceed the device's limits; [`Error::Device`] when the device fails.
    pub fn detect(
        &mut self,
        client: &Client,
        window: &DeviceWindow,
        spikes: &mut DetectedSpikes,
    ) -> Result<()> {
        let array = window.array();
        if array.channels() != self.channels {
            return Err(Error::Input {
                what: "detection window",
                reason: format!(
                    "{} channels, the detector was built for {}",
                    array.channels(),
                    self.channels
                ),
            });
        }
        if !spikes.adopt_shape(self.nc, self.pcs) {
            return Err(Error::Input {
                what: "spikes",
                reason: format!(
                    "shaped for {} channels x {} components, the detector gives {} x {}",
                    spikes.nc(),
                    spikes.p(),
                    self.nc,
                    self.pcs
                ),
            });
        }
        let n = array.samples();
        let owned = window.owned_local();
        if owned.is_empty() {
            return Ok(());
        }
        self.reserve_samples(client, n)?;
        reset_counters(client, &self.counters);
        self.project(client, array);
        self.score(client, n);
        self.select(client, n, &owned);
        let [mut found, first_bad] = read_counters(client, &self.counters)?;
        if first_bad != u32::MAX {
            let (c, t) = (first_bad as usize / n, first_bad as usize % n);
            return Err(Error::Input {
                what: "detection window",
                reason: format!(
                    "whitened sample {} of channel {c} is NaN or infinite: the recording holds NaN \
                     or infinite samples there or nearby (the common reference, the filter and \
                     the whitening spread one over channels and samples)",
                    window.start() + t as u64
                ),
            });
        }
        if found as usize > self.slots.capacity {
            self.reserve_slots(client, found as usize)?;
            reset_counters(client, &self.counters);
            self.select(client, n, &owned);
            [found, _] = read_counters(client, &self.counters)?;
        }
        let found = found as usize;
        if found == 0 {
            return Ok(());
        }
        self.features(client, array, found);
        let slots = &self.slots;
        let (nc, pcs) = (self.nc, self.pcs);
        let bytes = client.read(vec![
            prefix(&slots.found, found),
            prefix(&slots.props, 3 * found),
            prefix(&slots.codes, found),
            prefix(&slots.features, found * nc * pcs),
        ])?;
        let indices = u32::from_bytes(&bytes[0]);
        let props = f32::from_bytes(&bytes[1]);
        let codes = u32::from_bytes(&bytes[2]);
        let features = f32::from_bytes(&bytes[3]);

        // Sort by (column, centre) and append.
        let mut order: Vec<usize> = (0..found).collect();
        order.sort_unstable_by_key(|&m| (indices[m] as usize % n, indices[m] as usize / n));
        let block = nc * pcs;
        for m in order {
            let (g, t) = (indices[m] as usize / n, indices[m] as usize % n);
            spikes.sample.push(window.start() + t as u64);
            spikes.centre.push(g as u32);
            spikes.combo.push((codes[m] / 2) as u16); // below S * K <= u16::MAX (new)
            spikes.sign.push(if codes[m] % 2 == 1 { -1 } else { 1 });
            spikes.amplitude.push(props[3 * m]);
            spikes.x.push(props[3 * m + 1]);
            spikes.depth.push(props[3 * m + 2]);
            spikes
                .features
                .extend_from_slice(&features[m * block..(m + 1) * block]);
        }
        Ok(())
    }

    /// Queues the template projections `bt` of `array` (`n` samples per channel).
    fn project(&self, client: &Client, array: &DeviceArray<f32>) {
        // Counts below u32::MAX: `array.len()` is a typed array's length, `bt` was checked by
        // `reserve_samples`.
        Projection {
            x: array,
            weights: &self.wtemp,
            components: self.templates,
            nt: self.nt,
            out: &self.scratch.bt,
            counters: &self.counters,
            copy: (&self.no_copy, false),
            energy: (&self.scratch.energy, true),
        }
        .launch(client);
    }

    /// Queues `score_centres` over windows of `n` samples per channel.
    fn score(&self, client: &Client, n: usize) {
        let scratch = &self.scratch;
        let (g_count, k_count) = (self.centres, self.templates);
        let maps = g_count * n;
        // `score_centres`' numbering: blocks of centres by chunks of lanes on a GPU, centres by
        // runs of columns on the cpu runtime.
        let units = if self.layout.blocked() {
            g_count * n.div_ceil(kernel::CPU_COLUMNS)
        } else {
            g_count.div_ceil(SCORE_BLOCK) * n.div_ceil(LANES) * SCORE_BLOCK * LANES
        };
        kernel::score_centres::launch(
            client,
            self.layout.cube_count(units),
            self.layout.cube_dim(),
            scratch.bt.arg(self.channels * k_count * n),
            scratch.energy.arg(self.channels * n),
            self.nearest_channels.arg(g_count * self.nc),
            self.weights.arg(self.sizes * g_count * self.nc),
            scratch.amax.arg(maps),
            scratch.codes.arg(maps),
            g_count as u32,
            n as u32,
            self.skip_below,
            self.nc,
            k_count,
            self.sizes,
            SCORE_BLOCK,
            self.layout.blocked(),
        );
    }

    /// Queues `spike_features` for the first `spikes` found spikes of `array`.
    fn features(&self, client: &Client, array: &DeviceArray<f32>, spikes: usize) {
        let n = array.samples();
        let values = array.len();
        let (g_count, k_count) = (self.centres, self.templates);
        let maps = g_count * n;
        let bt_len = self.channels * k_count * n;
        let scratch = &self.scratch;
        let slots = &self.slots;
        let cap = slots.capacity;
        let (nc, pcs) = (self.nc, self.pcs);
        kernel::spike_features::launch(
            client,
            cube_count(spikes * nc),
            CubeDim::new_1d(CUBE_DIM),
            array.arg(values),
            scratch.bt.arg(bt_len),
            scratch.amax.arg(maps),
            scratch.codes.arg(maps),
            slots.found.arg(cap),
            self.nearest_channels.arg(g_count * nc),
            self.wpca.arg(pcs * self.nt),
            self.positions.arg(2 * self.channels),
            slots.features.arg(cap * nc * pcs),
            slots.props.arg(3 * cap),
            slots.codes.arg(cap),
            spikes as u32,
            n as u32,
            nc as u32,
            self.nt as u32,
            k_count,
            pcs,
        );
    }

    /// Milliseconds of each stage of [`detect`](Self::detect) on `window`, the device synced
    /// after each: projections, scores, selection (with the count's read-back) and features.
    #[cfg(test)]
    pub(super) fn stage_times(
        &mut self,
        client: &Client,
        window: &DeviceWindow,
    ) -> Result<[f64; 4]> {
        let array = window.array();
        let n = array.samples();
        let owned = window.owned_local();
        self.reserve_samples(client, n)?;
        reset_counters(client, &self.counters);
        cubecl::future::block_on(client.sync())?;
        let mut times = [0.0; 4];
        let mut started = std::time::Instant::now();
        let mut lap = |stage: usize| {
            times[stage] = started.elapsed().as_secs_f64() * 1e3;
            started = std::time::Instant::now();
        };
        self.project(client, array);
        cubecl::future::block_on(client.sync())?;
        lap(0);
        self.score(client, n);
        cubecl::future::block_on(client.sync())?;
        lap(1);
        self.select(client, n, &owned);
        let [found, _] = read_counters(client, &self.counters)?;
        lap(2);
        let found = (found as usize).min(self.slots.capacity);
        if found > 0 {
            self.features(client, array, found);
        }
        cubecl::future::block_on(client.sync())?;
        lap(3);
        Ok(times)
    }

    /// Queues `select_spikes` on the owned columns (the counters reset before).
    fn select(&self, client: &Client, n: usize, owned: &std::ops::Range<usize>) {
        let scratch = &self.scratch;
        let maps = self.centres * n;
        let units = self.centres * owned.len();
        kernel::select_spikes::launch(
            client,
            self.layout.cube_count(units),
            self.layout.cube_dim(),
            scratch.amax.arg(maps),
            self.nearest_centres.arg(self.centres * self.nn),
            self.counters.arg(2),
            self.slots.found.arg(self.slots.capacity),
            self.slots.capacity as u32,
            self.centres as u32,
            n as u32,
            self.nn as u32,
            owned.start as u32,
            owned.len() as u32,
            self.nt0min as u32,
            self.threshold,
            self.layout.blocked(),
        );
    }

    /// Makes the per-sample scratch hold windows of `samples` samples (reallocated only when
    /// longer than any before).
    fn reserve_samples(&mut self, client: &Client, samples: usize) -> Result<()> {
        if self.scratch.samples >= samples {
            return Ok(());
        }
        let bt = self.channels * self.templates * samples;
        let maps = self.centres * samples;
        self.limits
            .check("detection: template projections", bt as u64, 4)?;
        self.limits.check(
            "detection: projection energies",
            (self.channels * samples) as u64,
            4,
        )?;
        self.limits
            .check("detection: centre scores", maps as u64, 4)?;
        if samples + self.nt > u32::MAX as usize {
            return Err(Error::Input {
                what: "detection window",
                reason: format!("{samples} samples do not fit 32-bit indices"),
            });
        }
        self.scratch = Scratch {
            samples,
            bt: alloc::<f32>(client, bt)?,
            energy: alloc::<f32>(client, self.channels * samples)?,
            amax: alloc::<f32>(client, maps)?,
            codes: alloc::<u32>(client, maps)?,
        };
        Ok(())
    }

    /// Makes the per-spike buffers hold at least `spikes` spikes.
    fn reserve_slots(&mut self, client: &Client, spikes: usize) -> Result<()> {
        if self.slots.capacity >= spikes {
            return Ok(());
        }
        let capacity = spikes.next_power_of_two().min(u32::MAX as usize);
        let features = capacity * self.nc * self.pcs;
        self.limits
            .check("detection: spike features", features as u64, 4)?;
        self.limits
            .check("detection: spike properties", 3 * capacity as u64, 4)?;
        self.slots = Slots {
            capacity,
            found: alloc::<u32>(client, capacity)?,
            features: alloc::<f32>(client, features)?,
            props: alloc::<f32>(client, 3 * capacity)?,
            codes: alloc::<u32>(client, capacity)?,
        };
        Ok(())
    }
}
