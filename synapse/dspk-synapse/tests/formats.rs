//! `dspk_synapse::open` picks the right reader for every recording fixture (from the path and
//! metadata only) and each gives the stored matrix; unknown paths list the formats.

mod common;

use common::{CHANNELS, SAMPLES, fixture, i16s, matrix_channel_major};

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
