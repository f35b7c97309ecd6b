//! Universal-template detection against its `f64` reference, on every compiled runtime.

use cubecl::client::Client;
use dspk_core::ChunkSchedule;
use dspk_core::test_util::{Rng, for_each_runtime};
use dspk_ops::{DeviceArray, DeviceWindow};

use super::reference;
use super::{DetectedSpikes, UniversalDetector};
use crate::Error;
use crate::detection::centres::{CentreSettings, TemplateCentres, template_centres};
use crate::detection::universal::UniversalTemplates;
use crate::runner::test_windows::{cut_window, zero_window};

const CHANNELS: usize = 13;
const NT: usize = 41;
const NT0MIN: usize = 13;

/// Neuropixels 1.0 positions of the first `CHANNELS` contacts.
fn positions() -> Vec<[f32; 2]> {
    (0..CHANNELS)
        .map(|i| [[43.0, 11.0, 59.0, 27.0][i % 4], 20.0 * (i / 2) as f32])
        .collect()
}

/// 52 centres with 7 channels, 11 neighbours and 3 sizes each.
fn centres() -> TemplateCentres {
    let settings = CentreSettings {
        nearest_chans: 7,
        nearest_templates: 11,
        template_sizes: 3,
        ..CentreSettings::default()
    };
    template_centres(&positions(), &[0; CHANNELS], &settings).unwrap()
}

/// 4 trough-first shapes of different widths and 3 random components, `NT` samples each,
/// unit L2 norm.
fn templates() -> UniversalTemplates {
    let unit = |row: Vec<f32>| {
        let norm = row.iter().map(|v| v * v).sum::<f32>().sqrt();
        row.into_iter().map(|v| v / norm).collect::<Vec<f32>>()
    };
    let mut wtemp = Vec::new();
    for width in [1.5f32, 2.5, 4.0, 6.0] {
        wtemp.extend(unit(
            (0..NT)
                .map(|j| {
                    let d = j as f32 - NT0MIN as f32;
                    -(-(d / width).powi(2)).exp()
                        + 0.3 * (-((d - 2.0 * width) / (2.0 * width)).powi(2)).exp()
                })
                .collect(),
        ));
    }
    let mut rng = Rng::new(17);
    let mut wpca = Vec::new();
    for _ in 0..3 {
        wpca.extend(unit((0..NT).map(|_| rng.normal() as f32).collect()));
    }
    UniversalTemplates::new(NT, NT0MIN, wtemp, wpca).unwrap()
}

/// A spike added to the data: template `k` times `amplitude` starting at sample `start` on
/// channels near `channel` (Gaussian fall-off, 20 um).
struct Injected {
    start: usize,
    channel: usize,
    k: usize,
    amplitude: f32,
}

/// `CHANNELS x samples` unit Gaussian noise plus `spikes`.
fn recording(samples: usize, seed: u64, spikes: &[Injected]) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    let mut x: Vec<f32> = (0..CHANNELS * samples)
        .map(|_| rng.normal() as f32)
        .collect();
    let (templates, positions) = (templates(), positions());
    for spike in spikes {
        let [x0, y0] = positions[spike.channel];
        for (c, [xc, yc]) in positions.iter().enumerate() {
            let d2 = (xc - x0).powi(2) + (yc - y0).powi(2);
            let gain = spike.amplitude * (-d2 / (2.0 * 20.0 * 20.0)).exp();
            for j in 0..NT {
                let s = spike.start + j;
                if s < samples {
                    x[c * samples + s] += gain * templates.wtemp()[spike.k * NT + j];
                }
            }
        }
    }
    x
}

/// Spikes of both signs, two of them across the 777-sample cuts of the window test.
fn injected() -> Vec<Injected> {
    [
        (5, 0, 0, 40.0),
        (300, 6, 1, -35.0),
        (760, 12, 2, 50.0),
        (1540, 3, 3, -45.0),
        (1553, 9, 0, 30.0),
        (1960, 7, 1, -60.0),
    ]
    .into_iter()
    .map(|(start, channel, k, amplitude)| Injected {
        start,
        channel,
        k,
        amplitude,
    })
    .collect()
}

fn detector(client: &Client, threshold: f32) -> UniversalDetector {
    UniversalDetector::new(
        client,
        CHANNELS,
        &positions(),
        &centres(),
        &templates(),
        threshold,
    )
    .unwrap()
}

/// Detects every window of `schedule` in turn with one detector.
fn detect_all(
    client: &Client,
    detector: &mut UniversalDetector,
    data: &[f32],
    schedule: &ChunkSchedule,
) -> DetectedSpikes {
    let mut spikes = detector.new_spikes();
    for index in 0..schedule.len() {
        let (window, _) = cut_window(client, data, CHANNELS, schedule, index);
        detector.detect(client, &window, &mut spikes).unwrap();
    }
    spikes
}

