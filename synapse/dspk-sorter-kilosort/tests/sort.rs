//! Whole sorts on small ground-truth recordings, on every runtime compiled in: accuracy against
//! the truth, the same units run after run, whichever way the recording reaches the device,
//! whatever the window length; bad input gives an error or an empty sorting.

use std::sync::Arc;

use cubecl::client::Client;
use dspk_core::test_util::for_each_runtime;
use dspk_core::{RecordingSource, ScaledOnly};

mod common;

use common::{Altered, probe_of, settings, sized};
use dspk_sorter_kilosort::{Kilosort4, KilosortSettings, RunOptions, SortOutput, SortProbe};
use dspk_synapse::groundtruth::{
    CompareOptions, Drift, GroundTruthConfig, GroundTruthRecording, MatchMode, SpikeTrains,
    compare_to_ground_truth,
};

/// `channels` channels, `seconds` s, `units` units, seed 3.
fn recording(channels: usize, seconds: u64, units: usize, drift: Drift) -> GroundTruthRecording {
    sized(channels, seconds * 30_000, units, drift)
}

fn sort(
    client: &Client,
    source: Arc<dyn RecordingSource>,
    probe: &SortProbe,
    settings: &KilosortSettings,
    window: Option<u64>,
) -> dspk_sorter_kilosort::Result<SortOutput> {
    Kilosort4::new(settings.clone())
        .with_options(RunOptions {
            window,
            ..RunOptions::default()
        })
        .run(client, source, probe, &mut |_| {})
}

/// Per-unit accuracy of the sorting against the truth (SpikeInterface's Hungarian match,
/// 0.4 ms).
fn accuracies(rec: &GroundTruthRecording, output: &SortOutput) -> Vec<f64> {
    let s = &output.sorting;
    let labels: Vec<i64> = s.spike_clusters.iter().map(|&c| i64::from(c)).collect();
    let tested = SpikeTrains::from_labels(&s.spike_times, &labels).unwrap();
    let comparison = compare_to_ground_truth(
        &rec.spike_trains(),
        &tested,
        rec.info().sample_rate,
        &CompareOptions::default(),
    )
    .unwrap();
    comparison
        .performance(MatchMode::Hungarian)
        .iter()
        .map(|p| p.accuracy)
        .collect()
}

/// What identifies a sorting: every kept spike's time and unit.
fn identity(output: &SortOutput) -> (Vec<i64>, Vec<u32>) {
    (
        output.sorting.spike_times.clone(),
        output.sorting.spike_clusters.clone(),
    )
}

/// 32 channels, 20 s, 8 units with rigid drift: most units found.
#[test]
fn a_small_drifting_recording_is_sorted_accurately() {
    for_each_runtime(|target, client| {
        let rec = recording(32, 20, 8, Drift::Linear { total_um: 20.0 });
        let probe = probe_of(&rec);
        let first = sort(client, Arc::new(rec.clone()), &probe, &settings(1), None).unwrap();
        let acc = accuracies(&rec, &first);
        let good = acc.iter().filter(|&&a| a >= 0.8).count();
        let mean = acc.iter().sum::<f64>() / acc.len() as f64;
        println!(
            "{target}: {} units, {} spikes; accuracy {acc:.3?}, {good} >= 0.8, mean {mean:.3}",
            first.sorting.num_units(),
            first.sorting.num_spikes()
        );
        for stage in &first.stages {
            println!("{target}: {stage}");
        }
        assert!(good >= 6, "{target}: {good} units >= 0.8 ({acc:.3?})");
        assert!(mean >= 0.75, "{target}: mean accuracy {mean:.3}");
        let s = &first.sorting;
        assert!(s.spike_times.windows(2).all(|w| w[0] <= w[1]), "{target}");
        assert!(
            s.spike_times
                .iter()
                .all(|&t| (0..rec.info().num_samples as i64).contains(&t)),
            "{target}"
        );
        assert!(s.amplitudes.iter().all(|a| a.is_finite()), "{target}");
    });
}

