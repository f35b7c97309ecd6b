//! The front half of the sort (preprocessing fit, universal templates, drift, detection) on
//! small ground-truth recordings, on every runtime compiled in: the same spikes whichever way
//! the recording reaches the device, whatever the window length, with or without residency;
//! drift against the true motion; bad input.

use std::sync::Arc;

use cubecl::client::Client;
use dspk_core::test_util::for_each_runtime;
use dspk_core::{RecordingSource, ScaledOnly};
use dspk_sorter_kilosort::spikes::DetectedSpikes;
use dspk_sorter_kilosort::{Error, FrontHalf, Kilosort4, KilosortSettings, RunOptions, SortProbe};
use dspk_synapse::groundtruth::{Drift, GroundTruthRecording};

mod common;

use common::{Altered, probe_of, settings, sized};

/// 32 channels, `seconds` s, 8 units.
fn recording(seconds: u64, drift: Drift) -> GroundTruthRecording {
    sized(32, seconds * 30_000, 8, drift)
}

fn run(
    client: &Client,
    source: Arc<dyn RecordingSource>,
    probe: &SortProbe,
    settings: &KilosortSettings,
    window: Option<u64>,
) -> dspk_sorter_kilosort::Result<FrontHalf> {
    let options = RunOptions {
        window,
        ..RunOptions::default()
    };
    Kilosort4::new(settings.clone())
        .with_options(options)
        .run_front(client, source, probe, &mut |_| {})
}

/// Every spike's identity and the bits of its values.
fn bits(spikes: &DetectedSpikes) -> Vec<(u64, u32, u32, Vec<u32>)> {
    let per = spikes.features.len() / spikes.len().max(1);
    (0..spikes.len())
        .map(|i| {
            (
                spikes.sample[i],
                spikes.centre[i],
                spikes.amplitude[i].to_bits(),
                spikes.features[i * per..(i + 1) * per]
                    .iter()
                    .map(|v| v.to_bits())
                    .collect(),
            )
        })
        .collect()
}

/// The int16 recording uploaded as stored integers and through `ScaledOnly` (scaled f32
/// uploads) gives the same spikes (sample, centre, combination), drift correction included.
/// Their values agree to float rounding, not bit for bit: the device unpack computes
/// `stored * gain + offset` in f32 (the gain rounded to f32, the runtime free to fuse), the
/// host in f64 rounded once, so a sample can differ by one unit in the last place (measured on
/// lavapipe: 2.0e-5 of a spike's largest feature after drift correction).
#[test]
fn stored_upload_matches_f32_upload() {
    for_each_runtime(|target, client| {
        let rec = recording(4, Drift::Linear { total_um: 10.0 });
        let probe = probe_of(&rec);
        let stored = run(client, Arc::new(rec.clone()), &probe, &settings(1), None).unwrap();
        let scaled = run(
            client,
            Arc::new(ScaledOnly(rec)),
            &probe,
            &settings(1),
            None,
        )
        .unwrap();
        let (a, b) = (&stored.spikes, &scaled.spikes);
        assert!(a.len() > 50, "{target}: {} spikes", a.len());
        assert_eq!(identities(a), identities(b), "{target}: spikes");
        let worst = worst_difference(a, b);
        println!("{target}: {} spikes, values within {worst:e}", a.len());
        assert!(worst < 1e-4, "{target}: values differ by {worst:e}");
    });
}

/// Whether every amplitude and feature is finite.
fn finite(spikes: &DetectedSpikes) -> bool {
    spikes
        .amplitude
        .iter()
        .chain(&spikes.features)
        .all(|v| v.is_finite())
}

/// Each spike's sample, centre and template combination.
fn identities(spikes: &DetectedSpikes) -> Vec<(u64, u32, u16)> {
    (0..spikes.len())
        .map(|i| (spikes.sample[i], spikes.centre[i], spikes.combo[i]))
        .collect()
}

