//! A synthetic extracellular recording with known spikes, computed window by window.

use std::f64::consts::TAU;

use dspk_core::rng::SplitMix64;
use dspk_core::{
    ChannelInfo, ReadRequest, RecordingInfo, RecordingSource, SampleFormat, SampleRate,
};

use super::trains::SpikeTrains;
use crate::probe::{Contact, Probe};
use crate::{Error, Result};

/// The most spikes a recording may expect (`units x max rate x duration`): 20 million spikes
/// keep the spike list under about 1 GB.
pub const MAX_SPIKES: f64 = 2.0e7;
/// The most channels of a synthetic probe.
pub const MAX_CHANNELS: usize = 8192;
/// The most units.
pub const MAX_UNITS: usize = 10_000;
/// The waveform window before the trough, in ms.
const BEFORE_MS: f64 = 1.0;
/// The waveform window after the trough, in ms.
const AFTER_MS: f64 = 2.0;
/// Units sit this far (µm) in front of the probe plane, drawn uniformly in this range.
const DEPTH_UM: [f64; 2] = [5.0, 25.0];
/// Footprint values below this fraction of a stored step are not added (they round away).
const NEGLIGIBLE_STEPS: f64 = 0.01;

/// How all units move along the probe (y) over time: the probe's motion in the tissue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Drift {
    /// No motion.
    None,
    /// Units move linearly from their start position to `total_um` further along y at the
    /// end of the recording.
    Linear {
        /// Displacement at the last sample, µm (negative: towards the tip).
        total_um: f64,
    },
    /// Units oscillate along y: `amplitude_um * sin(2 pi t / period_s)`.
    Sine {
        /// Peak displacement, µm.
        amplitude_um: f64,
        /// Period, seconds.
        period_s: f64,
    },
}

/// Noise levels of a [`GroundTruthRecording`], all RMS in µV.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NoiseConfig {
    /// Independent on every channel (thermal noise).
    ///
    /// > default: 8.0
    pub independent_uv: f64,
    /// Shared by neighbouring channels (distant background activity): a sum of sources, one
    /// per probe row, weighted by a Gaussian of the distance along the probe.
    ///
    /// > default: 6.0
    pub neighbour_uv: f64,
    /// The length scale (σ, µm) of the neighbour-shared noise.
    ///
    /// > default: 20.0
    pub neighbour_length_um: f64,
    /// Identical on all channels (reference pick-up; a common reference removes it).
    ///
    /// > default: 12.0
    pub common_uv: f64,
    /// Amplitude of a slow sinusoid common to all channels (LFP-band; a high-pass removes it).
    ///
    /// > default: 40.0
    pub slow_wave_uv: f64,
    /// Frequency of the slow sinusoid, Hz.
    ///
    /// > default: 7.0
    pub slow_wave_hz: f64,
}

impl Default for NoiseConfig {
    fn default() -> Self {
        Self {
            independent_uv: 8.0,
            neighbour_uv: 6.0,
            neighbour_length_um: 20.0,
            common_uv: 12.0,
            slow_wave_uv: 40.0,
            slow_wave_hz: 7.0,
        }
    }
}

