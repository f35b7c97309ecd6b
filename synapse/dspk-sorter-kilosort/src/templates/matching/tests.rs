//! Learned-template matching against its `f64` reference, on every compiled runtime.

use cubecl::client::Client;
use dspk_core::ChunkSchedule;
use dspk_core::test_util::{Rng, for_each_runtime};
use dspk_ops::{DeviceArray, DeviceWindow};

use super::reference::{self, Problem};
use super::{MatchSettings, Matcher};
use crate::Error;
use crate::runner::test_windows::{cut_window, zero_window};
use crate::spikes::MatchedSpikes;

const CHANNELS: usize = 13;
const TEMPLATES: usize = 7;
const PCS: usize = 3;
const NT: usize = 21;
const NT0MIN: usize = 7;
const NC: usize = 5;

/// Neuropixels 1.0 positions of the first `CHANNELS` contacts.
fn positions() -> Vec<[f32; 2]> {
    (0..CHANNELS)
        .map(|i| [[43.0, 11.0, 59.0, 27.0][i % 4], 20.0 * (i / 2) as f32])
        .collect()
}

/// `PCS` orthonormal random rows of `NT` samples.
fn wpca() -> Vec<f32> {
    let mut rng = Rng::new(31);
    let mut rows: Vec<Vec<f64>> = Vec::new();
    for _ in 0..PCS {
        let mut v: Vec<f64> = (0..NT).map(|_| rng.normal()).collect();
        for row in &rows {
            let dot: f64 = v.iter().zip(row).map(|(a, b)| a * b).sum();
            v.iter_mut().zip(row).for_each(|(a, b)| *a -= dot * b);
        }
        let norm = v.iter().map(|a| a * a).sum::<f64>().sqrt();
        rows.push(v.into_iter().map(|a| a / norm).collect());
    }
    rows.into_iter().flatten().map(|v| v as f32).collect()
}

/// `TEMPLATES` unit-norm templates `[N, P, C]`, template `n` nonzero on 2 to 5 channels from
/// channel `(2 n) % C` on (several share channels).
fn templates() -> Vec<f32> {
    let mut rng = Rng::new(77);
    let mut u = vec![0.0f32; TEMPLATES * PCS * CHANNELS];
    for n in 0..TEMPLATES {
        let first = (2 * n) % CHANNELS;
        let width = 2 + n % 4;
        for c in first..(first + width).min(CHANNELS) {
            for p in 0..PCS {
                u[(n * PCS + p) * CHANNELS + c] = rng.normal() as f32;
            }
        }
        let norm = u[n * PCS * CHANNELS..(n + 1) * PCS * CHANNELS]
            .iter()
            .map(|v| v * v)
            .sum::<f32>()
            .sqrt();
        u[n * PCS * CHANNELS..(n + 1) * PCS * CHANNELS]
            .iter_mut()
            .for_each(|v| *v /= norm);
    }
    u
}

/// A planted spike: template `n` times `scale` with its score column at `column`.
#[derive(Debug, Clone, Copy)]
struct Planted {
    column: usize,
    n: usize,
    scale: f32,
}

/// Spikes of every template, some overlapping in time on shared channels.
fn planted() -> Vec<Planted> {
    [
        (40, 0, 20.0),
        (52, 1, 15.0),
        (300, 2, 25.0),
        (310, 3, 18.0),
        (318, 2, 16.0),
        (640, 4, 30.0),
        (655, 5, 22.0),
        (1000, 6, 17.0),
        (1290, 1, 24.0),
        (1301, 0, 19.0),
        (1700, 3, 26.0),
        (1990, 5, 21.0),
        (2003, 6, 28.0),
        (2250, 4, 16.0),
    ]
    .into_iter()
    .map(|(column, n, scale)| Planted { column, n, scale })
    .collect()
}

/// `CHANNELS x samples` noise of standard deviation `noise` plus `spikes`.
fn recording(samples: usize, seed: u64, noise: f64, spikes: &[Planted]) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    let mut x: Vec<f32> = (0..CHANNELS * samples)
        .map(|_| (noise * rng.normal()) as f32)
        .collect();
    let (u, w) = (templates(), wpca());
    for spike in spikes {
        for c in 0..CHANNELS {
            for j in 0..NT {
                let wave: f32 = (0..PCS)
                    .map(|p| u[(spike.n * PCS + p) * CHANNELS + c] * w[p * NT + j])
                    .sum();
                x[c * samples + spike.column + j - NT / 2] += spike.scale * wave;
            }
        }
    }
    x
}

