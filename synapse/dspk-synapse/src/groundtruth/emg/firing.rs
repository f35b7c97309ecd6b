//! Firing: a ramping common drive, recruitment thresholds and quasi-regular spike trains.

use dspk_core::rng::SplitMix64;

use super::{EmgConfig, Layout};

/// Random spread of each recruitment threshold around its even spacing.
const THRESHOLD_JITTER: f64 = 0.02;
/// The highest recruitment threshold.
const THRESHOLD_MAX: f64 = 0.95;
/// Step of the recruitment search, seconds.
const RECRUITMENT_STEP_S: f64 = 1e-3;
/// The shortest interval, a fraction of the mean interval `1 / rate`.
const SHORTEST_INTERVAL: f64 = 0.5;

/// The samples where a spike is kept (both inclusive): where its whole template fits.
#[derive(Debug, Clone, Copy)]
pub(super) struct Span {
    /// The first sample.
    pub(super) first: i64,
    /// The last sample.
    pub(super) last: i64,
}

/// The recruitment thresholds, ascending (one per unit, in unit order):
/// `linspace(0, max_threshold, units) + U(-0.02, 0.02)`, sorted, clipped to 0..=0.95, the
/// first set to 0 when the drive starts at 0.
pub(super) fn thresholds(config: &EmgConfig, random: &mut SplitMix64) -> Vec<f64> {
    let count = config.units;
    let mut thresholds: Vec<f64> = (0..count)
        .map(|u| {
            let even = if count > 1 {
                config.max_threshold * u as f64 / (count - 1) as f64
            } else {
                0.0
            };
            even + random.uniform(-THRESHOLD_JITTER, THRESHOLD_JITTER)
        })
        .collect();
    thresholds.sort_by(f64::total_cmp);
    for t in &mut thresholds {
        *t = t.clamp(0.0, THRESHOLD_MAX);
    }
    if config.drive_start <= 0.0
        && let Some(first) = thresholds.first_mut()
    {
        *first = 0.0;
    }
    thresholds
}

/// The firing rate of a unit with threshold `threshold` under a drive `drive`, Hz: 0 below
/// the threshold, then rising linearly from `rate_min` to `rate_max` at drive 1.
fn rate(config: &EmgConfig, threshold: f64, drive: f64) -> f64 {
    if drive < threshold {
        return 0.0;
    }
    let x = (drive - threshold) / (1.0 - threshold).max(1e-6);
    config.rate_min_hz + (config.rate_max_hz - config.rate_min_hz) * x.min(1.0)
}

/// The first point of the 1 ms grid `k * 1 ms` (before the end) where the drive reaches
/// `threshold`, found from the line's crossing rather than by a scan; `None` if the drive
/// never reaches it.
fn recruitment(config: &EmgConfig, duration: f64, threshold: f64) -> Option<f64> {
    let drive =
        |t: f64| config.drive_start + (config.drive_end - config.drive_start) * t / duration;
    let at = |k: u64| k as f64 * RECRUITMENT_STEP_S;
    let steps = (duration / RECRUITMENT_STEP_S).ceil() as u64;
    let mut k = if drive(0.0) >= threshold {
        0
    } else if config.drive_end > config.drive_start {
        let crossing =
            (threshold - config.drive_start) * duration / (config.drive_end - config.drive_start);
        ((crossing / RECRUITMENT_STEP_S).floor() as u64).min(steps)
    } else {
        return None;
    };
    // The crossing's rounding: step back while the previous point already reaches it, then
    // forward to the first point that does.
    while k > 0 && drive(at(k - 1)) >= threshold {
        k -= 1;
    }
    while k < steps && drive(at(k)) < threshold {
        k += 1;
    }
    (k < steps).then(|| at(k))
}

/// Draws the spikes of one unit and calls `spike(sample, amplitude factor)` for each one in
/// `kept`, in time order.
///
/// The unit starts at the first millisecond where the drive reaches `threshold`, plus a
/// uniform phase within one interval; intervals are `N(1 / r, isi_cv / r)`, at least
/// `0.5 / r`; the unit stops when a falling drive drops below its threshold. Spike times are
/// rounded to samples half to even; every spike drawn (kept or not) draws its amplitude factor
/// `1 + amplitude_jitter * N(0, 1)`.
pub(super) fn train(
    config: &EmgConfig,
    layout: &Layout,
    threshold: f64,
    kept: Span,
    random: &mut SplitMix64,
    mut spike: impl FnMut(i64, f64),
) {
    let duration = layout.num_samples as f64 / layout.fs;
    let drive =
        |t: f64| config.drive_start + (config.drive_end - config.drive_start) * t / duration;
    let Some(recruited) = recruitment(config, duration, threshold) else {
        return;
    };
    let first_rate = rate(config, threshold, drive(recruited)).max(config.rate_min_hz);
    let mut t = recruited + random.uniform(0.0, 1.0 / first_rate);
    while t < duration {
        let r = rate(config, threshold, drive(t));
        if r <= 0.0 {
            // The drive is linear: once below the threshold after recruitment it is falling
            // and stays below (the script steps on in 10 ms steps and never fires again).
            break;
        }
        let scale = 1.0 + config.amplitude_jitter * random.normal();
        let sample = (t * layout.fs).round_ties_even() as i64;
        if (kept.first..=kept.last).contains(&sample) {
            spike(sample, scale);
        }
        let interval = 1.0 / r + config.isi_cv / r * random.normal();
        t += interval.max(SHORTEST_INTERVAL / r);
    }
}
