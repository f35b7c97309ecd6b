//! A synthetic EMG-like recording with known motor-unit spikes: an intramuscular line of
//! contacts along the muscle fibres, long multiphasic potentials that reach each contact with
//! a conduction delay, and motor units recruited by a ramping drive.
//!
//! The model, its parameters and where it departs from the project's benchmark script are
//! documented on [`EmgRecording`].

mod firing;
mod noise;
mod units;
mod ziggurat;

use dspk_core::rng::SplitMix64;
use dspk_core::{
    ChannelInfo, MemoryRecording, ReadRequest, RecordingInfo, RecordingSource, SampleFormat,
    SampleRate,
};

use super::synth::{MAX_CHANNELS, MAX_SPIKES, MAX_UNITS};
use super::trains::SpikeTrains;
use crate::probe::{Contact, Probe};
use crate::{Error, Result};

/// The most stored values (`channels x samples`) of a recording: 4 GiB of int16.
pub const MAX_EMG_VALUES: u64 = 1 << 31;
/// The most template values (`units x window x channels`) before trimming.
const MAX_TEMPLATE_VALUES: u64 = 1 << 26;
/// Half the potential window, ms: +-5 ms holds a 2-4 ms potential and its broadened tails.
const HALF_WINDOW_MS: f64 = 5.0;
/// The largest delay bound, ms (delays of muscle potentials along a 15 mm thread stay under
/// 5 ms; the bound keeps the templates small).
const MAX_DELAY_MS: f64 = 20.0;
/// The widest Hermite-Gauss width, ms, whose potential the +-5 ms window holds.
const MAX_SIGMA_MS: f64 = 1.0;

/// How the conduction delays of the units relate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DelayMode {
    /// Each unit has its own innervation zone and conduction velocity.
    Unit,
    /// All units share one innervation zone and one velocity: one channel-delay profile, up to
    /// each unit's best-channel offset (what EMUsort's per-channel delay model assumes).
    Shared,
}

/// Noise of an [`EmgRecording`], RMS in µV unless said otherwise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EmgNoise {
    /// White Gaussian noise, independent per channel.
    ///
    /// > default: 10.0
    pub white_uv: f64,
    /// Low-pass Gaussian noise (distant muscle activity, movement), correlated between
    /// neighbouring channels.
    ///
    /// > default: 15.0
    pub lowpass_uv: f64,
    /// Cutoff of the low-pass noise's 4th-order Butterworth response, Hz (1 Hz..fs/2).
    ///
    /// > default: 500.0
    pub lowpass_cutoff_hz: f64,
    /// Amplitude of the mains hum, µV (0: none).
    ///
    /// > default: 0.0
    pub line_uv: f64,
    /// Frequency of the mains hum, Hz.
    ///
    /// > default: 60.0
    pub line_hz: f64,
}

impl Default for EmgNoise {
    fn default() -> Self {
        Self {
            white_uv: 10.0,
            lowpass_uv: 15.0,
            lowpass_cutoff_hz: 500.0,
            line_uv: 0.0,
            line_hz: 60.0,
        }
    }
}

impl EmgNoise {
    /// No noise at all.
    #[must_use]
    pub fn none() -> Self {
        Self {
            white_uv: 0.0,
            lowpass_uv: 0.0,
            line_uv: 0.0,
            ..Self::default()
        }
    }
}

