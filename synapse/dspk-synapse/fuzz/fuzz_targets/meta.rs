//! SpikeGLX `.meta` files: `Meta::parse`, then the stream layout (column types, gains through
//! `snsSaveChanSubset` and `~imroTbl`) and the probe geometry derived from it. Any bytes must
//! give `Ok` or an error naming the file, never a panic or an allocation sized by a value.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz/x.imec0.ap.meta");
    let meta = match dspk_synapse::spikeglx::Meta::parse(data, path) {
        Ok(meta) => meta,
        Err(error) => {
            assert_eq!(error.path(), Some(path));
            return;
        }
    };
    let stream = match meta.stream() {
        Ok(stream) => stream,
        Err(error) => {
            assert_eq!(error.path(), Some(path));
            return;
        }
    };
    assert_eq!(
        stream.num_analog()
            + stream
                .columns
                .iter()
                .filter(|c| !c.kind.is_analog())
                .count(),
        stream.columns.len()
    );
    assert!(
        stream
            .columns
            .iter()
            .all(|c| c.gain.is_finite() && c.gain > 0.0)
    );
    match meta.probe(&stream) {
        Ok(Some(probe)) => assert!(probe.positions().iter().flatten().all(|v| v.is_finite())),
        Ok(None) => {}
        Err(error) => assert_eq!(error.path(), Some(path)),
    }
});
