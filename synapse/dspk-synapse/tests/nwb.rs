//! NWB `ElectricalSeries` in HDF5 and NWB-Zarr: the fixtures (`tests/fixtures/nwb`) read
//! with the values SpikeInterface's `read_nwb_recording` reports (`expected.json`), windows,
//! partial chunk reads, format detection, and bad input (`tests/nwb_bad/make.py` writes the
//! odd HDF5 files; others are corrupted copies made in a temporary folder).
#![cfg(feature = "nwb")]

mod common;

use std::path::{Path, PathBuf};

use common::{
    CHANNELS, SAMPLES, expected, f64s, fixture, i16s, matrix_channel_major, matrix_value,
    writable_copy,
};
use dspk_core::test_util::check_recording_source;
use dspk_core::{RationalTime, RecordingSource, SampleRate};
use dspk_io::{Detection, Format};
use dspk_synapse::Error;
use dspk_synapse::nwb::{NwbFormat, NwbRecording, list_electrical_series};

const FIXTURES: [&str; 4] = [
    "pynwb_contiguous.nwb",
    "pynwb_chunked_gzip.nwb",
    "neuroconv.nwb",
    "hdmf_zarr.nwb.zarr",
];

fn nwb(name: &str) -> PathBuf {
    fixture(&format!("nwb/{name}"))
}

fn bad(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/nwb_bad")
        .join(name)
}

/// A fresh temporary folder for this test.
fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dspk-nwb-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn read_all_stored(source: &dyn RecordingSource) -> dspk_core::Result<Vec<i16>> {
    let info = source.info();
    let channels = info.all_channels();
    let mut out = vec![0u8; channels.len() * info.num_samples as usize * 2];
    source.read_stored(&channels, 0..info.num_samples, &mut out)?;
    Ok(i16s(&out))
}

/// probeinterface's positions of the probe the pynwb and hdmf-zarr fixtures were written with
/// (`probe/linear4.json`; the same probe's `rel_x`/`rel_y`).
fn linear4_positions() -> Vec<[f64; 2]> {
    let text = std::fs::read_to_string(fixture("probe/linear4.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["probes"][0]["contact_positions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let p = f64s(p);
            [p[0], p[1]]
        })
        .collect()
}

