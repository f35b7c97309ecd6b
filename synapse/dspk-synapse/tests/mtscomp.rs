//! mtscomp reader against the `tests/fixtures/mtscomp` fixtures and corrupted copies.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{CHANNELS, SAMPLES, expected, f64s, fixture, i16s, matrix_channel_major};
use dspk_core::RecordingSource;
use dspk_core::test_util::check_recording_source;
use dspk_io::{ChunkCache, Detection, Format};
use dspk_synapse::Error;
use dspk_synapse::mtscomp::{ChFile, MtscompFormat, MtscompRecording};

const VARIANTS: [&str; 2] = ["time_diff", "time_and_spatial_diff"];

fn cbin(variant: &str) -> PathBuf {
    fixture(&format!("mtscomp/{variant}/fixture_g0_t0.imec0.ap.cbin"))
}

fn stored(rec: &dyn RecordingSource, channels: &[usize], start: u64, end: u64) -> Vec<i16> {
    let mut bytes = vec![0u8; channels.len() * (end - start) as usize * 2];
    rec.read_stored(channels, start..end, &mut bytes).unwrap();
    i16s(&bytes)
}

fn sync_value(t: usize) -> u16 {
    (((t / 150) % 2) * 64) as u16
}

#[test]
fn fixtures_decode_to_the_matrix() {
    let expected = expected("mtscomp");
    for variant in VARIANTS {
        let rec = MtscompRecording::open(cbin(variant)).unwrap();
        let info = rec.info();
        assert_eq!(info.num_channels(), CHANNELS, "{variant}");
        assert_eq!(info.num_samples, SAMPLES as u64, "{variant}");
        let all = info.all_channels();
        assert_eq!(
            stored(&rec, &all, 0, SAMPLES as u64),
            matrix_channel_major(),
            "{variant}"
        );
        let gains: Vec<f64> = info.channels.iter().map(|c| c.gain).collect();
        assert_eq!(
            gains,
            f64s(&expected[variant]["si_gain_to_uV"]),
            "{variant}"
        );
        assert!(
            info.channels
                .iter()
                .all(|c| c.offset == 0.0 && c.unit == "uV")
        );

        let ch = rec.ch();
        let want_bounds: Vec<u64> = expected[variant]["ch"]["chunk_bounds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(ch.chunk_bounds(), want_bounds, "{variant}");
        assert_eq!(ch.do_spatial_diff(), variant == "time_and_spatial_diff");
        assert_eq!(
            ch.sha1_uncompressed(),
            Some("8c2e7c3dfc4fb1f2d67c63d1a3ba9662de32dab5")
        );

        let mut sync = vec![0u16; SAMPLES];
        rec.read_sync(0..SAMPLES as u64, &mut sync).unwrap();
        assert_eq!(sync, (0..SAMPLES).map(sync_value).collect::<Vec<_>>());
        assert_eq!(
            rec.probe().unwrap().channel_positions(CHANNELS).unwrap(),
            vec![[27.0, 0.0], [59.0, 0.0], [11.0, 20.0], [43.0, 20.0]]
        );
        check_recording_source(&rec);
    }
}

#[test]
fn windows_across_chunk_bounds_equal_the_whole_and_decode_once() {
    let whole = matrix_channel_major();
    let rec = MtscompRecording::open(cbin("time_diff")).unwrap();
    // Chunks [0,900,1800,2700,3000]: 850..950 needs chunks 0 and 1.
    assert_eq!(
        stored(&rec, &[2], 850, 950),
        whole[2 * SAMPLES + 850..2 * SAMPLES + 950]
    );
    let stats = rec.cache_stats();
    assert_eq!((stats.decodes, stats.hits), (2, 0));
    // 899..1801 needs 0, 1 (cached) and 2 (decoded).
    assert_eq!(
        stored(&rec, &[0, 3], 899, 1801),
        [
            &whole[899..1801],
            &whole[3 * SAMPLES + 899..3 * SAMPLES + 1801]
        ]
        .concat()
    );
    let stats = rec.cache_stats();
    assert_eq!((stats.decodes, stats.hits), (3, 2));

    for variant in VARIANTS {
        let rec = MtscompRecording::open(cbin(variant)).unwrap();
        for (start, end) in [
            (0usize, 1usize),
            (99, 103),
            (1499, 1501),
            (2699, 2701),
            (1, 2999),
            (2999, 3000),
            (123, 2877),
        ] {
            let channels = [3, 0, 2];
            let got = stored(&rec, &channels, start as u64, end as u64);
            let len = end - start;
            for (k, &c) in channels.iter().enumerate() {
                assert_eq!(
                    got[k * len..(k + 1) * len],
                    whole[c * SAMPLES + start..c * SAMPLES + end],
                    "{variant} channel {c} {start}..{end}"
                );
            }
        }
    }
}

#[test]
fn shared_cache_and_format() {
    let cache = Arc::new(ChunkCache::new(1 << 20));
    let a = MtscompRecording::open_with_cache(cbin("time_diff"), Arc::clone(&cache)).unwrap();
    let b = MtscompRecording::open_with_cache(cbin("time_diff"), Arc::clone(&cache)).unwrap();
    stored(&a, &[0], 0, 3000);
    stored(&b, &[0], 0, 3000);
    // Each recording has its own keys: 4 chunks decoded for each.
    assert_eq!(cache.stats().decodes, 8);

    let path = cbin("time_and_spatial_diff");
    assert_eq!(MtscompFormat.detect(&path), Detection::ByMetadata);
    assert_eq!(
        MtscompFormat.detect(&path.with_extension("ch")),
        Detection::ByMetadata
    );
    assert_eq!(
        MtscompFormat.detect(Path::new("/nowhere/a.cbin")),
        Detection::ByName
    );
    assert_eq!(
        MtscompFormat.detect(Path::new("/nowhere/a.bin")),
        Detection::No
    );
    let opened = MtscompFormat.open(&path.with_extension("ch")).unwrap();
    assert_eq!(
        stored(opened.as_ref(), &[0, 1, 2, 3], 0, 3000),
        matrix_channel_major()
    );
}

thread_local! {
    /// The temporary folders this test thread made (each test runs on its own thread).
    static COPIES: std::cell::RefCell<Vec<PathBuf>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Removes the temporary folders this test made (left in place if the test fails, to look at).
fn remove_copies() {
    for dir in COPIES.with(|c| std::mem::take(&mut *c.borrow_mut())) {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Copies a variant's `.cbin`, `.ch` and `.meta` into a fresh temporary folder, applying
/// `edit_ch` to the `.ch` JSON; returns the `.cbin` path.
fn corrupted_copy(
    variant: &str,
    tag: &str,
    edit_ch: impl FnOnce(&mut serde_json::Value),
) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dspk-mtscomp-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    COPIES.with(|c| c.borrow_mut().push(dir.clone()));
    let source = cbin(variant);
    let target = dir.join(source.file_name().unwrap());
    std::fs::copy(&source, &target).unwrap();
    std::fs::copy(source.with_extension("meta"), target.with_extension("meta")).unwrap();
    let mut ch: serde_json::Value =
        serde_json::from_slice(&std::fs::read(source.with_extension("ch")).unwrap()).unwrap();
    edit_ch(&mut ch);
    std::fs::write(target.with_extension("ch"), ch.to_string()).unwrap();
    target
}

fn open_err(cbin: &Path) -> Error {
    MtscompRecording::open(cbin).unwrap_err()
}

#[test]
fn bad_ch_files_give_errors_naming_the_file() {
    let ch_of = |p: &Path| p.with_extension("ch");

    // Offsets past the end of the .cbin.
    let path = corrupted_copy("time_diff", "past-end", |ch| {
        ch["chunk_offsets"][4] = 4000.into();
    });
    let error = open_err(&path);
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Truncated { path: p, needed: 4000, actual: 2939, .. }) if p == &path),
        "{error}"
    );

    // Non-monotonic bounds and offsets.
    let path = corrupted_copy("time_diff", "bounds", |ch| {
        ch["chunk_bounds"][2] = 800.into();
    });
    let error = open_err(&path);
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Invalid { path: p, problem }) if p == &ch_of(&path) && problem.contains("chunk_bounds")),
        "{error}"
    );
    let path = corrupted_copy("time_diff", "offsets", |ch| {
        ch["chunk_offsets"][1] = 0.into();
    });
    assert!(
        matches!(open_err(&path), Error::Io(dspk_io::Error::Invalid { problem, .. }) if problem.contains("chunk_offsets"))
    );

    // Absurd sample counts: over the chunk limit, and more than zlib could expand to.
    let path = corrupted_copy("time_diff", "absurd", |ch| {
        ch["shape"][0] = 1_000_000_000_000u64.into();
        ch["chunk_bounds"][4] = 1_000_000_000_000u64.into();
    });
    let error = open_err(&path);
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Invalid { path: p, problem }) if p == &ch_of(&path) && problem.contains("limit")),
        "{error}"
    );
    let path = corrupted_copy("time_diff", "ratio", |ch| {
        ch["shape"][0] = 50_000_000u64.into();
        ch["chunk_bounds"][4] = 50_000_000u64.into();
    });
    let error = open_err(&path);
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Invalid { path: p, problem }) if p == &path && problem.contains("zlib")),
        "{error}"
    );

    // Shape disagreeing with n_channels or with the .meta; unknown version.
    let path = corrupted_copy("time_diff", "shape", |ch| {
        ch["shape"][1] = 6.into();
    });
    assert!(matches!(
        open_err(&path),
        Error::Io(dspk_io::Error::Invalid { .. })
    ));
    let path = corrupted_copy("time_diff", "meta-size", |ch| {
        ch["shape"][0] = 2999.into();
        ch["chunk_bounds"][4] = 2999.into();
    });
    let error = open_err(&path);
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Invalid { path: p, problem }) if p == &path.with_extension("meta") && problem.contains("fileSizeBytes")),
        "{error}"
    );
    let path = corrupted_copy("time_diff", "version", |ch| {
        ch["version"] = "2.0".into();
    });
    assert!(
        matches!(open_err(&path), Error::Io(dspk_io::Error::Unsupported { what, .. }) if what.contains("2.0"))
    );

    // Missing .ch, not JSON.
    let path = corrupted_copy("time_diff", "no-ch", |_| {});
    std::fs::remove_file(ch_of(&path)).unwrap();
    assert!(
        matches!(open_err(&path), Error::Io(dspk_io::Error::Missing { path: p, .. }) if p == path)
    );
    assert!(ChFile::parse(b"{", Path::new("x.ch")).is_err());
    remove_copies();
}

