//! Drift estimation on synthetic spikes with known motion, and its errors.

use super::{DriftEstimate, DriftSettings, DriftSpikes, check_probe, estimate_drift};
use crate::Error;
use dspk_core::rng::SplitMix64;
use std::ops::Range;

/// Synthetic detected spikes: one slice per `st0` column used.
struct Spikes {
    depth: Vec<f64>,
    amplitude: Vec<f64>,
    batch: Vec<usize>,
}

impl Spikes {
    fn view(&self) -> DriftSpikes<'_> {
        DriftSpikes {
            depth: &self.depth,
            amplitude: &self.amplitude,
            batch: &self.batch,
        }
    }
}

/// Channel rows every 20 um from 20 um to `top` um.
fn probe(top: f64) -> Vec<f32> {
    (1..=(top / 20.0) as usize)
        .map(|r| 20.0 * r as f32)
        .collect()
}

/// `n_units` units at seeded depths (60 um from the probe's ends) and amplitudes (log-uniform
/// 10..80), each firing 10..30 spikes per batch at its depth displaced by `motion(batch,
/// depth)` plus 2 um of noise, amplitude jittered by 10 %; batches in `silent` have no spikes.
fn synthetic(
    top: f64,
    n_units: usize,
    n_batches: usize,
    motion: &dyn Fn(usize, f64) -> f64,
    silent: Range<usize>,
) -> Spikes {
    let mut rng = SplitMix64::new(20261201);
    let units: Vec<(f64, f64)> = (0..n_units)
        .map(|_| {
            (
                rng.uniform(80.0, top - 60.0),
                (rng.uniform(10f64.ln(), 80f64.ln())).exp(),
            )
        })
        .collect();
    let mut spikes = Spikes {
        depth: Vec::new(),
        amplitude: Vec::new(),
        batch: Vec::new(),
    };
    for b in (0..n_batches).filter(|b| !silent.contains(b)) {
        for &(depth, amplitude) in &units {
            for _ in 0..10 + rng.below(21) {
                let y = depth + motion(b, depth) + 2.0 * rng.normal();
                spikes.depth.push(y.clamp(20.0, top));
                spikes
                    .amplitude
                    .push((amplitude * (0.1 * rng.normal()).exp()).max(9.0));
                spikes.batch.push(b);
            }
        }
    }
    spikes
}

/// A triangle wave of +-20 um, period 20 batches: -20 um at batch 0, +20 um at batch 10.
fn zigzag(b: usize) -> f64 {
    let phase = (b % 20) as f64 / 20.0;
    20.0 * (1.0 - 4.0 * (phase - 0.5).abs())
}

/// For block `j`: the common offset (mean over `batches` of `dshift + truth`) and the largest
/// distance of `dshift + truth` from it, with `truth(b)` the units' displacement. The offset is
/// the displacement at the first reference batch: shifts register to it.
fn error_against(
    estimate: &DriftEstimate,
    j: usize,
    batches: impl Iterator<Item = usize> + Clone,
    truth: impl Fn(usize) -> f64,
) -> (f64, f64) {
    let residual = |b: usize| estimate.batch_shifts(b).unwrap()[j] + truth(b);
    let n = batches.clone().count() as f64;
    let offset = batches.clone().map(residual).sum::<f64>() / n;
    let worst = batches
        .map(|b| (residual(b) - offset).abs())
        .fold(0.0, f64::max);
    (offset, worst)
}

#[test]
fn drift_rigid_zigzag_is_recovered() {
    let y = probe(1000.0);
    let spikes = synthetic(1000.0, 80, 30, &|b, _| zigzag(b), 0..0);
    let estimate = estimate_drift(&y, &spikes.view(), 30, &DriftSettings::default(), 2).unwrap();
    for threads in [1, 3, 64] {
        let other =
            estimate_drift(&y, &spikes.view(), 30, &DriftSettings::default(), threads).unwrap();
        assert_eq!(other, estimate, "{threads} threads");
    }
    assert_eq!(estimate.n_blocks(), 1);
    assert_eq!(estimate.dshift().len(), 30);
    assert!(estimate.spike_counts().iter().all(|&c| c > 0));
    // dshift ~ -(displacement): the sign convention of Kilosort4.
    let (offset, worst) = error_against(&estimate, 0, 0..30, zigzag);
    // Registered to the first reference, batch 15, where the units sit at 0 um.
    assert!(offset.abs() < 1.0, "offset {offset} um");
    assert!(worst < 1.0, "worst error {worst} um");
}