/// What [`GroundTruthRecording::generate`] makes; every field has a default.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroundTruthConfig {
    /// Channels, two per row (contact `c` is in row `c / 2`, column `c % 2`).
    ///
    /// > default: 64
    pub channels: usize,
    /// Vertical distance between rows, µm.
    ///
    /// > default: 20.0 (Neuropixels 1.0)
    pub row_pitch_um: f64,
    /// Horizontal distance between the two columns, µm.
    ///
    /// > default: 32.0 (Neuropixels 1.0)
    pub column_spacing_um: f64,
    /// Horizontal shift of even rows, µm (Neuropixels 1.0's checkerboard: 16; 0 for aligned
    /// columns).
    ///
    /// > default: 16.0
    pub stagger_um: f64,
    /// Samples per second.
    ///
    /// > default: 30000
    pub sample_rate_hz: u64,
    /// Samples per channel.
    ///
    /// > default: 300000 (10 s)
    pub num_samples: u64,
    /// Units.
    ///
    /// > default: 24
    pub units: usize,
    /// Each unit's mean firing rate is drawn uniformly in this range, Hz.
    ///
    /// > default: [4.0, 12.0]
    pub firing_rate_hz: [f64; 2],
    /// No two spikes of a unit are closer than this, ms.
    ///
    /// > default: 2.0
    pub refractory_ms: f64,
    /// Each unit's trough amplitude at the nearest point of the probe plane is drawn uniformly
    /// in this range, µV.
    ///
    /// > default: [80.0, 180.0]
    pub amplitude_uv: [f64; 2],
    /// Spike-to-spike amplitude variation: each spike is scaled by `1 + jitter * N(0, 1)`,
    /// clamped to `[0.5, 1.5]`.
    ///
    /// > default: 0.1
    pub amplitude_jitter: f64,
    /// Distance over which a unit's amplitude decays by `e`, µm.
    ///
    /// > default: 30.0
    pub footprint_um: f64,
    /// Noise.
    pub noise: NoiseConfig,
    /// Probe motion.
    ///
    /// > default: [`Drift::None`]
    pub drift: Drift,
    /// µV per stored int16 step.
    ///
    /// > default: 0.195 (Intan headstages, Open Ephys)
    pub gain_uv: f64,
    /// Seed of every random choice.
    ///
    /// > default: 0
    pub seed: u64,
}

impl Default for GroundTruthConfig {
    fn default() -> Self {
        Self {
            channels: 64,
            row_pitch_um: 20.0,
            column_spacing_um: 32.0,
            stagger_um: 16.0,
            sample_rate_hz: 30_000,
            num_samples: 300_000,
            units: 24,
            firing_rate_hz: [4.0, 12.0],
            refractory_ms: 2.0,
            amplitude_uv: [80.0, 180.0],
            amplitude_jitter: 0.1,
            footprint_um: 30.0,
            noise: NoiseConfig::default(),
            drift: Drift::None,
            gain_uv: 0.195,
            seed: 0,
        }
    }
}

/// One synthetic unit.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticUnit {
    /// Position `[x, y]` in the probe plane at the first sample, µm.
    pub position: [f64; 2],
    /// Distance in front of the probe plane, µm.
    pub depth_um: f64,
    /// Trough amplitude at the nearest point of the probe plane (before per-spike variation),
    /// µV.
    pub amplitude_uv: f64,
    /// Mean firing rate, Hz.
    pub firing_rate_hz: f64,
    /// The spike waveform at one-sample steps, trough `-1` at index
    /// [`GroundTruthRecording::trough_index`]: a narrow negative Gaussian trough followed by a
    /// wider positive repolarisation, shape drawn per unit.
    pub waveform: Vec<f64>,
}

/// One true spike.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrueSpike {
    /// Sample of the waveform's trough.
    pub sample: u64,
    /// The unit.
    pub unit: usize,
    /// The channel with the largest amplitude for this spike (the unit's position at this
    /// time, so it follows drift).
    pub channel: usize,
    /// The unit's position `[x, y]` at this spike, µm.
    pub position: [f64; 2],
    /// This spike's trough amplitude at the nearest point of the probe plane, µV.
    pub amplitude_uv: f64,
}

