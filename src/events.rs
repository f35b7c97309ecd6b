//! Spikes detected on a stream and scored against known spikes, as the `detect` example does:
//! peaks beyond each channel's noise found on the device window by window
//! ([`peaks_beyond_noise`]), merged into one event per spike ([`merge_peaks`]) and matched to
//! the true spikes ([`score_events`]), with the least score a run accepts ([`Bounds`]).

use std::error::Error;

use dspk::cubecl::client::Client;
use dspk::ops::{
    ChannelVector, Height, Peak, PeakDetector, PeakOptions, Polarity, WindowStream, mad_noise_into,
};
use dspk::synapse::groundtruth::TrueSpike;

use crate::run_stream;

/// Finds, on the device, the peaks of every window of `stream` beyond `scale` times each
/// channel's MAD noise (measured on that window), of `polarity`, at least `distance` samples
/// apart ([`PeakOptions`]), and downloads only them (room is made for the most a window can
/// hold: one per `distance` samples of each channel). Returns
/// the peaks in recording samples, window after window, and the seconds the stream took (as
/// [`run_stream`], with a progress bar). Each peak is found once and as in the whole
/// recording when the stream's halo is at least `distance + 1`.
///
/// # Errors
///
/// The stream's errors, and the detector's: a zero `distance`, a NaN in a window.
pub fn peaks_beyond_noise(
    client: &Client,
    stream: &mut WindowStream,
    polarity: Polarity,
    scale: f32,
    distance: usize,
) -> Result<(Vec<Peak>, f64), Box<dyn Error>> {
    let (channels, samples) = (
        stream.workspace().channels(),
        stream.workspace().max_samples(),
    );
    let noise = ChannelVector::empty(client, channels)?;
    let per_channel = samples / distance.max(1) + 1;
    let mut detector = PeakDetector::new(client, channels.saturating_mul(per_channel))?;
    let options = PeakOptions {
        polarity,
        height: Height::PerChannel {
            thresholds: noise.clone(),
            scale,
        },
        distance,
    };
    let mut peaks = Vec::new();
    let seconds = run_stream(stream, "windows (detection)", |window| {
        mad_noise_into(client, window.array(), &noise)?;
        detector.detect_window(client, window, &options)?;
        peaks.extend(detector.peaks(client)?);
        Ok(())
    })?;
    Ok((peaks, seconds))
}

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

/// One detected spike: where the largest of the peaks merged into it lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// Recording sample.
    pub sample: u64,
    /// Channel.
    pub channel: usize,
}

/// Merges peaks (in recording samples, on channels placed at `positions`) into events,
/// largest magnitude first: each peak not yet taken becomes an event and takes every peak
/// within `radius` of it (itself included). Events come back in time order.
///
/// # Panics
///
/// When a peak's channel has no position.
#[must_use]
pub fn merge_peaks(peaks: &[Peak], positions: &[[f64; 2]], radius: Radius) -> Vec<Event> {
    let at = |i: usize| (peaks[i].sample, peaks[i].channel as usize);
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
            channel: at(i).1,
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

impl std::fmt::Display for Score {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "recall {:.3}, precision {:.3}",
            self.recall, self.precision
        )
    }
}

/// The least recall and precision a run accepts (`detect`'s `--min-recall` and
/// `--min-precision`); 0, the default, accepts any score.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Bounds {
    /// The least recall.
    pub recall: f64,
    /// The least precision.
    pub precision: f64,
}

impl Bounds {
    /// Whether `score` reaches both bounds.
    ///
    /// # Errors
    ///
    /// A [`Shortfall`] when its recall or its precision is below its bound.
    pub fn check(self, score: Score) -> Result<(), Shortfall> {
        if score.recall >= self.recall && score.precision >= self.precision {
            Ok(())
        } else {
            Err(Shortfall {
                score,
                bounds: self,
            })
        }
    }
}

/// A score below its [`Bounds`]; shown as `accuracy short of its bounds: recall 0.850 is
/// below --min-recall 0.9`, one clause per figure that falls short.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shortfall {
    /// The score.
    pub score: Score,
    /// The bounds it missed.
    pub bounds: Bounds,
}