#[test]
fn drift_non_rigid_motion_is_recovered_per_block() {
    // Motion grows with depth: +-10 um at the tip, +-30 um at 3840 um.
    let motion = |b: usize, y: f64| zigzag(b) * (0.5 + y / 3840.0);
    let y = probe(3840.0);
    let spikes = synthetic(3840.0, 300, 30, &motion, 0..0);
    let settings = DriftSettings {
        nblocks: 5,
        ..DriftSettings::default()
    };
    let estimate = estimate_drift(&y, &spikes.view(), 30, &settings, 2).unwrap();
    assert_eq!(estimate.n_blocks(), 9);
    // 766 bins of 5 um from y0 = 19, 153-bin blocks: centre 16.5 + 5 (start + 76).
    assert_eq!(estimate.block_centres()[0], 396.5);
    assert_eq!(estimate.block_centres()[8], 16.5 + 5.0 * (613.0 + 76.0));
    for (j, &centre) in estimate.block_centres().iter().enumerate() {
        let (offset, worst) = error_against(&estimate, j, 0..30, |b| motion(b, centre));
        assert!(offset.abs() < 1.0, "block {j}: offset {offset} um");
        assert!(worst < 2.0, "block {j}: worst error {worst} um");
    }
}

#[test]
fn drift_batches_without_spikes_get_zero_and_leave_the_rest() {
    // Batches 12..18 are silent, batch 15 among them: the first reference is batch 18, the
    // nearest with spikes, where the units sit at -12 um.
    let y = probe(1000.0);
    let spikes = synthetic(1000.0, 80, 30, &|b, _| zigzag(b), 12..18);
    let estimate = estimate_drift(&y, &spikes.view(), 30, &DriftSettings::default(), 2).unwrap();
    for b in 12..18 {
        assert_eq!(estimate.spike_counts()[b], 0);
        assert_eq!(estimate.batch_shifts(b).unwrap(), [0.0], "batch {b}");
    }
    let spiking = (0..12).chain(18..30);
    let (offset, worst) = error_against(&estimate, 0, spiking, zigzag);
    assert!((offset - zigzag(18)).abs() < 1.0, "offset {offset} um");
    assert!(worst < 1.5, "worst error {worst} um");
}

#[test]
fn drift_without_spikes_is_zero() {
    let y = probe(3840.0);
    let none = DriftSpikes {
        depth: &[],
        amplitude: &[],
        batch: &[],
    };
    let settings = DriftSettings {
        nblocks: 5,
        ..DriftSettings::default()
    };
    let estimate = estimate_drift(&y, &none, 7, &settings, 2).unwrap();
    assert_eq!(estimate.n_batches(), 7);
    assert_eq!(estimate.dshift(), [0.0; 63]);
    assert_eq!(estimate.spike_counts(), [0; 7]);
    assert_eq!(estimate.block_centres().len(), 9);
    assert!(estimate.batch_shifts(7).is_none());
}

#[test]
fn drift_settings_default_to_kilosort4s() {
    let s = DriftSettings::default();
    assert_eq!((s.nblocks, s.binning_depth, s.sig_interp), (1, 5.0, 20.0));
    assert_eq!((s.drift_smoothing, s.th_universal), ([0.5; 3], 9.0));
}

#[test]
fn drift_refuses_bad_input() {
    let y = probe(200.0);
    let (depth, amplitude, batch) = ([100.0], [20.0], [0]);
    let one = DriftSpikes {
        depth: &depth,
        amplitude: &amplitude,
        batch: &batch,
    };
    let default = DriftSettings::default();
    let input = |r: Result<DriftEstimate, Error>| matches!(r, Err(Error::Input { .. }));
    let setting = |r: Result<DriftEstimate, Error>| matches!(r, Err(Error::Setting { .. }));
    assert!(estimate_drift(&y, &one, 1, &default, 2).is_ok());
    assert!(input(estimate_drift(&[], &one, 1, &default, 2)));
    assert!(input(estimate_drift(
        &[20.0, f32::NAN],
        &one,
        1,
        &default,
        2
    )));
    assert!(input(estimate_drift(&y, &one, 0, &default, 2)));
    let spike = |d: f64, a: f64, b: usize| {
        let (d, a, b) = ([d], [a], [b]);
        estimate_drift(
            &y,
            &DriftSpikes {
                depth: &d,
                amplitude: &a,
                batch: &b,
            },
            1,
            &default,
            2,
        )
    };
    assert!(input(spike(100.0, 20.0, 1)), "batch index >= n_batches");
    assert!(input(spike(f64::NAN, 20.0, 0)));
    assert!(input(spike(100.0, f64::INFINITY, 0)));
    assert!(
        input(spike(1000.0, 20.0, 0)),
        "depth below the probe's bins"
    );
    assert!(input(spike(-5.0, 20.0, 0)), "depth above the probe's bins");
    assert!(input(spike(100.0, 5.0, 0)), "amplitude below Th_universal");
    let short = DriftSpikes {
        depth: &depth,
        amplitude: &[],
        batch: &batch,
    };
    assert!(input(estimate_drift(&y, &short, 1, &default, 2)));
    // 200 um of probe: 1 + ceil(181 / 5) = 38 bins.
    for settings in [
        DriftSettings {
            nblocks: 0,
            ..default.clone()
        },
        DriftSettings {
            nblocks: 39,
            ..default.clone()
        },
        DriftSettings {
            binning_depth: 0.0,
            ..default.clone()
        },
        DriftSettings {
            binning_depth: 1e-12,
            ..default.clone()
        },
        DriftSettings {
            sig_interp: f64::NAN,
            ..default.clone()
        },
        DriftSettings {
            drift_smoothing: [0.5, -1.0, 0.5],
            ..default.clone()
        },
        DriftSettings {
            th_universal: 100.0,
            ..default.clone()
        },
    ] {
        assert!(
            setting(estimate_drift(&y, &one, 1, &settings, 2)),
            "{settings:?}"
        );
    }
    let five = DriftSettings {
        nblocks: 5,
        ..default
    };
    if let Err(e) = estimate_drift(&y, &one, 1, &five, 2) {
        panic!("{e}");
    }
}