/// The largest difference of amplitudes (relative) and features (relative to the spike's
/// largest feature) between two lists of the same spikes.
fn worst_difference(a: &DetectedSpikes, b: &DetectedSpikes) -> f32 {
    let per = a.features.len() / a.len().max(1);
    (0..a.len())
        .map(|i| {
            let amplitude = ((a.amplitude[i] - b.amplitude[i]) / b.amplitude[i]).abs();
            let fb = &b.features[i * per..(i + 1) * per];
            let scale = fb.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let feature = a.features[i * per..(i + 1) * per]
                .iter()
                .zip(fb)
                .map(|(x, y)| (x - y).abs() / scale)
                .fold(0.0f32, f32::max);
            amplitude.max(feature)
        })
        .fold(0.0, f32::max)
}

/// Residency on, off and within a budget that holds part of the recording give the same
/// spikes; on, every pass after the first reads nothing from the host and serves every window
/// from device memory; within the budget, later passes serve the first windows from device
/// memory and read only the rest.
#[test]
fn residency_gives_the_same_spikes_and_reads_the_recording_once() {
    for_each_runtime(|target, client| {
        let rec = Arc::new(recording(4, Drift::Linear { total_um: 10.0 }));
        let probe = probe_of(&rec);
        let mut off = settings(1);
        off.resident_bytes = Some(0);
        let mut on = settings(1);
        on.resident_bytes = Some(u64::MAX);
        let streamed = run(client, rec.clone(), &probe, &off, None).unwrap();
        let resident = run(client, rec.clone(), &probe, &on, None).unwrap();
        assert_eq!(bits(&streamed.spikes), bits(&resident.spikes), "{target}");
        let passes: Vec<_> = resident
            .stages
            .iter()
            .filter(|s| s.pass.windows > 0)
            .collect();
        assert_eq!(passes.len(), 3, "{target}: fit, drift detection, detection");
        let first = &passes[0].pass;
        assert_eq!(first.resident_windows, 0);
        // Every sample at least once (halos overlap), as int16.
        assert!(
            first.read_bytes >= 32 * 2 * 4 * 30_000,
            "{target}: {}",
            first.read_bytes
        );
        assert_eq!(first.read_bytes, first.uploaded_bytes);
        for stage in &passes[1..] {
            assert_eq!(stage.pass.read_bytes, 0, "{target}: {}", stage.pass.name);
            assert_eq!(
                stage.pass.uploaded_bytes, 0,
                "{target}: {}",
                stage.pass.name
            );
            assert_eq!(stage.pass.resident_windows, stage.pass.windows);
        }
        let mut part = settings(1);
        part.resident_bytes = Some(first.read_bytes / 2);
        let partial = run(client, rec.clone(), &probe, &part, None).unwrap();
        assert_eq!(bits(&partial.spikes), bits(&resident.spikes), "{target}");
        let total = first.windows;
        for stage in partial.stages.iter().filter(|s| s.pass.windows > 0).skip(1) {
            let pass = &stage.pass;
            assert!(
                pass.read_bytes < first.read_bytes,
                "{target}: {} read {}",
                pass.name,
                pass.read_bytes
            );
            if pass.windows == total {
                assert!(
                    pass.resident_windows > 0 && pass.resident_windows < pass.windows,
                    "{target}: {} kept {} of {}",
                    pass.name,
                    pass.resident_windows,
                    pass.windows
                );
                assert!(pass.read_bytes > 0, "{target}: {}", pass.name);
            }
        }
        for stage in streamed.stages.iter().filter(|s| s.pass.windows > 0) {
            assert_eq!(
                stage.pass.resident_windows, 0,
                "{target}: {}",
                stage.pass.name
            );
            assert!(stage.pass.read_bytes > 0);
        }
    });
}