/// A deterministic synthetic extracellular recording with known spikes, as a
/// [`RecordingSource`] (int16, gain [`GroundTruthConfig::gain_uv`]).
///
/// Units sit in front of a two-column probe ([`probe`](Self::probe)); each fires a Poisson
/// train with a refractory period (intervals `refractory + exponential`, so the mean rate is
/// the unit's rate) and adds, per spike, its waveform times an amplitude decaying with the 3-D
/// distance to each contact, `A * exp(-(d - depth) / footprint)`. Drift moves every unit along
/// the probe. Noise is common + neighbour-shared + independent, plus a slow common sinusoid.
///
/// Nothing is stored but the spikes: any window is computed on demand, the noise of sample `s`
/// of each noise stream hashed from `(seed, stream, s)`, so a window's values never depend on
/// which other windows were read and a split read equals a whole one.
#[derive(Debug, Clone)]
pub struct GroundTruthRecording {
    config: GroundTruthConfig,
    info: RecordingInfo,
    probe: Probe,
    positions: Vec<[f64; 2]>,
    units: Vec<SyntheticUnit>,
    spikes: Vec<TrueSpike>,
    /// Per channel, `(row, weight)` of the neighbour-noise sources it sums.
    neighbour_weights: Vec<Vec<(usize, f64)>>,
    before: usize,
    after: usize,
}

/// The generator of stream `stream`, for the draws made once (units, spike trains).
const fn stream_rng(seed: u64, stream: u64) -> SplitMix64 {
    SplitMix64::new(SplitMix64::mix(seed ^ SplitMix64::at(stream, 0)))
}

/// Uniform in `[low, high)`.
fn uniform(random: &mut SplitMix64, [low, high]: [f64; 2]) -> f64 {
    random.uniform(low, high)
}

/// Stream ids of the hashed noise; the index (channel, row) goes in the low bits.
const STREAM_COMMON: u64 = 1 << 48;
const STREAM_ROW: u64 = 2 << 48;
const STREAM_CHANNEL: u64 = 3 << 48;
const STREAM_UNIT: u64 = 4 << 48;
const STREAM_TRAIN: u64 = 5 << 48;

/// The key of noise stream `stream`.
fn stream_key(seed: u64, stream: u64) -> u64 {
    SplitMix64::mix(seed ^ SplitMix64::mix(stream))
}

/// Standard normal values of a hashed noise stream for samples `start..start + out.len()`:
/// sample pair `p = s / 2` hashes to two uniforms, Box-Muller gives two normals (cosine for the
/// even sample, sine for the odd one).
fn normals(key: u64, start: u64, out: &mut [f64]) {
    for (k, value) in out.iter_mut().enumerate() {
        let s = start + k as u64;
        let h = SplitMix64::at(key, s / 2);
        let u1 = ((h >> 32) + 1) as f64 / 4_294_967_296.0;
        let u2 = (h & 0xFFFF_FFFF) as f64 / 4_294_967_296.0;
        let radius = (-2.0 * u1.ln()).sqrt();
        let angle = TAU * u2;
        *value = radius
            * if s.is_multiple_of(2) {
                angle.cos()
            } else {
                angle.sin()
            };
    }
}

fn check(ok: bool, problem: impl FnOnce() -> String) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::Argument(problem()))
    }
}

fn check_range(name: &str, range: [f64; 2]) -> Result<()> {
    check(
        range.iter().all(|v| v.is_finite() && *v >= 0.0) && range[0] <= range[1],
        || format!("{name} must be a range [low, high] of finite values >= 0, got {range:?}"),
    )
}

fn check_nonnegative(name: &str, value: f64) -> Result<()> {
    check(value.is_finite() && value >= 0.0, || {
        format!("{name} must be finite and >= 0, got {value}")
    })
}