fn settings(th_learned: f32, max_peels: usize) -> MatchSettings {
    MatchSettings {
        th_learned,
        max_peels,
        nearest_chans: NC,
    }
}

fn matcher(client: &Client, settings: &MatchSettings) -> Matcher {
    Matcher::new(
        client,
        &templates(),
        TEMPLATES,
        &wpca(),
        NT,
        NT0MIN,
        &positions(),
        settings,
    )
    .unwrap()
}

/// Matches every window of `schedule` in turn with one matcher.
fn match_all(
    client: &Client,
    matcher: &mut Matcher,
    data: &[f32],
    schedule: &ChunkSchedule,
) -> MatchedSpikes {
    let mut spikes = matcher.new_spikes();
    for index in 0..schedule.len() {
        let (window, _) = cut_window(client, data, CHANNELS, schedule, index);
        matcher.match_window(client, &window, &mut spikes).unwrap();
    }
    spikes
}

/// Trough sample of score column `column`.
fn trough(column: usize) -> i64 {
    column as i64 - (NT / 2 - NT0MIN) as i64
}

/// Asserts the device's spikes (appended from `first` on) equal the reference's: the same
/// (sample, template) exactly, values within float tolerance.
fn assert_matches(
    what: &str,
    spikes: &MatchedSpikes,
    first: usize,
    start: u64,
    expected: &[reference::Spike],
) {
    let found: Vec<(i64, u32)> = (first..spikes.len())
        .map(|m| (spikes.sample[m], spikes.template[m]))
        .collect();
    let wanted: Vec<(i64, u32)> = expected
        .iter()
        .map(|e| (start as i64 + trough(e.column), e.template as u32))
        .collect();
    assert_eq!(found, wanted, "{what}: spikes (sample, template)");
    for (offset, e) in expected.iter().enumerate() {
        let m = first + offset;
        let close = |name: &str, actual: f32, wanted: f64| {
            assert!(
                (f64::from(actual) - wanted).abs() <= 1e-4 * (1.0 + wanted.abs()),
                "{what}: spike {m} {name}: {actual} vs {wanted}"
            );
        };
        close("score", spikes.score[m], e.score);
        close("scale", spikes.scale[m], e.scale);
        for (i, &wanted) in e.features.iter().enumerate() {
            close("feature", spikes.features_of(m)[i], wanted);
        }
    }
}

fn problem<'a>(
    u: &'a [f32],
    w: &'a [f32],
    positions: &'a [[f32; 2]],
    settings: &MatchSettings,
) -> Problem<'a> {
    Problem {
        templates: u,
        n_templates: TEMPLATES,
        wpca: w,
        nt: NT,
        positions,
        threshold: f64::from(settings.th_learned),
        max_peels: settings.max_peels,
        nearest_chans: settings.nearest_chans,
    }
}

#[test]
fn match_equals_reference() {
    let data = recording(2500, 1, 1.0, &planted());
    let (u, w, positions) = (templates(), wpca(), positions());
    // Window 0 owns 0..1300 and reads 0..1393; window 1 owns 1300..2500, reads 1207..2500.
    let schedule = ChunkSchedule::new(2500, 1300, 93, 93).unwrap();
    for_each_runtime(|_, client| {
        for (th, peels) in [(8.0f32, 100), (3.0, 100), (3.0, 2)] {
            let settings = settings(th, peels);
            let mut matcher = matcher(client, &settings);
            let mut spikes = matcher.new_spikes();
            let mut deepest = 0;
            for index in 0..schedule.len() {
                let (window, host) = cut_window(client, &data, CHANNELS, &schedule, index);
                let expected = reference::match_window(
                    &host,
                    window.owned_local(),
                    &problem(&u, &w, &positions, &settings),
                );
                let first = spikes.len();
                matcher.match_window(client, &window, &mut spikes).unwrap();
                let what = format!("Th {th}, {peels} peels, window {index}");
                assert_matches(&what, &spikes, first, window.start(), &expected);
                assert!(
                    expected.iter().all(|e| e.peel < peels),
                    "{what}: peel limit"
                );
                deepest = expected.iter().map(|e| e.peel).fold(deepest, usize::max);
            }
            assert!(spikes.len() >= planted().len(), "{}", spikes.len());
            assert_eq!(spikes.features.len(), spikes.len() * NC * PCS);
            // Overlapping spikes need more than one peel.
            assert!(
                deepest >= 1,
                "Th {th}, {peels} peels: one peel found everything"
            );
        }
    });
}