/// With drift correction off the spikes are the same for windows of 30 000, 60 000 and
/// 111 111 samples (the whitening and templates are fitted over batches in recording time).
#[test]
fn spikes_do_not_depend_on_the_window_length() {
    for_each_runtime(|target, client| {
        let rec = Arc::new(recording(5, Drift::None));
        let probe = probe_of(&rec);
        let key = |f: &FrontHalf| -> Vec<(u64, u32, u16)> {
            let s = &f.spikes;
            (0..s.len())
                .map(|i| (s.sample[i], s.centre[i], s.combo[i]))
                .collect()
        };
        let base = run(client, rec.clone(), &probe, &settings(0), Some(30_000)).unwrap();
        assert!(base.spikes.len() > 50, "{target}");
        for window in [60_000, 111_111] {
            let other = run(client, rec.clone(), &probe, &settings(0), Some(window)).unwrap();
            assert_eq!(key(&other), key(&base), "{target}: window {window}");
            for (a, b) in other.spikes.amplitude.iter().zip(&base.spikes.amplitude) {
                assert!(
                    (a - b).abs() <= 1e-4 * b.abs(),
                    "{target}: window {window}: {a} vs {b}"
                );
            }
        }
    });
}

/// Rigid drift on a recording whose units move 30 µm: the estimated shift of every batch
/// within 3 µm of the truth, `dshift(b) = -(displacement(b) - displacement(reference))`.
#[test]
fn rigid_drift_follows_the_true_motion() {
    for_each_runtime(|target, client| {
        let rec = recording(8, Drift::Linear { total_um: 30.0 });
        let truth: Vec<f64> = (0..8).map(|b| rec.drift_um(b * 30_000 + 15_000)).collect();
        let probe = probe_of(&rec);
        let front = run(client, Arc::new(rec), &probe, &settings(1), None).unwrap();
        let drift = front.drift.unwrap();
        let reference = 4; // min(300, batches / 2)
        for (b, &shift) in drift.dshift().iter().enumerate() {
            let expected = -(truth[b] - truth[reference]);
            assert!(
                (shift - expected).abs() <= 3.0,
                "{target}: batch {b}: {shift} um, truth {expected} um ({:?})",
                drift.dshift()
            );
        }
    });
}

/// Batches without spikes (every channel flat) get no drift shift; the others keep theirs.
#[test]
fn a_flat_stretch_gets_no_shift() {
    for_each_runtime(|target, client| {
        let rec = recording(6, Drift::Linear { total_um: 20.0 });
        let probe = probe_of(&rec);
        let flat = Altered {
            inner: rec,
            channels: 0..32,
            samples: 60_000..120_000,
            value: 0.0,
        };
        let front = run(client, Arc::new(flat), &probe, &settings(1), None).unwrap();
        let drift = front.drift.unwrap();
        let counts = drift.spike_counts();
        assert_eq!(&counts[2..4], &[0, 0], "{target}: {counts:?}");
        assert_eq!(
            &drift.dshift()[2..4],
            &[0.0, 0.0],
            "{target}: {:?}",
            drift.dshift()
        );
        assert!(
            front
                .spikes
                .sample
                .iter()
                .all(|s| !(60_100..119_900).contains(s)),
            "{target}"
        );
    });
}

