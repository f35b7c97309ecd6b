//! Raw binary recordings: SpikeInterface's binary folder fixture, the dspk sidecar, the
//! writer's round trip in every layout, and `.npy` arrays read as recordings.

mod common;

use common::*;
use dspk_core::{ChannelInfo, MemoryRecording, RecordingSource, SampleFormat, SampleRate};
use dspk_io::{
    ByteOrder, RawRecording, RawWriteOptions, SampleOrder, open_npy_recording, write_raw,
};

#[test]
fn spikeinterface_binary_folder_fixture() {
    let folder = fixtures().join("si_binary/si_binary_folder");
    let recording = RawRecording::open_spikeinterface(&folder).unwrap();
    assert_eq!(recording.order(), SampleOrder::Interleaved);
    check_matrix_recording(&recording, true);
    // The JSON file itself opens too.
    let recording = RawRecording::open_spikeinterface(folder.join("binary.json")).unwrap();
    check_matrix_recording(&recording, true);
}

#[test]
fn spikeinterface_binary_gains_from_properties() {
    let source = fixtures().join("si_binary/si_binary_folder");
    let dir = scratch("si_properties");
    std::fs::create_dir_all(dir.join("properties")).unwrap();
    for file in [
        "traces_cached_seg0.raw",
        "properties/gain_to_uV.npy",
        "properties/offset_to_uV.npy",
    ] {
        std::fs::copy(source.join(file), dir.join(file)).unwrap();
    }
    let json = std::fs::read_to_string(source.join("binary.json")).unwrap();
    let mut value: serde_json::Value = serde_json::from_str(&json).unwrap();
    value["kwargs"]["gain_to_uV"] = serde_json::Value::Null;
    value["kwargs"]["offset_to_uV"] = serde_json::Value::Null;
    std::fs::write(dir.join("binary.json"), value.to_string()).unwrap();
    let recording = RawRecording::open_spikeinterface(&dir).unwrap();
    check_matrix_recording(&recording, true);
}

fn fixture_as_memory() -> MemoryRecording {
    let channels = (0..CHANNELS)
        .map(|c| ChannelInfo::new(IDS[c], GAINS[c], OFFSETS[c], "uV"))
        .collect();
    MemoryRecording::from_samples(
        channels,
        SampleRate::from_hz(30000).unwrap(),
        &matrix_channel_major(),
    )
    .unwrap()
}

#[test]
fn write_then_read_every_layout() {
    let source = fixture_as_memory();
    let dir = scratch("raw_round_trip");
    for order in [SampleOrder::Interleaved, SampleOrder::ChannelMajor] {
        for byte_order in [ByteOrder::Little, ByteOrder::Big] {
            let data = dir.join(format!("{}-{byte_order:?}.bin", order.name()));
            let sidecar = write_raw(&source, &data, RawWriteOptions { order, byte_order }).unwrap();
            assert_eq!(sidecar, dspk_io::sidecar_path(&data));
            for path in [&data, &sidecar] {
                let recording = RawRecording::open(path).unwrap();
                assert_eq!(
                    (recording.order(), recording.byte_order()),
                    (order, byte_order)
                );
                assert_eq!(recording.info(), source.info());
                check_matrix_recording(&recording, true);
            }
            let expected_len = (SAMPLES * CHANNELS * 2) as u64;
            assert_eq!(std::fs::metadata(&data).unwrap().len(), expected_len);
        }
    }
    // The little-endian interleaved file is byte for byte SpikeInterface's.
    let ours = std::fs::read(dir.join("interleaved-Little.bin")).unwrap();
    let theirs =
        std::fs::read(fixtures().join("si_binary/si_binary_folder/traces_cached_seg0.raw"))
            .unwrap();
    assert_eq!(ours, theirs);
}

