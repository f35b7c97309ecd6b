//! The Intan `.rhd` header: any bytes must give `Ok` or an error naming the file, never a
//! panic or an allocation larger than the input.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz/recording.rhd");
    match dspk_synapse::intan::RhdHeader::parse(data, path) {
        Ok(header) => {
            assert!(header.header_len <= data.len() as u64);
            assert!(header.sample_rate > 0.0);
            assert!(header.block_bytes().is_some_and(|b| b > 0));
            let _ = header.saved_channels().count();
        }
        Err(error) => assert_eq!(error.path(), Some(path)),
    }
});
