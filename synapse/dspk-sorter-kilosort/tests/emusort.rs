//! EMUsort on small EMG-like ground truth, on every runtime compiled in: a two-run parameter
//! sweep that shares one preprocessing fit and keeps the best-scored run, the channel delays of
//! a recording with one shared delay profile, accuracy; bad input gives clear errors.

use std::sync::Arc;

use dspk_core::test_util::for_each_runtime;
use dspk_core::{ReadRequest, RecordingInfo, RecordingSource};
use dspk_sorter_kilosort::sweep::{SweepDevice, run_sweep, sweep_grid};
use dspk_sorter_kilosort::{Kilosort4, KilosortSettings, SortProbe};
use dspk_synapse::groundtruth::{
    CompareOptions, DelayMode, EmgConfig, EmgRecording, MatchMode, SpikeTrains, align_lags,
    compare_to_ground_truth,
};

/// `channels` x `seconds` s, `units` motor units, one delay profile for all, seed 1.
fn emg(channels: usize, seconds: f64, units: usize) -> EmgRecording {
    EmgRecording::generate(&EmgConfig {
        channels,
        duration_s: seconds,
        units,
        delay_mode: DelayMode::Shared,
        ..EmgConfig::default()
    })
    .unwrap()
}

fn probe(rec: &EmgRecording) -> SortProbe {
    SortProbe::new(
        (0..rec.config().channels).collect(),
        rec.channel_positions()
            .iter()
            .map(|p| [p[0] as f32, p[1] as f32])
            .collect(),
        vec![0; rec.config().channels],
    )
    .unwrap()
}

/// 6 channels, 20 s (the score's presence bins are 20 s), 3 units: a sweep over `Th_learned`.
#[test]
fn an_emg_sweep_shares_its_fit_finds_the_delays_and_keeps_the_best_run() {
    for_each_runtime(|target, client| {
        let rec = emg(6, 20.0, 3);
        let probe = probe(&rec);
        let axes = vec![("Th_learned".to_string(), vec!["8".into(), "7".into()])];
        let runs = sweep_grid(&KilosortSettings::emusort(), &axes).unwrap();
        let device = SweepDevice {
            client: client.clone(),
            target: None,
        };
        let source: Arc<dyn RecordingSource> = Arc::new(rec.clone());
        let sweep = run_sweep(
            &[device],
            source,
            &probe,
            &runs,
            &Default::default(),
            2,
            &|_| {},
        )
        .unwrap();
        println!("{target}:\n{}", sweep.report());
        let outputs: Vec<_> = sweep
            .runs
            .iter()
            .map(|r| r.outcome.as_ref().unwrap())
            .collect();

        // The second run reused the first one's fit; the best run has the highest score.
        assert!(
            !sweep.runs[0].reused_fit && sweep.runs[1].reused_fit,
            "{target}"
        );
        assert!(Arc::ptr_eq(&outputs[0].fit, &outputs[1].fit), "{target}");
        let scores: Vec<f64> = sweep.runs.iter().map(|r| r.score.unwrap()).collect();
        let best = sweep.best.unwrap();
        assert!(
            scores.iter().all(|&s| s <= scores[best]),
            "{target}: {scores:?}"
        );
        assert!(
            scores.iter().all(|&s| (0.0..=1.0).contains(&s)),
            "{scores:?}"
        );

        // Delays within one sample of the truth on every channel where a unit is clear (its
        // potential at least 60 uV there, the noise about 18 uV rms).
        let delays = outputs[0].fit.delays.as_ref().unwrap();
        let truth = &rec.units()[0].delays_samples;
        let r = delays.reference;
        let len = rec.template_len();
        let clear = |c: usize| {
            (0..rec.units().len()).any(|u| {
                let t = rec.template(u).unwrap();
                (0..len).any(|s| t[s * 6 + c].abs() >= 60.0)
            })
        };
        for c in (0..6).filter(|&c| clear(c)) {
            let want = truth[c] - truth[r];
            let found = i64::from(delays.delays[c]);
            assert!(
                (found - want).abs() <= 1,
                "{target}: channel {c}: delay {found}, truth {want} ({:?})",
                delays.delays
            );
        }

        // Most units found (one lag per sorted unit within 3 ms, as EMUsort is scored).
        let sorting = &outputs[best].sorting;
        let labels: Vec<i64> = sorting
            .spike_clusters
            .iter()
            .map(|&c| i64::from(c))
            .collect();
        let sorted = SpikeTrains::from_labels(&sorting.spike_times, &labels).unwrap();
        let rate = rec.info().sample_rate;
        let aligned = align_lags(&rec.spike_trains(), &sorted, rate, 3.0, 0.4).unwrap();
        let comparison = compare_to_ground_truth(
            &rec.spike_trains(),
            &aligned.trains,
            rate,
            &CompareOptions::default(),
        )
        .unwrap();
        let accuracy: Vec<f64> = comparison
            .performance(MatchMode::Hungarian)
            .iter()
            .map(|p| p.accuracy)
            .collect();
        println!("{target}: accuracy {accuracy:?}");
        assert!(
            accuracy.iter().filter(|&&a| a >= 0.8).count() >= 2,
            "{target}: {accuracy:?}"
        );
    });
}

/// Every channel reads channel 0 of another recording.
struct Copies(EmgRecording);

impl RecordingSource for Copies {
    fn info(&self) -> &RecordingInfo {
        self.0.info()
    }

    fn fill_scaled(&self, request: &ReadRequest<'_>, out: &mut [f32]) -> dspk_core::Result<()> {
        let n = request.samples_per_channel();
        let first = ReadRequest::new(self.0.info(), &[0], request.samples())?;
        let mut row = vec![0f32; n];
        self.0.fill_scaled(&first, &mut row)?;
        for chunk in out.chunks_exact_mut(n) {
            chunk.copy_from_slice(&row);
        }
        Ok(())
    }
}

/// A single channel, the same signal on every channel, a delay search longer than the
/// recording: errors that say so.
#[test]
fn emg_bad_input_gives_clear_errors() {
    for_each_runtime(|target, client| {
        let sort = |source: Arc<dyn RecordingSource>, probe: &SortProbe, s: KilosortSettings| {
            Kilosort4::new(s)
                .run(client, source, probe, &mut |_| {})
                .map(|_| ())
                .unwrap_err()
                .to_string()
        };
        let one = emg(1, 2.0, 1);
        let e = sort(
            Arc::new(one.clone()),
            &probe(&one),
            KilosortSettings::emusort(),
        );
        assert!(e.contains("channel"), "{target}: {e}");

        let rec = emg(4, 2.0, 2);
        let e = sort(
            Arc::new(Copies(rec.clone())),
            &probe(&rec),
            KilosortSettings::emusort(),
        );
        assert!(e.contains("same signal"), "{target}: {e}");

        let short = emg(4, 0.05, 1);
        let long_search = KilosortSettings {
            max_chan_delay_ms: 100.0,
            ..KilosortSettings::emusort()
        };
        let e = sort(Arc::new(short.clone()), &probe(&short), long_search);
        assert!(e.contains("too short for a delay search"), "{target}: {e}");
    });
}