/// Bad input: a clear error, or a documented result; never a panic or NaN output.
#[test]
fn bad_input_is_an_error_or_a_documented_result() {
    for_each_runtime(|target, client| {
        let rec = recording(2, Drift::None);
        let probe = probe_of(&rec);

        // NaN samples: an error naming the channel and sample (or the covariance).
        let nan = Altered {
            inner: rec.clone(),
            channels: 5..6,
            samples: 45_000..45_010,
            value: f32::NAN,
        };
        let e = run(client, Arc::new(nan), &probe, &settings(0), None).unwrap_err();
        assert!(matches!(e, Error::Input { .. }), "{target}: {e}");
        assert!(e.to_string().contains("NaN or infinite"), "{target}: {e}");

        // A dead (all-zero) channel: sorted, nothing non-finite.
        let dead = Altered {
            inner: rec.clone(),
            channels: 7..8,
            samples: 0..60_000,
            value: 0.0,
        };
        let front = run(client, Arc::new(dead), &probe, &settings(0), None).unwrap();
        assert!(
            front.fit.whitening.dense().iter().all(|v| v.is_finite()),
            "{target}"
        );
        assert!(finite(&front.spikes), "{target}");
        assert!(!front.spikes.is_empty(), "{target}");

        // Shorter than one window (1 s of a 2 s batch): one window, sorted.
        let short = recording(1, Drift::None);
        let mut long_batch = settings(1);
        long_batch.batch_size = 60_000;
        let front = run(client, Arc::new(short.clone()), &probe, &long_batch, None).unwrap();
        let fit = front
            .stages
            .iter()
            .find(|s| s.pass.name == "whitening fit")
            .unwrap();
        assert_eq!(fit.pass.windows, 1, "{target}");
        assert_eq!(
            front.drift.unwrap().dshift(),
            &[0.0],
            "{target}: one batch is its own reference"
        );

        // Shorter than a template: an error.
        let tiny = sized(32, 50, 1, Drift::None);
        let e = run(client, Arc::new(tiny), &probe, &settings(0), None).unwrap_err();
        assert!(
            e.to_string().contains("shorter than one template"),
            "{target}: {e}"
        );

        // A probe naming channels the recording lacks.
        let wide = SortProbe::new(
            (0..40).collect(),
            (0..40).map(|i| [0.0, i as f32 * 20.0]).collect(),
            vec![0; 40],
        )
        .unwrap();
        let e = run(client, Arc::new(short.clone()), &wide, &settings(0), None).unwrap_err();
        assert!(
            e.to_string().contains("recording channel 3"),
            "{target}: {e}"
        );

        // Fewer channels than the neighbourhoods (4 < whitening_range 32, nearest_chans 10):
        // every neighbourhood is the whole probe.
        let few = sized(4, 60_000, 2, Drift::None);
        let few_probe = probe_of(&few);
        let front = run(client, Arc::new(few), &few_probe, &settings(0), None).unwrap();
        assert_eq!(front.fit.whitening.k(), 4, "{target}");
        assert!(finite(&front.spikes), "{target}");

        // Drift with windows that do not divide the batch: a settings error.
        let e = run(client, Arc::new(short), &probe, &settings(1), Some(20_000)).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Setting {
                    name: "nblocks",
                    ..
                }
            ),
            "{target}: {e}"
        );
    });
}

/// Universal templates learned from the recording (`templates_from_data`, Kilosort4's
/// default): the templates have the settings' shape and detection with them finds the true
/// spikes of the larger units.
#[test]
fn templates_learned_from_the_recording_find_the_spikes() {
    for_each_runtime(|target, client| {
        let rec = recording(4, Drift::None);
        let mut truth: Vec<u64> = rec
            .spikes()
            .iter()
            .filter(|s| rec.units()[s.unit].amplitude_uv >= 100.0)
            .map(|s| s.sample)
            .collect();
        truth.sort_unstable();
        let probe = probe_of(&rec);
        let learned = KilosortSettings {
            templates_from_data: true,
            templates_file: None,
            ..settings(0)
        };
        let front = run(client, Arc::new(rec), &probe, &learned, None).unwrap();
        assert_eq!(
            (
                front.templates.k(),
                front.templates.p(),
                front.templates.nt()
            ),
            (6, 6, 61)
        );
        // Troughs lie 10 samples before the spikes' times; 0.4 ms = 12 samples.
        let troughs: Vec<u64> = front.spikes.sample.iter().map(|s| s - 10).collect();
        let found = truth
            .iter()
            .filter(|&&t| troughs.iter().any(|&d| d.abs_diff(t) <= 12))
            .count();
        let recall = found as f64 / truth.len() as f64;
        println!(
            "{target}: recall {recall:.3} of {} true spikes",
            truth.len()
        );
        assert!(recall > 0.9, "{target}: recall {recall}");
    });
}

