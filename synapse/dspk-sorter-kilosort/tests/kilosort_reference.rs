//! Equality with Kilosort 4.1.7 on the same input (KILOSORT4.md §11).
//!
//! The input is dspk-synapse's deterministic ground-truth recording ([`reference_config`]); the
//! Kilosort values in `tests/reference/` were computed from it on the H200 machine by
//! `tests/reference/ks4_reference.py` (how to rerun it: that script's doc). Each test first
//! checks that the generator still produces the recording the references were made from.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cubecl::client::Client;
use dspk_core::RecordingSource;
use dspk_core::test_util::for_each_runtime;
use dspk_sorter_kilosort::detection::centres::{CentreSettings, template_centres};
use dspk_sorter_kilosort::{FrontHalf, Kilosort4, KilosortSettings, SortProbe};
use dspk_synapse::groundtruth::{Drift, GroundTruthConfig, GroundTruthRecording};

/// The reference recording: 64 channels, 10 s, 16 units, 20 µm of linear drift, seed 12.
fn reference_config() -> GroundTruthConfig {
    GroundTruthConfig {
        channels: 64,
        num_samples: 300_000,
        units: 16,
        drift: Drift::Linear { total_um: 20.0 },
        seed: 12,
        ..GroundTruthConfig::default()
    }
}

/// The recording's stored samples, interleaved (`samples x channels`) int16 little-endian:
/// Kilosort's input layout.
fn interleaved_bytes(recording: &GroundTruthRecording) -> Vec<u8> {
    let info = recording.info();
    let channels = info.num_channels();
    let samples = info.num_samples;
    let mut stored = vec![0u8; channels * samples as usize * 2];
    recording
        .read_stored(&info.all_channels(), 0..samples, &mut stored)
        .expect("the generator reads its own range");
    let n = samples as usize;
    let mut out = vec![0u8; stored.len()];
    for c in 0..channels {
        for s in 0..n {
            let from = (c * n + s) * 2;
            let to = (s * channels + c) * 2;
            out[to..to + 2].copy_from_slice(&stored[from..from + 2]);
        }
    }
    out
}

/// FNV-1a, 64 bits: ties the committed references to the generator's output.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn reference_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference")
}

/// Writes the reference input for `ks4_reference.py` into `$DSPK_KS_REF_OUT`.
#[test]
#[ignore = "writes the input of tests/reference/ks4_reference.py; run by hand"]
fn write_reference_input() {
    let out = PathBuf::from(std::env::var("DSPK_KS_REF_OUT").expect("set DSPK_KS_REF_OUT=DIR"));
    std::fs::create_dir_all(&out).unwrap();
    let config = reference_config();
    let recording = GroundTruthRecording::generate(&config).unwrap();
    let bytes = interleaved_bytes(&recording);
    std::fs::write(out.join("recording.bin"), &bytes).unwrap();
    dspk_synapse::probe::write_kilosort_json(&out.join("chanMap.json"), recording.probe()).unwrap();
    let meta = serde_json::json!({
        "file": "recording.bin",
        "n_channels": config.channels,
        "num_samples": config.num_samples,
        "sample_rate_hz": config.sample_rate_hz,
        "gain_uv": config.gain_uv,
        "generator": "dspk_synapse::groundtruth, tests/kilosort_reference.rs reference_config()",
        "fnv1a64_interleaved_int16": format!("{:016x}", fnv1a64(&bytes)),
    });
    std::fs::write(
        out.join("recording.json"),
        serde_json::to_string_pretty(&meta).unwrap(),
    )
    .unwrap();
}

/// The committed arrays of one reference file.
struct Reference {
    archive: dspk_io::NpzArchive,
}

impl Reference {
    fn open(name: &str) -> Self {
        Self {
            archive: dspk_io::NpzArchive::open(reference_dir().join(name)).unwrap(),
        }
    }

    /// Array `name` as f64 with its shape.
    fn array(&mut self, name: &str) -> (Vec<f64>, Vec<usize>) {
        let array = self.archive.read(name).unwrap();
        let shape = array.shape().iter().map(|&d| d as usize).collect();
        (array.to_f64().unwrap(), shape)
    }
}