#[test]
fn corrupt_chunk_fails_the_read_naming_the_file() {
    let path = corrupted_copy("time_diff", "zlib", |_| {});
    let mut data = std::fs::read(&path).unwrap();
    // Chunk 1 is bytes 878..1707: scramble its deflate body.
    for b in &mut data[900..1000] {
        *b ^= 0x5a;
    }
    std::fs::write(&path, &data).unwrap();
    let rec = MtscompRecording::open(&path).unwrap();
    // Chunk 0 still reads.
    assert_eq!(
        stored(&rec, &[0], 0, 900),
        matrix_channel_major()[..900].to_vec()
    );
    let mut out = vec![0u8; 2 * 10];
    let error = rec.read_stored(&[0], 895..905, &mut out).unwrap_err();
    let dspk_core::Error::Source { cause, .. } = &error else {
        panic!("{error}");
    };
    let inner = cause.downcast_ref::<Error>().expect("a dspk-synapse error");
    assert_eq!(inner.path(), Some(path.as_path()), "{inner}");
    assert!(
        matches!(
            inner,
            Error::Io(dspk_io::Error::Library { .. }) | Error::Io(dspk_io::Error::Invalid { .. })
        ),
        "{inner}"
    );
    assert!(inner.to_string().contains("chunk 1"), "{inner}");
    remove_copies();
}

