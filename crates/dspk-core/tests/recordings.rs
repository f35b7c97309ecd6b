//! Recordings: argument checks and `read == read_stored * gain + offset` for every format.

use std::sync::Arc;

use dspk_core::test_util::{Rng, check_recording_source};
use dspk_core::{
    ChannelInfo, ConcurrentReads, Error, MemoryRecording, ReadRequest, RecordingInfo,
    RecordingSource, RepeatedRecording, SampleFormat, SampleRate, ScaledOnly, SyntheticRecording,
};

/// A recording of `channels` x `samples` random stored values of `format` (extremes included
/// at the start of every channel) with random gains and offsets.
fn random_recording(
    format: SampleFormat,
    channels: usize,
    samples: usize,
    seed: u64,
) -> MemoryRecording {
    let mut rng = Rng::new(seed);
    let infos = (0..channels)
        .map(|c| {
            ChannelInfo::new(
                format!("ch{c}"),
                rng.uniform(0.1, 10.0),
                rng.uniform(-100.0, 100.0),
                "uV",
            )
        })
        .collect();
    let rate = SampleRate::from_hz(30_000).unwrap();
    let extremes: Vec<u64> = match format {
        SampleFormat::I16 => [i16::MIN, -1, 0, 1, i16::MAX]
            .map(|v| v as u16 as u64)
            .into(),
        SampleFormat::U16 => [0u16, 1, 32767, 32768, u16::MAX].map(u64::from).into(),
        SampleFormat::I32 => [i32::MIN, -1, 0, 1, i32::MAX]
            .map(|v| v as u32 as u64)
            .into(),
        SampleFormat::F32 => [-1e30f32, -1.5, 0.0, 1.5, 1e30]
            .map(|v| u64::from(v.to_bits()))
            .into(),
        _ => unreachable!("a new format needs its extremes here"),
    };
    let mut stored = Vec::new();
    for _ in 0..channels {
        for s in 0..samples {
            let bits = if s < extremes.len() {
                extremes[s]
            } else if format == SampleFormat::F32 {
                u64::from((rng.uniform(-1e4, 1e4) as f32).to_bits())
            } else {
                rng.next_u64()
            };
            stored.extend_from_slice(&bits.to_le_bytes()[..format.size()]);
        }
    }
    let info = RecordingInfo::new(infos, samples as u64, rate, format).unwrap();
    MemoryRecording::new(info, stored).unwrap()
}

#[test]
fn every_format_passes_the_conformance_suite() {
    for (i, format) in SampleFormat::ALL.into_iter().enumerate() {
        for (channels, samples) in [(1, 1), (3, 7), (5, 1001), (17, 2500)] {
            let recording =
                random_recording(format, channels, samples, i as u64 * 100 + channels as u64);
            check_recording_source(&recording);
            check_recording_source(&ScaledOnly(recording.clone()));
            check_recording_source(&Arc::new(recording));
        }
    }
    let synthetic =
        SyntheticRecording::new(9, 40_001, SampleRate::from_hz(30_000).unwrap(), 3).unwrap();
    check_recording_source(&synthetic);
}

/// A recording in memory may be read by time from several threads; its runs are the
/// values and bytes that `read` and `read_stored` give, for any channel order and range.
#[test]
fn memory_recordings_fill_runs_as_they_read() {
    for (i, format) in SampleFormat::ALL.into_iter().enumerate() {
        let recording = random_recording(format, 4, 301, 40 + i as u64);
        assert_eq!(
            recording.concurrent_reads(),
            ConcurrentReads::ByTime { align: 1 }
        );
        let size = format.size();
        let mut rng = Rng::new(5 + i as u64);
        for _ in 0..50 {
            let start = rng.next_u64() % 301;
            let len = (1 + rng.next_u64() % (301 - start)) as usize;
            let range = start..start + len as u64;
            let channels: &[usize] = match rng.next_u64() % 3 {
                0 => &[0, 1, 2, 3],
                1 => &[3, 1],
                _ => &[2],
            };
            let request = ReadRequest::new(recording.info(), channels, range.clone()).unwrap();
            let mut scaled = vec![0f32; channels.len() * len];
            recording
                .read(channels, range.clone(), &mut scaled)
                .unwrap();
            let mut by_runs = vec![f32::NAN; channels.len() * len];
            let mut runs: Vec<&mut [f32]> = by_runs.chunks_exact_mut(len).collect();
            recording.fill_scaled_runs(&request, &mut runs).unwrap();
            assert_eq!(
                by_runs.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                scaled.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                "{format}: scaled runs of {channels:?} over {range:?}"
            );
            let mut stored = vec![0u8; channels.len() * len * size];
            recording
                .read_stored(channels, range.clone(), &mut stored)
                .unwrap();
            let mut stored_runs = vec![0xAAu8; stored.len()];
            let mut runs: Vec<&mut [u8]> = stored_runs.chunks_exact_mut(len * size).collect();
            recording.fill_stored_runs(&request, &mut runs).unwrap();
            assert_eq!(stored_runs, stored, "{format}: stored runs of {channels:?}");
            // Runs of the wrong length are refused.
            let mut short = vec![0f32; len - 1 + channels.len() * len];
            let mut runs: Vec<&mut [f32]> = vec![&mut short[..len.saturating_sub(1)]];
            assert!(recording.fill_scaled_runs(&request, &mut runs).is_err());
        }
    }
}