/// The regenerated reference recording, after checking it is the one Kilosort saw.
fn reference_recording() -> GroundTruthRecording {
    let recording = GroundTruthRecording::generate(&reference_config()).unwrap();
    let meta: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(reference_dir().join("recording.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        meta["fnv1a64_interleaved_int16"].as_str().unwrap(),
        format!("{:016x}", fnv1a64(&interleaved_bytes(&recording))),
        "the generator no longer makes the recording the references were computed from: \
         regenerate them (tests/reference/ks4_reference.py)"
    );
    recording
}

fn sort_probe(recording: &GroundTruthRecording) -> SortProbe {
    SortProbe::from_probe(recording.probe(), recording.info().num_channels(), &[]).unwrap()
}

/// Settings of the reference runs: Kilosort4's defaults (its thresholds too), our closed-form
/// universal templates.
fn reference_settings(nblocks: usize) -> KilosortSettings {
    KilosortSettings {
        nblocks,
        th_universal: 9.0,
        th_learned: 8.0,
        templates_from_data: false,
        templates_file: Some(reference_dir().join("universal_templates.npz")),
        ..KilosortSettings::default()
    }
}

#[test]
fn template_centres_and_nearest_channels_equal_kilosort4s() {
    let recording = reference_recording();
    let probe = sort_probe(&recording);
    let centres = template_centres(
        probe.positions(),
        probe.shanks(),
        &CentreSettings::default(),
    )
    .unwrap();
    let mut reference = Reference::open("ks4_static.npz");
    let (xcup, _) = reference.array("xcup");
    let (ycup, _) = reference.array("ycup");
    assert_eq!(centres.count(), xcup.len(), "number of centres");
    for g in 0..centres.count() {
        let [x, y] = centres.position(g);
        assert_eq!(
            (f64::from(x), f64::from(y)),
            (xcup[g], ycup[g]),
            "centre {g}"
        );
    }
    // iC is [nearest_chans, G]: the same channel sets except where the 10th place ties.
    let (ic, shape) = reference.array("iC");
    let (nc, g_count) = (shape[0], shape[1]);
    assert_eq!((nc, g_count), (centres.nc(), centres.count()));
    let positions = probe.positions();
    let mut differing = 0;
    for g in 0..g_count {
        let mut ours: Vec<u32> = centres.nearest_channels()[g * nc..(g + 1) * nc].to_vec();
        let mut theirs: Vec<u32> = (0..nc).map(|i| ic[i * g_count + g] as u32).collect();
        ours.sort_unstable();
        theirs.sort_unstable();
        if ours != theirs {
            differing += 1;
            // Only a tie at the last place may differ: the distances of the sets' differing
            // members are equal.
            let [cx, cy] = centres.position(g);
            let d = |c: u32| {
                let p = positions[c as usize];
                (p[0] - cx).powi(2) + (p[1] - cy).powi(2)
            };
            let only_ours: Vec<f32> = ours
                .iter()
                .filter(|c| !theirs.contains(c))
                .map(|&c| d(c))
                .collect();
            let only_theirs: Vec<f32> = theirs
                .iter()
                .filter(|c| !ours.contains(c))
                .map(|&c| d(c))
                .collect();
            assert_eq!(only_ours.len(), only_theirs.len());
            for (a, b) in only_ours.iter().zip(&only_theirs) {
                assert_eq!(a, b, "centre {g}: a set difference that is not a tie");
            }
        }
    }
    println!("{differing} of {g_count} centres differ from Kilosort4 at a tie");
}

/// The front half with `settings` on `client`, no progress.
fn front_for(
    client: &Client,
    recording: GroundTruthRecording,
    probe: &SortProbe,
    settings: &KilosortSettings,
) -> FrontHalf {
    Kilosort4::new(settings.clone())
        .run_front(client, Arc::new(recording), probe, &mut |_| {})
        .unwrap()
}

/// Samples from a Kilosort batch edge within which its circular high-pass (which wraps each
/// batch's end into its start) and its edge rule (a batch sees only its own samples in the
/// maximum over ±nt0min) may give other spikes than ours.
const EDGE: u64 = 300;

/// The median, 99th percentile and maximum of `values` (sorted in place).
fn quantiles(values: &mut [f64]) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99), at(1.0))
}

fn near_batch_edge(sample: u64, total: u64) -> bool {
    let offset = sample % 60_000;
    !(EDGE..60_000 - EDGE).contains(&offset) || sample + EDGE >= total
}

/// `Wrot` tolerance, relative to its Frobenius norm. Kilosort's batch 0 (the only one its
/// covariance uses here) starts with 61 copies of the first sample and is filtered circularly,
/// so its first and last ~200 samples differ from our filter's (the documented improvement);
/// measured: 2.8e-4 on lavapipe.
const WROT_TOLERANCE: f64 = 5e-4;

