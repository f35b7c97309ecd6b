//! Every reader, read by the `WindowLoader` with 1 to 8 threads: the same windows, in the same
//! order, with the same bytes (stored) and values (scaled) as one thread, over windows that do
//! not divide the recording evenly.

mod common;

use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::Arc;

use dspk_core::{
    ChannelInfo, ChunkSchedule, ConcurrentReads, LoaderOptions, RecordingSource, SampleFormat,
    SampleRate, SyntheticRecording, WindowLoader,
};
use dspk_io::{ByteOrder, RawRecording, RawSpec, SampleOrder, ZarrRecording, ZarrWriteOptions};

const CHANNELS: usize = 5;
const SAMPLES: u64 = 23_017;

fn synthetic() -> SyntheticRecording {
    SyntheticRecording::new(CHANNELS, SAMPLES, SampleRate::from_hz(30_000).unwrap(), 11).unwrap()
}

/// The recording's int16 values as the file holds them: interleaved or channel-major, in
/// `order`'s bytes.
fn file_bytes(layout: SampleOrder, order: ByteOrder) -> Vec<u8> {
    let source = synthetic();
    let n = SAMPLES as usize;
    let value = |c: usize, s: usize| {
        let v = source.stored_value(c, s as u64);
        match order {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        }
    };
    let mut bytes = Vec::with_capacity(CHANNELS * n * 2);
    match layout {
        SampleOrder::Interleaved => (0..n)
            .flat_map(|s| (0..CHANNELS).map(move |c| (c, s)))
            .for_each(|(c, s)| bytes.extend_from_slice(&value(c, s))),
        SampleOrder::ChannelMajor => (0..CHANNELS)
            .flat_map(|c| (0..n).map(move |s| (c, s)))
            .for_each(|(c, s)| bytes.extend_from_slice(&value(c, s))),
    }
    bytes
}

fn raw(dir: &Path, layout: SampleOrder, order: ByteOrder, header: usize) -> RawRecording {
    let path = dir.join(format!("{}-{order:?}.bin", layout.name()));
    let mut bytes = vec![0xA5u8; header];
    bytes.extend(file_bytes(layout, order));
    std::fs::write(&path, bytes).unwrap();
    let channels = (0..CHANNELS)
        .map(|c| ChannelInfo::new(c.to_string(), 0.25 * (c + 1) as f64, c as f64, "uV"))
        .collect();
    RawRecording::new(
        &path,
        RawSpec {
            channels,
            sample_rate: SampleRate::from_hz(30_000).unwrap(),
            format: SampleFormat::I16,
            byte_order: order,
            order: layout,
            header_bytes: header as u64,
            num_samples: None,
        },
    )
    .unwrap()
}

/// A `.npy` file of shape `[SAMPLES, CHANNELS]`, `<i2`, in C (interleaved) or Fortran order.
fn npy(dir: &Path, fortran: bool) -> RawRecording {
    let path = dir.join(format!("fortran-{fortran}.npy"));
    let dict = format!(
        "{{'descr': '<i2', 'fortran_order': {}, 'shape': ({SAMPLES}, {CHANNELS}), }}",
        if fortran { "True" } else { "False" }
    );
    let unpadded = 10 + dict.len() + 1;
    let padding = unpadded.next_multiple_of(64) - unpadded;
    let header = format!("{dict}{}\n", " ".repeat(padding));
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&u16::try_from(header.len()).unwrap().to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    let layout = if fortran {
        SampleOrder::ChannelMajor
    } else {
        SampleOrder::Interleaved
    };
    bytes.extend(file_bytes(layout, ByteOrder::Little));
    std::fs::write(&path, bytes).unwrap();
    dspk_io::open_npy_recording(&path, SampleRate::from_hz(30_000).unwrap()).unwrap()
}

fn zarr(dir: &Path, chunk_samples: u64) -> ZarrRecording {
    let path = dir.join(format!("chunks-{chunk_samples}.zarr"));
    let options = ZarrWriteOptions {
        chunk_samples,
        zstd_level: Some(1),
    };
    dspk_io::write_zarr(&synthetic(), &path, options).unwrap();
    ZarrRecording::open(&path).unwrap()
}

/// Every window of `schedule` as `(index, read range, stored bytes, scaled values as bits)`.
type Windows = Vec<(usize, std::ops::Range<u64>, Vec<u8>, Vec<u32>)>;

fn load(source: &Arc<dyn RecordingSource>, schedule: ChunkSchedule, threads: usize) -> Windows {
    // Read-ahead hints on: they must change nothing read.
    let options = LoaderOptions {
        threads: NonZeroUsize::new(threads),
        read_ahead: true,
        ..LoaderOptions::default()
    };
    let all = source.info().all_channels();
    let channels: Vec<usize> = all.iter().rev().copied().collect(); // not in file order
    let stored = WindowLoader::<u8>::new(source.clone(), channels.clone(), schedule, options);
    let scaled = WindowLoader::<f32>::new(source.clone(), channels, schedule, options);
    let (stored, scaled) = (stored.unwrap(), scaled.unwrap());
    let expected = if source.concurrent_reads() == ConcurrentReads::No {
        1
    } else {
        threads
    };
    assert_eq!(stored.reader_threads(), expected);
    stored
        .zip(scaled)
        .map(|(stored, scaled)| {
            let (stored, scaled) = (stored.unwrap(), scaled.unwrap());
            assert_eq!(stored.window(), scaled.window());
            let bits = scaled.data().iter().map(|v| v.to_bits()).collect();
            let window = stored.window();
            (window.index(), window.read(), stored.data().to_vec(), bits)
        })
        .collect()
}

