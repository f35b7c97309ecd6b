//! Files that lie, are cut short or are corrupt: each gives an error naming the file and the
//! problem, never a panic and never an allocation sized by an unchecked field.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use dspk_core::RecordingSource;
use dspk_io::{Error, MissingChunks, NpyArray, RawRecording, ZarrOptions, ZarrRecording};

/// Copies a fixture folder (recursively) into a scratch folder.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A scratch copy of the SpikeInterface binary folder with `binary.json`'s kwargs edited.
fn si_folder_with(name: &str, edit: impl FnOnce(&mut serde_json::Value)) -> PathBuf {
    let dir = scratch(name);
    copy_tree(&fixtures().join("si_binary/si_binary_folder"), &dir);
    let json = std::fs::read_to_string(dir.join("binary.json")).unwrap();
    let mut value: serde_json::Value = serde_json::from_str(&json).unwrap();
    edit(&mut value["kwargs"]);
    std::fs::write(dir.join("binary.json"), value.to_string()).unwrap();
    dir
}

fn assert_names(error: &Error, file: &str, problem: &str) {
    let message = error.to_string();
    assert!(message.contains(file), "`{message}` does not name {file}");
    assert!(
        message.contains(problem),
        "`{message}` does not say `{problem}`"
    );
}

#[test]
fn truncated_raw_data_file() {
    let dir = si_folder_with("truncated", |_| {});
    let data = dir.join("traces_cached_seg0.raw");
    let bytes = std::fs::read(&data).unwrap();
    std::fs::write(&data, &bytes[..bytes.len() - 3]).unwrap();
    let error = RawRecording::open_spikeinterface(&dir).unwrap_err();
    assert!(matches!(error, Error::Truncated { .. }));
    assert_names(&error, "traces_cached_seg0.raw", "truncated");
}

#[test]
fn spikeinterface_json_that_lies() {
    for (name, edit, problem) in [
        (
            "si_dtype",
            Box::new(|k: &mut serde_json::Value| k["dtype"] = "<c8".into())
                as Box<dyn FnOnce(&mut serde_json::Value)>,
            "unsupported dtype",
        ),
        (
            "si_dtype_f8",
            Box::new(|k: &mut serde_json::Value| k["dtype"] = "float64".into()),
            "not a recording sample type",
        ),
        (
            "si_negative",
            Box::new(|k: &mut serde_json::Value| k["num_channels"] = (-4).into()),
            "invalid JSON",
        ),
        (
            "si_absurd_channels",
            Box::new(|k: &mut serde_json::Value| k["num_channels"] = u64::MAX.into()),
            "num_channels",
        ),
        (
            "si_channels_vs_ids",
            Box::new(|k: &mut serde_json::Value| k["num_channels"] = 5.into()),
            "entries for 5 channels",
        ),
        (
            "si_offset",
            Box::new(|k: &mut serde_json::Value| k["file_offset"] = (1u64 << 62).into()),
            "truncated",
        ),
        (
            "si_escape",
            Box::new(|k: &mut serde_json::Value| {
                k["file_paths"] = serde_json::json!(["../../etc/passwd"])
            }),
            "not a plain file name",
        ),
        (
            "si_segments",
            Box::new(|k: &mut serde_json::Value| k["file_paths"] = serde_json::json!(["a", "b"])),
            "2 segments",
        ),
        (
            "si_rate",
            Box::new(|k: &mut serde_json::Value| k["sampling_frequency"] = (-30000.0).into()),
            "sample rate",
        ),
        (
            "si_axis",
            Box::new(|k: &mut serde_json::Value| k["time_axis"] = 7.into()),
            "time_axis",
        ),
    ] {
        let dir = si_folder_with(name, edit);
        let error = RawRecording::open_spikeinterface(&dir).unwrap_err();
        assert_names(
            &error,
            if problem == "truncated" {
                "traces_cached_seg0.raw"
            } else {
                "binary.json"
            },
            problem,
        );
    }
}

