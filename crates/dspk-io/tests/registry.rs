//! Format detection and the registry.

mod common;

use std::path::Path;

use common::*;
use dspk_core::RecordingSource;
use dspk_io::{Detection, Error, Format, Registry, open, register};

#[test]
fn open_detects_every_fixture() {
    let si = fixtures().join("si_binary/si_binary_folder");
    for path in [
        si.clone(),
        si.join("binary.json"),
        fixtures().join("zarr_v2/si_default.zarr"),
        fixtures().join("zarr_v3/si_layout_sharded.zarr"),
    ] {
        let recording = open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        check_matrix_recording(recording.as_ref(), true);
    }
    let registry = Registry::default();
    assert_eq!(
        registry.detect(&si).unwrap().name(),
        "spikeinterface-binary"
    );
    assert_eq!(
        registry
            .detect(&fixtures().join("zarr_v3/si_layout_blosc.zarr"))
            .unwrap()
            .name(),
        "zarr"
    );
}

#[test]
fn raw_files_written_here_are_detected() {
    let dir = scratch("registry_raw");
    let source = open(fixtures().join("si_binary/si_binary_folder")).unwrap();
    let data = dir.join("traces.bin");
    let sidecar = dspk_io::write_raw(source.as_ref(), &data, Default::default()).unwrap();
    for path in [&data, &sidecar] {
        assert_eq!(Registry::default().detect(path).unwrap().name(), "dspk-raw");
        check_matrix_recording(open(path).unwrap().as_ref(), true);
    }
}

#[test]
fn unknown_paths_list_the_formats() {
    for path in [
        fixtures().join("README.md"),
        fixtures().join("no such file"),
        fixtures(),
    ] {
        let Err(error) = open(&path) else {
            panic!("{} opened", path.display())
        };
        assert!(matches!(error, Error::UnknownFormat { .. }), "{error}");
        let message = error.to_string();
        for name in ["dspk-raw", "spikeinterface-binary", "zarr"] {
            assert!(message.contains(name), "{message}");
        }
        assert!(message.contains(&path.display().to_string()), "{message}");
    }
}

/// A format another crate could add: `.fixture` files open the SpikeInterface fixture.
struct FixtureFormat;

impl Format for FixtureFormat {
    fn name(&self) -> &str {
        "fixture-test"
    }
    fn detect(&self, path: &Path) -> Detection {
        if path.extension().is_some_and(|e| e == "fixture") {
            Detection::ByName
        } else {
            Detection::No
        }
    }
    fn open(&self, _path: &Path) -> dspk_io::Result<Box<dyn RecordingSource>> {
        open(fixtures().join("si_binary/si_binary_folder"))
    }
}

#[test]
fn other_crates_register_formats() {
    let mut registry = Registry::empty();
    assert!(
        matches!(registry.open("x.fixture"), Err(Error::UnknownFormat { formats, .. }) if formats.is_empty())
    );
    registry.register(FixtureFormat);
    check_matrix_recording(registry.open("x.fixture").unwrap().as_ref(), true);
    // The global registry, used by `open`.
    register(FixtureFormat);
    check_matrix_recording(open("y.fixture").unwrap().as_ref(), true);
    let Err(error) = open("z.unknown") else {
        panic!("opened")
    };
    let error = error.to_string();
    assert!(
        error.contains("fixture-test") && error.contains("zarr"),
        "{error}"
    );
}