impl std::fmt::Display for Shortfall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let figures = [
            ("recall", self.score.recall, self.bounds.recall),
            ("precision", self.score.precision, self.bounds.precision),
        ];
        let short: Vec<String> = figures
            .iter()
            .filter(|(_, value, bound)| value < bound)
            .map(|&(name, value, bound)| {
                // Three decimals, unless they round up to the bound (0.8996 shows as 0.900).
                let shown = format!("{value:.3}");
                let shown = if shown.parse::<f64>().is_ok_and(|v| v < bound) {
                    shown
                } else {
                    value.to_string()
                };
                format!("{name} {shown} is below --min-{name} {bound}")
            })
            .collect();
        write!(f, "accuracy short of its bounds: {}", short.join(", and "))
    }
}

impl std::error::Error for Shortfall {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Channels 0 and 1 20 um apart, channel 2 200 um from both.
    const POSITIONS: [[f64; 2]; 3] = [[0.0, 0.0], [0.0, 20.0], [0.0, 220.0]];
    const RADIUS: Radius = Radius::new(10, 50.0);

    fn peak(sample: u64, channel: u32, value: f32) -> Peak {
        Peak {
            channel,
            sample,
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

    // Spikes on windows' edges (the window of 1 000 samples ends at 999 and 1 999) and two on
    // one channel closer than the distance: each found once, at its recording sample, with
    // windows of 1 000 as with the whole recording in one.
    #[test]
    fn peaks_beyond_noise_are_found_once_in_recording_samples() {
        use dspk::ops::{Pipeline, StreamOptions};
        use dspk::{ChannelInfo, MemoryRecording, SampleRate};
        use std::sync::Arc;

        let (channels, samples, distance) = (3, 5_000, 10);
        let mut rng = dspk::test_util::Rng::new(11);
        let mut stored: Vec<i16> = (0..channels * samples)
            .map(|_| rng.uniform(-10.0, 10.0) as i16)
            .collect();
        let spikes = [(999, 0), (1_000, 1), (1_999, 2), (3_000, 1), (4_990, 0)];
        for &(sample, channel) in &spikes {
            stored[channel * samples + sample as usize] = -1_000;
        }
        stored[samples + 3_005] = -800; // within `distance` of the spike at 3 000
        let infos = (0..channels)
            .map(|c| ChannelInfo::new(format!("C{c}"), 1.0, 0.0, "uV"))
            .collect();
        let rate = SampleRate::from_hz(30_000).unwrap();
        let source = Arc::new(MemoryRecording::from_samples(infos, rate, &stored).unwrap());
        dspk::test_util::for_each_runtime(|_, client| {
            for window in [1_000, 5_000] {
                let options = StreamOptions {
                    window,
                    extra_halo: distance as u64 + 1,
                    ..StreamOptions::default()
                };
                let mut stream =
                    WindowStream::new(client, source.clone(), Pipeline::new(), &options).unwrap();
                let (mut peaks, _) =
                    peaks_beyond_noise(client, &mut stream, Polarity::Negative, 4.5, distance)
                        .unwrap();
                peaks.sort_by_key(|p| (p.sample, p.channel));
                let found: Vec<(u64, usize)> = peaks
                    .iter()
                    .map(|p| (p.sample, p.channel as usize))
                    .collect();
                assert_eq!(found, spikes, "windows of {window}");
                assert!(peaks.iter().all(|p| p.value == -1_000.0), "{peaks:?}");
            }
        });
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
        assert_eq!(bounds.check(score(0.939, 0.993)), Ok(()));
        assert_eq!(bounds.check(score(0.9, 0.95)), Ok(()));
        assert_eq!(Bounds::default().check(score(0.0, 0.0)), Ok(()));
        let short = |recall, precision| bounds.check(score(recall, precision)).unwrap_err();
        assert_eq!(
            short(0.85, 0.993).to_string(),
            "accuracy short of its bounds: recall 0.850 is below --min-recall 0.9"
        );
        assert_eq!(
            short(0.939, 0.5).to_string(),
            "accuracy short of its bounds: precision 0.500 is below --min-precision 0.95"
        );
        assert_eq!(
            short(0.1, 0.2).to_string(),
            "accuracy short of its bounds: recall 0.100 is below --min-recall 0.9, and \
             precision 0.200 is below --min-precision 0.95"
        );
        // Three decimals that round up to the bound would read as no shortfall.
        assert_eq!(
            short(0.8996, 1.0).to_string(),
            "accuracy short of its bounds: recall 0.8996 is below --min-recall 0.9"
        );
        let boxed: Box<dyn std::error::Error> = Box::new(short(0.85, 1.0));
        assert_eq!(
            crate::error_report(boxed.as_ref()),
            "error: accuracy short of its bounds: recall 0.850 is below --min-recall 0.9\n"
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
}