/// The same units run after run, and whether the recording is uploaded as int16 or f32 or cut
/// into windows of another length (drift off).
#[test]
fn units_are_reproducible_and_do_not_depend_on_the_upload_or_the_window_length() {
    for_each_runtime(|target, client| {
        let rec = recording(32, 8, 6, Drift::None);
        let probe = probe_of(&rec);
        let base = sort(client, Arc::new(rec.clone()), &probe, &settings(0), None).unwrap();
        assert!(base.sorting.num_units() > 0, "{target}");
        let again = sort(client, Arc::new(rec.clone()), &probe, &settings(0), None).unwrap();
        assert_eq!(
            identity(&base),
            identity(&again),
            "{target}: a second run differs"
        );
        let scaled = sort(
            client,
            Arc::new(ScaledOnly(rec.clone())),
            &probe,
            &settings(0),
            None,
        )
        .unwrap();
        assert_eq!(identity(&base), identity(&scaled), "{target}: f32 upload");
        let windows = sort(client, Arc::new(rec), &probe, &settings(0), Some(21_001)).unwrap();
        assert_eq!(
            identity(&base),
            identity(&windows),
            "{target}: 21 001-sample windows"
        );
    });
}

/// Empty, very short, single-channel, flat, NaN-filled and dead-channel recordings: an error
/// that says what is wrong, or an empty sorting; never a panic.
#[test]
fn bad_recordings_give_an_error_or_an_empty_sorting() {
    for_each_runtime(|target, client| {
        let rec = recording(16, 3, 4, Drift::None);
        let probe = probe_of(&rec);
        let nothing = |channels: std::ops::Range<usize>, value: f32| Altered {
            inner: rec.clone(),
            channels,
            samples: 0..u64::MAX,
            value,
        };

        // Flat: no spikes, an empty sorting.
        let flat = sort(
            client,
            Arc::new(nothing(0..16, 0.0)),
            &probe,
            &settings(1),
            None,
        )
        .unwrap();
        assert_eq!(flat.sorting.num_units(), 0, "{target}");
        assert_eq!(flat.sorting.num_spikes(), 0, "{target}");

        // NaN-filled: an error naming NaN.
        let e = sort(
            client,
            Arc::new(nothing(0..16, f32::NAN)),
            &probe,
            &settings(0),
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("NaN"), "{target}: {e}");

        // A dead channel: sorted, finite.
        let dead = sort(
            client,
            Arc::new(nothing(3..4, 0.0)),
            &probe,
            &settings(0),
            None,
        )
        .unwrap();
        assert!(dead.sorting.num_units() > 0, "{target}");
        assert!(
            dead.sorting.amplitudes.iter().all(|a| a.is_finite()),
            "{target}"
        );

        // Shorter than one window, and shorter than a template.
        let short = recording(16, 1, 3, Drift::None);
        let mut long_batch = settings(1);
        long_batch.batch_size = 60_000;
        sort(client, Arc::new(short), &probe, &long_batch, None).unwrap();
        let tiny = GroundTruthRecording::generate(&GroundTruthConfig {
            channels: 16,
            num_samples: 40,
            units: 1,
            ..GroundTruthConfig::default()
        })
        .unwrap();
        let e = sort(client, Arc::new(tiny), &probe, &settings(0), None).unwrap_err();
        assert!(
            e.to_string().contains("shorter than one template"),
            "{target}: {e}"
        );

        // One channel.
        let one = recording(1, 2, 1, Drift::None);
        let one_probe = probe_of(&one);
        match sort(client, Arc::new(one), &one_probe, &settings(0), None) {
            Ok(out) => assert!(
                out.sorting.amplitudes.iter().all(|a| a.is_finite()),
                "{target}"
            ),
            Err(e) => assert!(!e.to_string().is_empty(), "{target}"),
        }
    });
}