#[test]
fn without_meta_every_column_is_a_channel() {
    let path = corrupted_copy("time_and_spatial_diff", "no-meta", |_| {});
    std::fs::remove_file(path.with_extension("meta")).unwrap();
    let rec = MtscompRecording::open(&path).unwrap();
    assert_eq!(rec.info().num_channels(), 5);
    assert!(rec.meta().is_none());
    assert_eq!(rec.info().channels[4].gain, 1.0);
    assert_eq!(rec.info().sample_rate.as_hz(), 30000.0);
    let sync: Vec<i16> = (0..SAMPLES).map(|t| sync_value(t) as i16).collect();
    assert_eq!(stored(&rec, &[4], 0, SAMPLES as u64), sync);
    assert!(matches!(
        rec.read_sync(0..1, &mut [0]),
        Err(Error::Io(dspk_io::Error::Missing { .. }))
    ));
    check_recording_source(&rec);
    remove_copies();
}

/// Compresses `data` (`[sample][channel]` int16) as mtscomp does, from the format's
/// description: per chunk, differences along time (first sample kept) then along channels
/// (first channel kept), wrapping, values in Fortran order, zlib. Writes `<dir>/x.cbin` and
/// `x.ch`; returns the `.cbin` path.
fn compress(dir: &Path, data: &[i16], channels: usize, chunk: usize, spatial: bool) -> PathBuf {
    use std::io::Write;
    let samples = data.len() / channels;
    let mut cbin = Vec::new();
    let (mut bounds, mut offsets) = (vec![0u64], vec![0u64]);
    for start in (0..samples).step_by(chunk) {
        let n = chunk.min(samples - start);
        let mut values = vec![0i16; n * channels];
        for c in 0..channels {
            for t in 0..n {
                let v = data[(start + t) * channels + c];
                let previous = if t == 0 {
                    0
                } else {
                    data[(start + t - 1) * channels + c]
                };
                values[c * n + t] = v.wrapping_sub(previous);
            }
        }
        if spatial {
            for c in (1..channels).rev() {
                for t in 0..n {
                    values[c * n + t] = values[c * n + t].wrapping_sub(values[(c - 1) * n + t]);
                }
            }
        }
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut encoder =
            flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(&bytes).unwrap();
        cbin.extend(encoder.finish().unwrap());
        bounds.push((start + n) as u64);
        offsets.push(cbin.len() as u64);
    }
    let ch = serde_json::json!({
        "algorithm": "zlib", "chunk_bounds": bounds, "chunk_offsets": offsets,
        "chunk_order": "F", "comp_level": -1, "do_spatial_diff": spatial,
        "do_time_diff": true, "dtype": "int16", "n_channels": channels,
        "sample_rate": 30000.0, "shape": [samples, channels], "version": "1.0",
    });
    let path = dir.join("x.cbin");
    std::fs::write(&path, cbin).unwrap();
    std::fs::write(path.with_extension("ch"), ch.to_string()).unwrap();
    path
}

