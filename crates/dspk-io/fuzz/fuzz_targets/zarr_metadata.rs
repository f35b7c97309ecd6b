//! Zarr metadata of the traces array (v2 `.zarray` or v3 `zarr.json`) and a chunk, opened and
//! read as a recording from an in-memory store: any bytes must give `Ok` or an error, never a
//! panic or an allocation sized by the metadata.
//!
//! Input: byte 0 picks v2 or v3 (bit 0) and whether the store also has `channel_ids`,
//! `properties/gain_to_uV` and `properties/offset_to_uV` (bit 1); byte 1 where the metadata
//! ends; the rest is metadata, then the bytes of chunk 0. With bit 1 set, six bytes follow byte
//! 1, a `(kind, length)` pair per extra array, and each array takes its `length` bytes from the
//! end of the input: `kind % 8` is 0 for no array, 1 to 6 for metadata made here (a dtype,
//! `kind / 8` entries in one chunk) with those bytes as its chunk, 7 for both from the input
//! (the first byte says how many of the rest are metadata; after them, the chunk).

#![no_main]

use std::path::Path;
use std::sync::Arc;

use dspk_core::RecordingSource;
use libfuzzer_sys::fuzz_target;
use zarrs::storage::store::MemoryStore;
use zarrs::storage::{StoreKey, WritableStorageTraits};

fn put(store: &MemoryStore, key: &str, value: &[u8]) {
    store
        .set(
            &StoreKey::new(key).expect("valid key"),
            value.to_vec().into(),
        )
        .expect("memory store");
}

/// One-dimensional array metadata for `kind` (1 to 6): `kind / 8` entries, one chunk.
fn vector_metadata(v3: bool, kind: u8) -> String {
    let n = kind / 8;
    let chunk = n.max(1);
    if v3 {
        let (dtype, fill, codecs) = match kind % 8 {
            1 => ("float64", "0.0", r#"[{"name":"bytes","configuration":{"endian":"little"}}]"#),
            2 => ("float32", "\"NaN\"", r#"[{"name":"bytes","configuration":{"endian":"big"}}]"#),
            3 => ("int64", "0", r#"[{"name":"bytes","configuration":{"endian":"little"}}]"#),
            4 => ("uint8", "0", r#"[{"name":"bytes"}]"#),
            5 => ("string", "\"\"", r#"[{"name":"vlen-utf8"}]"#),
            _ => ("float64", "0.0", r#"[{"name":"bytes","configuration":{"endian":"little"}},{"name":"zstd","configuration":{"level":0,"checksum":false}}]"#),
        };
        format!(
            r#"{{"zarr_format":3,"node_type":"array","shape":[{n}],"data_type":"{dtype}","chunk_grid":{{"name":"regular","configuration":{{"chunk_shape":[{chunk}]}}}},"chunk_key_encoding":{{"name":"default","configuration":{{"separator":"/"}}}},"fill_value":{fill},"codecs":{codecs}}}"#
        )
    } else {
        let (dtype, fill, filters) = match kind % 8 {
            1 => ("<f8", "0.0", "null"),
            2 => (">f4", "\"NaN\"", "null"),
            3 => ("<i8", "0", "null"),
            4 => ("<U2", "\"\"", "null"),
            5 => ("|O", "\"\"", r#"[{"id":"vlen-utf8"}]"#),
            _ => ("|S3", "\"\"", "null"),
        };
        format!(
            r#"{{"zarr_format":2,"shape":[{n}],"chunks":[{chunk}],"dtype":"{dtype}","compressor":null,"fill_value":{fill},"filters":{filters},"order":"C"}}"#
        )
    }
}

/// Puts the array `name` (metadata and chunk 0) into the store as `kind` and `bytes` say.
fn put_vector(store: &MemoryStore, v3: bool, name: &str, kind: u8, bytes: &[u8]) {
    let (metadata, chunk) = match kind % 8 {
        0 => return,
        7 => {
            let Some((&cut, bytes)) = bytes.split_first() else {
                return;
            };
            let (metadata, chunk) = bytes.split_at(usize::from(cut).min(bytes.len()));
            (metadata.to_vec(), chunk)
        }
        _ => (vector_metadata(v3, kind).into_bytes(), bytes),
    };
    if v3 {
        put(store, &format!("{name}/zarr.json"), &metadata);
        put(store, &format!("{name}/c/0"), chunk);
        put(store, &format!("{name}/c.0"), chunk);
    } else {
        put(store, &format!("{name}/.zarray"), &metadata);
        put(store, &format!("{name}/0"), chunk);
    }
}

fuzz_target!(|data: &[u8]| {
    let [mode, split, rest @ ..] = data else {
        return;
    };
    let mut rest = rest;
    let mut extras = Vec::new();
    if mode & 2 != 0 {
        let Some((header, tail)) = rest.split_first_chunk::<6>() else {
            return;
        };
        rest = tail;
        for (name, pair) in ["channel_ids", "properties/gain_to_uV", "properties/offset_to_uV"]
            .into_iter()
            .zip(header.chunks_exact(2))
        {
            let (kind, length) = (pair[0], usize::from(pair[1]).min(rest.len()));
            let (head, bytes) = rest.split_at(rest.len() - length);
            rest = head;
            extras.push((name, kind, bytes));
        }
    }
    let at = (usize::from(*split) * rest.len() / 255).min(rest.len());
    let (metadata, chunk) = rest.split_at(at);
    let store = MemoryStore::new();
    for (name, kind, bytes) in extras {
        put_vector(&store, mode % 2 == 0, name, kind, bytes);
    }
    if mode % 2 == 0 {
        put(&store, "zarr.json", br#"{"zarr_format":3,"node_type":"group","attributes":{"sampling_frequency":30000.0,"num_segments":1}}"#);
        put(&store, "traces_seg0/zarr.json", metadata);
        put(&store, "traces_seg0/c/0/0", chunk);
        put(&store, "traces_seg0/c.0.0", chunk);
    } else {
        put(&store, ".zgroup", br#"{"zarr_format":2}"#);
        put(
            &store,
            ".zattrs",
            br#"{"sampling_frequency":30000.0,"num_segments":1}"#,
        );
        put(&store, "traces_seg0/.zarray", metadata);
        put(&store, "traces_seg0/0.0", chunk);
        put(&store, "traces_seg0/0/0", chunk);
    }
    let options = dspk_io::ZarrOptions {
        max_chunk_bytes: 1 << 20,
        ..Default::default()
    };
    let path = Path::new("fuzz.zarr");
    match dspk_io::ZarrRecording::open_store(Arc::new(store), path, options) {
        Ok(recording) => {
            let info = recording.info();
            let n = info.num_samples.min(64);
            let mut out = vec![0u8; n as usize * info.stored_format.size()];
            let _ = recording.read_stored(&[0], 0..n, &mut out);
            let last = info.num_channels() - 1;
            let _ =
                recording.read_stored(&[last], info.num_samples - n..info.num_samples, &mut out);
        }
        Err(error) => assert_eq!(error.path(), path),
    }
});