#[test]
fn scaled_values_are_stored_times_gain_plus_offset() {
    for format in SampleFormat::ALL {
        let recording = random_recording(format, 4, 9, 11);
        let info = recording.info();
        let mut stored = vec![0u8; 4 * 9 * format.size()];
        let mut scaled = vec![0f32; 4 * 9];
        let channels = [0, 1, 2, 3];
        recording.read_stored(&channels, 0..9, &mut stored).unwrap();
        recording.read(&channels, 0..9, &mut scaled).unwrap();
        for c in 0..4 {
            for s in 0..9 {
                let at = (c * 9 + s) * format.size();
                let raw = format.decode(&stored[at..at + format.size()]);
                let expected = (raw * info.channels[c].gain + info.channels[c].offset) as f32;
                assert_eq!(
                    scaled[c * 9 + s],
                    expected,
                    "{format} channel {c} sample {s}"
                );
            }
        }
        // The extremes really are there (first samples of each channel).
        let first = format.decode(&stored[..format.size()]);
        let expected_min = match format {
            SampleFormat::I16 => -32768.0,
            SampleFormat::U16 => 0.0,
            SampleFormat::I32 => f64::from(i32::MIN),
            _ => f64::from(-1e30f32),
        };
        assert_eq!(first, expected_min, "{format}");
    }
}

#[test]
fn bad_arguments_name_what_was_wrong() {
    let recording = random_recording(SampleFormat::I16, 3, 100, 5);
    let error = recording.read(&[0, 3], 0..10, &mut [0.0; 20]).unwrap_err();
    assert_eq!(
        error.to_string(),
        "channel 3 is out of range: the recording has 3 channels"
    );
    let error = recording.read(&[0], 90..101, &mut [0.0; 11]).unwrap_err();
    assert_eq!(
        error.to_string(),
        "sample range 90..101 reaches past the end of the recording (100 samples)"
    );
    let error = recording
        .read_stored(&[0, 1], 0..10, &mut [0u8; 20])
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "output buffer holds 20 bytes, the request needs 40"
    );
    let error = recording.read(&[0, 1], 0..10, &mut [0.0; 21]).unwrap_err();
    assert_eq!(
        error.to_string(),
        "output buffer holds 21 values, the request needs 20"
    );
    let error = ScaledOnly(recording)
        .read_stored(&[0], 0..1, &mut [0u8; 2])
        .unwrap_err();
    assert!(matches!(error, Error::Unsupported { .. }), "{error}");
    assert!(error.to_string().contains("ScaledOnly"), "{error}");
}

#[test]
fn recordings_that_disagree_with_their_description_are_refused() {
    let rate = SampleRate::from_hz(1000).unwrap();
    let info = RecordingInfo::new(
        vec![ChannelInfo::new("a", 1.0, 0.0, "uV")],
        10,
        rate,
        SampleFormat::I16,
    )
    .unwrap();
    let error = MemoryRecording::new(info, vec![0; 19]).unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid recording: 1 channels x 10 samples of int16 need 20 bytes, got 19"
    );
    let error = RecordingInfo::new(vec![], 10, rate, SampleFormat::I16).unwrap_err();
    assert!(matches!(error, Error::InvalidRecording(_)), "{error}");
    let error = RecordingInfo::new(
        vec![ChannelInfo::new("a", f64::NAN, 0.0, "uV")],
        10,
        rate,
        SampleFormat::I16,
    )
    .unwrap_err();
    assert!(error.to_string().contains("must be finite"), "{error}");
    let error = MemoryRecording::from_samples(
        vec![ChannelInfo::new("a", 1.0, 0.0, "uV"); 2],
        rate,
        &[1i16, 2, 3],
    )
    .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("cannot be split evenly over 2 channels"),
        "{error}"
    );
}

#[test]
fn typed_samples_build_the_same_recording_as_bytes() {
    let rate = SampleRate::from_hz(1000).unwrap();
    let channels = vec![
        ChannelInfo::new("a", 0.5, 1.0, "uV"),
        ChannelInfo::new("b", 2.0, -1.0, "uV"),
    ];
    let recording =
        MemoryRecording::from_samples(channels, rate, &[1i16, -2, 3, i16::MIN, 5, 6]).unwrap();
    assert_eq!(recording.info().num_samples, 3);
    let mut out = [0f32; 6];
    recording.read(&[1, 0], 0..3, &mut out).unwrap();
    assert_eq!(out, [-65537.0, 9.0, 11.0, 1.5, 0.0, 2.5]);
}

