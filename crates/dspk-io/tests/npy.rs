//! `.npy`/`.npz` containers: dtypes, orders, byte orders, zip64 members, conversions.

mod common;

use common::*;
use dspk_io::{ByteOrder, Dtype, ElementKind, NpyArray, NpzArchive};

fn matrix_c_order_f64() -> Vec<f64> {
    (0..SAMPLES)
        .flat_map(|t| (0..CHANNELS).map(move |c| f64::from(matrix_value(t, c))))
        .collect()
}

#[test]
fn every_order_and_byte_order_reads_the_matrix() {
    for (file, fortran, order) in [
        ("matrix_c_le.npy", false, ByteOrder::Little),
        ("matrix_c_be.npy", false, ByteOrder::Big),
        ("matrix_f_le.npy", true, ByteOrder::Little),
        ("matrix_f_be.npy", true, ByteOrder::Big),
    ] {
        let array = NpyArray::read(data().join(file)).unwrap();
        assert_eq!(array.shape(), [3000, 4]);
        assert_eq!(array.fortran_order(), fortran);
        assert_eq!(array.dtype().order, order);
        assert_eq!(array.to_f64().unwrap(), matrix_c_order_f64(), "{file}");
        assert_eq!(
            array.to_i64().unwrap(),
            matrix_c_order_f64()
                .iter()
                .map(|&v| v as i64)
                .collect::<Vec<_>>()
        );
    }
    let expected = NpyArray::read(fixtures().join("expected_traces.npy")).unwrap();
    assert_eq!(expected.to_f64().unwrap(), matrix_c_order_f64());
}

#[test]
fn other_dtypes() {
    let gains = NpyArray::read(data().join("gains_be_f8.npy")).unwrap();
    assert_eq!(gains.to_f64().unwrap(), GAINS);
    let ids = NpyArray::read(data().join("ids_u2.npy")).unwrap();
    assert_eq!(ids.dtype().kind, ElementKind::Unicode);
    assert_eq!(ids.to_strings().unwrap(), IDS);
    // Fortran order in three dimensions comes back in C order.
    let small = NpyArray::read(data().join("small_f_i4.npy")).unwrap();
    assert_eq!(small.to_i64().unwrap(), (0..24).collect::<Vec<i64>>());
    let floats = NpyArray::read(data().join("floats_f4.npy")).unwrap();
    assert_eq!(floats.to_f64().unwrap(), [1.5, -2.25]);
    // The SpikeInterface properties.
    let folder = fixtures().join("si_binary/si_binary_folder/properties");
    assert_eq!(
        NpyArray::read(folder.join("gain_to_uV.npy"))
            .unwrap()
            .to_f64()
            .unwrap(),
        GAINS
    );
    assert_eq!(
        NpyArray::read(folder.join("offset_to_uV.npy"))
            .unwrap()
            .to_f64()
            .unwrap(),
        OFFSETS
    );
    assert_eq!(
        NpyArray::read(folder.join("group.npy"))
            .unwrap()
            .to_i64()
            .unwrap(),
        [0, 0, 0, 0]
    );
}

#[test]
fn wrong_dtype_conversions_name_the_file() {
    let path = data().join("floats_f4.npy");
    let error = NpyArray::read(&path).unwrap().to_i64().unwrap_err();
    assert_eq!(error.path(), path);
    assert!(error.to_string().contains("<f4"), "{error}");
    let error = NpyArray::read(data().join("ids_u2.npy"))
        .unwrap()
        .to_f64()
        .unwrap_err();
    assert!(error.to_string().contains("ids_u2.npy"), "{error}");
    let error = NpyArray::read(data().join("matrix_c_le.npy"))
        .unwrap()
        .to_strings()
        .unwrap_err();
    assert!(error.to_string().contains("not a text dtype"), "{error}");
    // A float .npy is not an int16 recording; a 1-D array is no recording at all.
    let rate = dspk_core::SampleRate::from_hz(1000).unwrap();
    for file in ["gains_be_f8.npy", "floats_f4.npy", "small_f_i4.npy"] {
        let error = dspk_io::open_npy_recording(data().join(file), rate).unwrap_err();
        assert!(error.to_string().contains(file), "{error}");
    }
}

