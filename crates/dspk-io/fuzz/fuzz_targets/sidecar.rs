//! The JSON metadata of raw recordings: dspk's sidecar and SpikeInterface's `binary.json`.
//! Any bytes must give `Ok` or an error naming the file, never a panic or a huge allocation.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz/sidecar.json");
    if let Err(error) = dspk_io::RawSidecar::parse(data, path) {
        assert_eq!(error.path(), path);
    }
    let path = Path::new("fuzz/binary.json");
    if let Err(error) = dspk_io::SiBinaryMeta::parse(data, path) {
        assert_eq!(error.path(), path);
    }
});
