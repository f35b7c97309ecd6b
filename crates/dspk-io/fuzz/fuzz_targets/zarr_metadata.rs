//! Zarr metadata of the traces array (v2 `.zarray` or v3 `zarr.json`) and a chunk, opened and
//! read as a recording from an in-memory store: any bytes must give `Ok` or an error, never a
//! panic or an allocation sized by the metadata.
//!
//! Input: byte 0 picks v2 or v3, byte 1 where the metadata ends; the rest is metadata, then the
//! bytes of chunk 0.

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

fuzz_target!(|data: &[u8]| {
    let [mode, split, rest @ ..] = data else {
        return;
    };
    let at = (usize::from(*split) * rest.len() / 255).min(rest.len());
    let (metadata, chunk) = rest.split_at(at);
    let store = MemoryStore::new();
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