#[test]
fn match_recovers_planted_spikes() {
    let spikes_in = planted();
    let total = 2500;
    let data = recording(total, 2, 1.0, &spikes_in);
    let schedule = ChunkSchedule::new(total as u64, total as u64, 0, 0).unwrap();
    for_each_runtime(|_, client| {
        let mut matcher = matcher(client, &settings(8.0, 100));
        let spikes = match_all(client, &mut matcher, &data, &schedule);
        assert_eq!(spikes.len(), spikes_in.len(), "{:?}", spikes.sample);
        for planted in &spikes_in {
            let sample = trough(planted.column);
            assert!(
                (0..spikes.len()).any(|m| spikes.sample[m].abs_diff(sample) <= 1
                    && spikes.template[m] as usize == planted.n
                    && (spikes.scale[m] - planted.scale).abs() < 0.25 * planted.scale
                    && spikes.score[m] > 8.0),
                "{planted:?} not found: {:?} {:?} {:?}",
                spikes.sample,
                spikes.template,
                spikes.scale
            );
        }
        assert!(spikes.sample.windows(2).all(|p| p[0] <= p[1]));
    });
}

#[test]
fn match_respects_the_peel_limit() {
    // Two overlapping spikes of templates on the same channels: the second is found only
    // after the first is peeled.
    let spikes_in = [
        Planted {
            column: 200,
            n: 2,
            scale: 40.0,
        },
        Planted {
            column: 206,
            n: 2,
            scale: 20.0,
        },
    ];
    let data = recording(500, 3, 0.0, &spikes_in);
    let schedule = ChunkSchedule::new(500, 500, 0, 0).unwrap();
    for_each_runtime(|_, client| {
        let one = match_all(
            client,
            &mut matcher(client, &settings(8.0, 1)),
            &data,
            &schedule,
        );
        let all = match_all(
            client,
            &mut matcher(client, &settings(8.0, 100)),
            &data,
            &schedule,
        );
        assert_eq!(one.len(), 1, "{:?}", one.sample);
        assert!(all.len() >= 2, "{:?}", all.sample);
        assert!(all.sample.contains(&trough(206)), "{:?}", all.sample);
    });
}

#[test]
fn match_finds_nothing_without_spikes() {
    let total = 900u64;
    let zeros = vec![0.0f32; CHANNELS * total as usize];
    let noise = recording(total as usize, 4, 1.0, &[]);
    let schedule = ChunkSchedule::new(total, 400, 84, 84).unwrap();
    for_each_runtime(|_, client| {
        let mut matcher = matcher(client, &settings(8.0, 100));
        for data in [&zeros, &noise] {
            let spikes = match_all(client, &mut matcher, data, &schedule);
            assert!(spikes.is_empty(), "{:?}", spikes.sample);
        }
    });
}

#[test]
fn match_reports_non_finite_samples() {
    let total = 400;
    let data = recording(total, 5, 1.0, &planted()[..2]);
    let schedule = ChunkSchedule::new(total as u64, 300, 50, 50).unwrap();
    for_each_runtime(|_, client| {
        let mut matcher = matcher(client, &settings(8.0, 100));
        for (channel, sample, value) in [(5, 123, f32::NAN), (12, 320, f32::NEG_INFINITY)] {
            let mut bad = data.clone();
            bad[channel * total + sample] = value;
            // Window 0 reads 0..350: sample 320 is in its halo.
            let (window, _) = cut_window(client, &bad, CHANNELS, &schedule, 0);
            let mut spikes = matcher.new_spikes();
            match matcher.match_window(client, &window, &mut spikes) {
                Err(Error::Input { reason, .. }) => assert!(
                    reason.contains(&format!("sample {sample} of channel {channel}")),
                    "{reason}"
                ),
                other => panic!("{value} at {sample}: {other:?}"),
            }
            assert!(spikes.is_empty());
        }
    });
}

