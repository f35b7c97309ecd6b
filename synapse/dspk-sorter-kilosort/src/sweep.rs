//! Parameter sweeps (EMUsort's `KS_params_to_sweep`): several settings run over one recording,
//! each sort scored with the EMUsort score ([`run_score`] of
//! [`SortOutput::units`]), the best chosen, all reported.
//!
//! Runs whose preprocessing settings agree ([`FitKey`]) share one preprocessing fit: the first
//! of them fits it, the others reuse it ([`RunOptions::fit`]). Runs spread over the devices
//! given, one run per device at a time, each device taking the next run when it is free; the
//! result does not depend on how many devices there are (each run is deterministic).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cubecl::client::Client;
use dspk_core::{ComputeTarget, RecordingSource};

use crate::RunOptions;
use crate::export::score::run_score;
use crate::preprocessing::{FitKey, PreprocessingFit};
use crate::runner::Progress;
use crate::{Error, Kilosort4, KilosortSettings, Result, SortOutput, SortProbe};

/// A device a sweep may run on: its client and, for page-locked reads, its target.
#[derive(Clone)]
pub struct SweepDevice {
    /// The device's client.
    pub client: Client,
    /// The device, so reads can page-lock their buffers for it (`None`: plain buffers).
    pub target: Option<ComputeTarget>,
}

/// One run of a sweep.
#[derive(Debug)]
pub struct SweepRun {
    /// The run's settings.
    pub settings: KilosortSettings,
    /// The sort, or why it failed.
    pub outcome: Result<SortOutput>,
    /// The run's EMUsort score (`None` when it failed or no unit has a score).
    pub score: Option<f64>,
    /// Whether it reused another run's preprocessing fit.
    pub reused_fit: bool,
    /// The device (index into the devices given) it ran on.
    pub device: usize,
    /// Wall time of the run.
    pub wall: Duration,
}

/// Every run of a sweep, in the order given, and the best.
#[derive(Debug)]
pub struct Sweep {
    /// The runs, in the order of the settings given.
    pub runs: Vec<SweepRun>,
    /// The run with the highest score (the first on ties); `None` when no run has one.
    pub best: Option<usize>,
}

impl Sweep {
    /// One line per run: index, score, units, spikes, wall time, fit reuse, device, and the
    /// settings that differ from the first run's.
    #[must_use]
    pub fn report(&self) -> String {
        let base = self
            .runs
            .first()
            .map(|r| serde_json::to_value(&r.settings).unwrap_or_default())
            .unwrap_or_default();
        let mut out = String::new();
        for (i, run) in self.runs.iter().enumerate() {
            let ours = serde_json::to_value(&run.settings).unwrap_or_default();
            let changed: Vec<String> = ours
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(name, value)| base.get(name.as_str()) != Some(value))
                .map(|(name, value)| format!("{name}={value}"))
                .collect();
            let mark = if self.best == Some(i) { '*' } else { ' ' };
            let result = match &run.outcome {
                Ok(output) => format!(
                    "score {} | {} units | {} spikes",
                    run.score.map_or("n/a".to_string(), |s| format!("{s:.4}")),
                    output.sorting.num_units(),
                    output.sorting.num_spikes()
                ),
                Err(error) => format!("failed: {error}"),
            };
            out.push_str(&format!(
                "{mark}run {i:>2} | {result} | {:.2} s | fit {} | device {} | {}\n",
                run.wall.as_secs_f64(),
                if run.reused_fit { "reused" } else { "fitted" },
                run.device,
                if changed.is_empty() {
                    "(first run's settings)".to_string()
                } else {
                    changed.join(" ")
                }
            ));
        }
        out
    }
}

/// What a sweep's progress callback hears: which run, and that run's progress.
#[derive(Debug, Clone, Copy)]
pub struct SweepProgress {
    /// Index of the run in the settings given.
    pub run: usize,
    /// The run's own progress.
    pub progress: Progress,
}

