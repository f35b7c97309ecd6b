//! Small probes (an 8-channel two-column probe, a 4-channel tetrode-sized one, every contact at
//! one position) and the checks a sort makes before reading data: drift correction turned off
//! with a warning where the probe is too short for it, settings refused early with the setting
//! to change.

use std::sync::Arc;

use dspk_core::RecordingSource;
use dspk_core::test_util::for_each_runtime;
use dspk_sorter_kilosort::{Error, Kilosort4, KilosortSettings, SortOutput, SortProbe};
use dspk_synapse::groundtruth::{
    CompareOptions, Drift, GroundTruthRecording, MatchMode, Performance, SpikeTrains,
    compare_to_ground_truth,
};

mod common;

use common::{Altered, probe_of, settings, sized};

/// Per-unit performance of the sorting against the truth (SpikeInterface's Hungarian match,
/// 0.4 ms), the scoring of the sort example.
fn performance(rec: &GroundTruthRecording, output: &SortOutput) -> Vec<Performance> {
    let s = &output.sorting;
    let labels: Vec<i64> = s.spike_clusters.iter().map(|&c| i64::from(c)).collect();
    let tested = SpikeTrains::from_labels(&s.spike_times, &labels).unwrap();
    compare_to_ground_truth(
        &rec.spike_trains(),
        &tested,
        rec.info().sample_rate,
        &CompareOptions::default(),
    )
    .unwrap()
    .performance(MatchMode::Hungarian)
}

/// Per-unit accuracy of the sorting against the truth.
fn accuracies(rec: &GroundTruthRecording, output: &SortOutput) -> Vec<f64> {
    performance(rec, output)
        .iter()
        .map(|p| p.accuracy)
        .collect()
}

/// Sorts `rec` with `nblocks` and returns each true unit's accuracy, printed with `what`.
fn unit_accuracies(
    client: &cubecl::client::Client,
    target: impl std::fmt::Display,
    what: &str,
    rec: &GroundTruthRecording,
    nblocks: usize,
) -> Vec<f64> {
    let output = Kilosort4::new(settings(nblocks))
        .run(client, Arc::new(rec.clone()), &probe_of(rec), &mut |_| {})
        .unwrap();
    let acc = accuracies(rec, &output);
    println!(
        "{target}: {what}, nblocks = {nblocks}: {} units, {} spikes, accuracy {acc:.3?}",
        output.sorting.num_units(),
        output.sorting.num_spikes(),
    );
    acc
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Per-unit recall of the sorting against the truth.
fn recalls(rec: &GroundTruthRecording, output: &SortOutput) -> Vec<f64> {
    performance(rec, output).iter().map(|p| p.recall).collect()
}

/// Sorts `channels` channels of 5 s with 4 units and 20 um of drift, drift correction asked
/// (`nblocks = 1`): it is turned off with a warning, at least `sorted_percent` % of the true
/// spike count is sorted and one unit is recalled at 0.9 or better (before the fix, the drift
/// estimate moved every channel 600 um off the probe and the sort was empty). Measured on
/// lavapipe: 8 channels 5 units, recall 0.517, 1, 1, 1; 4 channels 3 units, recall 1, 1, 0,
/// 0.605 (before the small-probe landmark floor: 1 unit each; the tests below ask for units).
fn small_probe_sorts(channels: usize, sorted_percent: usize) {
    for_each_runtime(|target, client| {
        let rec = sized(channels, 5 * 30_000, 4, Drift::Linear { total_um: 20.0 });
        let probe = probe_of(&rec);
        let output = Kilosort4::new(settings(1))
            .run(client, Arc::new(rec.clone()), &probe, &mut |_| {})
            .unwrap();
        let recall = recalls(&rec, &output);
        println!(
            "{target}: {channels} channels: {} units, {} spikes, recall {recall:.3?}; {:?}",
            output.sorting.num_units(),
            output.sorting.num_spikes(),
            output.warnings
        );
        assert!(output.drift.is_none(), "{target}");
        assert!(
            output
                .warnings
                .iter()
                .any(|w| w.starts_with("drift correction is off")),
            "{target}: {:?}",
            output.warnings
        );
        assert!(output.report().contains("warning: drift correction is off"));
        let truth = rec.spike_trains();
        let true_spikes: usize = (0..4).map(|u| truth.train(u).len()).sum();
        assert!(
            output.sorting.num_spikes() * 100 >= true_spikes * sorted_percent,
            "{target}: {} spikes sorted of {true_spikes}",
            output.sorting.num_spikes()
        );
        assert!(
            recall.iter().any(|&r| r >= 0.9),
            "{target}: recall {recall:.3?}"
        );
    });
}

#[test]
fn an_8_channel_probe_sorts_with_drift_correction_turned_off() {
    small_probe_sorts(8, 50);
}

#[test]
fn a_4_channel_probe_sorts_with_drift_correction_turned_off() {
    small_probe_sorts(4, 40);
}

/// The probe of `rec` with every contact moved to one position.
fn one_position(rec: &GroundTruthRecording) -> SortProbe {
    let probe = probe_of(rec);
    SortProbe::new(
        probe.channels().to_vec(),
        vec![[16.0, 40.0]; probe.len()],
        probe.shanks().to_vec(),
    )
    .unwrap()
}

#[test]
fn the_early_check_warns_of_small_and_degenerate_probes() {
    let rec = sized(8, 60_000, 2, Drift::None);
    let warnings = Kilosort4::new(settings(1))
        .check(rec.info(), &probe_of(&rec))
        .unwrap();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[0].contains("nearest_chans = 10"), "{warnings:?}");
    assert!(
        warnings[1].contains("drift correction is off"),
        "{warnings:?}"
    );
    // Every contact at one position: said so, and drift correction off.
    let warnings = Kilosort4::new(settings(0))
        .check(rec.info(), &one_position(&rec))
        .unwrap();
    assert!(
        warnings.iter().any(|w| w.contains("at (16, 40) um")),
        "{warnings:?}"
    );
    // 32 channels, nearest_chans 10, drift on: nothing to say.
    let wide = sized(32, 60_000, 2, Drift::None);
    let warnings = Kilosort4::new(settings(1))
        .check(wide.info(), &probe_of(&wide))
        .unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
}

