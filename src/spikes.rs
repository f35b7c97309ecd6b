//! A deterministic synthetic extracellular recording with known spikes, for the `detect`
//! example: units at known positions on a two-column probe, each firing a fixed waveform whose
//! amplitude decays with distance, over noise that is partly shared by all channels (which a
//! common reference removes), partly correlated between neighbours (which whitening removes)
//! and partly independent, plus a slow oscillation (which a high-pass filter removes).
//! Stored as int16 with a gain of 0.195 uV per step, like Intan and Open Ephys headstages.

use dspk::{ChannelInfo, MemoryRecording, SampleRate};

/// Microvolts per stored step.
pub const GAIN_UV: f64 = 0.195;

/// One true spike: which unit fired, when (sample of the waveform's trough) and the channel
/// nearest to the unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrueSpike {
    /// Sample index of the trough.
    pub sample: u64,
    /// The firing unit.
    pub unit: usize,
    /// The channel nearest the unit (largest amplitude).
    pub channel: usize,
}

/// What [`generate`] makes: the recording, the probe positions and the true spikes.
#[derive(Debug)]
pub struct SpikeRecording {
    /// The stored recording (int16, channel-major).
    pub recording: MemoryRecording,
    /// Contact positions in micrometres, `(x, y)` per channel.
    pub positions: Vec<(f64, f64)>,
    /// Every spike of every unit, sorted by sample.
    pub spikes: Vec<TrueSpike>,
}

/// Parameters of [`generate`].
#[derive(Debug, Clone, Copy)]
pub struct SpikeParams {
    /// Channels (two columns, 32 um apart, 20 um vertical pitch).
    pub channels: usize,
    /// Recording length in samples.
    pub samples: u64,
    /// Sample rate in Hz.
    pub rate_hz: u64,
    /// Number of units.
    pub units: usize,
    /// Mean firing rate per unit in Hz.
    pub firing_hz: f64,
    /// Trough amplitude at the unit's nearest channel, in uV (before distance decay).
    pub amplitude_uv: f64,
    /// Seed of every random choice.
    pub seed: u64,
}

/// `SplitMix64` random numbers (deterministic across platforms).
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller).
    fn normal(&mut self) -> f64 {
        let u = self.unit().max(f64::MIN_POSITIVE);
        let v = self.unit();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// The spike waveform at `t` seconds from the trough: a sharp negative trough followed by a
/// slower positive repolarisation, peak -1 at `t = 0`.
fn waveform(t: f64) -> f64 {
    let trough = -(-(t / 0.00025).powi(2)).exp();
    let rebound = 0.35 * (-((t - 0.0006) / 0.0005).powi(2)).exp();
    trough + rebound
}

/// Generates the recording described by `params`.
///
/// # Errors
///
/// When the channel count is zero or the recording cannot be described (see
/// [`MemoryRecording::from_samples`]).
pub fn generate(params: SpikeParams) -> Result<SpikeRecording, dspk::Error> {
    let SpikeParams {
        channels,
        samples,
        rate_hz,
        units,
        firing_hz,
        amplitude_uv,
        seed,
    } = params;
    let n = samples as usize;
    let rate = rate_hz as f64;
    let mut random = Random(seed);
    let positions: Vec<(f64, f64)> = (0..channels)
        .map(|c| (32.0 * (c % 2) as f64, 20.0 * (c / 2) as f64))
        .collect();
    let height = 20.0 * (channels.div_ceil(2)) as f64;

    // Units: position along the probe, between the columns; amplitude 0.7 to 1.5 times the
    // nominal one.
    let unit_positions: Vec<(f64, f64, f64)> = (0..units)
        .map(|_| {
            (
                random.unit() * 32.0,
                random.unit() * height,
                0.7 + 0.8 * random.unit(),
            )
        })
        .collect();

    // Firing: Poisson with a 2 ms refractory period, troughs away from the ends.
    let refractory = (0.002 * rate) as u64;
    let margin = (0.003 * rate) as u64;
    let mut spikes = Vec::new();
    for (unit, &(ux, uy, _)) in unit_positions.iter().enumerate() {
        let nearest = (0..channels)
            .min_by(|&a, &b| {
                let da = (positions[a].0 - ux).hypot(positions[a].1 - uy);
                let db = (positions[b].0 - ux).hypot(positions[b].1 - uy);
                da.total_cmp(&db)
            })
            .unwrap_or(0);
        let mut t = margin as f64;
        loop {
            t += refractory as f64 - (1.0 - random.unit()).ln() * rate / firing_hz;
            let sample = t as u64;
            if sample + margin >= samples {
                break;
            }
            spikes.push(TrueSpike {
                sample,
                unit,
                channel: nearest,
            });
        }
    }
    spikes.sort_by_key(|s| (s.sample, s.unit));

    let mut data = vec![0f64; channels * n];
    // Independent noise, 8 uV RMS, and neighbour-correlated noise: a field shared by channels
    // within ~40 um (smoothed along the probe), 6 uV RMS.
    for value in &mut data {
        *value = 8.0 * random.normal();
    }
    let rows = channels.div_ceil(2);
    let mut field = vec![0f64; rows];
    for s in 0..n {
        for f in &mut field {
            *f = random.normal();
        }
        for c in 0..channels {
            let row = c / 2;
            let lo = row.saturating_sub(1);
            let hi = (row + 1).min(rows - 1);
            let sum: f64 = field[lo..=hi].iter().sum();
            data[c * n + s] += 6.0 * sum / ((hi - lo + 1) as f64).sqrt();
        }
    }
    // Shared noise (12 uV RMS, e.g. reference pick-up) and a 7 Hz oscillation of 40 uV.
    for s in 0..n {
        let common =
            12.0 * random.normal() + 40.0 * (std::f64::consts::TAU * 7.0 * s as f64 / rate).sin();
        for c in 0..channels {
            data[c * n + s] += common;
        }
    }
    // Spikes: waveform over -1 ms .. +2 ms, amplitude decaying with distance (30 um scale).
    let before = (0.001 * rate) as i64;
    let after = (0.002 * rate) as i64;
    for spike in &spikes {
        let (ux, uy, gain) = unit_positions[spike.unit];
        for (c, &(x, y)) in positions.iter().enumerate() {
            let distance = (x - ux).hypot(y - uy).hypot(10.0);
            let amplitude = amplitude_uv * gain * (-(distance - 10.0) / 30.0).exp();
            if amplitude < 1.0 {
                continue;
            }
            for k in -before..=after {
                let index = spike.sample as i64 + k;
                if (0..n as i64).contains(&index) {
                    data[c * n + index as usize] += amplitude * waveform(k as f64 / rate);
                }
            }
        }
    }
    let stored: Vec<i16> = data
        .iter()
        .map(|&v| (v / GAIN_UV).round().clamp(-32768.0, 32767.0) as i16)
        .collect();
    let channel_info = (0..channels)
        .map(|c| ChannelInfo::new(format!("ch{c}"), GAIN_UV, 0.0, "uV"))
        .collect();
    let recording =
        MemoryRecording::from_samples(channel_info, SampleRate::from_hz(rate_hz)?, &stored)?;
    Ok(SpikeRecording {
        recording,
        positions,
        spikes,
    })
}