#[test]
fn dspk_sidecar_that_lies() {
    let dir = scratch("sidecar_lies");
    let data = dir.join("d.bin");
    std::fs::write(&data, vec![0u8; 800]).unwrap();
    let sidecar = dspk_io::sidecar_path(&data);
    let base = serde_json::json!({
        "format": "dspk-raw", "version": 1, "data_file": "d.bin", "dtype": "<i2",
        "order": "interleaved", "sample_rate": 1000,
        "channels": [{"name": "a"}, {"name": "b"}]
    });
    // The honest sidecar opens: 800 bytes = 200 samples of 2 channels.
    std::fs::write(&sidecar, base.to_string()).unwrap();
    assert_eq!(RawRecording::open(&data).unwrap().info().num_samples, 200);
    for (field, new_value, file, problem) in [
        ("num_samples", serde_json::json!(201), "d.bin", "truncated"),
        (
            "num_samples",
            serde_json::json!(u64::MAX),
            "d.bin",
            "truncated",
        ),
        (
            "num_samples",
            serde_json::json!(-1),
            "d.bin.json",
            "invalid JSON",
        ),
        ("header_bytes", serde_json::json!(801), "d.bin", "truncated"),
        (
            "header_bytes",
            serde_json::json!(3),
            "d.bin",
            "ends 1 bytes into a sample",
        ),
        (
            "dtype",
            serde_json::json!("<x9"),
            "d.bin.json",
            "unsupported dtype",
        ),
        (
            "order",
            serde_json::json!("diagonal"),
            "d.bin.json",
            "`order`",
        ),
        ("channels", serde_json::json!([]), "d.bin.json", "empty"),
        (
            "sample_rate",
            serde_json::json!("fast"),
            "d.bin.json",
            "sample rate",
        ),
        (
            "format",
            serde_json::json!("other"),
            "d.bin.json",
            "`format`",
        ),
        (
            "data_file",
            serde_json::json!("/etc/passwd"),
            "d.bin.json",
            "not a plain file name",
        ),
        (
            "data_file",
            serde_json::json!("missing.bin"),
            "missing.bin",
            "open",
        ),
        (
            "surprise",
            serde_json::json!(1),
            "d.bin.json",
            "unknown field",
        ),
    ] {
        let mut value = base.clone();
        value[field] = new_value;
        std::fs::write(&sidecar, value.to_string()).unwrap();
        let error = RawRecording::open(&data).unwrap_err();
        assert_names(&error, file, problem);
    }
}

#[test]
fn npy_files_that_lie() {
    let dir = scratch("npy_lies");
    let good = std::fs::read(data().join("matrix_c_le.npy")).unwrap();
    // Cut short: the data is shorter than the header's shape.
    let cut = dir.join("cut.npy");
    std::fs::write(&cut, &good[..good.len() - 1]).unwrap();
    assert_names(&NpyArray::read(&cut).unwrap_err(), "cut.npy", "truncated");
    let rate = dspk_core::SampleRate::from_hz(1000).unwrap();
    assert_names(
        &dspk_io::open_npy_recording(&cut, rate).unwrap_err(),
        "cut.npy",
        "truncated",
    );
    // A header that claims an enormous shape: refused before any allocation.
    let header = dspk_io::NpyHeader::encode("<i2".parse().unwrap(), false, &[1 << 40, 384]);
    let huge = dir.join("huge.npy");
    std::fs::write(&huge, &header).unwrap();
    assert_names(&NpyArray::read(&huge).unwrap_err(), "huge.npy", "truncated");
    assert_names(
        &dspk_io::open_npy_recording(&huge, rate).unwrap_err(),
        "huge.npy",
        "does not fit",
    );
    let header = dspk_io::NpyHeader::encode("<i2".parse().unwrap(), false, &[8, 1 << 40]);
    let wide = dir.join("wide.npy");
    std::fs::write(&wide, &header).unwrap();
    assert_names(
        &dspk_io::open_npy_recording(&wide, rate).unwrap_err(),
        "wide.npy",
        "channels",
    );
    // A header length past the end of the file, and no magic at all.
    let mut long = good[..10].to_vec();
    long[8..10].copy_from_slice(&60000u16.to_le_bytes());
    std::fs::write(dir.join("long.npy"), &long).unwrap();
    assert_names(
        &NpyArray::read(dir.join("long.npy")).unwrap_err(),
        "long.npy",
        "truncated",
    );
    std::fs::write(dir.join("text.npy"), b"hello").unwrap();
    assert_names(
        &NpyArray::read(dir.join("text.npy")).unwrap_err(),
        "text.npy",
        "magic",
    );
    std::fs::write(dir.join("empty.npy"), b"").unwrap();
    assert_names(
        &NpyArray::read(dir.join("empty.npy")).unwrap_err(),
        "empty.npy",
        "magic",
    );
}

