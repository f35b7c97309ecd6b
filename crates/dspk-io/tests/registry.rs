//! Format detection and the registry.

mod common;

use std::path::Path;

use common::*;
use dspk_core::RecordingSource;
use dspk_io::{Detection, Error, Format, Registry, open};

#[test]
fn open_detects_every_fixture() {
    let si = fixtures().join("si_binary/si_binary_folder");
    let zarr = [
        fixtures().join("zarr_v2/si_default.zarr"),
        fixtures().join("zarr_v3/si_layout_sharded.zarr"),
    ];
    let mut readable = vec![si.clone(), si.join("binary.json")];
    if cfg!(feature = "zarr") {
        readable.extend(zarr.iter().cloned());
    } else {
        // Without the feature a Zarr store is still recognised, and opening it names the
        // feature instead of reading nothing or saying no format fits.
        for path in &zarr {
            let error = open(path).err().expect("no Zarr reader compiled in");
            assert!(
                matches!(error, Error::Unsupported { .. })
                    && error.to_string().contains("`zarr` feature"),
                "{error}"
            );
        }
    }
    for path in readable {
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
    for path in [fixtures().join("README.md"), fixtures()] {
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
    let dir = scratch("registry_fixture_format");
    let (fixture, unknown) = (dir.join("x.fixture"), dir.join("z.unknown"));
    std::fs::write(&fixture, b"").unwrap();
    std::fs::write(&unknown, b"").unwrap();
    let mut registry = Registry::empty();
    assert!(
        matches!(registry.open(&fixture), Err(Error::UnknownFormat { formats, .. }) if formats.is_empty())
    );
    registry.register(FixtureFormat);
    check_matrix_recording(registry.open(&fixture).unwrap().as_ref(), true);
    let mut all = Registry::default();
    all.register(FixtureFormat);
    let Err(error) = all.open(&unknown) else {
        panic!("opened")
    };
    let error = error.to_string();
    assert!(
        error.contains("fixture-test") && error.contains("zarr"),
        "{error}"
    );
    // `open` uses this crate's formats only: a registry built elsewhere changes nothing.
    assert!(matches!(open(&fixture), Err(Error::UnknownFormat { .. })));
}

/// The error `open` gives for `path`.
fn open_err(path: &Path) -> Error {
    match open(path) {
        Ok(_) => panic!("{} opened", path.display()),
        Err(error) => error,
    }
}

/// A path that does not exist says so (it said "no format recognises this path" before).
#[test]
fn missing_paths_say_they_do_not_exist() {
    let path = fixtures().join("no such file");
    let error = open_err(&path);
    assert!(matches!(error, Error::NotFound { .. }), "{error}");
    assert_eq!(
        error.to_string(),
        format!("{}: no such file or folder", path.display())
    );
    // A path through a file (ENOTDIR) is an I/O error with the system's reason, not a format
    // that does not fit: the branch a permission error takes, testable as root.
    let error = open_err(&fixtures().join("README.md/inside"));
    assert!(matches!(error, Error::Io { .. }), "{error}");
}

/// A folder that cannot be listed says permission denied (a Zarr store said "array is
/// missing" before). Root reads any folder whatever its mode, so the check is skipped when
/// the folder stays readable after `chmod 000`.
#[cfg(unix)]
#[test]
fn unreadable_folders_say_permission_denied() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("registry_unreadable");
    let store = dir.join("store.zarr");
    std::fs::create_dir(&store).unwrap();
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o000)).unwrap();
    let readable = std::fs::read_dir(&store).is_ok();
    let result = open(&store).map(|_| ());
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o755)).unwrap();
    if readable {
        return; // Running as root: permissions do not deny, nothing to check.
    }
    let error = result.unwrap_err();
    assert!(matches!(error, Error::Io { .. }), "{error}");
    let message = error.to_string().to_lowercase();
    assert!(message.contains("permission denied"), "{message}");
}

/// A two-dimensional `.npy` says it needs a sample rate and how to give one (it was an
/// unknown format before).
#[test]
fn npy_files_say_they_need_a_rate() {
    let path = data().join("matrix_c_le.npy");
    let error = open_err(&path);
    assert!(matches!(error, Error::Invalid { .. }), "{error}");
    let message = error.to_string();
    assert!(
        message.contains("no sample rate") && message.contains("open_npy_recording"),
        "{message}"
    );
}