/// Runs every settings of `runs` over `source` read through `probe` on `devices` (one run per
/// device at a time), with `options` (its `fit` and `target` are set per run), `threads`
/// host threads per run for the clustering. Runs that share preprocessing settings share the
/// fit made by the first of them. Every run is tried: a failed run is reported, not fatal.
///
/// # Errors
///
/// [`Error::Setting`] when there are no runs or no devices.
pub fn run_sweep(
    devices: &[SweepDevice],
    source: Arc<dyn RecordingSource>,
    probe: &SortProbe,
    runs: &[KilosortSettings],
    options: &RunOptions,
    threads: usize,
    progress: &(dyn Fn(SweepProgress) + Sync),
) -> Result<Sweep> {
    if runs.is_empty() || devices.is_empty() {
        return Err(Error::Setting {
            name: "sweep",
            reason: format!(
                "{} runs on {} devices: nothing to do",
                runs.len(),
                devices.len()
            ),
        });
    }
    let info = source.info().clone();
    let keys: Vec<FitKey> = runs
        .iter()
        .map(|s| FitKey::new(info.num_samples, info.sample_rate.as_hz(), probe, s))
        .collect();
    // Runs that fit first (the first of each key), then those that reuse a fit.
    let first_of_key: Vec<usize> = (0..runs.len())
        .filter(|&i| !keys[..i].contains(&keys[i]))
        .collect();
    let rest: Vec<usize> = (0..runs.len())
        .filter(|i| !first_of_key.contains(i))
        .collect();
    let slots: Vec<Mutex<Option<SweepRun>>> = runs.iter().map(|_| Mutex::new(None)).collect();
    let fits: Mutex<Vec<(FitKey, Arc<PreprocessingFit>)>> = Mutex::new(Vec::new());
    for phase in [&first_of_key, &rest] {
        let next = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for (d, device) in devices.iter().enumerate() {
                let (next, slots, fits, keys, source) = (&next, &slots, &fits, &keys, &source);
                scope.spawn(move || {
                    while let Some(&i) = phase.get(next.fetch_add(1, Ordering::Relaxed)) {
                        let fit = fits.lock().ok().and_then(|fits| {
                            let (_, fit) = fits.iter().find(|(key, _)| *key == keys[i])?;
                            Some(fit.clone())
                        });
                        let run_options = RunOptions {
                            fit: fit.clone(),
                            target: device.target.or(options.target),
                            ..options.clone()
                        };
                        let started = Instant::now();
                        let outcome = Kilosort4::new(runs[i].clone())
                            .with_options(run_options)
                            .with_threads(threads)
                            .run(&device.client, source.clone(), probe, &mut |p| {
                                progress(SweepProgress {
                                    run: i,
                                    progress: p,
                                });
                            });
                        if let (Ok(output), Ok(mut fits)) = (&outcome, fits.lock())
                            && fit.is_none()
                        {
                            fits.push((keys[i].clone(), output.fit.clone()));
                        }
                        let score = outcome.as_ref().ok().and_then(|o| run_score(&o.units));
                        let run = SweepRun {
                            settings: runs[i].clone(),
                            outcome,
                            score,
                            reused_fit: fit.is_some(),
                            device: d,
                            wall: started.elapsed(),
                        };
                        if let Ok(mut slot) = slots[i].lock() {
                            *slot = Some(run);
                        }
                    }
                });
            }
        });
    }
    let runs: Vec<SweepRun> = slots
        .into_iter()
        .map(|slot| {
            slot.into_inner().ok().flatten().ok_or(Error::Setting {
                name: "sweep",
                reason: "a run's thread ended without a result".to_string(),
            })
        })
        .collect::<Result<_>>()?;
    let best = runs
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.score.map(|s| (i, s)))
        .fold(None, |best: Option<(usize, f64)>, (i, s)| match best {
            Some((_, b)) if b >= s => best,
            _ => Some((i, s)),
        })
        .map(|(i, _)| i);
    Ok(Sweep { runs, best })
}

/// The settings of a grid sweep: `base` with every combination of the values `axes` give
/// (`(setting name, values)`, values as [`KilosortSettings::set`] parses them), the last axis
/// varying fastest.
///
/// # Errors
///
/// [`Error::Setting`] for an axis without values, an unknown setting or a value it refuses;
/// more than 1 000 combinations.
pub fn sweep_grid(
    base: &KilosortSettings,
    axes: &[(String, Vec<String>)],
) -> Result<Vec<KilosortSettings>> {
    let mut grid = vec![base.clone()];
    for (name, values) in axes {
        if values.is_empty() {
            return Err(Error::Setting {
                name: "sweep",
                reason: format!("`{name}` has no values to sweep"),
            });
        }
        if grid.len() * values.len() > 1000 {
            return Err(Error::Setting {
                name: "sweep",
                reason: format!("{} combinations: at most 1000", grid.len() * values.len()),
            });
        }
        let mut next = Vec::with_capacity(grid.len() * values.len());
        for settings in &grid {
            for value in values {
                let mut s = settings.clone();
                s.set(name, value)?;
                next.push(s);
            }
        }
        grid = next;
    }
    Ok(grid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_combine_axes_and_refuse_bad_ones() {
        let base = KilosortSettings::emusort();
        let axes = vec![
            (
                "Th_universal".to_string(),
                vec!["7".to_string(), "9".to_string()],
            ),
            (
                "Th_learned".to_string(),
                vec!["6".into(), "7".into(), "8".into()],
            ),
        ];
        let grid = sweep_grid(&base, &axes).unwrap();
        assert_eq!(grid.len(), 6);
        assert_eq!((grid[0].th_universal, grid[0].th_learned), (7.0, 6.0));
        assert_eq!((grid[5].th_universal, grid[5].th_learned), (9.0, 8.0));
        assert!(grid.iter().all(|s| s.nskip == 2));
        let bad = vec![("Th_univ".to_string(), vec!["7".to_string()])];
        assert!(sweep_grid(&base, &bad).is_err());
        let empty = vec![("Th_universal".to_string(), Vec::new())];
        assert!(sweep_grid(&base, &empty).is_err());
        let negative = vec![("nskip".to_string(), vec!["0".to_string()])];
        assert!(sweep_grid(&base, &negative).is_err());
    }
}
