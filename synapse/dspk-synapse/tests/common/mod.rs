//! What every fixture test needs: where the workspace's `tests/fixtures` is and the stored
//! matrix that every recording fixture holds (`tests/fixtures/README.md`).

#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;

/// Samples in every recording fixture.
pub const SAMPLES: usize = 3000;
/// Neural channels in every recording fixture.
pub const CHANNELS: usize = 4;

/// `tests/fixtures/<relative>` of the workspace (this crate is at `synapse/dspk-synapse`).
pub fn fixture(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(relative)
}

/// The fixtures' stored value at sample `t` of channel `c` (README: "The stored matrix").
pub fn matrix_value(t: usize, c: usize) -> i16 {
    if t == 100 {
        return i16::MAX;
    }
    if t == 101 {
        return i16::MIN;
    }
    let h = (t as u32)
        .wrapping_mul(2_654_435_761)
        .wrapping_add((c as u32).wrapping_mul(40_503));
    let v = ((37 * (c + 1) * t + 1000 * c) % 4001) as i32 - 2000 + ((h >> 24) as i32 - 128);
    i16::try_from(v).expect("the matrix fits in i16")
}

/// The stored matrix channel-major (`out[c * SAMPLES + t]`), as `read_stored` returns it.
pub fn matrix_channel_major() -> Vec<i16> {
    (0..CHANNELS)
        .flat_map(|c| (0..SAMPLES).map(move |t| matrix_value(t, c)))
        .collect()
}

/// Little-endian bytes to i16 values.
pub fn i16s(bytes: &[u8]) -> Vec<i16> {
    bytes
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect()
}

/// `expected.json` of a fixture folder, parsed.
pub fn expected(folder: &str) -> serde_json::Value {
    let path = fixture(folder).join("expected.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The numbers of a JSON array (`expected.json` values), as f64.
pub fn f64s(value: &serde_json::Value) -> Vec<f64> {
    value
        .as_array()
        .expect("a JSON array")
        .iter()
        .map(|v| v.as_f64().expect("a JSON number"))
        .collect()
}

/// Copies the folder `from` into `to` (created), recursively, leaving every copied file
/// writable (a checkout's fixtures may be read-only), so tests can corrupt their copy.
pub fn writable_copy(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            writable_copy(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
            let mut permissions = std::fs::metadata(&target).unwrap().permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            permissions.set_readonly(false);
            std::fs::set_permissions(&target, permissions).unwrap();
        }
    }
}
