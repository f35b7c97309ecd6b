//! Phy's `params.py` (`phy::PhyParams::parse`, the bounded Python-literal parser): any text
//! must give `Ok` or an error naming the file, never a panic, a loop without end or an
//! allocation past the parser's limits.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("fuzz/params.py");
    match dspk_synapse::phy::PhyParams::parse(text, path) {
        Ok(params) => {
            // What parses is usable: a raw file to open, channels, a positive rate.
            assert!(params.n_channels_dat > 0);
            assert!(params.sample_rate.is_finite() && params.sample_rate > 0.0);
        }
        Err(error) => assert_eq!(error.path(), Some(path)),
    }
});