/// Kilosort 4.1.7's own rigid `dshift` from its own drift-pass spikes (`st_drift`, columns
/// depth, amplitude and batch), in `tests/reference/ks4_rigid.npz`: dspk-synapse's 64-channel
/// reference recording (two columns, rows every 20 um from 0 um, 5 batches).
#[test]
fn drift_matches_kilosort_on_its_own_spikes() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/reference/ks4_rigid.npz");
    let mut npz = dspk_io::NpzArchive::open(path).unwrap();
    let st = npz.read("st_drift").unwrap();
    let want = npz.read("dshift").unwrap().to_f64().unwrap();
    assert_eq!(st.shape()[1], 6);
    let st = st.to_f64().unwrap();
    let spikes = Spikes {
        depth: st.chunks_exact(6).map(|s| s[1]).collect(),
        amplitude: st.chunks_exact(6).map(|s| s[2]).collect(),
        batch: st.chunks_exact(6).map(|s| s[4] as usize).collect(),
    };
    let y: Vec<f32> = (0..64).map(|c| 20.0 * (c / 2) as f32).collect();
    let got = estimate_drift(&y, &spikes.view(), want.len(), &DriftSettings::default(), 2).unwrap();
    for (b, (g, w)) in got.dshift().iter().zip(&want).enumerate() {
        assert!((g - w).abs() < 1e-9, "batch {b}: {g} um, Kilosort {w} um");
    }
}

/// A two-column probe of `rows` rows every 20 um: the depths of its channels.
fn two_columns(rows: usize) -> Vec<f32> {
    (0..2 * rows).map(|c| 20.0 * (c / 2) as f32).collect()
}

#[test]
fn drift_is_turned_off_on_probes_too_short_for_the_registration() {
    let default = DriftSettings::default();
    // 8 channels, 60 um: 14 bins, the roll by 0 equals the roll by -14: off, with a warning.
    let off = check_probe(&two_columns(4), &default).unwrap().unwrap();
    assert!(off.contains("drift correction is off"), "{off}");
    assert!(
        off.contains("14 bins") && off.contains("nblocks = 0"),
        "{off}"
    );
    // A tetrode (20 um) and every contact at one depth: off.
    assert!(check_probe(&two_columns(2), &default).unwrap().is_some());
    assert!(check_probe(&[100.0; 4], &default).unwrap().is_some());
    // 12 channels (100 um, 22 bins) and 32 channels (300 um): drift correction runs.
    assert_eq!(check_probe(&two_columns(6), &default).unwrap(), None);
    assert_eq!(check_probe(&two_columns(16), &default).unwrap(), None);
    // nblocks = 0: nothing to decide, whatever the probe.
    let none = DriftSettings {
        nblocks: 0,
        ..default.clone()
    };
    assert_eq!(check_probe(&two_columns(1), &none).unwrap(), None);
}

#[test]
fn drift_refuses_blocks_too_short_for_the_fine_search_before_reading_data() {
    // 32 channels, 300 um: 62 bins, at most 5 blocks of >= 11 bins.
    let y = two_columns(16);
    let blocks = |nblocks| {
        check_probe(
            &y,
            &DriftSettings {
                nblocks,
                ..DriftSettings::default()
            },
        )
    };
    assert_eq!(blocks(5).unwrap(), None);
    for nblocks in [6, 1000] {
        match blocks(nblocks) {
            Err(Error::Setting { name, reason }) => {
                assert_eq!(name, "nblocks");
                assert!(reason.contains("nblocks <= 5"), "{reason}");
            }
            other => panic!("nblocks = {nblocks}: {other:?}"),
        }
    }
}
