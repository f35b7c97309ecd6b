//! Spike detection scored against known spikes: peaks found on channels merged into one event
//! per spike ([`merge_peaks`]), events matched to the true spikes in time and on the probe
//! ([`score_events`]) with the least score a run accepts ([`Bounds`]), and the recall of
//! detected times alone ([`recalled`]).

use std::fmt;

use super::synth::TrueSpike;

/// How close two things must be, in time and on the probe, to count as the same spike.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Radius {
    /// Samples apart, at most.
    pub samples: u64,
    /// Micrometres between the channels' positions, at most.
    pub um: f64,
}

impl Radius {
    /// Within `samples` samples and `um` micrometres.
    #[must_use]
    pub const fn new(samples: u64, um: f64) -> Self {
        Self { samples, um }
    }

    /// Whether `(sample_a, channel_a)` and `(sample_b, channel_b)` lie within this radius,
    /// with channel positions `[x, y]` in um from `positions`.
    fn holds(
        self,
        positions: &[[f64; 2]],
        (sample_a, channel_a): (u64, usize),
        (sample_b, channel_b): (u64, usize),
    ) -> bool {
        let ([xa, ya], [xb, yb]) = (positions[channel_a], positions[channel_b]);
        sample_a.abs_diff(sample_b) <= self.samples && (xa - xb).hypot(ya - yb) <= self.um
    }
}

/// A peak a detector found on one channel (e.g. `dspk_ops::Peak`, whose channel is a `u32`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChannelPeak {
    /// Recording sample.
    pub sample: u64,
    /// Channel.
    pub channel: usize,
    /// The signal at the peak: its magnitude ranks peaks when they merge.
    pub value: f32,
}

/// One detected spike: where the largest of the peaks merged into it lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// Recording sample.
    pub sample: u64,
    /// Channel.
    pub channel: usize,
}

/// Merges peaks (on channels placed at `positions`) into events, largest magnitude first:
/// each peak not yet taken becomes an event and takes every peak within `radius` of it (itself
/// included). Events come back in time order.
///
/// # Panics
///
/// When a peak's channel has no position.
#[must_use]
pub fn merge_peaks(peaks: &[ChannelPeak], positions: &[[f64; 2]], radius: Radius) -> Vec<Event> {
    let at = |i: usize| (peaks[i].sample, peaks[i].channel);
    let mut largest_first: Vec<usize> = (0..peaks.len()).collect();
    largest_first.sort_by(|&a, &b| peaks[b].value.abs().total_cmp(&peaks[a].value.abs()));
    let mut by_time: Vec<usize> = (0..peaks.len()).collect();
    by_time.sort_by_key(|&i| peaks[i].sample);
    let mut taken = vec![false; peaks.len()];
    let mut events = Vec::new();
    for i in largest_first {
        if taken[i] {
            continue;
        }
        let sample = peaks[i].sample;
        let first = by_time.partition_point(|&j| peaks[j].sample + radius.samples < sample);
        for &j in &by_time[first..] {
            if peaks[j].sample > sample + radius.samples {
                break;
            }
            taken[j] |= radius.holds(positions, at(i), at(j));
        }
        events.push(Event {
            sample,
            channel: peaks[i].channel,
        });
    }
    events.sort_by_key(|e| e.sample);
    events
}

/// How well events found known spikes; shown as `recall 0.939, precision 0.993`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Score {
    /// True spikes matched by an event (each event matches at most one).
    pub matched: usize,
    /// `matched / spikes` (0 without spikes).
    pub recall: f64,
    /// `matched / events` (0 without events).
    pub precision: f64,
}