#[test]
fn match_is_the_same_for_any_cut_into_windows() {
    let total = 2500u64;
    let data = recording(total as usize, 6, 1.0, &planted());
    for_each_runtime(|_, client| {
        let settings = settings(5.0, 100);
        let whole = ChunkSchedule::new(total, total, 0, 0).unwrap();
        let expected = match_all(client, &mut matcher(client, &settings), &data, &whole);
        assert!(expected.len() >= planted().len(), "{}", expected.len());
        let mut matcher = matcher(client, &settings);
        let halo = matcher.halo() as u64;
        assert_eq!(halo, 4 * NT as u64);
        // One matcher through windows of several lengths (its buffers reused); cuts at 1300
        // and 1290..1301 fall between overlapping spikes.
        for (window, left, right) in [
            (1300, halo, halo),
            (645, halo + 7, halo),
            (1001, halo, 150),
            (300, 2 * halo, halo + 1),
        ] {
            let schedule = ChunkSchedule::new(total, window, left, right).unwrap();
            let spikes = match_all(client, &mut matcher, &data, &schedule);
            assert_eq!(
                spikes, expected,
                "windows of {window}, halos {left} and {right}"
            );
        }
    });
}

#[test]
fn match_channels_are_nearest_the_best_channel() {
    for_each_runtime(|_, client| {
        let matcher = matcher(client, &settings(8.0, 100));
        let channels = matcher.channels();
        assert_eq!((channels.len(), channels.nc), (TEMPLATES, NC));
        let (u, positions) = (templates(), positions());
        for n in 0..TEMPLATES {
            let energy = |c: usize| -> f32 {
                (0..PCS)
                    .map(|p| u[(n * PCS + p) * CHANNELS + c].powi(2))
                    .sum()
            };
            let of = channels.of(n);
            let best = of[0] as usize;
            assert!(
                (0..CHANNELS).all(|c| energy(c) <= energy(best)),
                "template {n}"
            );
            let d2 = |c: u32| {
                let ([x, y], [x0, y0]) = (positions[c as usize], positions[best]);
                (x - x0).powi(2) + (y - y0).powi(2)
            };
            assert!(
                of.windows(2).all(|p| d2(p[0]) <= d2(p[1])),
                "template {n}: {of:?}"
            );
            let farther = (0..CHANNELS as u32).filter(|c| !of.contains(c));
            assert!(farther.into_iter().all(|c| d2(c) >= d2(of[NC - 1])));
        }
    });
}

#[test]
fn match_rejects_bad_inputs() {
    for_each_runtime(|_, client| {
        let (u, w, positions) = (templates(), wpca(), positions());
        let new = |u: &[f32], n: usize, nt: usize, s: &MatchSettings| {
            Matcher::new(client, u, n, &w[..PCS * nt], nt, NT0MIN, &positions, s)
        };
        let good = settings(8.0, 100);
        assert!(matches!(
            new(&u, TEMPLATES, NT, &settings(0.0, 100)),
            Err(Error::Setting { .. })
        ));
        assert!(matches!(
            new(&u, TEMPLATES, NT, &settings(f32::NAN, 100)),
            Err(Error::Setting { .. })
        ));
        assert!(matches!(
            new(&u, TEMPLATES, NT, &settings(8.0, 0)),
            Err(Error::Setting { .. })
        ));
        assert!(matches!(
            new(&u[1..], TEMPLATES, NT, &good),
            Err(Error::Input { .. })
        ));
        assert!(matches!(
            new(&u, TEMPLATES, NT - 1, &good),
            Err(Error::Input { .. })
        ));
        let mut zero = u.clone();
        zero[PCS * CHANNELS..2 * PCS * CHANNELS].fill(0.0);
        assert!(matches!(
            new(&zero, TEMPLATES, NT, &good),
            Err(Error::Input { .. })
        ));
        let mut nan = u.clone();
        nan[5] = f32::NAN;
        assert!(matches!(
            new(&nan, TEMPLATES, NT, &good),
            Err(Error::Input { .. })
        ));

        let mut matcher = new(&u, TEMPLATES, NT, &good).unwrap();
        let window = zero_window(client, CHANNELS + 1, 100);
        let mut spikes = matcher.new_spikes();
        assert!(matches!(
            matcher.match_window(client, &window, &mut spikes),
            Err(Error::Input { .. })
        ));
        let window = zero_window(client, CHANNELS, 100);
        let mut other = MatchedSpikes::new(NC, PCS + 1);
        other.sample.push(0);
        assert!(matches!(
            matcher.match_window(client, &window, &mut other),
            Err(Error::Input { .. })
        ));
    });
}

