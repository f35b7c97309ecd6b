//! Open Ephys binary: the fixture written by open-ephys-python-tools (README "openephys/")
//! read exactly, and bad recordings refused with errors naming the file.

mod common;

use std::path::{Path, PathBuf};

use dspk_core::{RationalTime, RecordingSource, test_util::check_recording_source};
use dspk_io::{Detection, Format, NpyArray};
use dspk_synapse::Error;
use dspk_synapse::openephys::{Oebin, OpenEphysFormat, OpenEphysRecording};

const SESSION: &str = "openephys/2024-05-01_12-00-00";
const NODE: &str = "openephys/2024-05-01_12-00-00/Record Node 101";
const RECORDING: &str = "openephys/2024-05-01_12-00-00/Record Node 101/experiment1/recording1";
const MAIN: &str = "Acquisition_Board-100.Rhythm Data";
const ADC: &str = "Acquisition_Board-100.Rhythm Data_ADC";
const STREAM_FOLDER: &str = "continuous/Acquisition_Board-100.Rhythm Data";

fn stored_i16(source: &dyn RecordingSource, channels: &[usize]) -> Vec<i16> {
    let n = source.info().num_samples;
    let mut bytes = vec![0u8; channels.len() * n as usize * 2];
    source.read_stored(channels, 0..n, &mut bytes).unwrap();
    common::i16s(&bytes)
}

#[test]
fn neural_stream_reads_the_matrix_with_the_files_gains_and_start_time() {
    let expected = common::expected("openephys");
    let recording = OpenEphysRecording::open(common::fixture(RECORDING), MAIN).unwrap();
    let info = recording.info();
    assert_eq!(info.num_samples, common::SAMPLES as u64);
    assert_eq!(info.sample_rate.as_hz(), 30000.0);
    assert_eq!(recording.columns(), &[0, 1, 2, 3]);
    let names: Vec<&str> = info.channels.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["CH1", "CH2", "CH3", "CH4"]);
    for (c, channel) in info.channels.iter().enumerate() {
        assert_eq!(channel.gain, 0.19499999284744263);
        assert_eq!(channel.gain, expected["si_gain_to_uV"][c].as_f64().unwrap());
        assert_eq!(
            channel.offset,
            expected["si_offset_to_uV"][c].as_f64().unwrap()
        );
        assert_eq!(channel.unit, "uV");
        assert_eq!(channel.unit, expected["neo_units"][c].as_str().unwrap());
    }
    assert_eq!(
        stored_i16(&recording, &[0, 1, 2, 3]),
        common::matrix_channel_major()
    );

    // t_start = 1_000_000 / 30000 s, exactly, and as neo reports it.
    assert_eq!(info.start_time, RationalTime::new(100, 3).unwrap());
    assert_eq!(
        info.start_time.as_secs_f64(),
        expected["neo_t_start_s"].as_f64().unwrap()
    );
    assert_eq!(
        recording.first_sample_number(),
        expected["first_sample_number"].as_i64().unwrap()
    );
    assert_eq!(info.metadata["gui_version"], "0.6.7");

    // Scaled = stored * bit_volts, through dspk-core's one definition.
    let mut scaled = vec![0f32; common::SAMPLES];
    recording
        .read(&[2], 0..common::SAMPLES as u64, &mut scaled)
        .unwrap();
    for (t, &value) in scaled.iter().enumerate() {
        let stored = f64::from(common::matrix_value(t, 2));
        assert_eq!(value, dspk_core::scale(stored, 0.19499999284744263, 0.0));
    }
    check_recording_source(&recording);
}

#[test]
fn adc_stream_is_apart_in_volts() {
    let expected = common::expected("openephys");
    let recording = OpenEphysRecording::open(common::fixture(RECORDING), ADC).unwrap();
    let info = recording.info();
    assert_eq!(recording.columns(), &[4]);
    assert_eq!(info.channels.len(), 1);
    assert_eq!(info.channels[0].name, "ADC1");
    assert_eq!(info.channels[0].gain, 0.00015258789062);
    assert_eq!(
        info.channels[0].gain,
        expected["neo_gain"][4].as_f64().unwrap()
    );
    assert_eq!(info.channels[0].unit, "V");
    assert_eq!(info.start_time, RationalTime::new(100, 3).unwrap());
    let adc = stored_i16(&recording, &[0]);
    let want: Vec<i16> = (0..common::SAMPLES)
        .map(|t| (t % 1000) as i16 * 10)
        .collect();
    assert_eq!(adc, want);
    check_recording_source(&recording);
}

