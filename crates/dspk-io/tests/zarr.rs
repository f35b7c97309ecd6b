//! Zarr recordings: the v2 and v3 fixtures (blosc, zstd, channel chunks, sharding), the chunk
//! cache's decode counts, and the writer's round trip.
#![cfg(feature = "zarr")]

mod common;

use std::sync::Arc;

use common::*;
use dspk_core::{ChannelInfo, MemoryRecording, RecordingSource, SampleRate};
use dspk_io::{ChunkCache, ZarrOptions, ZarrRecording, ZarrWriteOptions, write_zarr};

const STORES: [&str; 5] = [
    "zarr_v2/si_default.zarr",
    "zarr_v2/si_zstd_chanchunk.zarr",
    "zarr_v3/si_layout_blosc.zarr",
    "zarr_v3/si_layout_zstd_chanchunk.zarr",
    "zarr_v3/si_layout_sharded.zarr",
];

#[test]
fn every_fixture_store_reads_the_matrix() {
    for store in STORES {
        eprintln!("{store}");
        let recording = ZarrRecording::open(fixtures().join(store)).unwrap();
        let version = if store.starts_with("zarr_v2") {
            "2"
        } else {
            "3"
        };
        assert_eq!(recording.info().metadata["zarr_format"], version);
        check_matrix_recording(&recording, true);
    }
}

#[test]
fn straddling_windows_decode_each_chunk_once() {
    // si_default.zarr: chunks of 1024 samples x 4 channels -> 3 chunks.
    let cache = Arc::new(ChunkCache::new(1 << 20));
    let recording = ZarrRecording::open_with(
        fixtures().join("zarr_v2/si_default.zarr"),
        ZarrOptions {
            cache: cache.clone(),
            ..ZarrOptions::default()
        },
    )
    .unwrap();
    let mut out = vec![0f32; 4 * 600];
    // Straddles chunks 0 and 1.
    recording.read(&[0, 1, 2, 3], 800..1400, &mut out).unwrap();
    assert_eq!(cache.stats().decodes, 2);
    // The next window: the rest of chunk 1 and into chunk 2.
    recording.read(&[0, 1, 2, 3], 1400..2000, &mut out).unwrap();
    recording.read(&[3, 2, 1, 0], 2000..2600, &mut out).unwrap();
    let stats = cache.stats();
    assert_eq!(stats.decodes, 3, "{stats:?}");
    assert!(stats.hits > 0);
    // A budget of one chunk (1024 x 4 x 2 bytes) evicts, and windows still read right.
    let small = Arc::new(ChunkCache::new(1024 * 4 * 2));
    let recording = ZarrRecording::open_with(
        fixtures().join("zarr_v2/si_default.zarr"),
        ZarrOptions {
            cache: small.clone(),
            ..ZarrOptions::default()
        },
    )
    .unwrap();
    check_matrix_recording(&recording, true);
    assert!(small.stats().evictions > 0);
    assert!(small.stats().bytes <= small.budget());
}

#[test]
fn sharded_stores_decode_only_the_inner_chunks_a_window_touches() {
    // si_layout_sharded.zarr: one shard (3072, 4) of inner chunks (256, 2).
    let cache = Arc::new(ChunkCache::new(1 << 20));
    let recording = ZarrRecording::open_with(
        fixtures().join("zarr_v3/si_layout_sharded.zarr"),
        ZarrOptions {
            cache: cache.clone(),
            ..ZarrOptions::default()
        },
    )
    .unwrap();
    let mut out = vec![0u8; 2 * 100];
    recording.read_stored(&[0], 200..300, &mut out).unwrap();
    let stats = cache.stats();
    assert_eq!(
        (stats.decodes, stats.bytes),
        (2, 2 * 256 * 2 * 2),
        "{stats:?}"
    );
    for (s, value) in out.chunks_exact(2).enumerate() {
        assert_eq!(
            i16::from_le_bytes([value[0], value[1]]),
            matrix_value(200 + s, 0)
        );
    }
    // Channel 1 shares those inner chunks; channel 2 needs two more.
    recording.read_stored(&[1], 200..300, &mut out).unwrap();
    assert_eq!(cache.stats().decodes, 2);
    recording.read_stored(&[2], 200..300, &mut out).unwrap();
    assert_eq!(cache.stats().decodes, 4);
}

#[test]
fn chunks_over_the_limit_are_refused_before_decoding() {
    let recording = ZarrRecording::open_with(
        fixtures().join("zarr_v3/si_layout_blosc.zarr"),
        ZarrOptions {
            max_chunk_bytes: 1000,
            ..ZarrOptions::default()
        },
    )
    .unwrap();
    let mut out = vec![0u8; 2];
    let error = recording
        .read_stored(&[0], 0..1, &mut out)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("too large") && error.contains("si_layout_blosc.zarr"),
        "{error}"
    );
    assert_eq!(recording.cache().stats().decodes, 0);
}

#[test]
fn write_then_read() {
    let dir = scratch("zarr_round_trip");
    let channels = (0..CHANNELS)
        .map(|c| ChannelInfo::new(IDS[c], GAINS[c], OFFSETS[c], "uV"))
        .collect();
    let source = MemoryRecording::from_samples(
        channels,
        SampleRate::from_hz(30000).unwrap(),
        &matrix_channel_major(),
    )
    .unwrap();
    for (name, options) in [
        ("default.zarr", ZarrWriteOptions::default()),
        (
            "small_chunks.zarr",
            ZarrWriteOptions {
                chunk_samples: 333,
                zstd_level: Some(1),
            },
        ),
        (
            "raw.zarr",
            ZarrWriteOptions {
                chunk_samples: 1000,
                zstd_level: None,
            },
        ),
    ] {
        let path = dir.join(name);
        write_zarr(&source, &path, options).unwrap();
        let recording = ZarrRecording::open(&path).unwrap();
        assert_eq!(recording.info().channels, source.info().channels);
        assert_eq!(recording.info().sample_rate, source.info().sample_rate);
        check_matrix_recording(&recording, true);
    }
    // Exact rates and other units and formats survive.
    let rate: SampleRate = "30000.12".parse().unwrap();
    let values: Vec<f32> = (0..3000).map(|i| i as f32 * 0.125 - 7.0).collect();
    let source = MemoryRecording::from_samples(
        vec![
            ChannelInfo::new("x", 1.0, 0.0, "V"),
            ChannelInfo::new("y", 2.0, -1.0, "mV"),
        ],
        rate,
        &values,
    )
    .unwrap();
    let path = dir.join("f32.zarr");
    write_zarr(
        &source,
        &path,
        ZarrWriteOptions {
            chunk_samples: 700,
            zstd_level: Some(3),
        },
    )
    .unwrap();
    let recording = ZarrRecording::open(&path).unwrap();
    assert_eq!(recording.info().channels, source.info().channels);
    assert_eq!(recording.info().sample_rate, rate);
    let mut a = vec![0u8; 3000 * 4];
    let mut b = a.clone();
    source.read_stored(&[0, 1], 0..1500, &mut a).unwrap();
    recording.read_stored(&[0, 1], 0..1500, &mut b).unwrap();
    assert_eq!(a, b);
    dspk_core::test_util::check_recording_source(&recording);
}
