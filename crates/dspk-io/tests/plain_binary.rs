//! Plain binary files read the way Kilosort reads them (a channel count, a rate and a dtype
//! instead of a sidecar), the sidecar written for later runs, and malformed sidecars.

mod common;

use std::path::{Path, PathBuf};

use dspk_core::{RecordingSource, SampleFormat, SampleRate};
use dspk_io::{Error, MAX_PLAIN_CHANNELS, PlainBinary, RawRecording, sidecar_path};

fn rate() -> SampleRate {
    SampleRate::from_hz(30_000).unwrap()
}

/// A file `name` of `values` little-endian int16 values in a fresh scratch folder of its own
/// (names differ between tests, which run at once); the folder and the file.
fn file(name: &str, values: &[i16]) -> (PathBuf, PathBuf) {
    let dir = common::scratch(&format!("plain-{name}"));
    let path = dir.join(name);
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&path, bytes).unwrap();
    (dir, path)
}

#[test]
fn a_plain_file_reads_with_the_channel_count_rate_and_dtype_given() {
    // 3 samples of 4 channels: value = 10 * sample + channel.
    let values: Vec<i16> = (0..3)
        .flat_map(|s| (0..4).map(move |c| 10 * s + c))
        .collect();
    let (_dir, path) = file("data.bin", &values);
    let recording = RawRecording::open_plain(&path, &PlainBinary::new(4, rate())).unwrap();
    let info = recording.info();
    assert_eq!((info.num_channels(), info.num_samples), (4, 3));
    assert_eq!(info.sample_rate, rate());
    assert_eq!(info.stored_format, SampleFormat::I16);
    assert_eq!(info.channels[3].name, "3");
    let mut out = vec![0.0f32; 3];
    recording.read(&[2], 0..3, &mut out).unwrap();
    assert_eq!(out, [2.0, 12.0, 22.0]);

    // The same bytes as 2 channels of int32, and with gains.
    let mut plain = PlainBinary::new(2, rate());
    plain.format = SampleFormat::I32;
    plain.gains = vec![0.5];
    plain.unit = "uV".into();
    let recording = RawRecording::open_plain(&path, &plain).unwrap();
    assert_eq!(recording.info().num_samples, 3);
    assert_eq!(recording.info().channels[1].gain, 0.5);
    assert_eq!(recording.info().channels[1].unit, "uV");
}

#[test]
fn a_wrong_channel_count_is_refused_with_the_arithmetic() {
    // 385 columns x 2 samples; read as 384.
    let (_dir, path) = file("np1.ap.bin", &[0; 770]);
    let error = RawRecording::open_plain(&path, &PlainBinary::new(384, rate())).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "{}: 1540 bytes is not a whole number of samples of 384 channels of int16 (768 \
             bytes per sample): 1540 = 2 x 768 + 4; check the channel count (n_chan_bin); \
             counts near 384 that fit: 385",
            path.display()
        )
    );
    let mut float = PlainBinary::new(385, rate());
    float.format = SampleFormat::F32;
    let (_dir, odd) = file("odd.bin", &[0; 3]);
    let error = RawRecording::open_plain(&odd, &float).unwrap_err();
    assert!(
        error
            .to_string()
            .ends_with("6 = 0 x 1540 + 6; the file is not even a whole number of float32 values (4 bytes each): check the dtype"),
        "{error}"
    );
}

#[test]
fn bad_descriptions_are_refused_before_the_file_is_read() {
    let path = Path::new("missing.bin");
    for (plain, expected) in [
        (
            PlainBinary::new(0, rate()),
            "the channel count must be from 1",
        ),
        (
            PlainBinary::new(MAX_PLAIN_CHANNELS + 1, rate()),
            "the channel count must be from 1",
        ),
        (
            PlainBinary {
                gains: vec![1.0, 2.0],
                ..PlainBinary::new(3, rate())
            },
            "2 gains for 3 channels",
        ),
        (
            PlainBinary {
                gains: vec![f64::NAN],
                ..PlainBinary::new(3, rate())
            },
            "the gain of channel 0 is NaN",
        ),
    ] {
        let error = RawRecording::open_plain(path, &plain).unwrap_err();
        assert!(error.to_string().contains(expected), "{error}");
    }
    let error = RawRecording::open_plain(path, &PlainBinary::new(4, rate())).unwrap_err();
    assert!(matches!(error, Error::Io { .. }), "{error}");
}

#[test]
fn the_sidecar_written_opens_the_file_by_its_path() {
    let (_dir, path) = file("sidecar.bin", &[1, 2, 3, 4, 5, 6]);
    let mut plain = PlainBinary::new(3, rate());
    plain.gains = vec![0.5, 1.0, 2.0];
    let recording = RawRecording::open_plain(&path, &plain).unwrap();
    let sidecar = recording.write_sidecar().unwrap();
    assert_eq!(sidecar, sidecar_path(&path));
    let reopened = RawRecording::open(&path).unwrap();
    assert_eq!(reopened.info(), recording.info());
    let mut out = vec![0.0f32; 2];
    reopened.read(&[2], 0..2, &mut out).unwrap();
    assert_eq!(out, [6.0, 12.0]);
}

// A hand-written sidecar with a typo used to be reported as "no format recognises this path".
#[test]
fn a_malformed_sidecar_says_what_is_wrong_in_it() {
    let (_dir, path) = file("typo.bin", &[0; 8]);
    let sidecar = sidecar_path(&path);
    // A missing comma after `"order": "interleaved"` (line 5).
    std::fs::write(
        &sidecar,
        "{\n  \"format\": \"dspk-raw\",\n  \"version\": 1,\n  \"data_file\": \"typo.bin\",\n  \
         \"order\": \"interleaved\"\n  \"dtype\": \"<i2\"\n}\n",
    )
    .unwrap();
    for given in [&path, &sidecar] {
        let error = dspk_io::open(given).err().expect("a malformed sidecar");
        assert!(matches!(error, Error::Json { .. }), "{error}");
        assert_eq!(
            error.to_string(),
            format!(
                "{}: invalid JSON: expected `,` or `}}` at line 6 column 3",
                sidecar.display()
            )
        );
    }
    // Valid JSON beside the data file, but without the format: the missing field is named.
    std::fs::write(&sidecar, "{\"data_file\": \"typo.bin\"}").unwrap();
    let error = dspk_io::open(&path).err().expect("no format field");
    assert!(
        error.to_string().contains("missing field `format`"),
        "{error}"
    );
    // A valid sidecar of the wrong kind is not taken for one.
    std::fs::write(&sidecar, "{\"format\": \"other\"}").unwrap();
    let error = dspk_io::open(&path).err().expect("not a sidecar");
    assert!(matches!(error, Error::UnknownFormat { .. }), "{error}");
}