impl GroundTruthConfig {
    /// Checks every field.
    fn validate(&self) -> Result<()> {
        check((1..=MAX_CHANNELS).contains(&self.channels), || {
            format!("channels must be 1..={MAX_CHANNELS}, got {}", self.channels)
        })?;
        check(self.units <= MAX_UNITS, || {
            format!("units must be at most {MAX_UNITS}, got {}", self.units)
        })?;
        check((1000..=200_000).contains(&self.sample_rate_hz), || {
            format!(
                "sample_rate_hz must be 1000..=200000, got {}",
                self.sample_rate_hz
            )
        })?;
        check(self.num_samples > 0, || {
            "num_samples must be positive".into()
        })?;
        for (name, value) in [
            ("row_pitch_um", self.row_pitch_um),
            ("column_spacing_um", self.column_spacing_um),
            ("stagger_um", self.stagger_um),
            ("refractory_ms", self.refractory_ms),
            ("amplitude_jitter", self.amplitude_jitter),
            ("noise.independent_uv", self.noise.independent_uv),
            ("noise.neighbour_uv", self.noise.neighbour_uv),
            ("noise.common_uv", self.noise.common_uv),
            ("noise.slow_wave_uv", self.noise.slow_wave_uv),
            ("noise.slow_wave_hz", self.noise.slow_wave_hz),
        ] {
            check_nonnegative(name, value)?;
        }
        check_range("firing_rate_hz", self.firing_rate_hz)?;
        check_range("amplitude_uv", self.amplitude_uv)?;
        for (name, value) in [
            ("footprint_um", self.footprint_um),
            ("noise.neighbour_length_um", self.noise.neighbour_length_um),
            ("gain_uv", self.gain_uv),
        ] {
            check(value.is_finite() && value > 0.0, || {
                format!("{name} must be finite and > 0, got {value}")
            })?;
        }
        check(
            self.firing_rate_hz[1] * self.refractory_ms / 1000.0 <= 0.5,
            || {
                format!(
                    "a firing rate of {} Hz leaves no room for a refractory period of {} ms \
                 (rate x refractory must be at most 0.5)",
                    self.firing_rate_hz[1], self.refractory_ms
                )
            },
        )?;
        let seconds = self.num_samples as f64 / self.sample_rate_hz as f64;
        let expected = self.units as f64 * self.firing_rate_hz[1] * seconds;
        check(expected <= MAX_SPIKES, || {
            format!(
                "{} units at up to {} Hz over {seconds} s would make up to {expected:.0} \
                 spikes, more than the limit of {MAX_SPIKES:.0}",
                self.units, self.firing_rate_hz[1]
            )
        })?;
        match self.drift {
            Drift::None => Ok(()),
            Drift::Linear { total_um } => check(total_um.is_finite(), || {
                format!("drift total_um must be finite, got {total_um}")
            }),
            Drift::Sine {
                amplitude_um,
                period_s,
            } => check(
                amplitude_um.is_finite() && period_s.is_finite() && period_s > 0.0,
                || {
                    format!(
                        "sine drift needs a finite amplitude and a finite period > 0, got \
                         {amplitude_um} um and {period_s} s"
                    )
                },
            ),
        }
    }
}

