//! probeinterface JSON (`probe::read_probeinterface`) and, on the same bytes, the Kilosort 4
//! probe JSON (`probe::read_kilosort_json`): any bytes must give `Ok` or an error naming the
//! file, never a panic. A probeinterface group that reads is written back and must read the
//! same.

#![no_main]

use std::path::PathBuf;

use dspk_synapse::probe::{read_kilosort_json, read_probeinterface, write_probeinterface};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The readers open files only: scratch files per fuzzing process.
    let dir = std::env::temp_dir();
    let id = std::process::id();
    let path: PathBuf = dir.join(format!("dspk-fuzz-{id}.json"));
    std::fs::write(&path, data).expect("scratch file");
    match read_probeinterface(&path) {
        Ok(probes) => {
            assert!(!probes.is_empty() && probes.iter().all(|p| p.num_contacts() > 0));
            let again = dir.join(format!("dspk-fuzz-{id}-written.json"));
            write_probeinterface(&again, &probes).expect("a group that reads writes");
            assert_eq!(read_probeinterface(&again).expect("reads back"), probes);
        }
        Err(error) => assert_eq!(error.path(), Some(path.as_path())),
    }
    match read_kilosort_json(&path) {
        Ok(probe) => assert!(probe.num_contacts() > 0),
        Err(error) => assert_eq!(error.path(), Some(path.as_path())),
    }
});