#[test]
fn streams_are_named_as_neo_after_the_record_node() {
    let expected = common::expected("openephys");
    let streams = OpenEphysRecording::streams(common::fixture(RECORDING)).unwrap();
    let neo: Vec<String> = expected["neo_streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            format!(
                "Record Node 101#{}",
                s.as_str().unwrap().split_once('#').unwrap().1
            )
        })
        .collect();
    let ours: Vec<String> = streams
        .iter()
        .map(|s| format!("Record Node 101#{s}"))
        .collect();
    assert_eq!(ours, neo);
    assert_eq!(streams, [MAIN, ADC]);
}

#[test]
fn opens_from_the_oebin_the_record_node_and_the_session_folder() {
    let matrix = common::matrix_channel_major();
    for path in [
        common::fixture(RECORDING).join("structure.oebin"),
        common::fixture(NODE),
        common::fixture(SESSION),
    ] {
        let recording = OpenEphysRecording::open(&path, MAIN).unwrap();
        assert_eq!(
            stored_i16(&recording, &[0, 1, 2, 3]),
            matrix,
            "{}",
            path.display()
        );
        assert_eq!(OpenEphysFormat.detect(&path), Detection::ByMetadata);
        let opened = OpenEphysFormat.open(&path).unwrap();
        assert_eq!(
            opened.info().num_channels(),
            4,
            "the first stream is the neural one"
        );
        assert_eq!(stored_i16(opened.as_ref(), &[0, 1, 2, 3]), matrix);
    }
    assert_eq!(
        OpenEphysFormat.detect(&common::fixture("spikeglx")),
        Detection::No
    );
    assert_eq!(
        OpenEphysFormat.detect(&common::fixture("openephys/expected.json")),
        Detection::No
    );
}

/// A copy of the fixture recording in a fresh temporary folder, removed on drop.
struct Scratch {
    root: PathBuf,
}

impl Scratch {
    fn new(name: &str) -> Self {
        let root = std::env::temp_dir().join(format!(
            "dspk-synapse-openephys-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&root);
        common::writable_copy(&common::fixture(RECORDING), &root.join("recording1"));
        Self { root }
    }

    fn recording(&self) -> PathBuf {
        self.root.join("recording1")
    }

    fn oebin(&self) -> PathBuf {
        self.recording().join("structure.oebin")
    }

    fn stream_folder(&self) -> PathBuf {
        self.recording().join(STREAM_FOLDER)
    }

    /// Rewrites `structure.oebin` after `edit` changes its JSON.
    fn edit_oebin(&self, edit: impl FnOnce(&mut serde_json::Value)) {
        let mut json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(self.oebin()).unwrap()).unwrap();
        edit(&mut json);
        std::fs::write(self.oebin(), serde_json::to_vec_pretty(&json).unwrap()).unwrap();
    }

    fn open_error(&self) -> Error {
        OpenEphysRecording::open(self.recording(), MAIN).unwrap_err()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn assert_names(error: &Error, file: &Path, words: &str) {
    let message = error.to_string();
    assert!(
        message.contains(&file.display().to_string()),
        "`{message}` does not name {}",
        file.display()
    );
    assert!(
        message.contains(words),
        "`{message}` does not say `{words}`"
    );
}

#[test]
fn truncated_dat_is_refused() {
    let scratch = Scratch::new("truncated");
    let dat = scratch.stream_folder().join("continuous.dat");
    let bytes = std::fs::read(&dat).unwrap();
    std::fs::write(&dat, &bytes[..bytes.len() - 3]).unwrap();
    let error = scratch.open_error();
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Truncated { .. })),
        "{error:?}"
    );
    assert_names(&error, &dat, "truncated");
}

#[test]
fn num_channels_disagreeing_with_the_channel_list_is_refused() {
    let scratch = Scratch::new("num-channels");
    scratch.edit_oebin(|json| json["continuous"][0]["num_channels"] = 6.into());
    let error = scratch.open_error();
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Invalid { .. })),
        "{error:?}"
    );
    assert_names(
        &error,
        &scratch.oebin(),
        "`num_channels` is 6 but `channels` lists 5",
    );
}

#[test]
fn a_channel_list_that_disagrees_with_the_data_is_caught_by_sample_numbers() {
    // Four channels over a 5-column file: 30000 bytes are 3750 whole frames of 4 channels, so
    // only the sample numbers (3000) show the mismatch.
    let scratch = Scratch::new("columns");
    scratch.edit_oebin(|json| {
        let stream = &mut json["continuous"][0];
        stream["num_channels"] = 4.into();
        stream["channels"].as_array_mut().unwrap().pop();
    });
    let error = scratch.open_error();
    let npy = scratch.stream_folder().join("sample_numbers.npy");
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Invalid { .. })),
        "{error:?}"
    );
    assert_names(&error, &npy, "3000 sample numbers for the 3750 frames");
}