#[test]
fn fixtures_read_the_matrix_with_spikeinterface_gains() {
    let expected = expected("nwb");
    for name in FIXTURES {
        let recording = NwbRecording::open(nwb(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let entry = &expected[name];
        let series = entry["series_path"]
            .as_str()
            .unwrap_or("/acquisition/ElectricalSeries");
        assert_eq!(
            format!("/acquisition/{}", recording.series_name()),
            series,
            "{name}"
        );
        let info = recording.info();
        assert_eq!(info.num_channels(), CHANNELS, "{name}");
        assert_eq!(info.num_samples, SAMPLES as u64, "{name}");
        let rate = entry["starting_time"]["rate"]
            .as_f64()
            .or_else(|| entry["starting_time_zattrs"]["rate"].as_f64())
            .unwrap();
        assert_eq!(
            info.sample_rate,
            SampleRate::from_hz(rate as u64).unwrap(),
            "{name}"
        );
        assert_eq!(info.start_time, RationalTime::ZERO, "{name}");
        // Exact f64 equality: conversion * channel_conversion * 1e6 as SpikeInterface computes.
        let gains: Vec<f64> = info.channels.iter().map(|c| c.gain).collect();
        let offsets: Vec<f64> = info.channels.iter().map(|c| c.offset).collect();
        assert_eq!(gains, f64s(&entry["si_gain_to_uV"]), "{name}");
        assert_eq!(offsets, f64s(&entry["si_offset_to_uV"]), "{name}");
        assert!(info.channels.iter().all(|c| c.unit == "uV"), "{name}");
        assert_eq!(
            read_all_stored(&recording).unwrap(),
            matrix_channel_major(),
            "{name}"
        );
        check_recording_source(&recording);
    }
}

#[test]
fn fixtures_channel_names_and_probes() {
    // Channel names are the electrodes table's `channel_name` column (as h5py reads it).
    for (name, prefix) in [
        ("pynwb_contiguous.nwb", "CH"),
        ("pynwb_chunked_gzip.nwb", "CH"),
        ("hdmf_zarr.nwb.zarr", "CH"),
        ("neuroconv.nwb", "A"),
    ] {
        let recording = NwbRecording::open(nwb(name)).unwrap();
        let names: Vec<&str> = recording
            .info()
            .channels
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        let wanted: Vec<String> = (0..CHANNELS).map(|c| format!("{prefix}{c}")).collect();
        assert_eq!(names, wanted, "{name}");
    }
    for name in [
        "pynwb_contiguous.nwb",
        "pynwb_chunked_gzip.nwb",
        "hdmf_zarr.nwb.zarr",
    ] {
        let recording = NwbRecording::open(nwb(name)).unwrap();
        let probe = recording
            .probe()
            .unwrap_or_else(|| panic!("{name}: no probe"));
        assert_eq!(
            probe.channel_positions(CHANNELS).unwrap(),
            linear4_positions(),
            "{name}"
        );
        assert!(probe.contacts().iter().all(|c| c.shank == 0), "{name}");
    }
    // neuroconv's table has no x/y/rel_x/rel_y columns.
    let recording = NwbRecording::open(nwb("neuroconv.nwb")).unwrap();
    assert!(recording.probe().is_none());
}

#[test]
fn windows_at_odd_offsets_equal_the_whole() {
    let windows: [(&[usize], std::ops::Range<u64>); 6] = [
        (&[0, 1, 2, 3], 997..1003),
        (&[3, 1], 1..2999),
        (&[2], 999..2001),
        (&[1, 2], 0..1),
        (&[0, 3], 2999..3000),
        (&[3, 0, 2], 95..105),
    ];
    for name in FIXTURES {
        let recording = NwbRecording::open(nwb(name)).unwrap();
        for (channels, range) in &windows {
            let n = (range.end - range.start) as usize;
            let mut out = vec![0u8; channels.len() * n * 2];
            recording
                .read_stored(channels, range.clone(), &mut out)
                .unwrap();
            let wanted: Vec<i16> = channels
                .iter()
                .flat_map(|&c| range.clone().map(move |t| matrix_value(t as usize, c)))
                .collect();
            assert_eq!(i16s(&out), wanted, "{name} {channels:?} {range:?}");
            let mut scaled = vec![0f32; channels.len() * n];
            recording
                .read(channels, range.clone(), &mut scaled)
                .unwrap();
            for (k, &c) in channels.iter().enumerate() {
                let info = &recording.info().channels[c];
                for s in 0..n {
                    let stored = f64::from(wanted[k * n + s]);
                    assert_eq!(
                        scaled[k * n + s],
                        (stored * info.gain + info.offset) as f32,
                        "{name}"
                    );
                }
            }
        }
    }
}

#[test]
fn windows_decode_only_the_chunks_they_touch() {
    // pynwb_chunked_gzip.nwb: chunks of 1000 samples x 4 channels (3 chunks). The HDF5
    // counters are the file's: opening already decoded the chunked electrodes-table columns,
    // so count from there.
    let recording = NwbRecording::open(nwb("pynwb_chunked_gzip.nwb")).unwrap();
    assert_eq!(recording.info().metadata["nwb_data_layout"], "chunked");
    let opened = recording.cache_stats();
    let mut out = vec![0u8; 4 * 1000 * 2];
    recording
        .read_stored(&[0, 1, 2, 3], 1000..2000, &mut out)
        .unwrap();
    let after = recording.cache_stats();
    assert_eq!(
        after.decodes - opened.decodes,
        1,
        "one chunk for 1000..2000"
    );
    let mut out = vec![0u8; 2 * 2 * 2];
    recording.read_stored(&[0, 3], 999..1001, &mut out).unwrap();
    let last = recording.cache_stats();
    assert_eq!(
        last.decodes - after.decodes,
        1,
        "999..1001 adds chunk 0 only"
    );
    assert_eq!(last.hits - after.hits, 1, "chunk 1 came from the cache");

    // The Zarr store has one chunk (3000 x 4): decoded once for several windows.
    let recording = NwbRecording::open(nwb("hdmf_zarr.nwb.zarr")).unwrap();
    let mut out = vec![0u8; 10 * 2];
    for start in [0, 1500, 2990] {
        recording
            .read_stored(&[1], start..start + 10, &mut out)
            .unwrap();
    }
    let stats = recording.cache_stats();
    assert_eq!((stats.decodes, stats.hits), (1, 2));

    // Contiguous data has no chunks: positional reads of the rows.
    let recording = NwbRecording::open(nwb("pynwb_contiguous.nwb")).unwrap();
    assert_eq!(recording.info().metadata["nwb_data_layout"], "contiguous");
    let opened = recording.cache_stats();
    recording.read_stored(&[1], 0..10, &mut out).unwrap();
    assert_eq!(recording.cache_stats().decodes, opened.decodes);
}

#[test]
fn series_are_listed_and_picked_by_name() {
    assert_eq!(
        list_electrical_series(nwb("neuroconv.nwb")).unwrap(),
        ["ElectricalSeriesRaw"]
    );
    assert_eq!(
        list_electrical_series(nwb("hdmf_zarr.nwb.zarr")).unwrap(),
        ["ElectricalSeries"]
    );
    // `Position` in /acquisition is not an ElectricalSeries.
    assert_eq!(
        list_electrical_series(bad("two_series.nwb")).unwrap(),
        ["AnotherSeries", "ElectricalSeries"]
    );
    let first = NwbRecording::open(bad("two_series.nwb")).unwrap();
    assert_eq!(first.series_name(), "AnotherSeries");
    let named = NwbRecording::open_series(bad("two_series.nwb"), "ElectricalSeries").unwrap();
    assert_eq!(named.series_name(), "ElectricalSeries");

    for (path, there) in [
        (nwb("neuroconv.nwb"), "ElectricalSeriesRaw"),
        (nwb("hdmf_zarr.nwb.zarr"), "ElectricalSeries"),
    ] {
        let error = NwbRecording::open_series(&path, "Nope").unwrap_err();
        let message = error.to_string();
        assert!(
            matches!(error, Error::Io(dspk_io::Error::Missing { .. })),
            "{message}"
        );
        assert!(
            message.contains("`Nope`") && message.contains(there),
            "{message}"
        );
        assert!(message.contains(&*path.to_string_lossy()), "{message}");
        // Not a series either.
        assert!(NwbRecording::open_series(&path, "Position").is_err());
    }
}

#[test]
fn generated_files_read_their_values() {
    // good.nwb: 64 samples of the matrix, chunks (16, 4), x/y positions, two shanks,
    // starting_time 2.5 s at 20 kHz.
    let recording = NwbRecording::open(bad("good.nwb")).unwrap();
    let info = recording.info();
    assert_eq!(info.num_samples, 64);
    assert_eq!(info.sample_rate, SampleRate::from_hz(20_000).unwrap());
    assert_eq!(info.start_time, RationalTime::new(5, 2).unwrap());
    let names: Vec<&str> = info.channels.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["0", "1", "2", "3"],
        "no channel_name column: the ids"
    );
    let stored = read_all_stored(&recording).unwrap();
    let wanted: Vec<i16> = (0..4)
        .flat_map(|c| (0..64).map(move |t| matrix_value(t, c)))
        .collect();
    assert_eq!(stored, wanted);
    let probe = recording.probe().unwrap();
    let shanks: Vec<u32> = probe.contacts().iter().map(|c| c.shank).collect();
    assert_eq!(shanks, [0, 0, 1, 1]);
    assert_eq!(
        probe.positions(),
        [[0.0, 0.0], [0.0, 20.0], [16.0, 40.0], [16.0, 60.0]]
    );
    check_recording_source(&recording);

    // The same values stored big-endian and contiguous.
    let recording = NwbRecording::open(bad("big_endian.nwb")).unwrap();
    assert_eq!(recording.info().metadata["nwb_data_layout"], "contiguous");
    assert_eq!(read_all_stored(&recording).unwrap(), wanted);
    check_recording_source(&recording);

    // Uniform timestamps 1.5 + i / 25000: rate 25 kHz, start 1.5 s.
    let recording = NwbRecording::open(bad("timestamps.nwb")).unwrap();
    assert_eq!(
        recording.info().sample_rate,
        SampleRate::from_hz(25_000).unwrap()
    );
    assert_eq!(
        recording.info().start_time,
        RationalTime::new(3, 2).unwrap()
    );
}

/// `open` fails, and its message names the file and contains every one of `words`.
fn assert_open_fails(path: &Path, words: &[&str]) -> Error {
    let error = NwbRecording::open(path).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains(&*path.to_string_lossy()),
        "{}: {message}",
        path.display()
    );
    for word in words {
        assert!(
            message.contains(word),
            "{}: `{word}` in {message}",
            path.display()
        );
    }
    error
}

