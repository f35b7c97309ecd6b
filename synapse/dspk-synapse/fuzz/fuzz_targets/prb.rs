//! Fuzzes the `.prb` literal parser, and feeds the same bytes to the Kilosort channel-map
//! MAT-file reader: neither may panic, loop without end or allocate more than its stated
//! limits, whatever the bytes.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz.prb");
    if let Ok(probes) = dspk_synapse::probe::parse_prb(data, path) {
        // Whatever parses is a valid probe group: no probe without contacts.
        assert!(probes.iter().all(|p| p.num_contacts() > 0));
    }
    let _ = dspk_synapse::probe::parse_kilosort_mat(data, Path::new("fuzz.mat"));
});
