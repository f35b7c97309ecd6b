//! Shared helpers of the dspk-io tests: fixture paths, the expected matrix, scratch folders.

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};

use dspk_core::RecordingSource;

/// The workspace's `tests/fixtures` folder (this crate is at `crates/dspk-io`).
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// This crate's own test files (`tests/data`, written by `tests/data/make_npy.py`).
pub fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

/// A fresh, empty scratch folder for one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("dspk-io")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch folder");
    dir
}

pub const SAMPLES: usize = 3000;
pub const CHANNELS: usize = 4;
pub const GAINS: [f64; 4] = [0.195, 0.5, 1.0, 2.34375];
pub const OFFSETS: [f64; 4] = [0.0, -10.0, 5.5, 100.0];
pub const IDS: [&str; 4] = ["A0", "A1", "A2", "A3"];

/// The stored matrix `v[t][c]` of `tests/fixtures/README.md`, from its formula.
pub fn matrix_value(t: usize, c: usize) -> i16 {
    if t == 100 {
        return i16::MAX;
    }
    if t == 101 {
        return i16::MIN;
    }
    let h = (t as u32)
        .wrapping_mul(2_654_435_761)
        .wrapping_add((c as u32).wrapping_mul(40503));
    let v = ((37 * (c + 1) * t + 1000 * c) % 4001) as i32 - 2000 + ((h >> 24) as i32 - 128);
    v as i16
}

/// The matrix channel-major, as `read_stored` returns it for all channels.
pub fn matrix_channel_major() -> Vec<i16> {
    (0..CHANNELS)
        .flat_map(|c| (0..SAMPLES).map(move |t| matrix_value(t, c)))
        .collect()
}

/// Reads every stored value of `source` (channel-major) as i16.
pub fn read_all_i16(source: &dyn RecordingSource) -> Vec<i16> {
    let info = source.info();
    let mut bytes = vec![0u8; info.num_channels() * info.num_samples as usize * 2];
    source
        .read_stored(&info.all_channels(), 0..info.num_samples, &mut bytes)
        .expect("read_stored");
    bytes
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect()
}

/// Checks that `source` holds exactly the fixture matrix, with the fixture's ids, gains and
/// offsets (when `scaled_as_fixture`), passes the conformance suite, and reads windows that
/// straddle any chunking the same as a whole read.
pub fn check_matrix_recording(source: &dyn RecordingSource, scaled_as_fixture: bool) {
    let info = source.info();
    assert_eq!(info.num_channels(), CHANNELS);
    assert_eq!(info.num_samples, SAMPLES as u64);
    assert_eq!(info.stored_format, dspk_core::SampleFormat::I16);
    let all = read_all_i16(source);
    assert_eq!(all, matrix_channel_major());
    // The int16 extremes survive.
    assert_eq!(all[100], i16::MAX);
    assert_eq!(all[101], i16::MIN);
    if scaled_as_fixture {
        assert_eq!(
            info.sample_rate,
            dspk_core::SampleRate::from_hz(30000).unwrap()
        );
        for (c, channel) in info.channels.iter().enumerate() {
            assert_eq!(channel.name, IDS[c]);
            assert_eq!(channel.gain, GAINS[c]);
            assert_eq!(channel.offset, OFFSETS[c]);
            assert_eq!(channel.unit, "uV");
        }
        // read = stored * gain + offset, through dspk_core::scale.
        let mut scaled = vec![0f32; 2 * 50];
        source.read(&[3, 1], 990..1040, &mut scaled).unwrap();
        for (k, &c) in [3usize, 1].iter().enumerate() {
            for s in 0..50 {
                let expected =
                    dspk_core::scale(f64::from(matrix_value(990 + s, c)), GAINS[c], OFFSETS[c]);
                assert_eq!(scaled[k * 50 + s], expected);
            }
        }
    }
    // Windows of odd sizes over channel subsets in any order.
    for (channels, range) in [
        (vec![2usize], 1000..1100),
        (vec![3, 0], 0..3000),
        (vec![1, 1, 2], 1023..2049),
        (vec![0, 1, 2, 3], 2999..3000),
    ] {
        let m = (range.end - range.start) as usize;
        let mut bytes = vec![0u8; channels.len() * m * 2];
        source
            .read_stored(&channels, range.clone(), &mut bytes)
            .unwrap();
        for (k, &c) in channels.iter().enumerate() {
            for s in 0..m {
                let at = (k * m + s) * 2;
                let value = i16::from_le_bytes([bytes[at], bytes[at + 1]]);
                assert_eq!(
                    value,
                    matrix_value(range.start as usize + s, c),
                    "channel {c} sample {}",
                    range.start as usize + s
                );
            }
        }
    }
    dspk_core::test_util::check_recording_source(source);
}
