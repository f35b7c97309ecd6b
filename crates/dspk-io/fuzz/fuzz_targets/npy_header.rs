//! `.npy` files: the header parser, and whole arrays with their conversions.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz.npy");
    match dspk_io::NpyHeader::parse(data, path) {
        Ok(header) => {
            assert!(header.data_offset as usize <= data.len());
            let _ = header.data_len();
        }
        Err(error) => assert_eq!(error.path(), path),
    }
    if let Ok(array) = dspk_io::NpyArray::from_bytes(data, path) {
        let _ = array.to_f64();
        let _ = array.to_i64();
        let _ = array.to_strings();
        let bytes = array.to_bytes();
        let again =
            dspk_io::NpyArray::from_bytes(&bytes, path).expect("a written array reads back");
        assert_eq!(
            (again.dtype(), again.shape(), again.data()),
            (array.dtype(), array.shape(), array.data())
        );
    }
});