/// What [`EmgRecording::generate`] makes; the defaults are the script's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EmgConfig {
    /// Contacts on the line.
    ///
    /// > default: 16
    pub channels: usize,
    /// Contact spacing along the line, mm.
    ///
    /// > default: 1.0
    pub pitch_mm: f64,
    /// Motor units.
    ///
    /// > default: 8
    pub units: usize,
    /// Length of the recording, seconds (`round(duration * fs)` samples).
    ///
    /// > default: 60.0
    pub duration_s: f64,
    /// Samples per second.
    ///
    /// > default: 30000
    pub sample_rate_hz: u64,
    /// Seed of every random draw.
    ///
    /// > default: 1
    pub seed: u64,
    /// µV per stored int16 step.
    ///
    /// > default: 0.195 (Intan RHD)
    pub gain_uv: f64,
    /// Best-channel peak amplitude range, µV, drawn log-uniformly.
    ///
    /// > default: [80.0, 600.0]
    pub amplitude_uv: [f64; 2],
    /// Amplitude decay length `lambda`, mm.
    ///
    /// > default: 2.5
    pub decay_mm: f64,
    /// Hermite-Gauss width range, ms (sets the 2-4 ms potential duration); at most 1 ms.
    ///
    /// > default: [0.35, 0.6]
    pub sigma_ms: [f64; 2],
    /// Conduction velocity range, m/s (mm/ms).
    ///
    /// > default: [3.0, 5.0]
    pub velocity_m_s: [f64; 2],
    /// Bound of |delay| relative to the best channel, ms (velocities are raised to keep it).
    ///
    /// > default: 2.0
    pub max_delay_ms: f64,
    /// Per-unit or shared delay profiles.
    ///
    /// > default: [`DelayMode::Unit`]
    pub delay_mode: DelayMode,
    /// Firing rate at recruitment, Hz.
    ///
    /// > default: 8.0
    pub rate_min_hz: f64,
    /// Firing rate at full drive, Hz.
    ///
    /// > default: 30.0
    pub rate_max_hz: f64,
    /// Coefficient of variation of the inter-spike intervals.
    ///
    /// > default: 0.15
    pub isi_cv: f64,
    /// Drive (0..1) at the first sample.
    ///
    /// > default: 0.0
    pub drive_start: f64,
    /// Drive (0..1) at the end.
    ///
    /// > default: 1.0
    pub drive_end: f64,
    /// Recruitment thresholds spread over `[0, max_threshold]` of the drive (0..1).
    ///
    /// > default: 0.6
    pub max_threshold: f64,
    /// Per-spike amplitude standard deviation, a fraction of the unit's amplitude.
    ///
    /// > default: 0.05
    pub amplitude_jitter: f64,
    /// Noise.
    pub noise: EmgNoise,
}

impl Default for EmgConfig {
    fn default() -> Self {
        Self {
            channels: 16,
            pitch_mm: 1.0,
            units: 8,
            duration_s: 60.0,
            sample_rate_hz: 30_000,
            seed: 1,
            gain_uv: 0.195,
            amplitude_uv: [80.0, 600.0],
            decay_mm: 2.5,
            sigma_ms: [0.35, 0.6],
            velocity_m_s: [3.0, 5.0],
            max_delay_ms: 2.0,
            delay_mode: DelayMode::Unit,
            rate_min_hz: 8.0,
            rate_max_hz: 30.0,
            isi_cv: 0.15,
            drive_start: 0.0,
            drive_end: 1.0,
            max_threshold: 0.6,
            amplitude_jitter: 0.05,
            noise: EmgNoise::default(),
        }
    }
}

/// Sizes derived from a configuration: samples per millisecond and the template windows.
#[derive(Debug, Clone, Copy)]
struct Layout {
    /// Samples per second.
    fs: f64,
    /// Samples per channel.
    num_samples: usize,
    /// The largest |delay|, samples: `floor(max_delay_ms * fs / 1000)`.
    max_delay: i64,
    /// Half the waveform window, samples: `ceil(5 ms * fs)`.
    half: usize,
    /// The spike sample in the untrimmed template: `2 * half + max_delay`.
    center: usize,
}

impl Layout {
    /// Samples per millisecond.
    fn per_ms(&self) -> f64 {
        self.fs / 1000.0
    }

    /// The untrimmed template length, `2 * center + 1`.
    fn window(&self) -> usize {
        2 * self.center + 1
    }
}

fn check(ok: bool, problem: impl FnOnce() -> String) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::Argument(problem()))
    }
}

