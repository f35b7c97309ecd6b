//! A clone of the repository is complete on its own: no file refers to a folder beside the
//! checkout (the fixtures and CI scripts once lived in one), and the fixtures are in
//! `tests/fixtures`.

use std::path::{Path, PathBuf};

/// The folders and files of the workspace that the repository holds (build output, git's own
/// folder and ignored tool folders left out).
const TRACKED: [&str; 12] = [
    ".cargo",
    ".ci",
    "benches",
    "crates",
    "docs",
    "examples",
    "src",
    "synapse",
    "tests",
    "Cargo.toml",
    "README.md",
    "clippy.toml",
];

/// Every file under `path` (or `path` itself when it is a file).
fn files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).expect("read folder") {
            files(&entry.expect("folder entry").path(), out);
        }
    } else if path.is_file() {
        out.push(path.to_path_buf());
    }
}

// Guards issue 11: tests read their fixtures, and CI ran its LLVM script, from a `shared`
// folder beside the checkout, which a clone from the public repository does not have.
#[test]
fn no_file_refers_to_a_folder_beside_the_checkout() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // Spelled in two pieces so this file does not match itself.
    let outside = concat!("..", "/shared");
    let mut all = Vec::new();
    for name in TRACKED {
        files(&root.join(name), &mut all);
    }
    assert!(all.len() > 300, "{} files", all.len());
    let offenders: Vec<_> = all
        .iter()
        .filter(|path| {
            std::fs::read(path)
                .map(|bytes| String::from_utf8_lossy(&bytes).contains(outside))
                .unwrap_or(false)
        })
        .collect();
    assert!(offenders.is_empty(), "{outside} named in {offenders:?}");
}

#[test]
fn the_fixtures_are_in_the_repository() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let expected = std::fs::read(fixtures.join("expected_traces.npy")).expect("the matrix");
    // A (3000, 4) int16 array: 6000 x 4 bytes after the header.
    assert!(expected.len() > 24_000, "{} bytes", expected.len());
    for folder in [
        "mtscomp",
        "nwb",
        "openephys",
        "phy",
        "probe",
        "si_binary",
        "spikeglx",
        "zarr_v2",
        "zarr_v3",
    ] {
        assert!(
            fixtures.join(folder).join("expected.json").is_file(),
            "tests/fixtures/{folder}/expected.json"
        );
    }
}