/// Matches each true spike, in time order, to the nearest-in-time unused event within
/// `radius` of its sample and channel (channel positions from `positions`); `events` are in
/// time order, as [`merge_peaks`] returns them.
///
/// # Panics
///
/// When a channel has no position.
#[must_use]
pub fn score_events(
    events: &[Event],
    spikes: &[TrueSpike],
    positions: &[[f64; 2]],
    radius: Radius,
) -> Score {
    let mut used = vec![false; events.len()];
    let mut matched = 0;
    for spike in spikes {
        let first = events.partition_point(|e| e.sample + radius.samples < spike.sample);
        let best = (first..events.len())
            .take_while(|&e| events[e].sample <= spike.sample + radius.samples)
            .filter(|&e| !used[e])
            .filter(|&e| {
                let event = (events[e].sample, events[e].channel);
                radius.holds(positions, event, (spike.sample, spike.channel))
            })
            .min_by_key(|&e| events[e].sample.abs_diff(spike.sample));
        if let Some(e) = best {
            used[e] = true;
            matched += 1;
        }
    }
    Score {
        matched,
        recall: matched as f64 / spikes.len().max(1) as f64,
        precision: matched as f64 / events.len().max(1) as f64,
    }
}

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "recall {:.3}, precision {:.3}",
            self.recall, self.precision
        )
    }
}

/// The least recall and precision a run accepts; 0, the default, accepts any score.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Bounds {
    /// The least recall.
    pub recall: f64,
    /// The least precision.
    pub precision: f64,
}

impl Bounds {
    /// What `score` misses of these bounds: `None` when its recall and its precision both
    /// reach theirs (a NaN figure reaches none).
    #[must_use]
    pub fn shortfall(self, score: Score) -> Option<Shortfall> {
        let met = score.recall >= self.recall && score.precision >= self.precision;
        (!met).then_some(Shortfall {
            score,
            bounds: self,
        })
    }
}

/// A score below its [`Bounds`]; shown as `accuracy short of its bounds: recall 0.850 is
/// below its bound 0.9`, one clause per figure that falls short.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shortfall {
    /// The score.
    pub score: Score,
    /// The bounds it missed.
    pub bounds: Bounds,
}

impl fmt::Display for Shortfall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let figures = [
            ("recall", self.score.recall, self.bounds.recall),
            ("precision", self.score.precision, self.bounds.precision),
        ];
        let short: Vec<String> = figures
            .iter()
            .filter(|&&(_, value, bound)| value < bound || value.is_nan())
            .map(|&(name, value, bound)| {
                // Three decimals, unless they round up to the bound (0.8996 shows as 0.900).
                let shown = format!("{value:.3}");
                let shown = if shown.parse::<f64>().is_ok_and(|v| v < bound) {
                    shown
                } else {
                    value.to_string()
                };
                format!("{name} {shown} is below its bound {bound}")
            })
            .collect();
        write!(f, "accuracy short of its bounds: {}", short.join(", and "))
    }
}