/// Asserts the device's spikes (appended from `first` on) equal the reference's: the same
/// (sample, centre, combo, sign) exactly, values within float tolerance.
fn assert_matches(
    what: &str,
    spikes: &DetectedSpikes,
    first: usize,
    start: u64,
    expected: &[reference::Spike],
) {
    let found: Vec<(u64, u32, u16, i8)> = (first..spikes.len())
        .map(|m| {
            (
                spikes.sample[m],
                spikes.centre[m],
                spikes.combo[m],
                spikes.sign[m],
            )
        })
        .collect();
    let wanted: Vec<(u64, u32, u16, i8)> = expected
        .iter()
        .map(|e| {
            (
                start + e.column as u64,
                e.centre as u32,
                e.combo as u16,
                e.sign,
            )
        })
        .collect();
    assert_eq!(
        found, wanted,
        "{what}: spikes (sample, centre, combo, sign)"
    );
    let block = spikes.nc() * spikes.p();
    for (offset, e) in expected.iter().enumerate() {
        let m = first + offset;
        let close = |name: &str, actual: f32, wanted: f64, tol: f64| {
            assert!(
                (f64::from(actual) - wanted).abs() <= tol * (1.0 + wanted.abs()),
                "{what}: spike {m} {name}: {actual} vs {wanted}"
            );
        };
        close("amplitude", spikes.amplitude[m], e.amplitude, 1e-5);
        close("x", spikes.x[m], e.x, 1e-5);
        close("depth", spikes.depth[m], e.depth, 1e-5);
        for (i, &wanted) in e.features.iter().enumerate() {
            close("feature", spikes.features[m * block + i], wanted, 1e-5);
        }
    }
}

#[test]
fn detect_matches_reference() {
    let data = recording(3000, 1, &injected());
    // Window 0 owns 0..1901 of 0..1962; window 1 owns 37..1136 of its 1136 samples.
    let schedule = ChunkSchedule::new(3000, 1901, 37, 61).unwrap();
    for_each_runtime(|_, client| {
        for threshold in [9.0f32, 3.5] {
            let mut detector = detector(client, threshold);
            let mut spikes = detector.new_spikes();
            for index in 0..schedule.len() {
                let (window, host) = cut_window(client, &data, CHANNELS, &schedule, index);
                let expected = reference::detect(
                    &host,
                    CHANNELS,
                    window.owned_local(),
                    &positions(),
                    &centres(),
                    &templates(),
                    f64::from(threshold),
                );
                let first = spikes.len();
                detector.detect(client, &window, &mut spikes).unwrap();
                let what = format!("threshold {threshold}, window {index}");
                assert_matches(&what, &spikes, first, window.start(), &expected);
                assert!(
                    spikes.sample[first..]
                        .iter()
                        .all(|s| window.window().valid().contains(s)),
                    "{what}: a spike outside the owned samples"
                );
            }
            assert!(spikes.sign.contains(&1) && spikes.sign.contains(&-1));
            assert_eq!(spikes.features.len(), spikes.len() * 7 * 3);
        }
    });
}

#[test]
fn detect_finds_injected_spikes_of_both_signs() {
    let spikes_in = injected();
    let total = 2100;
    let data = recording(total, 2, &spikes_in);
    let schedule = ChunkSchedule::new(total as u64, total as u64, 0, 0).unwrap();
    for_each_runtime(|_, client| {
        let spikes = detect_all(client, &mut detector(client, 9.0), &data, &schedule);
        // The score column of a spike starting at `start` is `start + nt / 2`.
        for spike in &spikes_in {
            let column = (spike.start + NT / 2) as u64;
            let sign = if spike.amplitude < 0.0 { -1 } else { 1 };
            assert!(
                (0..spikes.len()).any(|m| spikes.sample[m].abs_diff(column) <= 2
                    && spikes.sign[m] == sign
                    && spikes.amplitude[m] > 20.0),
                "no spike near column {column} with sign {sign}: {:?}",
                spikes.sample
            );
        }
        for &sample in &spikes.sample {
            assert!(
                spikes_in
                    .iter()
                    .any(|s| sample.abs_diff((s.start + NT / 2) as u64) <= NT as u64),
                "spike at {sample} far from every injected spike"
            );
        }
    });
}

