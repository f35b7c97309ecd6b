//! The samples: spikes plus white, low-pass and mains noise, computed block by block over
//! channels in parallel and stored as int16.

use std::f64::consts::{PI, TAU};

use dspk_core::rng::SplitMix64;

use super::ziggurat::Ziggurat;
use super::{EmgConfig, Layout};

/// The low-pass sources are mixed between channels with weights `exp(-MIX_DECAY * |i - j|)`.
const MIX_DECAY: f64 = 0.5;
/// Samples per block, at most (fewer with many channels, to bound the buffers).
const BLOCK: usize = 1 << 15;
/// Values per block buffer (`channels x block`), at most.
const BLOCK_VALUES: usize = 1 << 20;
/// The int16 range, as `f64`.
const LOWEST: f64 = i16::MIN as f64;
const HIGHEST: f64 = i16::MAX as f64;
/// Values are clamped to this range before rounding (beyond it they clip anyway).
const BOUND_LOW: f64 = -65_536.0;
const BOUND_HIGH: f64 = 65_536.0;
/// `1.5 * 2^52`: adding and subtracting it rounds an `f64` below `2^51` in magnitude to an
/// integer, half to even (the default rounding of IEEE 754 arithmetic).
const ROUNDING: f64 = 6_755_399_441_055_744.0;
/// The burn-in of the low-pass filters, in periods of the cutoff frequency.
const BURN_IN_PERIODS: f64 = 20.0;

/// The spikes to add and their templates.
pub(super) struct Spikes<'a> {
    /// Spike samples, sorted.
    pub(super) times: &'a [i64],
    /// The unit of each spike.
    pub(super) units: &'a [usize],
    /// The amplitude factor of each spike.
    pub(super) scales: &'a [f64],
    /// `units x template_len x channels`, µV.
    pub(super) templates: &'a [f64],
    /// Samples per template.
    pub(super) template_len: usize,
    /// The template sample on the spike time.
    pub(super) template_center: usize,
}

/// One biquad section, direct form II transposed.
#[derive(Debug, Clone, Copy)]
struct Biquad {
    b: [f64; 3],
    a: [f64; 2],
    state: [f64; 2],
}

impl Biquad {
    /// The low-pass section of quality `q` for a prewarped cutoff `k = tan(pi fc / fs)`
    /// (bilinear transform of `1 / (s^2 + s / q + 1)`).
    fn lowpass(k: f64, q: f64) -> Self {
        let norm = 1.0 / (1.0 + k / q + k * k);
        let b0 = k * k * norm;
        Self {
            b: [b0, 2.0 * b0, b0],
            a: [2.0 * (k * k - 1.0) * norm, (1.0 - k / q + k * k) * norm],
            state: [0.0; 2],
        }
    }

    fn step(&mut self, x: f64) -> f64 {
        let y = self.b[0] * x + self.state[0];
        self.state[0] = self.b[1] * x - self.a[0] * y + self.state[1];
        self.state[1] = self.b[2] * x - self.a[1] * y;
        y
    }
}

/// A 4th-order Butterworth low-pass (two biquads, bilinear transform) scaled to unit RMS gain
/// for white noise: its output is divided by `sqrt(sum h^2)`, `h` its impulse response.
#[derive(Debug, Clone, Copy)]
struct Butterworth {
    sections: [Biquad; 2],
    norm: f64,
}

impl Butterworth {
    /// The filter for `cutoff_hz` at `fs` (`cutoff_hz < fs / 2`), and its burn-in length:
    /// 20 cutoff periods, over which its slowest pole decays by `e^-20` or more.
    fn new(cutoff_hz: f64, fs: f64) -> (Self, usize) {
        let k = (PI * cutoff_hz / fs).tan();
        // Order 4: pole pairs at angles pi/8 and 3pi/8 from the negative real axis.
        let sections =
            [PI / 8.0, 3.0 * PI / 8.0].map(|angle| Biquad::lowpass(k, 0.5 / angle.cos()));
        let burn_in = (BURN_IN_PERIODS * fs / cutoff_hz).ceil() as usize;
        let mut impulse = Self {
            sections,
            norm: 1.0,
        };
        let energy: f64 = (0..burn_in)
            .map(|k| {
                let h = impulse.filter(if k == 0 { 1.0 } else { 0.0 });
                h * h
            })
            .sum();
        (
            Self {
                sections,
                norm: 1.0 / energy.sqrt(),
            },
            burn_in,
        )
    }

