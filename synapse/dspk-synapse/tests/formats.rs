//! `dspk_synapse::open` picks the right reader for every recording fixture (from the path and
//! metadata only) and each gives the stored matrix; unknown paths list the formats.

mod common;

use common::{CHANNELS, SAMPLES, fixture, i16s, matrix_channel_major, writable_copy};

/// The recording fixtures, as a user would point at them.
const RECORDINGS: &[&str] = &[
    "spikeglx/np1/fixture_g0/fixture_g0_imec0/fixture_g0_t0.imec0.ap.bin",
    "spikeglx/np1/fixture_g0/fixture_g0_imec0/fixture_g0_t0.imec0.ap.meta",
    "spikeglx/np2/fixture2_g0/fixture2_g0_imec0/fixture2_g0_t0.imec0.ap.bin",
    "spikeglx/np1_subset/fixture3_g0/fixture3_g0_imec0/fixture3_g0_t0.imec0.ap.bin",
    "mtscomp/time_diff/fixture_g0_t0.imec0.ap.cbin",
    "mtscomp/time_and_spatial_diff/fixture_g0_t0.imec0.ap.cbin",
    "openephys/2024-05-01_12-00-00/Record Node 101/experiment1/recording1",
    "nwb/pynwb_contiguous.nwb",
    "nwb/pynwb_chunked_gzip.nwb",
    "nwb/neuroconv.nwb",
    "nwb/hdmf_zarr.nwb.zarr",
    "phy/si_export",
    // dspk-io's own formats stay reachable through the same call.
    "si_binary/si_binary_folder",
    "zarr_v2/si_default.zarr",
];

#[test]
fn every_recording_fixture_opens_by_detection() {
    let expected = matrix_channel_major();
    for relative in RECORDINGS {
        let recording =
            dspk_synapse::open(fixture(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"));
        let info = recording.info();
        assert_eq!(info.num_samples, SAMPLES as u64, "{relative}");
        assert!(info.num_channels() >= CHANNELS, "{relative}");
        let channels: Vec<usize> = (0..CHANNELS).collect();
        let mut bytes = vec![0u8; CHANNELS * SAMPLES * 2];
        recording
            .read_stored(&channels, 0..SAMPLES as u64, &mut bytes)
            .unwrap_or_else(|e| panic!("{relative}: {e}"));
        assert_eq!(i16s(&bytes), expected, "{relative}");
    }
}

#[test]
fn formats_are_listed_when_nothing_matches() {
    let dir = std::env::temp_dir().join(format!("dspk-synapse-formats-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("notes.txt");
    std::fs::write(&path, "not a recording").unwrap();
    let Err(error) = dspk_synapse::open(&path) else {
        panic!("a text file opened as a recording");
    };
    let message = error.to_string();
    for name in [
        "spikeglx",
        "mtscomp",
        "openephys-binary",
        "nwb",
        "intan-rhd",
        "phy",
        "zarr",
    ] {
        assert!(message.contains(name), "{name} missing from: {message}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A SpikeGLX run folder (`*_g0/`) and probe folder (`*_g0_imec0/`) open their `ap` stream
/// (they were unknown formats before), as does a `.meta` given for its `.bin`.
#[test]
fn spikeglx_folders_and_meta_files_open() {
    let expected = matrix_channel_major();
    for relative in [
        "spikeglx/np1/fixture_g0",
        "spikeglx/np1/fixture_g0/fixture_g0_imec0",
        "spikeglx/np1/fixture_g0/fixture_g0_imec0/fixture_g0_t0.imec0.ap.meta",
    ] {
        let recording =
            dspk_synapse::open(fixture(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"));
        assert_eq!(recording.info().num_samples, SAMPLES as u64, "{relative}");
        let channels: Vec<usize> = (0..CHANNELS).collect();
        let mut bytes = vec![0u8; CHANNELS * SAMPLES * 2];
        recording
            .read_stored(&channels, 0..SAMPLES as u64, &mut bytes)
            .unwrap();
        assert_eq!(i16s(&bytes), expected, "{relative}");
    }
}

/// The error `dspk_synapse::open` gives for `path`.
fn open_err(path: &std::path::Path) -> dspk_io::Error {
    match dspk_synapse::open(path) {
        Ok(_) => panic!("{} opened", path.display()),
        Err(error) => error,
    }
}

/// A run folder with two probes is an error listing both streams.
#[test]
fn spikeglx_folders_with_several_streams_list_them() {
    let run = std::env::temp_dir().join(format!("dspk-synapse-run-{}/x_g0", std::process::id()));
    let _ = std::fs::remove_dir_all(&run);
    let probe = fixture("spikeglx/np1/fixture_g0/fixture_g0_imec0");
    writable_copy(&probe, &run.join("x_g0_imec0"));
    writable_copy(&probe, &run.join("x_g0_imec1"));
    let error = open_err(&run);
    let message = error.to_string();
    assert!(
        message.contains("2 SpikeGLX streams")
            && message.contains("x_g0_imec0/fixture_g0_t0.imec0.ap.bin")
            && message.contains("x_g0_imec1/fixture_g0_t0.imec0.ap.bin"),
        "{message}"
    );
    std::fs::remove_dir_all(run.parent().unwrap()).unwrap();
}

/// A path that does not exist says so (it said "no format recognises this path" before).
#[test]
fn missing_paths_say_they_do_not_exist() {
    let path = fixture("spikeglx/np1/no_such_g0");
    let error = open_err(&path);
    assert!(matches!(error, dspk_io::Error::NotFound { .. }), "{error}");
}

/// A synapse reader's error reached through `open` names the file once (it read
/// "X: dspk-synapse: X: ..." before).
#[test]
fn errors_name_the_file_once() {
    let dir = std::env::temp_dir().join(format!("dspk-once-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    writable_copy(&fixture("spikeglx/np1/fixture_g0/fixture_g0_imec0"), &dir);
    let bin = dir.join("fixture_g0_t0.imec0.ap.bin");
    let bytes = std::fs::read(&bin).unwrap();
    std::fs::write(&bin, &bytes[..bytes.len() - 10]).unwrap();
    let message = open_err(&bin).to_string();
    let shown = bin.display().to_string();
    assert_eq!(message.matches(&shown).count(), 1, "{message}");
    assert!(
        message.starts_with(&format!("{shown}: file is truncated")),
        "{message}"
    );
    assert!(!message.contains("dspk-synapse"), "{message}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `dspk_synapse::open` leaves `dspk_io::open` with `dspk-io`'s formats only (it added the
/// neural formats to a global registry before).
#[test]
fn opening_through_synapse_changes_no_global_registry() {
    let bin = fixture("spikeglx/np1/fixture_g0/fixture_g0_imec0/fixture_g0_t0.imec0.ap.bin");
    dspk_synapse::open(&bin).unwrap();
    assert!(matches!(
        dspk_io::open(&bin),
        Err(dspk_io::Error::UnknownFormat { .. })
    ));
}