#[test]
fn npz_archives_stored_and_deflated_with_zip64_members() {
    let mut archive = NpzArchive::open(data().join("arrays.npz")).unwrap();
    assert_eq!(archive.names(), ["matrix", "gains"]);
    assert_eq!(
        archive.read("matrix").unwrap().to_f64().unwrap(),
        matrix_c_order_f64()
    );
    assert_eq!(archive.read("gains.npy").unwrap().to_f64().unwrap(), GAINS);
    let error = archive.read("nothing").unwrap_err();
    assert!(matches!(error, dspk_io::Error::Missing { .. }));
    assert!(error.to_string().contains("matrix, gains"), "{error}");

    // Zip64 throughout: central-directory extra fields and the zip64 end record.
    let mut archive = NpzArchive::open(data().join("arrays_zip64.npz")).unwrap();
    assert_eq!(archive.names(), ["matrix", "gains"]);
    assert_eq!(
        archive.read("matrix").unwrap().to_f64().unwrap(),
        matrix_c_order_f64()
    );
    assert_eq!(archive.read("gains").unwrap().to_f64().unwrap(), GAINS);

    let mut archive = NpzArchive::open(data().join("arrays_compressed.npz")).unwrap();
    assert_eq!(
        archive.read("matrix").unwrap().to_f64().unwrap(),
        matrix_c_order_f64()
    );
    assert_eq!(archive.read("ids").unwrap().to_strings().unwrap(), IDS);
}

#[test]
fn write_then_read() {
    let dir = scratch("npy_round_trip");
    let original = NpyArray::read(data().join("matrix_f_be.npy")).unwrap();
    original.write(dir.join("copy.npy")).unwrap();
    let copy = NpyArray::read(dir.join("copy.npy")).unwrap();
    assert_eq!(
        (
            copy.dtype(),
            copy.shape(),
            copy.fortran_order(),
            copy.data()
        ),
        (
            original.dtype(),
            original.shape(),
            original.fortran_order(),
            original.data()
        )
    );
    let values = [0.1, -2.5, 1e300];
    let array = NpyArray::from_f64(&values);
    array.write(dir.join("f8.npy")).unwrap();
    assert_eq!(
        NpyArray::read(dir.join("f8.npy"))
            .unwrap()
            .to_f64()
            .unwrap(),
        values
    );
    let dtype: Dtype = "<i2".parse().unwrap();
    assert!(NpyArray::new(dtype, false, vec![3], vec![0; 5]).is_err());
}

/// Every `.npy` file of the fixtures (`tests/fixtures`: Phy exports in three dtypes and
/// orders, Open Ephys timestamps, SpikeInterface properties) reads as numpy reads it
/// (`tests/data/fixture_npy_reference.json`, from `make_fixture_npy_reference.py`).
#[test]
fn every_fixture_npy_reads_as_numpy_reads_it() {
    let reference: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data().join("fixture_npy_reference.json")).unwrap())
            .unwrap();
    let reference = reference.as_object().unwrap();
    assert!(reference.len() >= 40, "{} files", reference.len());
    let floats = |value: &serde_json::Value| -> Vec<f64> {
        value
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect()
    };
    for (file, expected) in reference {
        let array = NpyArray::read(fixtures().join(file)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            array.dtype().to_string(),
            expected["dtype"].as_str().unwrap(),
            "{file}"
        );
        let shape: Vec<u64> = expected["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap())
            .collect();
        assert_eq!(array.shape(), shape, "{file}");
        if expected["fortran_order"].as_bool().unwrap() {
            assert!(array.fortran_order(), "{file}");
        }
        if let Some(strings) = expected.get("strings") {
            let strings: Vec<&str> = strings
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap())
                .collect();
            assert_eq!(array.to_strings().unwrap(), strings, "{file}");
            continue;
        }
        let values = array.to_f64().unwrap_or_else(|e| panic!("{e}"));
        if let Some(exact) = expected.get("values") {
            assert_eq!(values, floats(exact), "{file}");
            continue;
        }
        assert_eq!(values[..10], floats(&expected["first"])[..], "{file}");
        let sum: f64 = values.iter().sum();
        let weighted: f64 = values
            .iter()
            .enumerate()
            .map(|(i, v)| v * ((i % 97) + 1) as f64)
            .sum();
        for (what, actual) in [("sum", sum), ("weighted_sum", weighted)] {
            let want = expected[what].as_f64().unwrap();
            assert!(
                (actual - want).abs() <= 1e-9 * want.abs().max(1.0),
                "{file}: {what} {actual} vs {want}"
            );
        }
    }
}