    fn filter(&mut self, x: f64) -> f64 {
        let y = self.sections[0].step(x);
        self.sections[1].step(y) * self.norm
    }
}

/// The noise of one channel: one random stream, each sample drawing two standard normals
/// (ziggurat): the first is the white noise, the second feeds the low-pass source.
#[derive(Debug, Clone)]
pub(super) struct ChannelNoise {
    random: SplitMix64,
    lowpass: Option<Butterworth>,
}

impl ChannelNoise {
    /// The channel's noise from its stream; with a low-pass filter (`(cutoff_hz, fs)`), run
    /// for its burn-in so that the first sample is already stationary.
    pub(super) fn new(random: SplitMix64, lowpass: Option<(f64, f64)>, normal: &Ziggurat) -> Self {
        let Some((cutoff_hz, fs)) = lowpass else {
            return Self {
                random,
                lowpass: None,
            };
        };
        let (filter, burn_in) = Butterworth::new(cutoff_hz, fs);
        let mut noise = Self {
            random,
            lowpass: Some(filter),
        };
        let mut white = vec![0.0; burn_in.min(BLOCK)];
        let mut source = white.clone();
        let mut left = burn_in;
        while left > 0 {
            let n = left.min(white.len());
            noise.fill(normal, &mut white[..n], &mut source[..n]);
            left -= n;
        }
        noise
    }

    /// The next `white.len()` samples: unit white noise into `white`, unit-RMS low-pass noise
    /// into `source` (left untouched without a low-pass filter).
    fn fill(&mut self, normal: &Ziggurat, white: &mut [f64], source: &mut [f64]) {
        for (w, s) in white.iter_mut().zip(source.iter_mut()) {
            *w = normal.sample(&mut self.random);
            let x = normal.sample(&mut self.random);
            if let Some(filter) = &mut self.lowpass {
                *s = filter.filter(x);
            }
        }
    }
}

/// Per channel, the norm `sqrt(sum_j a^(2 |c - j|))` of its row of mixing weights `a^|c - j|`
/// (`a = exp(-MIX_DECAY)`), from the two geometric sums.
fn mixing_norms(channels: usize) -> Vec<f64> {
    let r = (-2.0 * MIX_DECAY).exp();
    let geometric = |terms: usize| (1.0 - r.powi(terms as i32)) / (1.0 - r);
    (0..channels)
        .map(|c| (geometric(c + 1) + r * geometric(channels - 1 - c)).sqrt())
        .collect()
}

/// Mixes the low-pass sources between channels: `mixed[c] = sum_j a^|c - j| sources[j]`
/// (`a = exp(-MIX_DECAY)`) over the first `len` samples of each row, by a forward and a
/// backward first-order recursion over the channels (`f_c = x_c + a f_(c-1)`,
/// `b_c = x_c + a b_(c+1)`, `mixed_c = f_c + a b_(c+1)`); `sources` is overwritten with `b`.
fn mix_sources(sources: &mut [Vec<f64>], mixed: &mut [Vec<f64>], len: usize) {
    let a = (-MIX_DECAY).exp();
    for (c, source) in sources.iter().enumerate() {
        let (done, rest) = mixed.split_at_mut(c);
        let row = &mut rest[0][..len];
        row.copy_from_slice(&source[..len]);
        if let Some(previous) = done.last() {
            for (v, p) in row.iter_mut().zip(previous) {
                *v += a * p;
            }
        }
    }
    for c in (0..sources.len().saturating_sub(1)).rev() {
        let (head, tail) = sources.split_at_mut(c + 1);
        let next = &tail[0][..len];
        for ((m, b), n) in mixed[c][..len]
            .iter_mut()
            .zip(&mut head[c][..len])
            .zip(next)
        {
            *m += a * n;
            *b += a * n;
        }
    }
}