#[test]
fn match_subtracts_tied_peaks_in_column_order() {
    // A constant input scores exactly the same at every column where a template fits: every
    // such column is a peak of the first peel, each within `nt` of the next, so every sample
    // is covered by many subtractions at once (the residual features check them).
    let total = 400;
    let data = vec![4.0f32; CHANNELS * total];
    let (u, w, positions) = (templates(), wpca(), positions());
    let schedule = ChunkSchedule::new(total as u64, total as u64, 0, 0).unwrap();
    for_each_runtime(|_, client| {
        let one = settings(3.0, 1);
        let (window, host) = cut_window(client, &data, CHANNELS, &schedule, 0);
        let expected = reference::match_window(
            &host,
            window.owned_local(),
            &problem(&u, &w, &positions, &one),
        );
        assert_eq!(expected.len(), total - (NT - 1), "every column ties");
        let mut spikes = MatchedSpikes::default();
        matcher(client, &one)
            .match_window(client, &window, &mut spikes)
            .unwrap();
        assert_matches("ties", &spikes, 0, 0, &expected);

        let more = settings(3.0, 4);
        let mut matcher = matcher(client, &more);
        let mut first = MatchedSpikes::default();
        matcher.match_window(client, &window, &mut first).unwrap();
        let mut again = MatchedSpikes::default();
        matcher.match_window(client, &window, &mut again).unwrap();
        let expected = reference::match_window(
            &host,
            window.owned_local(),
            &problem(&u, &w, &positions, &more),
        );
        assert_matches("ties, 4 peels", &first, 0, 0, &expected);
        assert_eq!(first, again, "the same window twice");
    });
}

/// Time per window at Kilosort4's size: NP1.0 (383 channels), 400 learned templates nonzero on
/// 12 to 19 channels each, 6 PCs of 61 samples, 60 000 owned samples and the halo, noise with
/// 3000 planted spikes. Ignored (far too slow on a software renderer); run on a GPU with
/// `cargo test --release -p dspk-sorter-kilosort --lib -- --ignored match_timing --nocapture`.
#[test]
#[ignore]
fn match_timing_np1_window() {
    let positions: Vec<[f32; 2]> = (0..384usize)
        .filter(|&i| i != 191)
        .map(|i| [[43.0, 11.0, 59.0, 27.0][i % 4], 20.0 * (i / 2) as f32])
        .collect();
    let (channels, n_templates, pcs, nt) = (positions.len(), 400, 6, 61);
    let mut rng = Rng::new(12);
    let wpca: Vec<f32> = (0..pcs * nt).map(|_| (rng.normal() / 8.0) as f32).collect();
    let mut u = vec![0.0f32; n_templates * pcs * channels];
    for n in 0..n_templates {
        let first = n * (channels - 20) / n_templates;
        for c in first..first + 12 + n % 8 {
            for p in 0..pcs {
                u[(n * pcs + p) * channels + c] = rng.normal() as f32;
            }
        }
    }
    let settings = MatchSettings::default();
    let schedule = ChunkSchedule::new(60_000 + 244, 60_000, 244, 244).unwrap();
    let total = 60_000 + 244;
    let mut data: Vec<f32> = (0..channels * total).map(|_| rng.normal() as f32).collect();
    for spike in 0..3000 {
        let (n, column) = (spike * 37 % n_templates, 100 + spike * 19);
        for c in 0..channels {
            for j in 0..nt {
                let wave: f32 = (0..pcs)
                    .map(|p| u[(n * pcs + p) * channels + c] * wpca[p * nt + j])
                    .sum();
                data[c * total + column + j - nt / 2] += 2.0 * wave;
            }
        }
    }
    for_each_runtime(|target, client| {
        let started = std::time::Instant::now();
        let mut matcher = Matcher::new(
            client,
            &u,
            n_templates,
            &wpca,
            nt,
            20,
            &positions,
            &settings,
        )
        .unwrap();
        eprintln!(
            "match_timing runtime={target} setup_ms={:.1}",
            started.elapsed().as_secs_f64() * 1e3
        );
        let halo_window = schedule.window(0).unwrap();
        let array = DeviceArray::from_host(client, &data, channels, total).unwrap();
        let window = DeviceWindow::new(array, halo_window).unwrap();
        for rep in 0..5 {
            let mut spikes = matcher.new_spikes();
            let started = std::time::Instant::now();
            matcher.match_window(client, &window, &mut spikes).unwrap();
            eprintln!(
                "match_timing runtime={target} rep={rep} channels={channels} \
                 templates={n_templates} samples={total} spikes={} ms={:.3}",
                spikes.len(),
                started.elapsed().as_secs_f64() * 1e3
            );
        }
    });
}