#[test]
fn npz_archives_that_lie() {
    let dir = scratch("npz_lies");
    let good = std::fs::read(data().join("arrays_compressed.npz")).unwrap();
    // Corrupt deflate data in the middle of the first member.
    let mut corrupt = good.clone();
    for byte in &mut corrupt[200..400] {
        *byte ^= 0x5a;
    }
    let path = dir.join("corrupt.npz");
    std::fs::write(&path, &corrupt).unwrap();
    let mut archive = dspk_io::NpzArchive::open(&path).unwrap();
    let error = archive.read("matrix").unwrap_err();
    assert!(error.to_string().contains("corrupt.npz"), "{error}");
    // Not a zip at all, and a zip cut short.
    std::fs::write(dir.join("text.npz"), b"not a zip").unwrap();
    assert_names(
        &dspk_io::NpzArchive::open(dir.join("text.npz")).unwrap_err(),
        "text.npz",
        "zip",
    );
    std::fs::write(dir.join("cut.npz"), &good[..good.len() / 2]).unwrap();
    assert_names(
        &dspk_io::NpzArchive::open(dir.join("cut.npz")).unwrap_err(),
        "cut.npz",
        "zip",
    );
}

#[test]
fn zarr_stores_that_lie() {
    // A corrupt chunk: decoding fails with the store and the chunk named.
    let dir = scratch("zarr_corrupt");
    copy_tree(
        &fixtures().join("zarr_v3/si_layout_zstd_chanchunk.zarr"),
        &dir,
    );
    let chunk = dir.join("traces_seg0/c/1/0");
    let mut bytes = std::fs::read(&chunk).unwrap();
    let middle = bytes.len() / 2;
    bytes.truncate(middle);
    std::fs::write(&chunk, &bytes).unwrap();
    let recording = ZarrRecording::open(&dir).unwrap();
    let mut out = vec![0u8; 2 * 100];
    recording.read_stored(&[0], 0..100, &mut out).unwrap();
    let error = recording
        .read_stored(&[0], 1000..1100, &mut out)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("zarr_corrupt") && error.contains("chunk [1, 0]"),
        "{error}"
    );

    // A corrupt sharded store: the index checksum fails.
    let dir = scratch("zarr_shard_corrupt");
    copy_tree(&fixtures().join("zarr_v3/si_layout_sharded.zarr"), &dir);
    let shard = dir.join("traces_seg0/c/0/0");
    let mut bytes = std::fs::read(&shard).unwrap();
    let last = bytes.len() - 10;
    bytes[last] ^= 0xff;
    std::fs::write(&shard, &bytes).unwrap();
    let recording = ZarrRecording::open(&dir).unwrap();
    let error = recording
        .read_stored(&[0], 0..100, &mut out)
        .unwrap_err()
        .to_string();
    assert!(error.contains("zarr_shard_corrupt"), "{error}");

    // A corrupt blosc chunk (v2).
    let dir = scratch("zarr_blosc_corrupt");
    copy_tree(&fixtures().join("zarr_v2/si_default.zarr"), &dir);
    let chunk = dir.join("traces_seg0/0.0");
    let mut bytes = std::fs::read(&chunk).unwrap();
    for byte in &mut bytes[16..] {
        *byte = byte.wrapping_mul(31).wrapping_add(7);
    }
    std::fs::write(&chunk, &bytes).unwrap();
    if let Ok(recording) = ZarrRecording::open(&dir) {
        let error = recording
            .read_stored(&[0], 0..100, &mut out)
            .unwrap_err()
            .to_string();
        assert!(error.contains("zarr_blosc_corrupt"), "{error}");
    }

    // Missing traces array.
    let dir = scratch("zarr_missing");
    copy_tree(&fixtures().join("zarr_v3/si_layout_blosc.zarr"), &dir);
    std::fs::remove_file(dir.join("traces_seg0/zarr.json")).unwrap();
    assert_names(
        &ZarrRecording::open(&dir).unwrap_err(),
        "zarr_missing",
        "traces_seg0` is missing",
    );

    // Metadata that lies: an absurd shape, an unsupported data type, a wrong ids length,
    // malformed JSON, and no sampling frequency.
    let edit = |name: &str, file: &str, change: &dyn Fn(&mut serde_json::Value)| {
        let dir = scratch(name);
        copy_tree(&fixtures().join("zarr_v3/si_layout_blosc.zarr"), &dir);
        let path = dir.join(file);
        let mut value: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        change(&mut value);
        std::fs::write(&path, value.to_string()).unwrap();
        dir
    };
    let dir = edit("zarr_wide", "traces_seg0/zarr.json", &|v| {
        v["shape"] = serde_json::json!([3000, 1u64 << 40])
    });
    assert_names(
        &ZarrRecording::open(&dir).unwrap_err(),
        "zarr_wide",
        "channels",
    );
    let dir = edit("zarr_huge_chunk", "traces_seg0/zarr.json", &|v| {
        v["shape"] = serde_json::json!([1u64 << 50, 4]);
        v["chunk_grid"]["configuration"]["chunk_shape"] = serde_json::json!([1u64 << 48, 4]);
    });
    // The shape's last chunk is not in the store: refused at open unless missing chunks are
    // asked to read as the fill value; then the chunk size is refused before decoding.
    assert!(matches!(
        ZarrRecording::open(&dir).unwrap_err(),
        Error::MissingChunk { .. }
    ));
    let recording = ZarrRecording::open_with(&dir, fill_missing()).unwrap();
    let error = recording
        .read_stored(&[0], 0..100, &mut out)
        .unwrap_err()
        .to_string();
    // Guards the limit's numbers being readable (they printed as raw byte counts before).
    assert!(
        error.contains("too large: 2.25 PB (limit 536.87 MB)"),
        "{error}"
    );
    let dir = edit("zarr_dtype", "traces_seg0/zarr.json", &|v| {
        v["data_type"] = "float64".into()
    });
    assert_names(
        &ZarrRecording::open(&dir).unwrap_err(),
        "zarr_dtype",
        "not a recording sample type",
    );
    let dir = edit("zarr_ids", "channel_ids/zarr.json", &|v| {
        v["shape"] = serde_json::json!([3])
    });
    assert_names(
        &ZarrRecording::open(&dir).unwrap_err(),
        "zarr_ids",
        "channel_ids",
    );
    let dir = edit("zarr_rate", "zarr.json", &|v| {
        v["attributes"] = serde_json::json!({})
    });
    assert_names(
        &ZarrRecording::open(&dir).unwrap_err(),
        "zarr_rate",
        "sampling_frequency",
    );
    let dir = edit("zarr_json", "zarr.json", &|_| {});
    std::fs::write(
        dir.join("traces_seg0/zarr.json"),
        b"{\"zarr_format\": 3, \"node_type\": ",
    )
    .unwrap();
    assert_names(
        &ZarrRecording::open(&dir).unwrap_err(),
        "zarr_json",
        "traces_seg0",
    );
}