fn check_positive(name: &str, value: f64) -> Result<()> {
    check(value.is_finite() && value > 0.0, || {
        format!("{name} must be finite and > 0, got {value}")
    })
}

fn check_nonnegative(name: &str, value: f64) -> Result<()> {
    check(value.is_finite() && value >= 0.0, || {
        format!("{name} must be finite and >= 0, got {value}")
    })
}

fn check_fraction(name: &str, value: f64) -> Result<()> {
    check((0.0..=1.0).contains(&value), || {
        format!("{name} must be in 0..=1, got {value}")
    })
}

fn check_positive_range(name: &str, [low, high]: [f64; 2]) -> Result<()> {
    check(
        low.is_finite() && high.is_finite() && low > 0.0 && low <= high,
        || format!("{name} must be a range [low, high] with 0 < low <= high, got [{low}, {high}]"),
    )
}

impl EmgConfig {
    /// Checks every field and derives the sizes.
    fn layout(&self) -> Result<Layout> {
        check((1..=MAX_CHANNELS).contains(&self.channels), || {
            format!("channels must be 1..={MAX_CHANNELS}, got {}", self.channels)
        })?;
        check((1..=MAX_UNITS).contains(&self.units), || {
            format!("units must be 1..={MAX_UNITS}, got {}", self.units)
        })?;
        check((1000..=200_000).contains(&self.sample_rate_hz), || {
            format!(
                "sample_rate_hz must be 1000..=200000, got {}",
                self.sample_rate_hz
            )
        })?;
        for (name, value) in [
            ("duration_s", self.duration_s),
            ("pitch_mm", self.pitch_mm),
            ("gain_uv", self.gain_uv),
            ("decay_mm", self.decay_mm),
            ("max_delay_ms", self.max_delay_ms),
            ("rate_min_hz", self.rate_min_hz),
        ] {
            check_positive(name, value)?;
        }
        for (name, value) in [
            ("isi_cv", self.isi_cv),
            ("amplitude_jitter", self.amplitude_jitter),
            ("noise.white_uv", self.noise.white_uv),
            ("noise.lowpass_uv", self.noise.lowpass_uv),
            ("noise.line_uv", self.noise.line_uv),
            ("noise.line_hz", self.noise.line_hz),
        ] {
            check_nonnegative(name, value)?;
        }
        for (name, value) in [
            ("drive_start", self.drive_start),
            ("drive_end", self.drive_end),
            ("max_threshold", self.max_threshold),
        ] {
            check_fraction(name, value)?;
        }
        check_positive_range("amplitude_uv", self.amplitude_uv)?;
        check_positive_range("sigma_ms", self.sigma_ms)?;
        check_positive_range("velocity_m_s", self.velocity_m_s)?;
        check(self.sigma_ms[1] <= MAX_SIGMA_MS, || {
            format!(
                "sigma_ms must be at most {MAX_SIGMA_MS} ms (the +-{HALF_WINDOW_MS} ms window \
                 holds no wider potential), got {}",
                self.sigma_ms[1]
            )
        })?;
        check(
            self.rate_max_hz.is_finite() && self.rate_max_hz >= self.rate_min_hz,
            || {
                format!(
                    "rate_max_hz must be finite and >= rate_min_hz ({}), got {}",
                    self.rate_min_hz, self.rate_max_hz
                )
            },
        )?;
        let fs = self.sample_rate_hz as f64;
        let cutoff = self.noise.lowpass_cutoff_hz;
        check(
            cutoff.is_finite() && cutoff >= 1.0 && cutoff < fs / 2.0,
            || {
                format!(
                    "noise.lowpass_cutoff_hz must be in 1 Hz..{} Hz (below Nyquist), got {cutoff}",
                    fs / 2.0
                )
            },
        )?;
        let expected = self.units as f64 * self.rate_max_hz * self.duration_s;
        check(expected <= MAX_SPIKES, || {
            format!(
                "{} units at up to {} Hz over {} s would make up to {expected:.0} spikes, more \
                 than the limit of {MAX_SPIKES:.0}",
                self.units, self.rate_max_hz, self.duration_s
            )
        })?;
        let samples = (self.duration_s * fs).round_ties_even();
        let values = samples * self.channels as f64;
        check(values <= MAX_EMG_VALUES as f64, || {
            format!(
                "{} channels x {samples} samples is more than the limit of {MAX_EMG_VALUES} \
                 values",
                self.channels
            )
        })?;
        let per_ms = fs / 1000.0;
        let delay_samples = (self.max_delay_ms * per_ms).floor();
        let half = (HALF_WINDOW_MS * per_ms).ceil() as usize;
        check(self.max_delay_ms <= MAX_DELAY_MS, || {
            format!(
                "max_delay_ms must be at most {MAX_DELAY_MS} ms, got {}",
                self.max_delay_ms
            )
        })?;
        let layout = Layout {
            fs,
            num_samples: samples as usize,
            max_delay: delay_samples as i64,
            half,
            center: 2 * half + delay_samples as usize,
        };
        let template_values = (self.units * layout.window() * self.channels) as u64;
        check(template_values <= MAX_TEMPLATE_VALUES, || {
            format!(
                "{} units x {} samples x {} channels of templates is more than the limit of \
                 {MAX_TEMPLATE_VALUES} values",
                self.units,
                layout.window(),
                self.channels
            )
        })?;
        check(layout.num_samples >= layout.window(), || {
            format!(
                "the recording ({} samples) is shorter than one potential window with its delays \
                 (2 x (2 x {} + {}) + 1 = {} samples: +-{HALF_WINDOW_MS} ms of potential each \
                 side and +-{} ms of delay); make duration_s at least {:.4} s or max_delay_ms \
                 smaller",
                layout.num_samples,
                layout.half,
                layout.max_delay,
                layout.window(),
                self.max_delay_ms,
                layout.window() as f64 / fs
            )
        })?;
        Ok(layout)
    }
}