#[test]
fn large_synthetic_reads_match_sample_by_sample() {
    // 21 x 20011 values: over the size at which the synthetic source spreads channels over
    // threads.
    let source =
        SyntheticRecording::new(23, 50_000, SampleRate::from_hz(30_000).unwrap(), 4).unwrap();
    let channels: Vec<usize> = (0..21).rev().collect();
    let range = 12_345..32_356u64;
    let n = (range.end - range.start) as usize;
    let mut stored = vec![0u8; channels.len() * n * 2];
    let mut scaled = vec![0f32; channels.len() * n];
    source
        .read_stored(&channels, range.clone(), &mut stored)
        .unwrap();
    source.read(&channels, range.clone(), &mut scaled).unwrap();
    for (k, &c) in channels.iter().enumerate() {
        for s in 0..n {
            let value = source.stored_value(c, range.start + s as u64);
            let at = 2 * (k * n + s);
            assert_eq!(
                i16::from_le_bytes([stored[at], stored[at + 1]]),
                value,
                "channel {c} sample {s}"
            );
            assert_eq!(
                scaled[k * n + s],
                dspk_core::scale(f64::from(value), SyntheticRecording::GAIN_UV, 0.0)
            );
        }
    }
}

/// A repeated recording reads sample `s` of its block at `s % block`, across any number of
/// block boundaries, scaled, stored and by runs, for any channel order; it passes the
/// conformance suite and refuses empty or overflowing repeats.
#[test]
fn repeated_recordings_read_their_block_modulo_its_length() {
    let block = 37usize;
    let inner = random_recording(SampleFormat::I16, 3, block, 7);
    let repeated = RepeatedRecording::new(Arc::new(inner.clone()), 5).unwrap();
    assert_eq!(repeated.info().num_samples, 5 * block as u64);
    assert_eq!(repeated.block_samples(), block as u64);
    assert_eq!(repeated.repeats(), 5);
    check_recording_source(&repeated);
    check_recording_source(
        &RepeatedRecording::new(Arc::new(ScaledOnly(inner.clone())), 3).unwrap(),
    );

    let all = [0usize, 1, 2];
    let mut whole = vec![0f32; 3 * block];
    inner.read(&all, 0..block as u64, &mut whole).unwrap();
    let mut whole_stored = vec![0u8; 3 * block * 2];
    inner
        .read_stored(&all, 0..block as u64, &mut whole_stored)
        .unwrap();
    let mut rng = Rng::new(11);
    for _ in 0..200 {
        let start = (rng.next_u64() % (5 * block as u64)) as usize;
        let len = (rng.next_u64() % (5 * block as u64 - start as u64 + 1)) as usize;
        let channels: &[usize] = match rng.next_u64() % 3 {
            0 => &[0, 1, 2],
            1 => &[2, 0],
            _ => &[1],
        };
        let range = start as u64..(start + len) as u64;
        let mut scaled = vec![0f32; channels.len() * len];
        repeated.read(channels, range.clone(), &mut scaled).unwrap();
        let mut stored = vec![0u8; channels.len() * len * 2];
        repeated
            .read_stored(channels, range.clone(), &mut stored)
            .unwrap();
        let mut runs_out = vec![0f32; channels.len() * len];
        if len > 0 {
            let request = ReadRequest::new(repeated.info(), channels, range.clone()).unwrap();
            let mut runs: Vec<&mut [f32]> = runs_out.chunks_exact_mut(len).collect();
            repeated.fill_scaled_runs(&request, &mut runs).unwrap();
        }
        for (k, &c) in channels.iter().enumerate() {
            for i in 0..len {
                let s = (start + i) % block;
                let what = format!("channel {c}, sample {} of {range:?}", start + i);
                assert_eq!(scaled[k * len + i], whole[c * block + s], "{what}");
                assert_eq!(runs_out[k * len + i], whole[c * block + s], "{what} (runs)");
                assert_eq!(
                    stored[(k * len + i) * 2..(k * len + i + 1) * 2],
                    whole_stored[(c * block + s) * 2..(c * block + s + 1) * 2],
                    "{what} (stored)"
                );
            }
        }
    }

    let mut out = vec![0f32; 2];
    assert!(matches!(
        repeated.read(&[0], 5 * block as u64 - 1..5 * block as u64 + 1, &mut out),
        Err(Error::SamplesPastEnd { .. })
    ));
    for repeats in [0, u64::MAX] {
        assert!(matches!(
            RepeatedRecording::new(Arc::new(inner.clone()), repeats),
            Err(Error::InvalidRecording(_))
        ));
    }
    // Concurrent reads by time only where block boundaries fall on the inner alignment.
    assert_eq!(repeated.concurrent_reads(), inner.concurrent_reads());
    let synthetic =
        SyntheticRecording::new(3, 4_000, SampleRate::from_hz(30_000).unwrap(), 2).unwrap();
    let inner_reads = synthetic.concurrent_reads();
    let repeated_synthetic = RepeatedRecording::new(Arc::new(synthetic), 2).unwrap();
    match inner_reads {
        ConcurrentReads::ByTime { align } if !4_000u64.is_multiple_of(align) => {
            assert_eq!(repeated_synthetic.concurrent_reads(), ConcurrentReads::No);
        }
        other => assert_eq!(repeated_synthetic.concurrent_reads(), other),
    }
}
