//! mtscomp `.ch` files and chunk decoding. The input is `[json length: u16 LE][.ch JSON]
//! [.cbin bytes]`: the JSON goes to `ChFile::parse`, the rest is checked as the `.cbin`
//! (`check_file_length`) and every chunk decoded. Any bytes must give `Ok` or an error naming
//! the file, never a panic, and decoding never allocates more than a chunk's stated size,
//! which the checks bound by the compressed length.

#![no_main]

use std::path::Path;

use dspk_synapse::mtscomp::ChFile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let ch_path = Path::new("fuzz/x.ch");
    let cbin_path = Path::new("fuzz/x.cbin");
    if data.len() < 2 {
        return;
    }
    let json_len = usize::from(u16::from_le_bytes([data[0], data[1]])).min(data.len() - 2);
    let (json, cbin) = data[2..].split_at(json_len);
    let ch = match ChFile::parse(json, ch_path) {
        Ok(ch) => ch,
        Err(error) => {
            assert_eq!(error.path(), Some(ch_path));
            return;
        }
    };
    if let Err(error) = ch.check_file_length(cbin_path, cbin.len() as u64) {
        assert_eq!(error.path(), Some(cbin_path));
        return;
    }
    for chunk in 0..ch.num_chunks() {
        let bytes = ch.chunk_bytes(chunk);
        let compressed = &cbin[bytes.start as usize..bytes.end as usize];
        match ch.decode_chunk(chunk, compressed, cbin_path) {
            Ok(decoded) => assert_eq!(decoded.len(), ch.decoded_len(chunk)),
            Err(error) => assert_eq!(error.path(), Some(cbin_path)),
        }
    }
});