/// `nblocks = 0`, our universal templates: `Wrot` within [`WROT_TOLERANCE`]; the
/// spikes (sample, centre, template combination) of Kilosort4's `st0` away from batch edges
/// found, and no others; amplitudes, depths and features within float tolerance.
#[test]
fn static_front_half_matches_kilosort4() {
    for_each_runtime(|target, client| {
        let recording = reference_recording();
        let total = recording.info().num_samples;
        let probe = sort_probe(&recording);
        let front = front_for(client, recording, &probe, &reference_settings(0));
        let mut reference = Reference::open("ks4_static.npz");

        // Kilosort whitens stored integers, we whiten µV: its Wrot is ours times the gain.
        let gain = reference_config().gain_uv;
        let ours: Vec<f64> = front
            .fit
            .whitening
            .dense()
            .iter()
            .map(|w| w * gain)
            .collect();
        let (theirs, shape) = reference.array("Wrot");
        assert_eq!(shape, vec![probe.len(), probe.len()]);
        let norm = theirs.iter().map(|v| v * v).sum::<f64>().sqrt();
        let difference = ours
            .iter()
            .zip(&theirs)
            .map(|(a, b)| (a - b).powi(2))
            .sum::<f64>()
            .sqrt();
        println!(
            "{target}: Wrot relative difference {:e} (Frobenius)",
            difference / norm
        );
        // Each row's neighbourhood (its non-zero columns) is Kilosort's, except at a tie at
        // the last place (equal distances).
        let n = probe.len();
        let positions = probe.positions();
        let distance = |a: usize, b: usize| {
            let (p, q) = (positions[a], positions[b]);
            (p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2)
        };
        let mut tied_rows = 0;
        for row in 0..n {
            let mine: Vec<usize> = (0..n).filter(|&j| ours[row * n + j] != 0.0).collect();
            let kilosorts: Vec<usize> = (0..n).filter(|&j| theirs[row * n + j] != 0.0).collect();
            if mine != kilosorts {
                tied_rows += 1;
                let only = |a: &[usize], b: &[usize]| -> Vec<f32> {
                    a.iter()
                        .filter(|j| !b.contains(j))
                        .map(|&j| distance(row, j))
                        .collect()
                };
                assert_eq!(
                    only(&mine, &kilosorts),
                    only(&kilosorts, &mine),
                    "{target}: row {row}'s neighbourhood differs beyond a tie"
                );
            }
        }
        println!("{target}: {tied_rows} of {n} whitening neighbourhoods differ at a tie");
        assert!(
            difference <= WROT_TOLERANCE * norm,
            "{target}: Wrot differs by {:e} of its norm",
            difference / norm
        );

        // Kilosort's nearest channels per centre ([nc, G]): features are compared channel by
        // channel (the order of tied channels may differ), depths where the sets are equal.
        let (ic, ic_shape) = reference.array("iC");
        let nc = ic_shape[0];
        let their_channels =
            |g: usize| -> Vec<u32> { (0..nc).map(|i| ic[i * ic_shape[1] + g] as u32).collect() };
        let our_channels =
            |g: usize| front.centres.nearest_channels()[g * nc..(g + 1) * nc].to_vec();
        let (st0, shape) = reference.array("st0");
        let (tf, tf_shape) = reference.array("tF");
        let n = shape[0];
        let per_spike = tf_shape[1] * tf_shape[2];
        let theirs: std::collections::HashMap<(u64, u32), usize> = (0..n)
            .map(|i| {
                (
                    (
                        (st0[i * 6] * 30_000.0).round() as u64,
                        st0[i * 6 + 5] as u32,
                    ),
                    i,
                )
            })
            .collect();
        let spikes = &front.spikes;
        let ours: std::collections::HashMap<(u64, u32), usize> = (0..spikes.len())
            .map(|i| ((spikes.sample[i], spikes.centre[i]), i))
            .collect();
        let (mut compared, mut missing, mut extra, mut combos) = (0, Vec::new(), Vec::new(), 0);
        let (mut amplitudes, mut depths, mut features) = (Vec::new(), Vec::new(), Vec::new());
        for (&key, &i) in &theirs {
            if near_batch_edge(key.0, total) {
                continue;
            }
            let Some(&j) = ours.get(&key) else {
                missing.push(key);
                continue;
            };
            compared += 1;
            combos += usize::from(u32::from(spikes.combo[j]) != st0[i * 6 + 3] as u32);
            let amplitude = f64::from(spikes.amplitude[j]);
            amplitudes.push((amplitude - st0[i * 6 + 2]).abs() / st0[i * 6 + 2]);
            let g = key.1 as usize;
            let (mine, kilosorts) = (our_channels(g), their_channels(g));
            let (mut sorted_mine, mut sorted_theirs) = (mine.clone(), kilosorts.clone());
            sorted_mine.sort_unstable();
            sorted_theirs.sort_unstable();
            if sorted_mine == sorted_theirs {
                depths.push((f64::from(spikes.depth[j]) - st0[i * 6 + 1]).abs());
            }
            let pcs = per_spike / nc;
            let theirs = &tf[i * per_spike..(i + 1) * per_spike];
            let scale = theirs.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let ours = &spikes.features[j * per_spike..(j + 1) * per_spike];
            let mut worst = 0.0f64;
            for (a, channel) in mine.iter().enumerate() {
                if let Some(b) = kilosorts.iter().position(|c| c == channel) {
                    for q in 0..pcs {
                        let d = f64::from(ours[a * pcs + q]) - theirs[b * pcs + q];
                        worst = worst.max(d.abs());
                    }
                }
            }
            features.push(worst / scale);
        }
        for &key in ours.keys() {
            if !near_batch_edge(key.0, total) && !theirs.contains_key(&key) {
                extra.push(key);
            }
        }
        let (amplitude, depth, feature) = (
            quantiles(&mut amplitudes),
            quantiles(&mut depths),
            quantiles(&mut features),
        );
        println!(
            "{target}: {compared} spikes equal, {} of Kilosort's missing, {} extra, {combos} \
             other combinations; relative amplitude difference (median, 99 %, max) {amplitude:?}, \
             depth difference um {depth:?}, relative feature difference {feature:?}",
            missing.len(),
            extra.len()
        );
        assert!(compared > 500, "{target}: only {compared} spikes compared");
        assert!(
            missing.len() + extra.len() <= compared / 100,
            "{target}: missing {missing:?}, extra {extra:?}"
        );
        assert!(
            combos <= compared / 100,
            "{target}: {combos} combinations differ"
        );
        assert!(amplitude.1 < 2e-3, "{target}: amplitudes {amplitude:?}");
        assert!(depth.1 < 0.5, "{target}: depths {depth:?}");
        assert!(feature.1 < 2e-3, "{target}: features {feature:?}");
    });
}

