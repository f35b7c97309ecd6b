//! Equality with Kilosort 4.1.7 on the same input (KILOSORT4.md §11).
//!
//! The input is dspk-synapse's deterministic ground-truth recording ([`reference_config`]); the
//! Kilosort values in `tests/reference/` were computed from it on the H200 machine by
//! `tests/reference/ks4_reference.py` (how to rerun it: that script's doc). Each test first
//! checks that the generator still produces the recording the references were made from.

use std::path::{Path, PathBuf};

use dspk_core::RecordingSource;
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
    std::fs::write(out.join("recording.json"), serde_json::to_string_pretty(&meta).unwrap()).unwrap();
}
