//! `.npz` archives (`NpzArchive`): any bytes, written to a file and opened, must give `Ok` or an
//! error naming the archive (or `archive.npz/member.npy`), never a panic or an allocation sized
//! by a zip or `.npy` header; every member is read.

#![no_main]

use std::path::PathBuf;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // `NpzArchive` opens files only: one scratch file per fuzzing process.
    let path: PathBuf =
        std::env::temp_dir().join(format!("dspk-fuzz-{}.npz", std::process::id()));
    std::fs::write(&path, data).expect("scratch file");
    match dspk_io::NpzArchive::open(&path) {
        Ok(mut archive) => {
            for name in archive.names() {
                match archive.read(&name) {
                    Ok(array) => {
                        let _ = array.to_f64();
                    }
                    Err(error) => assert!(error.path().starts_with(&path), "{error}"),
                }
            }
        }
        Err(error) => assert_eq!(error.path(), path),
    }
});