impl GroundTruthRecording {
    /// Draws units and spike trains from `config` (the samples are computed when read).
    ///
    /// # Errors
    ///
    /// [`Error::Argument`] if a field is out of range (see [`GroundTruthConfig`]: no channels,
    /// a negative or non-finite level, a firing rate too high for the refractory period, more
    /// than [`MAX_SPIKES`] expected spikes, more than [`MAX_CHANNELS`] channels or
    /// [`MAX_UNITS`] units, a sample rate outside 1 kHz..=200 kHz).
    pub fn generate(config: &GroundTruthConfig) -> Result<Self> {
        config.validate()?;
        let rate = config.sample_rate_hz as f64;
        let positions: Vec<[f64; 2]> = (0..config.channels)
            .map(|c| {
                let row = c / 2;
                let stagger = if row.is_multiple_of(2) {
                    config.stagger_um
                } else {
                    0.0
                };
                [
                    (c % 2) as f64 * config.column_spacing_um + stagger,
                    row as f64 * config.row_pitch_um,
                ]
            })
            .collect();
        let contacts = positions
            .iter()
            .enumerate()
            .map(|(c, &position)| Contact {
                id: format!("e{c}"),
                position,
                shank: 0,
                device_channel: Some(c),
            })
            .collect();
        let probe = Probe::new("synthetic two-column probe", contacts)?;

        let before = (BEFORE_MS / 1000.0 * rate).round() as usize;
        let after = (AFTER_MS / 1000.0 * rate).round() as usize;
        let x_range = positions
            .iter()
            .fold([f64::INFINITY, f64::NEG_INFINITY], |[lo, hi], p| {
                [lo.min(p[0]), hi.max(p[0])]
            });
        let height = positions.last().map_or(0.0, |p| p[1]);
        let units: Vec<SyntheticUnit> = (0..config.units)
            .map(|u| {
                let mut random = stream_rng(config.seed, STREAM_UNIT | u as u64);
                let position = [
                    uniform(&mut random, x_range),
                    uniform(&mut random, [0.0, height]),
                ];
                let depth_um = uniform(&mut random, DEPTH_UM);
                let amplitude_uv = uniform(&mut random, config.amplitude_uv);
                let firing_rate_hz = uniform(&mut random, config.firing_rate_hz);
                // Trough sigma 0.12..0.22 ms; repolarisation 0.45..0.75 ms later, sigma
                // 0.35..0.6 ms, 0.2..0.45 of the trough.
                let trough = uniform(&mut random, [0.12e-3, 0.22e-3]);
                let delay = uniform(&mut random, [0.45e-3, 0.75e-3]);
                let width = uniform(&mut random, [0.35e-3, 0.6e-3]);
                let ratio = uniform(&mut random, [0.2, 0.45]);
                let shape = |t: f64| {
                    -(-0.5 * (t / trough).powi(2)).exp()
                        + ratio * (-0.5 * ((t - delay) / width).powi(2)).exp()
                };
                let raw: Vec<f64> = (0..=before + after)
                    .map(|k| shape((k as f64 - before as f64) / rate))
                    .collect();
                let depth = -raw[before];
                let waveform = raw.iter().map(|v| v / depth).collect();
                SyntheticUnit {
                    position,
                    depth_um,
                    amplitude_uv,
                    firing_rate_hz,
                    waveform,
                }
            })
            .collect();

        let mut recording = Self {
            config: *config,
            info: Self::info_for(config)?,
            probe,
            positions,
            units,
            spikes: Vec::new(),
            neighbour_weights: Vec::new(),
            before,
            after,
        };
        recording.spikes = recording.draw_spikes();
        recording.neighbour_weights = recording.neighbour_sources();
        Ok(recording)
    }

    fn info_for(config: &GroundTruthConfig) -> Result<RecordingInfo> {
        let channels = (0..config.channels)
            .map(|c| ChannelInfo::new(format!("ch{c}"), config.gain_uv, 0.0, "uV"))
            .collect();
        let rate = SampleRate::from_hz(config.sample_rate_hz)
            .map_err(|e| Error::Argument(e.to_string()))?;
        let mut info = RecordingInfo::new(channels, config.num_samples, rate, SampleFormat::I16)
            .map_err(|e| Error::Argument(e.to_string()))?;
        info.metadata
            .insert("generator".into(), "dspk-synapse groundtruth".into());
        info.metadata.insert("seed".into(), config.seed.to_string());
        info.metadata
            .insert("units".into(), config.units.to_string());
        Ok(info)
    }