#[test]
fn the_early_check_refuses_nblocks_too_many_for_the_probe() {
    let rec = sized(32, 60_000, 2, Drift::None);
    let e = Kilosort4::new(settings(1000))
        .check(rec.info(), &probe_of(&rec))
        .unwrap_err();
    assert!(
        matches!(&e, Error::Setting { name: "nblocks", reason } if reason.contains("nblocks <= 5")),
        "{e}"
    );
}

#[test]
fn the_early_check_refuses_a_recording_shorter_than_a_template_and_a_probe_too_wide() {
    let rec = sized(8, 40, 1, Drift::None);
    let e = Kilosort4::new(settings(0))
        .check(rec.info(), &probe_of(&rec))
        .unwrap_err();
    assert!(e.to_string().contains("shorter than one template"), "{e}");
    let narrow = sized(4, 60_000, 1, Drift::None);
    let e = Kilosort4::new(settings(0))
        .check(narrow.info(), &probe_of(&rec))
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("it names recording channel 4, but the recording has 4 channels"),
        "{e}"
    );
}

#[test]
fn the_early_check_refuses_settings_out_of_range() {
    let rec = sized(8, 60_000, 1, Drift::None);
    let bad = KilosortSettings {
        nt: 60,
        ..settings(0)
    };
    let e = Kilosort4::new(bad)
        .check(rec.info(), &probe_of(&rec))
        .unwrap_err();
    assert!(matches!(e, Error::Setting { name: "nt", .. }), "{e}");
}

/// A recording without spikes gives an empty sorting and a warning that says so.
#[test]
fn a_flat_recording_sorts_empty_with_a_warning() {
    for_each_runtime(|target, client| {
        let rec = sized(8, 2 * 30_000, 2, Drift::None);
        let probe = probe_of(&rec);
        let flat = Altered {
            inner: rec,
            channels: 0..8,
            samples: 0..u64::MAX,
            value: 0.0,
        };
        let output = Kilosort4::new(settings(0))
            .run(client, Arc::new(flat), &probe, &mut |_| {})
            .unwrap();
        assert_eq!(output.sorting.num_units(), 0, "{target}");
        assert!(
            output.warnings.iter().any(|w| w.starts_with("no spikes")),
            "{target}: {:?}",
            output.warnings
        );
    });
}

/// A short recording on a small probe has few spikes per clustering group: with Kilosort's
/// landmark stride (every 20th spike) a unit of 50-200 spikes holds fewer landmarks than the
/// graph's 10 neighbours, and the units of a group merged (before the small-probe landmark
/// floor: 1 unit on the bench generator's 4-channel 20 s recordings, 2 of 4 on its 8-channel
/// ones). Sorts `seconds` s of `units` units on `channels` channels, no drift, `nblocks = 0`;
/// at least `found` units must reach accuracy `least`.
fn small_probe_finds_its_units(channels: usize, units: usize, seconds: u64, found: usize) {
    let least = 0.95;
    for_each_runtime(|target, client| {
        let rec = sized(channels, seconds * 30_000, units, Drift::None);
        let what = format!("{channels} channels, {units} units, {seconds} s");
        let acc = unit_accuracies(client, target, &what, &rec, 0);
        assert!(
            acc.iter().filter(|&&a| a >= least).count() >= found,
            "{target}: {what}: accuracy {acc:.3?}, fewer than {found} at {least}"
        );
    });
}

/// Measured on lavapipe: accuracy 0.988, 1.000 and 0.000; the third unit (86 uV, between
/// the other two) is not detected (work left).
#[test]
fn a_tetrode_finds_its_units() {
    small_probe_finds_its_units(4, 3, 20, 2);
}

/// Measured on lavapipe: 1.000 for each of the 4 units.
#[test]
fn an_8_channel_probe_finds_its_units() {
    small_probe_finds_its_units(8, 4, 10, 4);
}

/// Without drift correction (`nblocks = 0`) a 12-channel probe long enough for the drift
/// registration sorts as well as with it, on a recording that drifts 10 um (measured on
/// lavapipe: every unit at 1.000 both ways).
#[test]
fn a_12_channel_probe_sorts_as_well_without_drift_correction() {
    for_each_runtime(|target, client| {
        let rec = sized(12, 10 * 30_000, 4, Drift::Linear { total_um: 10.0 });
        let what = "12 channels, 4 units, 10 s, 10 um drift";
        let off = unit_accuracies(client, target, what, &rec, 0);
        let on = unit_accuracies(client, target, what, &rec, 1);
        assert!(mean(&on) >= 0.9, "{target}: drift correction on: {on:.3?}");
        assert!(
            mean(&off) >= mean(&on) - 0.05,
            "{target}: off {off:.3?}, on {on:.3?}"
        );
    });
}