/// One motor unit of an [`EmgRecording`].
#[derive(Debug, Clone, PartialEq)]
pub struct EmgUnit {
    /// Territory centre `[lateral depth, position along the line]`, µm (the script's
    /// `gt_unit_locations.npy` without its zero third column; contacts sit at `x = 0`).
    pub position_um: [f64; 2],
    /// The drawn best-channel peak amplitude, µV (before per-spike variation).
    pub amplitude_uv: f64,
    /// The largest |value| of the unit's template over all channels, µV.
    pub peak_amplitude_uv: f64,
    /// Hermite-Gauss width on the best channel, ms.
    pub sigma_ms: f64,
    /// Coefficients of the Hermite functions of orders 1, 2 and 3 on the best channel.
    pub coefficients: [f64; 3],
    /// Innervation zone: position along the line, µm.
    pub innervation_zone_um: f64,
    /// Conduction velocity, m/s (after any raise that keeps the delays in range).
    pub velocity_m_s: f64,
    /// The channel nearest to the territory centre, where the potential is largest.
    pub best_channel: usize,
    /// Per channel, arrival there minus arrival on the best channel, samples (0 on the best
    /// channel, within +-`floor(max_delay_ms * fs / 1000)`).
    pub delays_samples: Vec<i64>,
    /// Drive (0..1) at which the unit is recruited.
    pub recruitment_threshold: f64,
}