    /// Every unit's spikes: intervals of `ceil(refractory)` samples plus an exponential
    /// number of samples (mean `1/rate - refractory`), troughs kept where the whole waveform
    /// fits; sorted by sample then unit.
    fn draw_spikes(&self) -> Vec<TrueSpike> {
        let rate = self.config.sample_rate_hz as f64;
        let refractory = (self.config.refractory_ms / 1000.0 * rate).ceil();
        let last = self.config.num_samples.saturating_sub(self.after as u64);
        let mut spikes = Vec::new();
        for (u, unit) in self.units.iter().enumerate() {
            if unit.firing_rate_hz <= 0.0 {
                continue;
            }
            let mut random = stream_rng(self.config.seed, STREAM_TRAIN | u as u64);
            let mean_gap = (rate / unit.firing_rate_hz - refractory).max(0.0);
            let mut sample =
                self.before as f64 + (-(1.0 - random.next_f64()).ln() * mean_gap).floor();
            while sample < last as f64 {
                let scale = (1.0 + self.config.amplitude_jitter * random.normal()).clamp(0.5, 1.5);
                let at = sample as u64;
                let position = self.unit_position(u, at);
                spikes.push(TrueSpike {
                    sample: at,
                    unit: u,
                    channel: self.nearest_channel(position),
                    position,
                    amplitude_uv: unit.amplitude_uv * scale,
                });
                sample += refractory + (-(1.0 - random.next_f64()).ln() * mean_gap).floor();
            }
        }
        spikes.sort_by_key(|s| (s.sample, s.unit));
        spikes
    }

    /// Per channel, the neighbour-noise sources (one per row, at the row's y) within three
    /// length scales, with Gaussian weights scaled so the sum has RMS `neighbour_uv`.
    fn neighbour_sources(&self) -> Vec<Vec<(usize, f64)>> {
        let rows = self.config.channels.div_ceil(2);
        let sigma = self.config.noise.neighbour_length_um;
        self.positions
            .iter()
            .map(|p| {
                let mut sources: Vec<(usize, f64)> = (0..rows)
                    .filter_map(|row| {
                        let d = p[1] - row as f64 * self.config.row_pitch_um;
                        (d.abs() <= 3.0 * sigma).then(|| (row, (-0.5 * (d / sigma).powi(2)).exp()))
                    })
                    .collect();
                if sources.is_empty() {
                    // Rows farther apart than 3 sigma: the channel's own row alone.
                    sources.push(((p[1] / self.config.row_pitch_um).round() as usize, 1.0));
                }
                let norm = sources.iter().map(|(_, w)| w * w).sum::<f64>().sqrt();
                for (_, w) in &mut sources {
                    *w *= self.config.noise.neighbour_uv / norm;
                }
                sources
            })
            .collect()
    }

    /// The configuration it was made from.
    #[must_use]
    pub fn config(&self) -> &GroundTruthConfig {
        &self.config
    }

    /// The probe: one contact per channel, wired to that channel.
    #[must_use]
    pub fn probe(&self) -> &Probe {
        &self.probe
    }

    /// The contact positions `[x, y]` by channel, µm.
    #[must_use]
    pub fn channel_positions(&self) -> &[[f64; 2]] {
        &self.positions
    }

    /// The units.
    #[must_use]
    pub fn units(&self) -> &[SyntheticUnit] {
        &self.units
    }

    /// Every spike of every unit, sorted by sample then unit.
    #[must_use]
    pub fn spikes(&self) -> &[TrueSpike] {
        &self.spikes
    }

    /// The spike trains, unit `u` named `"u"`, for
    /// [`compare_to_ground_truth`](super::compare_to_ground_truth).
    ///
    /// # Panics
    ///
    /// Never: the trains are sorted and non-negative by construction.
    #[must_use]
    pub fn spike_trains(&self) -> SpikeTrains {
        let mut trains = vec![Vec::new(); self.units.len()];
        for spike in &self.spikes {
            trains[spike.unit].push(spike.sample as i64);
        }
        SpikeTrains::new(
            trains
                .into_iter()
                .enumerate()
                .map(|(u, t)| (u.to_string(), t))
                .collect(),
        )
        .expect("generated trains are sorted and non-negative")
    }

    /// The index of the trough in every [`SyntheticUnit::waveform`] (samples before it).
    #[must_use]
    pub fn trough_index(&self) -> usize {
        self.before
    }