/// Zarr options that read missing chunks as the fill value.
fn fill_missing() -> ZarrOptions {
    ZarrOptions {
        missing_chunks: MissingChunks::FillValue,
        ..ZarrOptions::default()
    }
}

/// A deleted chunk file inside the declared shape is an error naming the chunk's key (it read
/// as zeros before), in v2, v3 and sharded stores; the fill value only when asked for.
#[test]
fn zarr_deleted_chunks_are_errors() {
    for (fixture, name, deleted, key, samples) in [
        (
            "zarr_v2/si_default.zarr",
            "zarr_deleted_v2",
            "1.0",
            "traces_seg0/1.0",
            1024..2048,
        ),
        (
            "zarr_v3/si_layout_zstd_chanchunk.zarr",
            "zarr_deleted_v3",
            "c/1/0",
            "traces_seg0/c/1/0",
            1024..2048,
        ),
    ] {
        let dir = scratch(name);
        copy_tree(&fixtures().join(fixture), &dir);
        std::fs::remove_file(dir.join("traces_seg0").join(deleted)).unwrap();
        let recording = ZarrRecording::open(&dir).unwrap();
        let mut out = vec![0u8; 2 * 100];
        recording.read_stored(&[0], 0..100, &mut out).unwrap();
        let error = recording
            .read_stored(&[0], samples.start + 10..samples.start + 110, &mut out)
            .unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains(name) && message.contains(&format!("chunk `{key}`")),
            "{message}"
        );
        assert!(
            message.contains(&format!("samples {}..{}", samples.start, samples.end)),
            "{message}"
        );
        // Asked for, the missing chunk reads as the fill value (0).
        let recording = ZarrRecording::open_with(&dir, fill_missing()).unwrap();
        recording
            .read_stored(&[0], samples.start + 10..samples.start + 110, &mut out)
            .unwrap();
        assert!(out.iter().all(|&b| b == 0));
    }
    // A sharded store without its (only) shard: the last chunk is missing at open.
    let dir = scratch("zarr_deleted_shard");
    copy_tree(&fixtures().join("zarr_v3/si_layout_sharded.zarr"), &dir);
    std::fs::remove_file(dir.join("traces_seg0/c/0/0")).unwrap();
    let error = ZarrRecording::open(&dir).unwrap_err();
    assert!(
        matches!(&error, Error::MissingChunk { key, .. } if key == "traces_seg0/c/0/0"),
        "{error}"
    );
    let recording = ZarrRecording::open_with(&dir, fill_missing()).unwrap();
    let mut out = vec![0u8; 2 * 100];
    recording.read_stored(&[2], 500..600, &mut out).unwrap();
    assert!(out.iter().all(|&b| b == 0));
}