/// Every stored value as little-endian int16 bytes, channel-major (`channels x num_samples`),
/// and how many were clipped.
/// `noise` holds one [`ChannelNoise`] per channel, `phases` the mains-hum phase of each.
pub(super) fn render(
    config: &EmgConfig,
    layout: &Layout,
    spikes: &Spikes<'_>,
    mut noise: Vec<ChannelNoise>,
    normal: &Ziggurat,
    phases: &[f64],
) -> (Vec<u8>, u64) {
    let channels = config.channels;
    let n = layout.num_samples;
    let levels = &config.noise;
    let lowpass = levels.lowpass_uv > 0.0;
    let factors: Vec<f64> = mixing_norms(channels)
        .iter()
        .map(|norm| levels.lowpass_uv / norm)
        .collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZero::get)
        .min(channels);
    let per_thread = channels.div_ceil(threads);
    let block = (BLOCK_VALUES / channels).clamp(2, BLOCK);

    let mut stored = vec![0u8; channels * n * 2];
    let mut outputs: Vec<&mut [u8]> = stored.chunks_mut(2 * n).collect();
    let mut white = vec![vec![0.0f64; block]; channels];
    let mut sources = vec![vec![0.0f64; block]; channels];
    let mut mixed = vec![vec![0.0f64; block]; channels];
    let mut clipped = 0u64;
    let columns = &Columns::new(spikes, channels);
    let after = (spikes.template_len - spikes.template_center) as i64;
    let before = spikes.template_center as i64;
    for start in (0..n).step_by(block) {
        let len = block.min(n - start);
        // The white noise and the low-pass sources of this block, then their mix.
        std::thread::scope(|scope| {
            for ((noise, white), sources) in noise
                .chunks_mut(per_thread)
                .zip(white.chunks_mut(per_thread))
                .zip(sources.chunks_mut(per_thread))
            {
                scope.spawn(move || {
                    for ((noise, white), source) in noise.iter_mut().zip(white).zip(sources) {
                        noise.fill(normal, &mut white[..len], &mut source[..len]);
                    }
                });
            }
        });
        if lowpass {
            mix_sources(&mut sources, &mut mixed, len);
        }
        // Spikes whose template overlaps the block.
        let end = (start + len) as i64;
        let lo = spikes.times.partition_point(|&t| t + after <= start as i64);
        let hi = spikes.times.partition_point(|&t| t - before < end);
        let (white, mixed, factors) = (&white, &mixed, &factors);
        let counts: Vec<u64> = std::thread::scope(|scope| {
            let handles: Vec<_> = outputs
                .chunks_mut(per_thread)
                .enumerate()
                .map(|(chunk, outputs)| {
                    scope.spawn(move || {
                        let mut buffer = vec![0.0f64; len];
                        let mut clipped = 0u64;
                        for (k, output) in outputs.iter_mut().enumerate() {
                            let c = chunk * per_thread + k;
                            let factor = if lowpass { factors[c] } else { 0.0 };
                            buffer.fill(0.0);
                            add_spikes(spikes, columns, lo..hi, c, channels, start, &mut buffer);
                            if levels.line_uv > 0.0 {
                                for (s, v) in buffer.iter_mut().enumerate() {
                                    let t = (start + s) as f64 / layout.fs;
                                    *v += levels.line_uv
                                        * (TAU * levels.line_hz * t + phases[c]).sin();
                                }
                            }
                            let out = &mut output[2 * start..2 * (start + len)];
                            let values = buffer.iter().zip(&white[c]).zip(&mixed[c]);
                            for (stored, ((v, w), m)) in out.chunks_exact_mut(2).zip(values) {
                                let uv = v + levels.white_uv * w + factor * m;
                                let q = round_half_even(
                                    (uv / config.gain_uv).clamp(BOUND_LOW, BOUND_HIGH),
                                );
                                if !(LOWEST..=HIGHEST).contains(&q) {
                                    clipped += 1;
                                }
                                // `as` saturates to the int16 range.
                                stored.copy_from_slice(&(q as i16).to_le_bytes());
                            }
                        }
                        clipped
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        });
        clipped += counts.iter().sum::<u64>();
    }
    (stored, clipped)
}

/// `x` rounded to an integer, half to even, for `|x| < 2^51` (`f64::round_ties_even`,
/// without the library call it compiles to on baseline x86-64).
fn round_half_even(x: f64) -> f64 {
    (x + ROUNDING) - ROUNDING
}

/// The templates by unit and channel: each channel's column of a unit's template, trimmed to
/// its non-zero rows.
struct Columns {
    /// Per `(unit, channel)`, the first row kept and the values from there.
    columns: Vec<(usize, Vec<f64>)>,
}

impl Columns {
    fn new(spikes: &Spikes<'_>, channels: usize) -> Self {
        let len = spikes.template_len;
        let columns = spikes
            .templates
            .chunks_exact(len * channels)
            .flat_map(|template| {
                (0..channels).map(move |c| {
                    let column: Vec<f64> = (0..len).map(|k| template[k * channels + c]).collect();
                    let first = column.iter().position(|&v| v != 0.0).unwrap_or(len);
                    let end = column
                        .iter()
                        .rposition(|&v| v != 0.0)
                        .map_or(first, |k| k + 1);
                    (first, column[first..end].to_vec())
                })
            })
            .collect();
        Self { columns }
    }
}

/// Adds the spikes `range` of `spikes` on channel `channel` to `buffer`, which holds samples
/// `start..start + buffer.len()`.
fn add_spikes(
    spikes: &Spikes<'_>,
    columns: &Columns,
    range: std::ops::Range<usize>,
    channel: usize,
    channels: usize,
    start: usize,
    buffer: &mut [f64],
) {
    let (start, end) = (start as i64, (start + buffer.len()) as i64);
    for s in range {
        let (offset, column) = &columns.columns[spikes.units[s] * channels + channel];
        // Column value j (template row offset + j) lands on sample first + j.
        let first = spikes.times[s] - spikes.template_center as i64 + *offset as i64;
        let j0 = (start - first).clamp(0, column.len() as i64) as usize;
        let j1 = (end - first).clamp(0, column.len() as i64) as usize;
        if j0 >= j1 {
            continue;
        }
        let at = (first + j0 as i64 - start) as usize;
        let scale = spikes.scales[s];
        for (out, value) in buffer[at..at + (j1 - j0)].iter_mut().zip(&column[j0..j1]) {
            *out += scale * value;
        }
    }
}

#[cfg(test)]
mod tests {
    use dspk_core::rng::SplitMix64;

    use super::{
        Butterworth, ChannelNoise, MIX_DECAY, Ziggurat, mix_sources, mixing_norms, round_half_even,
    };

    #[test]
    fn lowpass_noise_has_unit_rms_and_butterworth_response() {
        let fs = 30_000.0;
        let normal = Ziggurat::new();
        let mut noise = ChannelNoise::new(SplitMix64::new(5), Some((500.0, fs)), &normal);
        let mut white = vec![0.0; 1 << 17];
        let mut source = white.clone();
        noise.fill(&normal, &mut white, &mut source);
        for x in [&white, &source] {
            let rms = (x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64).sqrt();
            assert!((rms - 1.0).abs() < 0.05, "rms {rms}");
        }
        // |H| = 1 / sqrt(1 + (tan(pi f / fs) / tan(pi fc / fs))^8): 1/sqrt(2) at the cutoff,
        // about 1/16 at twice the cutoff.
        let warp = |f: f64| (std::f64::consts::PI * f / fs).tan();
        let ratio = warp(1000.0) / warp(500.0);
        let at_double = 1.0 / (1.0 + ratio.powi(8)).sqrt();
        for (f, expected) in [(500.0, 0.5f64.sqrt()), (1000.0, at_double)] {
            let (mut filter, _) = Butterworth::new(500.0, fs);
            filter.norm = 1.0;
            let n = 30_000;
            let (mut re, mut im) = (0.0, 0.0);
            for k in 0..2 * n {
                let phase = std::f64::consts::TAU * f * k as f64 / fs;
                let y = filter.filter(phase.sin());
                if k >= n {
                    re += y * phase.sin();
                    im += y * phase.cos();
                }
            }
            let gain = 2.0 * re.hypot(im) / n as f64;
            assert!(
                (gain - expected).abs() < 1e-3,
                "{f} Hz: {gain}, expected {expected}"
            );
        }
    }

    #[test]
    fn mixing_matches_the_dense_weights() {
        let (channels, len) = (7, 5);
        let mut random = SplitMix64::new(2);
        let original: Vec<Vec<f64>> = (0..channels)
            .map(|_| (0..len).map(|_| random.normal()).collect())
            .collect();
        let mut sources = original.clone();
        let mut mixed = vec![vec![0.0; len]; channels];
        mix_sources(&mut sources, &mut mixed, len);
        let norms = mixing_norms(channels);
        for c in 0..channels {
            let weight = |j: usize| (-MIX_DECAY * c.abs_diff(j) as f64).exp();
            let norm: f64 = (0..channels).map(|j| weight(j).powi(2)).sum::<f64>().sqrt();
            assert!((norms[c] - norm).abs() < 1e-12);
            for s in 0..len {
                let dense: f64 = (0..channels).map(|j| weight(j) * original[j][s]).sum();
                assert!(
                    (mixed[c][s] - dense).abs() < 1e-12,
                    "channel {c} sample {s}"
                );
            }
        }
    }

    #[test]
    fn rounding_is_half_to_even() {
        for x in [
            0.5, 1.5, 2.5, -0.5, -2.5, 3.49, -3.51, 32767.5, -32768.5, 1e5, 0.0,
        ] {
            assert_eq!(round_half_even(x), x.round_ties_even(), "{x}");
        }
    }
}