    /// The drift displacement along y at `sample`, µm.
    #[must_use]
    pub fn drift_um(&self, sample: u64) -> f64 {
        let rate = self.config.sample_rate_hz as f64;
        match self.config.drift {
            Drift::None => 0.0,
            Drift::Linear { total_um } => {
                let last = self.config.num_samples.saturating_sub(1).max(1) as f64;
                total_um * sample as f64 / last
            }
            Drift::Sine {
                amplitude_um,
                period_s,
            } => amplitude_um * (TAU * sample as f64 / rate / period_s).sin(),
        }
    }

    /// Unit `unit`'s position `[x, y]` at `sample`, µm.
    ///
    /// # Panics
    ///
    /// If `unit` is out of range.
    #[must_use]
    pub fn unit_position(&self, unit: usize, sample: u64) -> [f64; 2] {
        let [x, y] = self.units[unit].position;
        [x, y + self.drift_um(sample)]
    }

    /// The channel nearest to `position` (the first on ties).
    fn nearest_channel(&self, position: [f64; 2]) -> usize {
        let distance = |p: &[f64; 2]| (p[0] - position[0]).hypot(p[1] - position[1]);
        self.positions
            .iter()
            .enumerate()
            .min_by(|a, b| distance(a.1).total_cmp(&distance(b.1)))
            .map_or(0, |(c, _)| c)
    }

    /// The amplitude factor of a unit at `position` and `depth` on channel `channel`:
    /// `exp(-(d - depth) / footprint)` with `d` the 3-D distance.
    fn footprint(&self, channel: usize, position: [f64; 2], depth: f64) -> f64 {
        let p = self.positions[channel];
        let d = (p[0] - position[0]).hypot(p[1] - position[1]).hypot(depth);
        (-(d - depth) / self.config.footprint_um).exp()
    }

    /// Unit `unit`'s template at `sample` (its position then, nominal amplitude): channel-major,
    /// `channels x waveform.len()` values in µV, the trough at [`trough_index`](Self::trough_index).
    ///
    /// # Panics
    ///
    /// If `unit` is out of range.
    #[must_use]
    pub fn template(&self, unit: usize, sample: u64) -> Vec<f64> {
        let u = &self.units[unit];
        let position = self.unit_position(unit, sample);
        (0..self.positions.len())
            .flat_map(|c| {
                let amplitude = u.amplitude_uv * self.footprint(c, position, u.depth_um);
                u.waveform.iter().map(move |w| w * amplitude)
            })
            .collect()
    }