/// A deterministic synthetic EMG-like recording with known motor-unit spikes, held in memory
/// as int16 (gain [`EmgConfig::gain_uv`]) and read as a [`RecordingSource`] (it forwards to a
/// [`MemoryRecording`]).
///
/// The model is the one of the project's `gen_emg_ground_truth.py` benchmark script (numpy),
/// with the same parameters and defaults; the random draws differ (this generator uses
/// [`SplitMix64`] streams, not numpy's), so the same seed gives another recording of the same
/// model.
///
/// # Model
///
/// - **Channels**: [`EmgConfig::channels`] contacts on a straight line along the fibres,
///   [`EmgConfig::pitch_mm`] apart; contact `c` sits at `x = 0`, `y = pitch * c` (µm, as the
///   script's `chanMap.json`). `span = (channels - 1) * pitch`.
/// - **Units** ([`EmgConfig::units`]): unit `u` has a peak amplitude drawn log-uniformly in
///   [`EmgConfig::amplitude_uv`] (units sorted by it, unit 0 smallest), a territory centre at
///   `x_u` uniform along the line and lateral depth `y_u` uniform in 0.3..2.5 mm, a
///   Hermite-Gauss width `sigma_u` uniform in [`EmgConfig::sigma_ms`], three shape coefficients
///   `N(0, 1) * [1, 0.7, 0.45]` (the first at least 0.5 in magnitude), an innervation zone (IZ)
///   at `span / 2 + U(-0.25, 0.25) * span` and a conduction velocity uniform in
///   [`EmgConfig::velocity_m_s`]. With [`DelayMode::Shared`] all units share one IZ
///   (`span / 2 + U(-0.15, 0.15) * span`) and one velocity.
/// - **Amplitude**: on channel `c` a unit's potential is scaled by `exp(-r / lambda)` relative
///   to its best channel, `r` the distance from the contact to the territory centre and
///   `lambda` = [`EmgConfig::decay_mm`]; the best channel is the nearest contact.
/// - **Waveform**: `w(t) = sum_n a_n H_n(t / s) exp(-(t / s)^2 / 2)` over the physicists'
///   Hermite polynomials of orders 1..3, normalised to a largest |value| of 1, on a +-5 ms
///   window whose last millisecond on each side is a raised-cosine taper. Away from the best
///   channel the width grows to `s = sigma_u (1 + 0.12 r / lambda)` and the coefficients drift
///   by `0.12 r / lambda * N(0, 1)` each (per unit and channel): the shape broadens and
///   changes with distance.
/// - **Delays**: the potential leaves the IZ both ways and reaches channel `c` after
///   `|y_c - iz| / v`. Delays are relative to the best channel (0 there), in whole samples
///   (rounded half to even, as numpy), clipped to +-`floor(max_delay_ms * fs / 1000)`; when a
///   unit's delay spread would exceed [`EmgConfig::max_delay_ms`] its velocity is raised
///   (for [`DelayMode::Shared`], every unit's by the same factor, and all units share one
///   integer channel profile, so two units' delays differ by a constant).
/// - **Firing**: a common drive rises linearly from [`EmgConfig::drive_start`] to
///   [`EmgConfig::drive_end`] over the recording. Recruitment thresholds are
///   `linspace(0, max_threshold, units) + U(-0.02, 0.02)`, sorted, clipped to 0..0.95 (the
///   first one 0 when the drive starts at 0): smaller units are recruited first. A unit starts
///   at the first millisecond where the drive reaches its threshold (plus a uniform phase of
///   one interval) and fires quasi-regularly: intervals `N(1 / r, isi_cv / r)`, at least
///   `0.5 / r`, with a rate `r` rising from [`EmgConfig::rate_min_hz`] at its threshold to
///   [`EmgConfig::rate_max_hz`] at full drive (drive 1), so rates and overlaps grow with time.
///   Each spike's potential is scaled by `1 + amplitude_jitter * N(0, 1)`.
/// - **Noise** ([`EmgNoise`]): white Gaussian noise independent per channel, plus low-pass
///   Gaussian noise (4th-order Butterworth, unit RMS per source, one source per channel) mixed
///   between channels with weights `exp(-|i - j| / 2)` (each row scaled to unit norm; computed
///   as two first-order recursions over the channels, exactly, in `O(channels)`), plus an
///   optional mains hum `line_uv * sin(2 pi line_hz t + phase_c)` with a random phase per
///   channel.
/// - **Stored values**: `round(uV / gain)` (half to even) clipped to int16.
///
/// A spike's time is the sample where the unit's potential has its largest |value| on its
/// best channel: the sample [`EmgRecording::template_center`] of its template. Spikes are kept
/// where the whole template fits in the recording.
///
/// # Departures from the script
///
/// - Random draws come from per-purpose [`SplitMix64`] streams (units, thresholds, one per
///   unit's train, one per channel's noise, the hum phases), so no value matches numpy's; a
///   unit's per-spike amplitude factors are drawn with its spike train rather than after
///   sorting all spikes; the noise's normal values come from a ziggurat sampler (Marsaglia
///   and Tsang), two per sample and channel (white, then the low-pass source's input).
/// - The low-pass noise is white noise through a 4th-order digital Butterworth filter
///   (bilinear transform, two biquads) after a burn-in, scaled by the filter's exact RMS gain,
///   instead of an FFT of the whole recording scaled by its measured standard deviation: the
///   same spectrum up to the bilinear warping (which only matters near Nyquist, where the
///   filter has long cut everything), not circular, and computed block by block.
///   [`EmgNoise::lowpass_cutoff_hz`] must lie in 1 Hz..fs/2.
/// - The best-channel peak is located on the tapered waveform (the script locates it before
///   the taper and asserts that the taper did not move it), so the spike time is at the
///   template's largest |value| whatever the shape.
/// - Samples are summed in `f64` and rounded once (the script sums in `f32`).
/// - Configurations the script would accept but that make no sense are rejected (see
///   [`EmgRecording::generate`]).
#[derive(Debug, Clone)]
pub struct EmgRecording {
    config: EmgConfig,
    recording: MemoryRecording,
    probe: Probe,
    positions: Vec<[f64; 2]>,
    units: Vec<EmgUnit>,
    /// `units x template_len x channels`, µV.
    templates: Vec<f64>,
    template_len: usize,
    template_center: usize,
    spike_times: Vec<i64>,
    spike_units: Vec<usize>,
    spike_scales: Vec<f64>,
    clipped: u64,
}

