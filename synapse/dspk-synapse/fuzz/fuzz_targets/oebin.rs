//! `structure.oebin` (Open Ephys binary): any bytes must give `Ok` or an error naming the
//! file, never a panic or a huge allocation.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz/structure.oebin");
    match dspk_synapse::openephys::Oebin::parse(data, path) {
        Ok(oebin) => {
            for stream in &oebin.continuous {
                assert!(!stream.channels.is_empty());
                assert!(!stream.folder_name.is_empty() && !stream.folder_name.contains('/'));
                assert!(stream.channels.iter().all(|c| c.bit_volts.is_finite()));
            }
        }
        Err(error) => assert_eq!(error.path(), Some(path)),
    }
});
