//! The shared stored matrix the fixture tests compare against is the one in the fixtures.

mod common;

#[test]
fn matrix_matches_expected_traces_npy() {
    let npy = dspk_io::NpyArray::read(common::fixture("expected_traces.npy")).unwrap();
    assert_eq!(
        npy.shape(),
        &[common::SAMPLES as u64, common::CHANNELS as u64]
    );
    let values = npy.to_i64().unwrap();
    for t in 0..common::SAMPLES {
        for c in 0..common::CHANNELS {
            assert_eq!(
                values[t * common::CHANNELS + c],
                i64::from(common::matrix_value(t, c)),
                "t {t} c {c}"
            );
        }
    }
}