/// Stream ids of the random draws; an index (unit, channel) goes in the low bits.
const STREAM_UNITS: u64 = 1 << 48;
const STREAM_THRESHOLDS: u64 = 2 << 48;
const STREAM_TRAIN: u64 = 3 << 48;
const STREAM_NOISE: u64 = 4 << 48;
const STREAM_HUM: u64 = 5 << 48;

/// The generator of random stream `stream` for `seed`.
fn stream(seed: u64, stream: u64) -> SplitMix64 {
    SplitMix64::new(SplitMix64::mix(seed ^ SplitMix64::mix(stream)))
}

impl EmgRecording {
    /// Draws the units, their templates and spike trains, and computes every sample.
    ///
    /// # Errors
    ///
    /// [`Error::Argument`] naming the field if the configuration is unusable: no channels or
    /// no units (or more than [`MAX_CHANNELS`] / [`MAX_UNITS`]), a sample rate outside
    /// 1 kHz..=200 kHz, a length, pitch, gain, decay, delay bound or minimum rate that is not
    /// a finite positive number, a negative or non-finite noise level, jitter or ISI CV, a
    /// drive or threshold outside 0..=1, a range with `low > high` or `low <= 0`, a width
    /// above 1 ms, `rate_max_hz < rate_min_hz`, a low-pass cutoff outside 1 Hz..fs/2, a delay
    /// bound above 20 ms, a recording shorter than one potential window with its delays
    /// (`2 * (2 * ceil(5 ms) + floor(max delay)) + 1` samples), more than [`MAX_SPIKES`]
    /// expected spikes or more than [`MAX_EMG_VALUES`] stored values.
    pub fn generate(config: &EmgConfig) -> Result<Self> {
        let layout = config.layout()?;
        let thresholds = firing::thresholds(config, &mut stream(config.seed, STREAM_THRESHOLDS));
        let units::Units {
            units,
            templates,
            template_len,
            template_center,
        } = units::draw(
            config,
            &layout,
            &thresholds,
            &mut stream(config.seed, STREAM_UNITS),
        );
        let margin = template_center as i64;
        let kept = firing::Span {
            first: margin,
            last: layout.num_samples as i64 - margin - 1,
        };
        let mut spikes: Vec<(i64, usize, f64)> = Vec::new();
        for (u, unit) in units.iter().enumerate() {
            let mut random = stream(config.seed, STREAM_TRAIN | u as u64);
            firing::train(
                config,
                &layout,
                unit.recruitment_threshold,
                kept,
                &mut random,
                |sample, scale| spikes.push((sample, u, scale)),
            );
        }
        spikes.sort_by_key(|&(sample, unit, _)| (sample, unit));
        let spike_times: Vec<i64> = spikes.iter().map(|s| s.0).collect();
        let spike_units: Vec<usize> = spikes.iter().map(|s| s.1).collect();
        let spike_scales: Vec<f64> = spikes.iter().map(|s| s.2).collect();

        let placed = noise::Spikes {
            times: &spike_times,
            units: &spike_units,
            scales: &spike_scales,
            templates: &templates,
            template_len,
            template_center,
        };
        let lowpass =
            (config.noise.lowpass_uv > 0.0).then_some((config.noise.lowpass_cutoff_hz, layout.fs));
        let normal = ziggurat::Ziggurat::new();
        let channel_noise = (0..config.channels)
            .map(|c| {
                let random = stream(config.seed, STREAM_NOISE | c as u64);
                noise::ChannelNoise::new(random, lowpass, &normal)
            })
            .collect();
        let mut hum = stream(config.seed, STREAM_HUM);
        let phases: Vec<f64> = (0..config.channels)
            .map(|_| hum.uniform(0.0, std::f64::consts::TAU))
            .collect();
        let (stored, clipped) =
            noise::render(config, &layout, &placed, channel_noise, &normal, &phases);

        let positions: Vec<[f64; 2]> = (0..config.channels)
            .map(|c| [0.0, c as f64 * config.pitch_mm * 1000.0])
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
        let probe = Probe::new(
            format!(
                "line of {} contacts, pitch {} mm, along the fibres (y)",
                config.channels, config.pitch_mm
            ),
            contacts,
        )?;
        let channels = (0..config.channels)
            .map(|c| ChannelInfo::new(c.to_string(), config.gain_uv, 0.0, "uV"))
            .collect();
        let rate = SampleRate::from_hz(config.sample_rate_hz)
            .map_err(|e| Error::Argument(e.to_string()))?;
        let info = RecordingInfo::new(channels, layout.num_samples as u64, rate, SampleFormat::I16)
            .map_err(|e| Error::Argument(e.to_string()))?;
        let mut recording =
            MemoryRecording::new(info, stored).map_err(|e| Error::Argument(e.to_string()))?;
        let metadata = &mut recording.info_mut().metadata;
        metadata.insert("generator".into(), "dspk-synapse groundtruth emg".into());
        metadata.insert("seed".into(), config.seed.to_string());
        metadata.insert("units".into(), config.units.to_string());

        Ok(Self {
            config: *config,
            recording,
            probe,
            positions,
            units,
            templates,
            template_len,
            template_center,
            spike_times,
            spike_units,
            spike_scales,
            clipped,
        })
    }