#[test]
fn short_sample_numbers_are_refused() {
    let scratch = Scratch::new("sample-numbers");
    let npy = scratch.stream_folder().join("sample_numbers.npy");
    let values: Vec<u8> = (0..2999i64).flat_map(|v| v.to_le_bytes()).collect();
    NpyArray::new("<i8".parse().unwrap(), false, vec![2999], values)
        .unwrap()
        .write(&npy)
        .unwrap();
    let error = scratch.open_error();
    assert_names(&error, &npy, "2999 sample numbers for the 3000 frames");

    NpyArray::from_f64(&[1.0; 3000]).write(&npy).unwrap();
    let error = scratch.open_error();
    assert_names(&error, &npy, "1-D int64");
}

#[test]
fn missing_data_files_are_named() {
    let scratch = Scratch::new("missing");
    let folder = scratch.stream_folder();
    std::fs::remove_file(folder.join("sample_numbers.npy")).unwrap();
    let error = scratch.open_error();
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Missing { .. })),
        "{error:?}"
    );
    assert_names(&error, &folder, "sample_numbers.npy is missing");

    std::fs::remove_file(folder.join("continuous.dat")).unwrap();
    let error = scratch.open_error();
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Missing { .. })),
        "{error:?}"
    );
    assert_names(&error, &folder, "continuous.dat is missing");

    let empty = scratch.root.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let error = OpenEphysRecording::open(&empty, MAIN).unwrap_err();
    assert_names(&error, &empty, "structure.oebin");
    assert_eq!(OpenEphysFormat.detect(&empty), Detection::No);
}

#[test]
fn bad_json_and_unknown_versions_are_refused() {
    let scratch = Scratch::new("versions");
    let oebin = scratch.oebin();
    std::fs::write(&oebin, b"{\"GUI version\": \"0.6.7\", \"continuous\": [").unwrap();
    assert_names(&scratch.open_error(), &oebin, "not valid JSON");

    let cases: [(&str, serde_json::Value, &str); 5] = [
        ("0.5.3", serde_json::Value::Null, "before 0.6"),
        ("2.0.0", serde_json::Value::Null, "unsupported"),
        ("six", serde_json::Value::Null, "not `major.minor[.patch]`"),
        (
            "0.6.7",
            "../../elsewhere/".into(),
            "not a plain folder name",
        ),
        (
            "0.6.7",
            serde_json::json!(7),
            "`folder_name` is missing or not a string",
        ),
    ];
    for (version, folder, words) in cases {
        let scratch = Scratch::new("versions-case");
        scratch.edit_oebin(|json| {
            json["GUI version"] = version.into();
            if !folder.is_null() {
                json["continuous"][0]["folder_name"] = folder.clone();
            }
        });
        assert_names(&scratch.open_error(), &scratch.oebin(), words);
    }

    let scratch = Scratch::new("units");
    scratch.edit_oebin(|json| {
        json["continuous"][0]["channels"][2]
            .as_object_mut()
            .unwrap()
            .remove("units");
    });
    assert_names(
        &scratch.open_error(),
        &scratch.oebin(),
        "continuous[0].channels[2]: `units` is missing",
    );

    let scratch = Scratch::new("rate");
    scratch.edit_oebin(|json| json["continuous"][0]["sample_rate"] = (-30000.0).into());
    assert_names(
        &scratch.open_error(),
        &scratch.oebin(),
        "`sample_rate` -30000.0",
    );
}

#[test]
fn unknown_streams_and_several_recordings_are_explained() {
    let scratch = Scratch::new("streams");
    let error =
        OpenEphysRecording::open(scratch.recording(), "Neuropix-PXI-100.ProbeA").unwrap_err();
    assert_names(&error, &scratch.oebin(), &format!("streams: {MAIN}, {ADC}"));

    common::writable_copy(&scratch.recording(), &scratch.root.join("recording2"));
    let error = OpenEphysRecording::open(&scratch.root, MAIN).unwrap_err();
    assert_names(&error, &scratch.root, "holds 2 Open Ephys recordings");
}

#[test]
fn oebin_parse_keeps_the_fields() {
    let path = common::fixture(RECORDING).join("structure.oebin");
    let oebin = Oebin::parse(&std::fs::read(&path).unwrap(), &path).unwrap();
    assert_eq!(oebin.gui_version, "0.6.7");
    assert_eq!(oebin.continuous.len(), 1);
    let stream = &oebin.continuous[0];
    assert_eq!(stream.folder_name, MAIN);
    assert_eq!(stream.stream_name, "Rhythm Data");
    assert_eq!(stream.source_processor_name, "Acquisition Board");
    assert_eq!(stream.sample_rate.numerator(), 30000);
    assert_eq!(stream.sample_rate.denominator(), 1);
    assert_eq!(stream.channels.len(), 5);
    assert_eq!(stream.channels[4].description, "ADC data channel");
}