#[test]
fn every_reader_gives_the_same_windows_with_any_number_of_threads() {
    let dir = common::scratch("loader_threads");
    let sources: Vec<(&str, Arc<dyn RecordingSource>, ConcurrentReads)> = vec![
        (
            "raw interleaved",
            Arc::new(raw(&dir, SampleOrder::Interleaved, ByteOrder::Little, 0)),
            ConcurrentReads::ByTime { align: 1 },
        ),
        (
            "raw interleaved big-endian with a header",
            Arc::new(raw(&dir, SampleOrder::Interleaved, ByteOrder::Big, 37)),
            ConcurrentReads::ByTime { align: 1 },
        ),
        (
            "raw channel-major",
            Arc::new(raw(&dir, SampleOrder::ChannelMajor, ByteOrder::Little, 0)),
            ConcurrentReads::ByChannel,
        ),
        (
            "npy C order",
            Arc::new(npy(&dir, false)),
            ConcurrentReads::ByTime { align: 1 },
        ),
        (
            "npy Fortran order",
            Arc::new(npy(&dir, true)),
            ConcurrentReads::ByChannel,
        ),
        (
            "zarr",
            Arc::new(zarr(&dir, 1_000)),
            ConcurrentReads::ByTime { align: 1_000 },
        ),
    ];
    // Windows of 6 001 samples with halos: neither the windows nor the parts divide evenly.
    let schedule = ChunkSchedule::new(SAMPLES, 6_001, 150, 250).unwrap();
    for (name, source, mode) in &sources {
        assert_eq!(source.concurrent_reads(), *mode, "{name}");
        let one = load(source, schedule, 1);
        assert_eq!(one.len(), schedule.len(), "{name}");
        for ((index, read, stored, _), window) in one.iter().zip(schedule.iter()) {
            assert_eq!((*index, read.clone()), (window.index(), window.read()));
            let mut expected = vec![0u8; stored.len()];
            let channels: Vec<usize> = (0..CHANNELS).rev().collect();
            source
                .read_stored(&channels, read.clone(), &mut expected)
                .unwrap();
            assert_eq!(stored, &expected, "{name}: window {index}");
        }
        for threads in 2..=8 {
            let many = load(source, schedule, threads);
            assert!(many == one, "{name}: {threads} threads differ from one");
        }
    }
}

#[test]
fn wide_interleaved_files_transpose_across_tiles_and_blocks() {
    // 300 channels: 600-byte frames, so a read of 8 000 samples crosses the reader's 512 KiB
    // blocks (872 rows), and 300 is not a multiple of the transposition's 8-channel tiles.
    let (channels, samples) = (300, 8_000u64);
    let rate = SampleRate::from_hz(30_000).unwrap();
    let source = SyntheticRecording::new(channels, samples, rate, 5).unwrap();
    let dir = common::scratch("loader_threads_wide");
    let path = dir.join("wide.bin");
    let bytes: Vec<u8> = (0..samples)
        .flat_map(|s| (0..channels).map(move |c| (c, s)))
        .flat_map(|(c, s)| source.stored_value(c, s).to_le_bytes())
        .collect();
    std::fs::write(&path, bytes).unwrap();
    let infos = (0..channels)
        .map(|c| ChannelInfo::new(c.to_string(), 1.0, 0.0, ""))
        .collect();
    let raw = Arc::new(
        RawRecording::new(
            &path,
            RawSpec {
                channels: infos,
                sample_rate: rate,
                format: SampleFormat::I16,
                byte_order: ByteOrder::Little,
                order: SampleOrder::Interleaved,
                header_bytes: 0,
                num_samples: None,
            },
        )
        .unwrap(),
    );
    let picked: Vec<usize> = (0..channels).rev().step_by(7).collect();
    let schedule = ChunkSchedule::new(samples, 7_500, 0, 0).unwrap();
    for threads in [1, 3] {
        let options = LoaderOptions {
            threads: NonZeroUsize::new(threads),
            ..LoaderOptions::default()
        };
        for window in
            WindowLoader::<u8>::new(raw.clone(), picked.clone(), schedule, options).unwrap()
        {
            let window = window.unwrap();
            let read = window.window().read();
            let n = window.window().read_len();
            for (k, &c) in picked.iter().enumerate() {
                for s in 0..n {
                    let at = 2 * (k * n + s);
                    let got = i16::from_le_bytes([window.data()[at], window.data()[at + 1]]);
                    let expected = source.stored_value(c, read.start + s as u64);
                    assert_eq!(got, expected, "channel {c}, sample {s}, {threads} threads");
                }
            }
        }
    }
}