#[test]
fn write_then_read_other_formats_and_rates() {
    let dir = scratch("raw_formats");
    let rate: SampleRate = "30000.12".parse().unwrap();
    let channels = || {
        vec![
            ChannelInfo::new("x", 0.5, -3.0, "mV"),
            ChannelInfo::new("y", 2.0, 1.0, "mV"),
        ]
    };
    let f32s: Vec<f32> = (0..2000).map(|i| i as f32 * 0.25 - 100.0).collect();
    let i32s: Vec<i32> = (0..2000).map(|i| i * 100_003 - 7).collect();
    let u16s: Vec<u16> = (0..2000).map(|i| (i * 37 % 65536) as u16).collect();
    let sources = [
        MemoryRecording::from_samples(channels(), rate, &f32s).unwrap(),
        MemoryRecording::from_samples(channels(), rate, &i32s).unwrap(),
        MemoryRecording::from_samples(channels(), rate, &u16s).unwrap(),
    ];
    for (i, source) in sources.iter().enumerate() {
        for byte_order in [ByteOrder::Little, ByteOrder::Big] {
            let data = dir.join(format!("{i}-{byte_order:?}.bin"));
            write_raw(
                source,
                &data,
                RawWriteOptions {
                    order: SampleOrder::ChannelMajor,
                    byte_order,
                },
            )
            .unwrap();
            let recording = RawRecording::open(&data).unwrap();
            assert_eq!(recording.info(), source.info());
            let size = source.info().stored_format.size();
            let mut a = vec![0u8; 2 * 1000 * size];
            let mut b = a.clone();
            source.read_stored(&[0, 1], 0..1000, &mut a).unwrap();
            recording.read_stored(&[0, 1], 0..1000, &mut b).unwrap();
            assert_eq!(a, b);
            dspk_core::test_util::check_recording_source(&recording);
        }
    }
}

#[test]
fn npy_arrays_as_recordings_in_every_order() {
    let rate = SampleRate::from_hz(30000).unwrap();
    for (file, order) in [
        ("matrix_c_le.npy", SampleOrder::Interleaved),
        ("matrix_c_be.npy", SampleOrder::Interleaved),
        ("matrix_f_le.npy", SampleOrder::ChannelMajor),
        ("matrix_f_be.npy", SampleOrder::ChannelMajor),
    ] {
        let recording = open_npy_recording(data().join(file), rate).unwrap();
        assert_eq!(recording.order(), order, "{file}");
        check_matrix_recording(&recording, false);
    }
    // The shared fixture matrix itself.
    let recording = open_npy_recording(fixtures().join("expected_traces.npy"), rate).unwrap();
    check_matrix_recording(&recording, false);
    assert_eq!(recording.info().stored_format, SampleFormat::I16);
}

/// Interleaved reads large enough to share among several threads (by sample range) give the
/// same values as the source: every channel, a channel subset in another order, and a read
/// that straddles the scratch blocks, for int16 and int32 in either byte order, stored and
/// scaled.
#[test]
fn large_interleaved_reads_split_over_threads_equal_the_file() {
    let dir = scratch("raw_large_interleaved");
    let (channels, samples) = (67usize, 40_011usize);
    let rate = SampleRate::from_hz(30_000).unwrap();
    let infos = || {
        (0..channels)
            .map(|c| ChannelInfo::new(c.to_string(), 1.0, 0.0, "uV"))
            .collect::<Vec<_>>()
    };
    let value = |s: usize, c: usize| (s * 131 + c * 7919) as i64 % 65_521 - 32_760;
    let i16s: Vec<i16> = (0..samples * channels)
        .map(|i| value(i / channels, i % channels) as i16)
        .collect();
    let i32s: Vec<i32> = (0..samples * channels)
        .map(|i| value(i / channels, i % channels) as i32 * 3)
        .collect();
    for (name, source) in [
        (
            "i16",
            MemoryRecording::from_samples(infos(), rate, &i16s).unwrap(),
        ),
        (
            "i32",
            MemoryRecording::from_samples(infos(), rate, &i32s).unwrap(),
        ),
    ] {
        for byte_order in [ByteOrder::Little, ByteOrder::Big] {
            let data = dir.join(format!("{name}-{byte_order:?}.bin"));
            write_raw(
                &source,
                &data,
                RawWriteOptions {
                    order: SampleOrder::Interleaved,
                    byte_order,
                },
            )
            .unwrap();
            let recording = RawRecording::open(&data).unwrap();
            let size = source.info().stored_format.size();
            let subset: Vec<usize> = (0..channels).rev().step_by(3).collect();
            for (chosen, range) in [
                ((0..channels).collect::<Vec<_>>(), 0..samples as u64),
                (subset, 1_234..39_999),
            ] {
                let what = format!("{name} {byte_order:?}: {} channels", chosen.len());
                let n = (range.end - range.start) as usize;
                let mut ours = vec![0u8; chosen.len() * n * size];
                let mut expected = vec![0u8; ours.len()];
                recording
                    .read_stored(&chosen, range.clone(), &mut ours)
                    .unwrap();
                source
                    .read_stored(&chosen, range.clone(), &mut expected)
                    .unwrap();
                assert!(ours == expected, "{what}");
                let mut ours = vec![0f32; chosen.len() * n];
                let mut expected = vec![0f32; ours.len()];
                recording.read(&chosen, range.clone(), &mut ours).unwrap();
                source.read(&chosen, range, &mut expected).unwrap();
                assert!(ours == expected, "{what}, scaled");
            }
        }
    }
}