#[test]
fn bad_hdf5_files_are_refused() {
    let error = assert_open_fails(&bad("float_data.nwb"), &["data", "int16"]);
    assert!(
        matches!(error, Error::Io(dspk_io::Error::Invalid { .. })),
        "{error}"
    );
    let error = assert_open_fails(&bad("one_dimensional.nwb"), &["data", "shape [64]"]);
    assert!(
        matches!(error, Error::Io(dspk_io::Error::Invalid { .. })),
        "{error}"
    );
    assert_open_fails(
        &bad("channel_conversion_3.nwb"),
        &["channel_conversion", "[3]", "[4]"],
    );
    assert_open_fails(
        &bad("electrode_outside_table.nwb"),
        &["electrodes`[3] is 9", "4 rows"],
    );
    assert_open_fails(
        &bad("timestamps_jitter.nwb"),
        &["not uniformly spaced", "40"],
    );
    let error = assert_open_fails(&bad("no_timing.nwb"), &["starting_time", "timestamps"]);
    assert!(
        matches!(error, Error::Io(dspk_io::Error::Missing { .. })),
        "{error}"
    );
}

#[test]
fn truncated_and_foreign_files_give_errors() {
    let dir = temp_dir("truncated");
    for source in ["pynwb_contiguous.nwb", "pynwb_chunked_gzip.nwb"] {
        let bytes = std::fs::read(nwb(source)).unwrap();
        // h5py: the contiguous data sits at bytes 3464..27464, the three gzip chunks at
        // 12224..32955; every cut below loses data or metadata the reader needs.
        for len in [0, 8, 512, 4000, 20_000, 27_000] {
            let path = dir.join(format!("{len}-{source}"));
            std::fs::write(&path, &bytes[..len]).unwrap();
            let result = NwbRecording::open(&path)
                .map_err(|e| e.to_string())
                .and_then(|r| read_all_stored(&r).map(drop).map_err(|e| e.to_string()));
            let message = result.expect_err(&format!("{source} cut to {len} bytes"));
            assert!(message.contains(&*path.to_string_lossy()), "{message}");
        }
    }
    let text = dir.join("notes.nwb");
    std::fs::write(&text, "this is not an HDF5 file\n".repeat(100)).unwrap();
    let error = assert_open_fails(&text, &["HDF5"]);
    assert!(
        matches!(error, Error::Io(dspk_io::Error::Library { .. })),
        "{error}"
    );
    assert_open_fails(&dir.join("missing.nwb"), &["missing"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Copies the NWB-Zarr fixture into `dir`.
fn copy_store(dir: &Path) -> PathBuf {
    let store = dir.join("copy.nwb.zarr");
    writable_copy(&nwb("hdmf_zarr.nwb.zarr"), &store);
    store
}

/// Rewrites the JSON file `file` with `edit`.
fn edit_json(file: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    edit(&mut value);
    std::fs::write(file, serde_json::to_string(&value).unwrap()).unwrap();
}

#[test]
fn bad_zarr_stores_are_refused() {
    let dir = temp_dir("zarr");
    let series = "acquisition/ElectricalSeries";

    let store = copy_store(&dir.join("dtype"));
    edit_json(&store.join(series).join("data/.zarray"), |v| {
        v["dtype"] = "<f4".into()
    });
    assert_open_fails(&store, &["data", "int16"]);

    let store = copy_store(&dir.join("rank"));
    edit_json(&store.join(series).join("data/.zarray"), |v| {
        v["shape"] = serde_json::json!([12000]);
        v["chunks"] = serde_json::json!([12000]);
    });
    assert_open_fails(&store, &["data", "[12000]"]);

    let store = copy_store(&dir.join("cc"));
    edit_json(
        &store.join(series).join("channel_conversion/.zarray"),
        |v| {
            v["shape"] = serde_json::json!([5]);
        },
    );
    assert_open_fails(&store, &["channel_conversion", "[5]", "[4]"]);

    let store = copy_store(&dir.join("chunk"));
    let chunk = store.join(series).join("data/0.0");
    let bytes = std::fs::read(&chunk).unwrap();
    std::fs::write(&chunk, &bytes[..bytes.len() / 2]).unwrap();
    let recording = NwbRecording::open(&store).unwrap();
    let message = read_all_stored(&recording).unwrap_err().to_string();
    assert!(message.contains("chunk [0, 0]"), "{message}");

    let store = copy_store(&dir.join("reference"));
    edit_json(&store.join(series).join("electrodes/.zattrs"), |v| {
        v["table"]["value"]["source"] = "../other.nwb.zarr".into();
    });
    let error = assert_open_fails(&store, &["another store"]);
    assert!(
        matches!(error, Error::Io(dspk_io::Error::Unsupported { .. })),
        "{error}"
    );

    let store = copy_store(&dir.join("huge"));
    edit_json(&store.join(series).join("data/.zarray"), |v| {
        v["shape"] = serde_json::json!([1u64 << 40, 4]);
        v["chunks"] = serde_json::json!([1u64 << 40, 4]);
    });
    assert_open_fails(&store, &["chunks of", "bytes"]);

    std::fs::remove_dir_all(&dir).unwrap();
}

/// Replaces the store's `starting_time` with an uncompressed float64 `timestamps` array.
fn with_timestamps(store: &Path, stamps: &[f64]) {
    let series = store.join("acquisition/ElectricalSeries");
    std::fs::remove_dir_all(series.join("starting_time")).unwrap();
    let array = series.join("timestamps");
    std::fs::create_dir_all(&array).unwrap();
    let n = stamps.len();
    let metadata = serde_json::json!({
        "chunks": [n], "compressor": null, "dtype": "<f8", "fill_value": 0.0,
        "filters": null, "order": "C", "shape": [n], "zarr_format": 2
    });
    std::fs::write(array.join(".zarray"), metadata.to_string()).unwrap();
    let bytes: Vec<u8> = stamps.iter().flat_map(|t| t.to_le_bytes()).collect();
    std::fs::write(array.join("0"), bytes).unwrap();
}

#[test]
fn zarr_timestamps_give_the_rate_and_start() {
    let dir = temp_dir("zarr-timestamps");
    let stamps: Vec<f64> = (0..SAMPLES).map(|i| 10.0 + i as f64 / 30_000.0).collect();

    let store = copy_store(&dir.join("uniform"));
    with_timestamps(&store, &stamps);
    let recording = NwbRecording::open(&store).unwrap();
    assert_eq!(
        recording.info().sample_rate,
        SampleRate::from_hz(30_000).unwrap()
    );
    assert_eq!(recording.info().start_time, RationalTime::from_secs(10));
    assert_eq!(read_all_stored(&recording).unwrap(), matrix_channel_major());

    let store = copy_store(&dir.join("short"));
    with_timestamps(&store, &stamps[..SAMPLES - 1]);
    assert_open_fails(&store, &["timestamps", "[2999]", "[3000]"]);

    let store = copy_store(&dir.join("gap"));
    let mut gap = stamps.clone();
    for t in &mut gap[2000..] {
        *t += 0.5;
    }
    with_timestamps(&store, &gap);
    assert_open_fails(&store, &["not uniformly spaced", "2000"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn format_detection() {
    let format = NwbFormat;
    for name in FIXTURES {
        assert_eq!(format.detect(&nwb(name)), Detection::ByMetadata, "{name}");
        let source = format.open(&nwb(name)).unwrap();
        assert_eq!(
            read_all_stored(source.as_ref()).unwrap(),
            matrix_channel_major()
        );
    }
    let dir = temp_dir("detect");
    let text = dir.join("notes.nwb");
    std::fs::write(&text, "not HDF5").unwrap();
    assert_eq!(format.detect(&text), Detection::ByName);
    assert!(format.open(&text).is_err());
    assert_eq!(format.detect(&nwb("expected.json")), Detection::No);
    assert_eq!(format.detect(&dir), Detection::No);
    std::fs::remove_dir_all(&dir).unwrap();

    // Beside dspk-io's formats (its Zarr reader only guesses a `.zarr` folder by name), the
    // NWB-Zarr store goes to this reader.
    let mut registry = dspk_io::Registry::default();
    registry.register(NwbFormat);
    for name in FIXTURES {
        assert_eq!(registry.detect(&nwb(name)).unwrap().name(), "nwb", "{name}");
        let source = registry.open(nwb(name)).unwrap();
        assert_eq!(source.info().num_samples, SAMPLES as u64);
    }
}

/// A scratch copy of the NWB-Zarr fixture for test `name`, with `data`'s shape set to `shape`
/// when given.
fn zarr_copy(name: &str, shape: Option<serde_json::Value>) -> PathBuf {
    let store = copy_store(&temp_dir(name));
    if let Some(shape) = shape {
        edit_json(
            &store.join("acquisition/ElectricalSeries/data/.zarray"),
            |v| v["shape"] = shape,
        );
    }
    store
}

/// A deleted chunk of an NWB-Zarr series is an error naming its key (it read as zeros
/// before); reading it as the fill value is an explicit option.
#[test]
fn nwb_zarr_missing_chunks_are_errors() {
    let store = zarr_copy("deleted_chunk", None);
    std::fs::remove_file(store.join("acquisition/ElectricalSeries/data/0.0")).unwrap();
    let error = NwbRecording::open(&store).unwrap_err();
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::MissingChunk { key, .. })
            if key == "acquisition/ElectricalSeries/data/0.0"),
        "{error}"
    );
    let recording = NwbRecording::open_series_with(
        &store,
        "ElectricalSeries",
        dspk_io::MissingChunks::FillValue,
    )
    .unwrap();
    let mut bytes = vec![1u8; 2 * 100];
    recording.read_stored(&[1], 200..300, &mut bytes).unwrap();
    assert!(bytes.iter().all(|&b| b == 0));
    std::fs::remove_dir_all(store.parent().unwrap()).unwrap();
}

/// A `data` shape larger than the chunks written is refused at open (it read trailing zeros
/// before), and a shape of 9e18 samples is refused even with the fill value allowed (it
/// opened and read zeros until killed).
#[test]
fn nwb_zarr_shapes_larger_than_the_store_are_refused() {
    let store = zarr_copy("long_shape", Some(serde_json::json!([6000, 4])));
    let error = NwbRecording::open(&store).unwrap_err();
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::MissingChunk { key, .. })
            if key == "acquisition/ElectricalSeries/data/1.0"),
        "{error}"
    );
    std::fs::remove_dir_all(store.parent().unwrap()).unwrap();
    let store = zarr_copy(
        "absurd_shape",
        Some(serde_json::json!([9_000_000_000_000_000_000u64, 4])),
    );
    for missing in [
        dspk_io::MissingChunks::Error,
        dspk_io::MissingChunks::FillValue,
    ] {
        let error = NwbRecording::open_series_with(&store, "ElectricalSeries", missing)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("9 000 000 000 000 000 000 samples"),
            "{error}"
        );
    }
    std::fs::remove_dir_all(store.parent().unwrap()).unwrap();
}