/// A shape larger than the data written is refused at open, naming the last chunk (it read
/// trailing zeros before); a shape of 9e18 samples is refused even when missing chunks may
/// read as the fill value (it opened and read zeros until killed before).
#[test]
fn zarr_shapes_larger_than_the_store_are_refused() {
    let dir = scratch("zarr_long_v2");
    copy_tree(&fixtures().join("zarr_v2/si_default.zarr"), &dir);
    let zarray = dir.join("traces_seg0/.zarray");
    let mut value: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&zarray).unwrap()).unwrap();
    value["shape"] = serde_json::json!([6000, 4]);
    std::fs::write(&zarray, value.to_string()).unwrap();
    let error = ZarrRecording::open(&dir).unwrap_err();
    assert!(
        matches!(&error, Error::MissingChunk { key, samples, .. }
            if key == "traces_seg0/5.0" && *samples == (5120..6000)),
        "{error}"
    );
    assert_eq!(
        ZarrRecording::open_with(&dir, fill_missing())
            .unwrap()
            .info()
            .num_samples,
        6000
    );

    let dir = scratch("zarr_long_v3");
    copy_tree(&fixtures().join("zarr_v3/si_layout_blosc.zarr"), &dir);
    let json = dir.join("traces_seg0/zarr.json");
    let mut value: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    value["shape"] = serde_json::json!([9_000_000_000_000_000_000u64, 4]);
    std::fs::write(&json, value.to_string()).unwrap();
    for options in [ZarrOptions::default(), fill_missing()] {
        let error = ZarrRecording::open_with(&dir, options).unwrap_err();
        assert_names(&error, "zarr_long_v3", "9 000 000 000 000 000 000 samples");
    }
}

/// A data file that is a folder is an error (it opened and reported the folder's size as
/// samples before).
#[test]
fn raw_data_file_that_is_a_folder() {
    let dir = si_folder_with("raw_folder", |_| {});
    let data = dir.join("traces_cached_seg0.raw");
    std::fs::remove_file(&data).unwrap();
    std::fs::create_dir(&data).unwrap();
    let error = RawRecording::open_spikeinterface(&dir).unwrap_err();
    assert!(matches!(error, Error::Invalid { .. }), "{error}");
    assert_names(&error, "traces_cached_seg0.raw", "is a folder");
}

/// A zero-byte data file opens as a valid recording of zero samples (consumers that need
/// samples say so with `dspk_core::Error::EmptyRecording`).
#[test]
fn raw_data_file_that_is_empty() {
    let dir = si_folder_with("raw_empty", |_| {});
    std::fs::write(dir.join("traces_cached_seg0.raw"), b"").unwrap();
    let recording = RawRecording::open_spikeinterface(&dir).unwrap();
    assert_eq!(recording.info().num_samples, 0);
    assert_eq!(recording.info().num_channels(), CHANNELS);
    let mut out = [0u8; 0];
    recording.read_stored(&[0], 0..0, &mut out).unwrap();
}