    /// The configuration it was made from.
    #[must_use]
    pub fn config(&self) -> &EmgConfig {
        &self.config
    }

    /// Samples per second.
    #[must_use]
    pub fn sample_rate_hz(&self) -> u64 {
        self.config.sample_rate_hz
    }

    /// Samples per channel.
    #[must_use]
    pub fn num_samples(&self) -> u64 {
        self.recording.info().num_samples
    }

    /// µV per stored step (`uV = stored * gain`, offset 0).
    #[must_use]
    pub fn gain_uv(&self) -> f64 {
        self.config.gain_uv
    }

    /// The stored values, `samples x channels` interleaved (sample `s` of channel `c` at
    /// `s * channels + c`): the script's `recording.bin` layout.
    ///
    /// # Panics
    ///
    /// Never: reading the whole in-memory recording cannot fail.
    #[must_use]
    pub fn interleaved_samples(&self) -> Vec<i16> {
        let info = self.recording.info();
        let channels = info.num_channels();
        let n = info.num_samples as usize;
        let mut bytes = vec![0u8; channels * n * 2];
        self.recording
            .read_stored(&info.all_channels(), 0..info.num_samples, &mut bytes)
            .expect("the whole in-memory recording is readable");
        let mut out = vec![0i16; channels * n];
        for (c, channel) in bytes.chunks_exact(2 * n).enumerate() {
            for (s, value) in channel.chunks_exact(2).enumerate() {
                out[s * channels + c] = i16::from_le_bytes([value[0], value[1]]);
            }
        }
        out
    }