/// `nblocks = 1`: the rigid shifts within 0.5 µm (one upsampling step is 0.5 µm) of
/// Kilosort4's `dshift`.
#[test]
fn rigid_drift_matches_kilosort4() {
    for_each_runtime(|target, client| {
        let recording = reference_recording();
        let probe = sort_probe(&recording);
        let front = front_for(client, recording, &probe, &reference_settings(1));
        let (theirs, shape) = Reference::open("ks4_rigid.npz").array("dshift");
        let drift = front.drift.expect("nblocks = 1 estimates drift");
        assert_eq!(drift.dshift().len(), shape.iter().product::<usize>());
        println!(
            "{target}: dshift ours {:?}, Kilosort4 {theirs:?}",
            drift.dshift()
        );
        for (b, (a, e)) in drift.dshift().iter().zip(&theirs).enumerate() {
            assert!(
                (a - e).abs() <= 0.5,
                "{target}: batch {b}: {a} um, Kilosort4 {e} um"
            );
        }
    });
}

/// `nblocks = 5` (9 overlapping blocks): the block centres equal Kilosort4's `yblk` and every
/// batch's block shifts lie within 1 µm of its `dshift` (two upsampling steps: the blocks see
/// few spikes on 64 channels, so small differences in the drift-pass spikes can move a block's
/// peak by a step; measured on lavapipe: 0.5 µm, one step).
#[test]
fn nonrigid_drift_matches_kilosort4() {
    for_each_runtime(|target, client| {
        let recording = reference_recording();
        let probe = sort_probe(&recording);
        let front = front_for(client, recording, &probe, &reference_settings(5));
        let mut reference = Reference::open("ks4_nonrigid.npz");
        let (theirs, shape) = reference.array("dshift");
        let (yblk, _) = reference.array("yblk");
        let drift = front.drift.expect("nblocks = 5 estimates drift");
        assert_eq!((drift.n_batches(), drift.n_blocks()), (shape[0], shape[1]));
        assert_eq!(
            drift.block_centres(),
            yblk.as_slice(),
            "{target}: block centres"
        );
        let worst = drift
            .dshift()
            .iter()
            .zip(&theirs)
            .map(|(a, e)| (a - e).abs())
            .fold(0.0, f64::max);
        println!("{target}: non-rigid dshift differs from Kilosort4's by at most {worst} um");
        assert!(
            worst <= 1.0,
            "{target}: ours {:?}, Kilosort4 {theirs:?}",
            drift.dshift()
        );
    });
}