#[test]
fn many_chunks_round_trip_in_parallel() {
    // DSPK_MTSCOMP_SAMPLES makes it a throughput measurement (run with --release).
    let samples: usize = std::env::var("DSPK_MTSCOMP_SAMPLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let channels = 64;
    let dir = std::env::temp_dir().join(format!("dspk-mtscomp-{}-roundtrip", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = dspk_core::test_util::Rng::new(7);
    let data: Vec<i16> = (0..samples * channels)
        .map(|i| {
            let slow = ((i / channels) as f64 / 40.0).sin() * 3000.0;
            (slow + rng.uniform(-200.0, 200.0)) as i16
        })
        .collect();
    for spatial in [false, true] {
        let path = compress(&dir, &data, channels, 3000, spatial);
        let rec = MtscompRecording::open(&path).unwrap();
        let all = rec.info().all_channels();
        let started = std::time::Instant::now();
        let got = stored(&rec, &all, 0, samples as u64);
        let elapsed = started.elapsed();
        eprintln!(
            "spatial={spatial}: decoded {} chunks, {:.1} MB in {elapsed:?} ({:.0} MB/s)",
            rec.ch().num_chunks(),
            (data.len() * 2) as f64 / 1e6,
            (data.len() * 2) as f64 / 1e6 / elapsed.as_secs_f64()
        );
        assert!(got.chunks_exact(samples).enumerate().all(|(c, row)| {
            row.iter()
                .enumerate()
                .all(|(t, v)| *v == data[t * channels + c])
        }));
        assert_eq!(rec.cache_stats().decodes, rec.ch().num_chunks() as u64);
        check_recording_source(&rec);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