    /// The stored values of `channels` over `start..start + len`, channel-major, into `out`.
    fn render(&self, channels: &[usize], start: u64, len: usize, out: &mut [i16]) {
        /// Below this many values one thread is faster.
        const PARALLEL_MIN: usize = 1 << 16;
        if len == 0 || channels.is_empty() {
            return;
        }
        let rate = self.config.sample_rate_hz as f64;
        let noise = &self.config.noise;
        // Shared by all channels: common noise and the slow wave.
        let mut common = vec![0.0f64; len];
        normals(
            stream_key(self.config.seed, STREAM_COMMON),
            start,
            &mut common,
        );
        for (k, value) in common.iter_mut().enumerate() {
            let t = (start + k as u64) as f64 / rate;
            *value = noise.common_uv * *value
                + noise.slow_wave_uv * (TAU * noise.slow_wave_hz * t).sin();
        }
        // Neighbour sources of the rows the channels use.
        let (first_row, last_row) = channels
            .iter()
            .flat_map(|&c| self.neighbour_weights[c].iter().map(|&(row, _)| row))
            .fold((usize::MAX, 0), |(lo, hi), row| (lo.min(row), hi.max(row)));
        let rows: Vec<Vec<f64>> = (first_row..=last_row)
            .map(|row| {
                let mut values = vec![0.0f64; len];
                normals(
                    stream_key(self.config.seed, STREAM_ROW | row as u64),
                    start,
                    &mut values,
                );
                values
            })
            .collect();
        // Spikes whose waveform overlaps the window.
        let end = start + len as u64;
        let lo = self
            .spikes
            .partition_point(|s| s.sample + (self.after as u64) < start);
        let hi = self
            .spikes
            .partition_point(|s| s.sample < end + self.before as u64);
        let spikes = &self.spikes[lo..hi];

        let fill = |channel: usize, out: &mut [i16], buffer: &mut Vec<f64>| {
            buffer.resize(len, 0.0);
            normals(
                stream_key(self.config.seed, STREAM_CHANNEL | channel as u64),
                start,
                buffer,
            );
            for (value, &c) in buffer.iter_mut().zip(&common) {
                *value = noise.independent_uv * *value + c;
            }
            for &(row, weight) in &self.neighbour_weights[channel] {
                for (value, &r) in buffer.iter_mut().zip(&rows[row - first_row]) {
                    *value += weight * r;
                }
            }
            for spike in spikes {
                let unit = &self.units[spike.unit];
                let amplitude =
                    spike.amplitude_uv * self.footprint(channel, spike.position, unit.depth_um);
                if amplitude < NEGLIGIBLE_STEPS * self.config.gain_uv {
                    continue;
                }
                // Waveform index k lands on sample spike.sample - before + k.
                let first = spike.sample as i64 - self.before as i64;
                let k0 = (start as i64 - first).max(0) as usize;
                let k1 = ((end as i64 - first).max(0) as usize).min(unit.waveform.len());
                for k in k0..k1 {
                    let at = (first + k as i64 - start as i64) as usize;
                    buffer[at] += amplitude * unit.waveform[k];
                }
            }
            for (stored, &value) in out.iter_mut().zip(buffer.iter()) {
                *stored = (value / self.config.gain_uv)
                    .round()
                    .clamp(f64::from(i16::MIN), f64::from(i16::MAX))
                    as i16;
            }
        };

        let threads = if channels.len() * len < PARALLEL_MIN {
            1
        } else {
            std::thread::available_parallelism()
                .map_or(1, std::num::NonZero::get)
                .min(channels.len())
        };
        let per_thread = channels.len().div_ceil(threads);
        std::thread::scope(|scope| {
            for (channels, out) in channels
                .chunks(per_thread)
                .zip(out.chunks_mut(per_thread * len))
            {
                let fill = &fill;
                scope.spawn(move || {
                    let mut buffer = Vec::with_capacity(len);
                    for (&channel, out) in channels.iter().zip(out.chunks_exact_mut(len)) {
                        fill(channel, out, &mut buffer);
                    }
                });
            }
        });
    }
}

impl RecordingSource for GroundTruthRecording {
    fn info(&self) -> &RecordingInfo {
        &self.info
    }

    fn fill_scaled(&self, request: &ReadRequest<'_>, out: &mut [f32]) -> dspk_core::Result<()> {
        let mut stored = vec![0i16; out.len()];
        let len = request.samples_per_channel();
        self.render(
            request.channels(),
            request.samples().start,
            len,
            &mut stored,
        );
        for ((&channel, out), stored) in request
            .channels()
            .iter()
            .zip(out.chunks_exact_mut(len.max(1)))
            .zip(stored.chunks_exact(len.max(1)))
        {
            let info = &self.info.channels[channel];
            for (value, &s) in out.iter_mut().zip(stored) {
                *value = dspk_core::scale(f64::from(s), info.gain, info.offset);
            }
        }
        Ok(())
    }

    fn fill_stored(&self, request: &ReadRequest<'_>, out: &mut [u8]) -> dspk_core::Result<()> {
        let mut stored = vec![0i16; request.num_values()];
        self.render(
            request.channels(),
            request.samples().start,
            request.samples_per_channel(),
            &mut stored,
        );
        for (bytes, value) in out.chunks_exact_mut(2).zip(&stored) {
            bytes.copy_from_slice(&value.to_le_bytes());
        }
        Ok(())
    }

    fn can_read_stored(&self) -> bool {
        true
    }
}