/// Where a detection pass's time goes on a GPU, per 384-channel window of 60 000 samples:
/// the preprocessing from resident int16 alone, then with the sparse whitening, the dense
/// (drift-corrected) whitening, and the sparse whitening plus detection; the device synced
/// after every window. Ignored (minutes on a software renderer); on a GPU:
/// `cargo test --release -p dspk-sorter-kilosort --test front -- --ignored window_step_timing --nocapture`.
#[test]
#[ignore]
fn window_step_timing() {
    use dspk_sorter_kilosort::detection::UniversalDetector;
    use dspk_sorter_kilosort::detection::centres::{CentreSettings, template_centres};
    use dspk_sorter_kilosort::detection::universal::UniversalTemplates;
    use dspk_sorter_kilosort::preprocessing::{
        Preprocessing, Whitener, channel_offsets, fit_whitening,
    };
    use dspk_sorter_kilosort::runner::{DeviceWindows, SortContext};

    let windows_count = 8u64;
    let rec = Arc::new(sized(384, windows_count * 60_000, 96, Drift::None));
    let probe = probe_of(&rec);
    let settings = KilosortSettings {
        batch_size: 60_000,
        ..settings(0)
    };
    for_each_runtime(|target, client| {
        let sync = || cubecl::future::block_on(client.sync()).unwrap();
        let offsets = channel_offsets(rec.as_ref(), probe.channels(), 0..60_000, 1.0).unwrap();
        let pre = Preprocessing::new(offsets, &settings, 30_000.0).unwrap();
        let mut windows = DeviceWindows::new(
            client,
            rec.clone(),
            probe.channels().to_vec(),
            60_000,
            81,
            None,
            Box::new(pre),
            u64::MAX,
        )
        .unwrap();
        let mut progress = |_| {};
        let mut ctx = SortContext::new(client, &probe, &settings, 30_000.0, 1, &mut progress);
        let (white, _) = fit_whitening(&mut ctx, &mut windows).unwrap();
        let max = windows.max_read_len();
        let mut sparse =
            Whitener::new(client, Whitener::sparse(client, &white).unwrap(), max).unwrap();
        let mut dense =
            Whitener::new(client, Whitener::sparse(client, &white).unwrap(), max).unwrap();
        dense.set_dense(client, &white.dense()).unwrap();
        let templates =
            UniversalTemplates::from_npz(settings.templates_file.as_ref().unwrap()).unwrap();
        let centres = template_centres(
            probe.positions(),
            probe.shanks(),
            &CentreSettings::default(),
        )
        .unwrap();
        let mut detector = UniversalDetector::new(
            client,
            probe.len(),
            probe.positions(),
            &centres,
            &templates,
            9.0,
        )
        .unwrap();
        let mut spikes = detector.new_spikes();
        let mut time = |name: &str, visit: &mut dyn FnMut(&dspk_ops::DeviceWindow)| {
            sync();
            let started = std::time::Instant::now();
            let report = windows
                .pass("timing", &mut |_| {}, |w| {
                    visit(w);
                    sync();
                    Ok(())
                })
                .unwrap();
            let ms = started.elapsed().as_secs_f64() * 1e3 / report.windows as f64;
            eprintln!(
                "window_step_timing runtime={target} step={name} windows={} resident={} ms_per_window={ms:.3}",
                report.windows, report.resident_windows
            );
        };
        for _ in 0..2 {
            time("preprocess", &mut |_| {});
            time("preprocess+sparse_whiten", &mut |w| {
                sparse.whiten(client, w).unwrap();
            });
            time("preprocess+dense_whiten", &mut |w| {
                dense.whiten(client, w).unwrap();
            });
            time("preprocess+sparse_whiten+detect", &mut |w| {
                let white = sparse.whiten(client, w).unwrap();
                detector.detect(client, white, &mut spikes).unwrap();
            });
        }
        // The same inside a profiling window, as the passes' device time is measured.
        let window = client.profile_start().ok();
        time("profiled:preprocess+sparse_whiten+detect", &mut |w| {
            let white = sparse.whiten(client, w).unwrap();
            detector.detect(client, white, &mut spikes).unwrap();
        });
        if let Some(window) = window {
            let _ = client.profile_end(window);
        }
        eprintln!(
            "window_step_timing runtime={target} spikes={}",
            spikes.len()
        );
    });
}