/// The number of `truth` samples with a `found` sample within `tolerance` samples (`found`
/// sorted ascending; each true spike counts once, and a found spike may serve several true
/// ones, as a detection recall counts).
#[must_use]
pub fn recalled(truth: &[u64], found: &[u64], tolerance: u64) -> usize {
    truth
        .iter()
        .filter(|&&t| {
            let i = found.partition_point(|&f| f.saturating_add(tolerance) < t);
            found
                .get(i)
                .is_some_and(|&f| f <= t.saturating_add(tolerance))
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Channels 0 and 1 20 um apart, channel 2 200 um from both.
    const POSITIONS: [[f64; 2]; 3] = [[0.0, 0.0], [0.0, 20.0], [0.0, 220.0]];
    const RADIUS: Radius = Radius::new(10, 50.0);

    fn peak(sample: u64, channel: usize, value: f32) -> ChannelPeak {
        ChannelPeak {
            sample,
            channel,
            value,
        }
    }

    fn spike(sample: u64, channel: usize) -> TrueSpike {
        TrueSpike {
            sample,
            unit: 0,
            channel,
            position: POSITIONS[channel],
            amplitude_uv: 100.0,
        }
    }

    #[test]
    fn peaks_near_in_time_and_space_merge_into_the_largest() {
        let peaks = [
            peak(100, 0, -50.0),
            peak(104, 1, -80.0), // near the first: takes it
            peak(104, 2, -60.0), // same time, 200 um away: its own event
            peak(115, 1, -70.0), // 11 samples after the largest: its own event
            peak(300, 0, -40.0), // far in time
            peak(302, 0, -40.0), // an equal peak later: the earlier one is kept
        ];
        let events = merge_peaks(&peaks, &POSITIONS, RADIUS);
        let at = |sample, channel| Event { sample, channel };
        assert_eq!(
            events,
            [at(104, 1), at(104, 2), at(115, 1), at(300, 0)],
            "{events:?}"
        );
        assert!(merge_peaks(&[], &POSITIONS, RADIUS).is_empty());
    }

    // Guards CI's run of `detect`, which printed its accuracy and exited 0 whatever it was:
    // below a bound it now fails with a message naming what fell short.
    #[test]
    fn a_score_below_its_bounds_falls_short() {
        let score = |recall, precision| Score {
            matched: 0,
            recall,
            precision,
        };
        let bounds = Bounds {
            recall: 0.9,
            precision: 0.95,
        };
        assert_eq!(bounds.shortfall(score(0.939, 0.993)), None);
        assert_eq!(bounds.shortfall(score(0.9, 0.95)), None);
        assert_eq!(Bounds::default().shortfall(score(0.0, 0.0)), None);
        let short = |recall, precision| bounds.shortfall(score(recall, precision)).unwrap();
        assert_eq!(short(0.85, 0.993).bounds, bounds);
        assert_eq!(
            short(0.85, 0.993).to_string(),
            "accuracy short of its bounds: recall 0.850 is below its bound 0.9"
        );
        assert_eq!(
            short(0.939, 0.5).to_string(),
            "accuracy short of its bounds: precision 0.500 is below its bound 0.95"
        );
        assert_eq!(
            short(0.1, 0.2).to_string(),
            "accuracy short of its bounds: recall 0.100 is below its bound 0.9, and \
             precision 0.200 is below its bound 0.95"
        );
        // Three decimals that round up to the bound would read as no shortfall.
        assert_eq!(
            short(0.8996, 1.0).to_string(),
            "accuracy short of its bounds: recall 0.8996 is below its bound 0.9"
        );
        assert_eq!(
            short(f64::NAN, 1.0).to_string(),
            "accuracy short of its bounds: recall NaN is below its bound 0.9"
        );
    }

    #[test]
    fn each_spike_matches_the_nearest_unused_event_once() {
        let event = |sample, channel| Event { sample, channel };
        let events = [event(95, 0), event(103, 1), event(500, 2), event(900, 0)];
        // Spike 100 takes event 103 (nearer than 95); spike 101 then takes 95; spike 500 on
        // channel 0 is 220 um from event 500's channel; spike 920 is 20 samples late.
        let spikes = [spike(100, 0), spike(101, 0), spike(500, 0), spike(920, 0)];
        let score = score_events(&events, &spikes, &POSITIONS, RADIUS);
        assert_eq!(score.matched, 2);
        assert_eq!(score.recall, 0.5);
        assert_eq!(score.precision, 0.5);
        assert_eq!(score.to_string(), "recall 0.500, precision 0.500");
        let none = score_events(&[], &[], &POSITIONS, RADIUS);
        assert_eq!((none.matched, none.recall, none.precision), (0, 0.0, 0.0));
    }

    #[test]
    fn recalled_counts_true_spikes_with_a_detection_in_tolerance() {
        let found = [10, 50, 100];
        assert_eq!(recalled(&[10, 12, 13, 38, 62, 63, 100, 200], &found, 12), 6);
        assert_eq!(recalled(&[0, 5], &found, 5), 1);
        assert_eq!(recalled(&[5], &[], 5), 0);
        assert_eq!(recalled(&[], &found, 5), 0);
        assert_eq!(recalled(&[u64::MAX - 1], &[u64::MAX - 3], 2), 1);
    }
}