    /// How many stored values were clipped to the int16 range.
    #[must_use]
    pub fn clipped_samples(&self) -> u64 {
        self.clipped
    }

    /// The probe: one contact per channel on a line (`x = 0`, `y = pitch * c`, µm).
    #[must_use]
    pub fn probe(&self) -> &Probe {
        &self.probe
    }

    /// The contact positions `[x, y]` by channel, µm (`[0, pitch * c]`).
    #[must_use]
    pub fn channel_positions(&self) -> &[[f64; 2]] {
        &self.positions
    }

    /// The units, in unit order (smallest amplitude first).
    #[must_use]
    pub fn units(&self) -> &[EmgUnit] {
        &self.units
    }

    /// Every spike's sample (where its potential peaks on the unit's best channel), sorted by
    /// sample then unit.
    #[must_use]
    pub fn spike_times(&self) -> &[i64] {
        &self.spike_times
    }

    /// Every spike's unit, in the order of [`spike_times`](Self::spike_times).
    #[must_use]
    pub fn spike_units(&self) -> &[usize] {
        &self.spike_units
    }

    /// Every spike's amplitude factor `1 + amplitude_jitter * N(0, 1)`, in the order of
    /// [`spike_times`](Self::spike_times).
    #[must_use]
    pub fn spike_amplitude_scales(&self) -> &[f64] {
        &self.spike_scales
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
        for (&sample, &unit) in self.spike_times.iter().zip(&self.spike_units) {
            trains[unit].push(sample);
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

    /// All templates, `units x template_len x channels` (C order, the script's
    /// `gt_templates.npy`), µV: the noiseless potential of one spike at amplitude factor 1.
    #[must_use]
    pub fn templates(&self) -> &[f64] {
        &self.templates
    }

    /// Unit `unit`'s template, `template_len x channels`, µV; `None` if there is no such unit.
    #[must_use]
    pub fn template(&self, unit: usize) -> Option<&[f64]> {
        let size = self.template_len * self.config.channels;
        self.templates.get(unit * size..(unit + 1) * size)
    }

    /// Samples per template.
    #[must_use]
    pub fn template_len(&self) -> usize {
        self.template_len
    }

    /// The template sample that lies on the spike time (the script's `gt_template_center`):
    /// a spike at sample `t` adds template row `k` to sample `t - template_center + k`.
    #[must_use]
    pub fn template_center(&self) -> usize {
        self.template_center
    }
}

impl RecordingSource for EmgRecording {
    fn info(&self) -> &RecordingInfo {
        self.recording.info()
    }

    fn fill_scaled(&self, request: &ReadRequest<'_>, out: &mut [f32]) -> dspk_core::Result<()> {
        self.recording.fill_scaled(request, out)
    }

    fn fill_stored(&self, request: &ReadRequest<'_>, out: &mut [u8]) -> dspk_core::Result<()> {
        self.recording.fill_stored(request, out)
    }

    fn can_read_stored(&self) -> bool {
        true
    }
}