#[test]
fn detect_is_the_same_for_any_cut_into_windows() {
    let total = 1999u64;
    let data = recording(total as usize, 3, &injected());
    for_each_runtime(|_, client| {
        let whole = ChunkSchedule::new(total, total, 0, 0).unwrap();
        let expected = detect_all(client, &mut detector(client, 3.5), &data, &whole);
        assert!(expected.len() > 10, "{} spikes", expected.len());
        let mut detector = detector(client, 3.5);
        let halo = detector.halo() as u64;
        assert_eq!(halo, (NT / 2 + NT0MIN) as u64);
        // One detector through windows of several lengths (its buffers reused).
        for (window, left, right) in [(777, halo, halo), (500, halo + 3, halo), (1201, halo, 99)] {
            let schedule = ChunkSchedule::new(total, window, left, right).unwrap();
            let spikes = detect_all(client, &mut detector, &data, &schedule);
            assert_eq!(
                spikes, expected,
                "windows of {window}, halos {left} and {right}"
            );
        }
    });
}

#[test]
fn detect_reports_non_finite_samples() {
    let total = 400;
    let data = recording(total, 4, &[]);
    let schedule = ChunkSchedule::new(total as u64, 300, 50, 50).unwrap();
    for_each_runtime(|_, client| {
        let mut detector = detector(client, 3.5);
        for (channel, sample, value) in [(5, 123, f32::NAN), (12, 320, f32::INFINITY)] {
            let mut bad = data.clone();
            bad[channel * total + sample] = value;
            // Window 0 reads 0..350: sample 320 is in its halo.
            let (window, _) = cut_window(client, &bad, CHANNELS, &schedule, 0);
            let mut spikes = detector.new_spikes();
            let result = detector.detect(client, &window, &mut spikes);
            match result {
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
fn detect_finds_nothing_in_zeros() {
    let total = 500u64;
    let data = vec![0.0f32; CHANNELS * total as usize];
    let schedule = ChunkSchedule::new(total, 250, 50, 50).unwrap();
    for_each_runtime(|_, client| {
        let spikes = detect_all(client, &mut detector(client, 0.001), &data, &schedule);
        assert!(spikes.is_empty(), "{:?}", spikes.sample);
    });
}

#[test]
fn detect_grows_past_its_first_spike_capacity() {
    // A constant input scores the same at every column away from the ends: each centre that
    // beats its neighbours fires at every one of them (more than the 4096 first slots).
    let total = 1500;
    let data = vec![10.0f32; CHANNELS * total];
    let schedule = ChunkSchedule::new(total as u64, total as u64, 0, 0).unwrap();
    for_each_runtime(|_, client| {
        let mut detector = detector(client, 1.0);
        let (window, host) = cut_window(client, &data, CHANNELS, &schedule, 0);
        let expected = reference::detect(
            &host,
            CHANNELS,
            window.owned_local(),
            &positions(),
            &centres(),
            &templates(),
            1.0,
        );
        assert!(expected.len() > 4096, "{}", expected.len());
        let mut spikes = detector.new_spikes();
        detector.detect(client, &window, &mut spikes).unwrap();
        assert_matches("constant input", &spikes, 0, 0, &expected);
    });
}

#[test]
fn detect_rejects_mismatched_shapes() {
    for_each_runtime(|_, client| {
        let (positions, centres, templates) = (positions(), centres(), templates());
        let new = |channels, threshold| {
            UniversalDetector::new(
                client, channels, &positions, &centres, &templates, threshold,
            )
        };
        assert!(matches!(new(CHANNELS - 1, 9.0), Err(Error::Input { .. })));
        assert!(matches!(new(CHANNELS, 0.0), Err(Error::Setting { .. })));
        assert!(matches!(
            new(CHANNELS, f32::NAN),
            Err(Error::Setting { .. })
        ));
        let mut detector = new(CHANNELS, 9.0).unwrap();
        let window = zero_window(client, CHANNELS + 1, 100);
        let mut spikes = detector.new_spikes();
        assert!(matches!(
            detector.detect(client, &window, &mut spikes),
            Err(Error::Input { .. })
        ));
        let window = zero_window(client, CHANNELS, 100);
        // Empty spikes of any shape take the detector's; others must have it.
        let mut spikes = DetectedSpikes::default();
        detector.detect(client, &window, &mut spikes).unwrap();
        assert_eq!((spikes.nc(), spikes.p()), (7, 3));
        let mut other = DetectedSpikes::new(7, 4);
        other.sample.push(0);
        assert!(matches!(
            detector.detect(client, &window, &mut other),
            Err(Error::Input { .. })
        ));
    });
}

#[test]
fn detect_breaks_ties_as_specified() {
    // One channel per centre: every size weighs it by 1, so all sizes tie (the first, s = 0,
    // wins) and centres sharing a nearest channel score the same (all of them fire).
    // Templates 0 and 1 are one shape: k = 0 wins.
    let settings = CentreSettings {
        nearest_chans: 1,
        nearest_templates: 11,
        template_sizes: 3,
        ..CentreSettings::default()
    };
    let centres = template_centres(&positions(), &[0; CHANNELS], &settings).unwrap();
    let base = templates();
    let mut wtemp = base.wtemp().to_vec();
    wtemp.copy_within(0..NT, NT);
    let templates = UniversalTemplates::new(NT, NT0MIN, wtemp, base.wpca().to_vec()).unwrap();
    let total = 2100;
    let data = recording(total, 5, &injected());
    let schedule = ChunkSchedule::new(total as u64, total as u64, 0, 0).unwrap();
    for_each_runtime(|_, client| {
        let mut detector =
            UniversalDetector::new(client, CHANNELS, &positions(), &centres, &templates, 9.0)
                .unwrap();
        let (window, host) = cut_window(client, &data, CHANNELS, &schedule, 0);
        let expected = reference::detect(
            &host,
            CHANNELS,
            window.owned_local(),
            &positions(),
            &centres,
            &templates,
            9.0,
        );
        let mut spikes = detector.new_spikes();
        detector.detect(client, &window, &mut spikes).unwrap();
        assert_matches("ties", &spikes, 0, 0, &expected);
        assert!(spikes.combo.iter().all(|&combo| combo < 4 && combo != 1));
        assert!(spikes.combo.contains(&0));
        assert!(
            spikes.sample.windows(2).any(|pair| pair[0] == pair[1]),
            "no two centres fired together: {:?}",
            spikes.sample
        );
    });
}

/// Time per window at Kilosort4's size: NP1.0 (383 channels, 1532 centres, 10 channels and 100
/// neighbours each, 5 sizes, 6 templates of 61 samples, 6 PCs), 60 000 owned samples and a
/// halo, noise with a few hundred spikes. Ignored (minutes on a software renderer); run on a
/// GPU with `cargo test --release -- --ignored detect_timing --nocapture`.
#[test]
#[ignore]
fn detect_timing_np1_window() {
    let probe_channels: usize = std::env::var("DSPK_TIMING_CHANNELS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(384);
    let positions: Vec<[f32; 2]> = (0..probe_channels)
        .filter(|&i| i != 191)
        .map(|i| [[43.0, 11.0, 59.0, 27.0][i % 4], 20.0 * (i / 2) as f32])
        .collect();
    let channels = positions.len();
    let centres =
        template_centres(&positions, &vec![0; channels], &CentreSettings::default()).unwrap();
    let mut rng = Rng::new(9);
    let row = |rng: &mut Rng| -> Vec<f32> {
        let v: Vec<f32> = (0..61).map(|_| rng.normal() as f32).collect();
        let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt();
        v.into_iter().map(|a| a / norm).collect()
    };
    let wtemp: Vec<f32> = (0..6).flat_map(|_| row(&mut rng)).collect();
    let wpca: Vec<f32> = (0..6).flat_map(|_| row(&mut rng)).collect();
    let templates = UniversalTemplates::new(61, 20, wtemp, wpca).unwrap();
    // Window 0 owns samples 0..60 000 and reads 0..60 050.
    let total = 60_050usize;
    let mut data: Vec<f32> = (0..channels * total).map(|_| rng.normal() as f32).collect();
    for spike in 0..600 {
        let (c, start) = (spike * 37 % channels, 100 + spike * 97);
        for j in 0..61 {
            data[c * total + start + j] += 40.0 * templates.wtemp()[(spike % 6) * 61 + j];
        }
    }
    let schedule = ChunkSchedule::new(total as u64, 60_000, 50, 50).unwrap();
    for_each_runtime(|target, client| {
        let mut detector =
            UniversalDetector::new(client, channels, &positions, &centres, &templates, 9.0)
                .unwrap();
        let halo_window = schedule.window(0).unwrap();
        let array = DeviceArray::from_host(client, &data, channels, total).unwrap();
        let window = DeviceWindow::new(array, halo_window).unwrap();
        for rep in 0..5 {
            let mut spikes = detector.new_spikes();
            let started = std::time::Instant::now();
            detector.detect(client, &window, &mut spikes).unwrap();
            eprintln!(
                "detect_timing runtime={target} rep={rep} channels={channels} centres={} \
                 samples={total} spikes={} ms={:.3}",
                centres.count(),
                spikes.len(),
                started.elapsed().as_secs_f64() * 1e3
            );
        }
        for rep in 0..3 {
            let [project, score, select, features] = detector.stage_times(client, &window).unwrap();
            eprintln!(
                "detect_stages runtime={target} rep={rep} project_ms={project:.3} \
                 score_ms={score:.3} select_ms={select:.3} features_ms={features:.3}"
            );
        }
    });
}
