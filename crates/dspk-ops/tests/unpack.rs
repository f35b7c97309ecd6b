//! Stored upload and unpack, on every runtime compiled in, against an f64 host reference.

use dspk_core::test_util::{Rng, for_each_runtime};
use dspk_core::{ComputeTarget, SampleFormat};
use dspk_ops::{
    ChannelVector, DeviceArray, DeviceLimits, Error, PipelineWorkspace, StoredArray, unpack_scaled,
};

/// Random stored values of `format` for `channels x samples`, with the format's extremes at the
/// start of each channel, as little-endian bytes, and the same values as f64.
fn stored_values(
    format: SampleFormat,
    channels: usize,
    samples: usize,
    rng: &mut Rng,
) -> (Vec<u8>, Vec<f64>) {
    let extremes: Vec<f64> = match format {
        SampleFormat::I16 => vec![-32768.0, -1.0, 0.0, 1.0, 32767.0],
        SampleFormat::U16 => vec![0.0, 1.0, 32767.0, 32768.0, 65535.0],
        SampleFormat::I32 => vec![
            -2_147_483_648.0,
            -1.0,
            0.0,
            1.0,
            2_147_483_647.0,
            -16_777_217.0,
        ],
        _ => vec![-1.5e30, -1.0, 0.0, 1.0, 3.25e-20],
    };
    let mut bytes = Vec::new();
    let mut values = Vec::new();
    for _ in 0..channels {
        for s in 0..samples {
            let value = if s < extremes.len() {
                extremes[s]
            } else {
                match format {
                    SampleFormat::I16 => f64::from(rng.next_u64() as u16 as i16),
                    SampleFormat::U16 => f64::from(rng.next_u64() as u16),
                    SampleFormat::I32 => f64::from(rng.next_u64() as u32 as i32),
                    _ => f64::from(rng.uniform(-1e4, 1e4) as f32),
                }
            };
            match format {
                SampleFormat::I16 => bytes.extend_from_slice(&(value as i16).to_le_bytes()),
                SampleFormat::U16 => bytes.extend_from_slice(&(value as u16).to_le_bytes()),
                SampleFormat::I32 => bytes.extend_from_slice(&(value as i32).to_le_bytes()),
                _ => bytes.extend_from_slice(&(value as f32).to_le_bytes()),
            }
            values.push(value);
        }
    }
    (bytes, values)
}

/// Compares device output with `stored * gain + offset` in f64. Tolerance per value: one f32
/// rounding of the stored value (i32 beyond 2^24), of the product and of the sum, i.e.
/// `2^-23 * (|stored * gain| + |offset|)` plus the input rounding; NaN never passes.
fn check(
    what: &str,
    actual: &[f32],
    stored: &[f64],
    gains: &[f64],
    offsets: &[f64],
    samples: usize,
) {
    assert_eq!(actual.len(), stored.len(), "{what}: lengths");
    for (i, (&a, &x)) in actual.iter().zip(stored).enumerate() {
        let c = i / samples;
        let (g, o) = (f64::from(gains[c] as f32), f64::from(offsets[c] as f32));
        let expected = x * g + o;
        let tolerance = 2f64.powi(-22) * ((x * g).abs() + o.abs()) + 1e-30;
        let difference = (f64::from(a) - expected).abs();
        assert!(
            difference <= tolerance,
            "{what}: channel {c} sample {}: actual {a}, expected {expected}, stored {x}, \
             difference {difference:e}, tolerance {tolerance:e}",
            i % samples
        );
    }
}

fn random_scaling(channels: usize, rng: &mut Rng) -> (Vec<f64>, Vec<f64>) {
    let gains = (0..channels).map(|_| rng.uniform(0.05, 5.0)).collect();
    let offsets = (0..channels).map(|_| rng.uniform(-200.0, 200.0)).collect();
    (gains, offsets)
}

#[test]
fn unpack_is_exact_for_every_format_on_every_runtime() {
    for_each_runtime(|target, client| {
        let mut rng = Rng::new(17);
        for format in SampleFormat::ALL {
            for (channels, samples) in [(1, 1), (1, 6), (3, 7), (5, 129), (7, 1001)] {
                let (gains, offsets) = random_scaling(channels, &mut rng);
                let mut workspace = PipelineWorkspace::new(client, channels, samples + 3).unwrap();
                workspace.set_stored_scaling(&gains, &offsets).unwrap();
                let (bytes, values) = stored_values(format, channels, samples, &mut rng);
                workspace
                    .process_stored_chunk_in_vram(&bytes, format, samples)
                    .unwrap();
                let what = format!("{target} {format} {channels}x{samples}");
                check(
                    &what,
                    &workspace.output().to_host(client).unwrap(),
                    &values,
                    &gains,
                    &offsets,
                    samples,
                );
            }
        }
    });
}

#[test]
fn int16_extremes_unpack_exactly_with_unit_gain() {
    for_each_runtime(|target, client| {
        let extremes: [i16; 5] = [-32768, -1, 0, 1, 32767];
        let bytes: Vec<u8> = extremes.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut workspace = PipelineWorkspace::new(client, 1, 5).unwrap();
        workspace.set_stored_scaling(&[1.0], &[0.0]).unwrap();
        workspace
            .process_stored_chunk_in_vram(&bytes, SampleFormat::I16, 5)
            .unwrap();
        assert_eq!(
            workspace.output().to_host(client).unwrap(),
            [-32768.0, -1.0, 0.0, 1.0, 32767.0],
            "on {target}"
        );
        // The same bits as uint16 are offset-binary: 32768, 65535, 0, 1, 32767.
        workspace
            .process_stored_chunk_in_vram(&bytes, SampleFormat::U16, 5)
            .unwrap();
        assert_eq!(
            workspace.output().to_host(client).unwrap(),
            [32768.0, 65535.0, 0.0, 1.0, 32767.0],
            "on {target}"
        );
    });
}

#[test]
fn stored_and_f32_paths_fill_the_workspace_alike() {
    for_each_runtime(|target, client| {
        let mut rng = Rng::new(99);
        let (channels, samples) = (11, 2003);
        let (gains, offsets) = random_scaling(channels, &mut rng);
        let (bytes, values) = stored_values(SampleFormat::I16, channels, samples, &mut rng);
        let mut workspace = PipelineWorkspace::new(client, channels, samples).unwrap();
        workspace.set_stored_scaling(&gains, &offsets).unwrap();
        workspace
            .process_stored_chunk_in_vram(&bytes, SampleFormat::I16, samples)
            .unwrap();
        let from_stored = workspace.output().to_host(client).unwrap();
        // The host path: dspk_core::scale, the definition `read` uses (f64, rounded once).
        let scaled: Vec<f32> = values
            .iter()
            .enumerate()
            .map(|(i, &x)| dspk_core::scale(x, gains[i / samples], offsets[i / samples]))
            .collect();
        workspace
            .process_scaled(cubecl::bytes::Bytes::from_elems(scaled.clone()), samples)
            .unwrap();
        let from_f32 = workspace.output().to_host(client).unwrap();
        assert_eq!(from_f32, scaled, "{target}: the f32 path is a plain copy");
        // The device computes in f32 (gain and offset rounded to f32, one or two roundings):
        // within 2^-22 of the terms' magnitude of the host's f64-then-round value.
        check(
            &format!("{target} stored vs f64"),
            &from_stored,
            &values,
            &gains,
            &offsets,
            samples,
        );
        let ulps = from_stored
            .iter()
            .zip(&from_f32)
            .map(|(a, b)| (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs())
            .max()
            .unwrap();
        eprintln!("{target}: stored vs f32 path differ by at most {ulps} ulp");
    });
}

#[test]
fn odd_windows_shorter_than_the_workspace_and_nan_inputs() {
    for_each_runtime(|target, client| {
        let mut workspace = PipelineWorkspace::new(client, 3, 100).unwrap();
        workspace
            .set_stored_scaling(&[1.0, 2.0, 3.0], &[0.0, 0.5, -1.0])
            .unwrap();
        // 3 x 5 int16 = 30 bytes: not a multiple of 4, padded in place.
        let values: Vec<i16> = (0..15).map(|v| v - 7).collect();
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        workspace
            .process_stored_chunk_in_vram(&bytes, SampleFormat::I16, 5)
            .unwrap();
        let expected: Vec<f32> = values
            .iter()
            .enumerate()
            .map(|(i, &v)| f32::from(v) * [1.0, 2.0, 3.0][i / 5] + [0.0, 0.5, -1.0][i / 5])
            .collect();
        assert_eq!(
            workspace.output().to_host(client).unwrap(),
            expected,
            "on {target}"
        );
        // NaN in float32 stored values propagates (never a silent finite value).
        let floats = [1.0f32, f32::NAN, 2.0];
        let bytes: Vec<u8> = floats.iter().flat_map(|v| v.to_le_bytes()).collect();
        workspace
            .process_stored_chunk_in_vram(&bytes, SampleFormat::F32, 1)
            .unwrap();
        let out = workspace.output().to_host(client).unwrap();
        assert_eq!(out[0], 1.0);
        assert!(out[1].is_nan(), "on {target}: NaN became {}", out[1]);
        assert_eq!(out[2], 5.0);
    });
}

/// A window shorter than its buffers is unpacked alone: nothing past `channels * samples` is
/// written (a kernel bounded by a buffer's length, which in a kernel is the allocation's,
/// would unpack the stale tail with out-of-range channel indices).
#[test]
fn unpack_writes_only_the_window() {
    for_each_runtime(|target, client| {
        let (channels, samples, capacity) = (3, 7, 1000);
        for format in [SampleFormat::I16, SampleFormat::F32] {
            let stored = client.create(cubecl::bytes::Bytes::from_bytes_vec(vec![
                1u8;
                capacity * 4
            ]));
            let stored = StoredArray::from_handle(stored, format, channels, samples).unwrap();
            let gains = ChannelVector::from_host(client, &[1.0; 3]).unwrap();
            let offsets = ChannelVector::from_host(client, &[0.0; 3]).unwrap();
            let all = DeviceArray::from_host(client, &vec![-7.0; capacity], capacity, 1).unwrap();
            let out = all.front(channels, samples).unwrap();
            unpack_scaled(client, &stored, &gains, &offsets, &out).unwrap();
            let all = all.to_host(client).unwrap();
            assert!(
                all[..channels * samples].iter().all(|&v| v != -7.0),
                "on {target}, {format}: the window was not written"
            );
            let written = all[channels * samples..]
                .iter()
                .filter(|&&v| v != -7.0)
                .count();
            assert_eq!(
                written, 0,
                "on {target}, {format}: values past the window written"
            );
        }
    });
}

#[test]
fn requests_over_the_limits_are_refused() {
    for_each_runtime(|_target, client| {
        let tiny = DeviceLimits {
            max_values: 1000,
            max_buffer_bytes: 2000,
        };
        // 3 x 400 = 1200 values > 1000.
        let error = PipelineWorkspace::with_limits(client, 3, 400, tiny)
            .err()
            .unwrap();
        assert!(
            matches!(
                error,
                Error::OverLimit {
                    requested: 1200,
                    limit: 1000,
                    unit: "values",
                    ..
                }
            ),
            "{error}"
        );
        // 3 x 200 = 600 values, 2400 bytes as f32 > 2000.
        let error = PipelineWorkspace::with_limits(client, 3, 200, tiny)
            .err()
            .unwrap();
        assert_eq!(
            error.to_string(),
            "workspace window needs 2400 bytes, over the limit of 2000 bytes (the device's largest single buffer)"
        );
        // The real limits: 2^32 values are refused whatever the device.
        let error = PipelineWorkspace::new(client, 65_536, 65_536)
            .err()
            .unwrap();
        assert!(
            matches!(error, Error::OverLimit { unit: "values", .. }),
            "{error}"
        );
        // A window longer than the workspace, or bytes that disagree with the shape.
        let mut workspace = PipelineWorkspace::new(client, 2, 10).unwrap();
        workspace
            .set_stored_scaling(&[1.0, 1.0], &[0.0, 0.0])
            .unwrap();
        let error = workspace
            .process_stored_chunk_in_vram(&[0; 44], SampleFormat::I16, 11)
            .unwrap_err();
        assert!(
            matches!(
                error,
                Error::WindowTooLong {
                    samples: 11,
                    max_samples: 10
                }
            ),
            "{error}"
        );
        let error = workspace
            .process_stored_chunk_in_vram(&[0; 38], SampleFormat::I16, 10)
            .unwrap_err();
        assert!(
            matches!(
                error,
                Error::Shape {
                    expected: 40,
                    actual: 38,
                    ..
                }
            ),
            "{error}"
        );
        let error = workspace
            .set_stored_scaling(&[1.0], &[0.0, 0.0])
            .unwrap_err();
        assert!(
            matches!(error, Error::Shape { what: "gains", .. }),
            "{error}"
        );
        let error = workspace
            .set_stored_scaling(&[1.0, f64::NAN], &[0.0, 0.0])
            .unwrap_err();
        assert!(
            matches!(error, Error::BadScaling { channel: 1, .. }),
            "{error}"
        );
        // Buffer sizes are checked against the shape where the arrays are made.
        let error = DeviceArray::<f32>::from_handle(client.empty(4 * 19), 2, 10).unwrap_err();
        assert!(
            matches!(
                error,
                Error::ArrayShape {
                    expected: 80,
                    given: 76,
                    ..
                }
            ),
            "{error}"
        );
        // 2 x 10 int16 need 40 bytes; 36 are refused, with both counts and the format.
        let error =
            StoredArray::from_handle(client.empty(36), SampleFormat::I16, 2, 10).unwrap_err();
        assert_eq!(
            error.to_string(),
            "2 x 10 int16 array (channels x samples) needs 40 bytes, given 36"
        );
        // The kernel entry point refuses arrays whose shapes disagree.
        let stored = StoredArray::from_handle(client.empty(40), SampleFormat::I16, 2, 10).unwrap();
        let scaling = ChannelVector::from_host(client, &[1.0, 1.0]).unwrap();
        let out = DeviceArray::empty(client, 2, 9).unwrap();
        let error = unpack_scaled(client, &stored, &scaling, &scaling, &out).unwrap_err();
        assert!(
            matches!(
                error,
                Error::ShapeMismatch {
                    what: "unpack: output",
                    ..
                }
            ),
            "{error}"
        );
        let mut fresh = PipelineWorkspace::new(client, 2, 10).unwrap();
        let error = fresh
            .process_stored_chunk_in_vram(&[0; 40], SampleFormat::I16, 10)
            .unwrap_err();
        assert!(matches!(error, Error::ScalingNotSet), "{error}");
    });
}

#[test]
fn loader_upload_buffers_go_straight_to_the_device_and_come_back() {
    use std::sync::Arc;

    use dspk_core::{
        ChunkSchedule, LoaderOptions, RecordingSource, SampleRate, SyntheticRecording, WindowLoader,
    };

    for_each_runtime(|target, client| {
        let (channels, samples) = (5, 20_001u64);
        let source = Arc::new(
            SyntheticRecording::new(channels, samples, SampleRate::from_hz(30_000).unwrap(), 9)
                .unwrap(),
        );
        let gains: Vec<f64> = source.info().channels.iter().map(|c| c.gain).collect();
        let offsets: Vec<f64> = source.info().channels.iter().map(|c| c.offset).collect();
        // Odd window lengths, so stored windows need padding to whole words.
        let schedule = ChunkSchedule::new(samples, 1_999, 0, 0).unwrap();
        let mut workspace = PipelineWorkspace::new(client, channels, 1_999).unwrap();
        workspace.set_stored_scaling(&gains, &offsets).unwrap();
        let all = source.info().all_channels();
        let options = LoaderOptions::for_target(Some(target));
        let mut loader =
            WindowLoader::<u8>::new(source.clone(), all.clone(), schedule, options).unwrap();
        for window in &mut loader {
            let window = window.unwrap();
            let range = window.window().read();
            let n = window.window().read_len();
            workspace
                .process_stored(window.into_upload(), SampleFormat::I16, n)
                .unwrap();
            let mut expected = vec![0f32; channels * n];
            source.read(&all, range, &mut expected).unwrap();
            // One f32 rounding of stored * gain (offsets are zero here).
            let actual = workspace.output().to_host(client).unwrap();
            for (i, (a, e)) in actual.iter().zip(&expected).enumerate() {
                assert!(
                    (a - e).abs() <= e.abs() * 2.4e-7,
                    "on {target}: value {i}: {a} vs {e}"
                );
            }
        }
        let stats = loader.stats();
        assert_eq!(
            stats.buffers_allocated, 2,
            "on {target}: buffers recycled through uploads: {stats:?}"
        );
        assert!(stats.peak_in_flight <= 2, "{stats:?}");
        // CUDA page-locks both recycled buffers (a driver refusal here is a regression);
        // nothing else pins.
        let pinned = if target == ComputeTarget::Cuda {
            stats.buffers_allocated
        } else {
            0
        };
        assert_eq!(
            stats.buffers_pinned, pinned,
            "on {target}: page-locked buffers: {stats:?}"
        );
        eprintln!("{target}: {stats:?}");
    });
}

/// Windows streamed from the loader into the workspace without any read-back or sync in the
/// loop: the runtime must give the upload buffers back by itself (a hang here is a deadlock
/// between the loader waiting for a buffer and the runtime holding it).
#[test]
fn streaming_without_syncs_never_starves_the_loader() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use dspk_core::{ChunkSchedule, LoaderOptions, SampleRate, SyntheticRecording, WindowLoader};

    static DONE: AtomicBool = AtomicBool::new(false);
    std::thread::spawn(|| {
        std::thread::sleep(std::time::Duration::from_secs(120));
        if !DONE.load(Ordering::SeqCst) {
            eprintln!("streaming_without_syncs_never_starves_the_loader: stuck for 120 s");
            std::process::exit(1);
        }
    });
    for_each_runtime(|target, client| {
        let (channels, window) = (8, 3_001u64);
        let samples = 200 * window;
        let source = Arc::new(
            SyntheticRecording::new(channels, samples, SampleRate::from_hz(30_000).unwrap(), 1)
                .unwrap(),
        );
        let schedule = ChunkSchedule::new(samples, window, 0, 0).unwrap();
        let mut workspace = PipelineWorkspace::new(client, channels, window as usize).unwrap();
        workspace.set_stored_scaling(&[1.0; 8], &[0.0; 8]).unwrap();
        let all: Vec<usize> = (0..channels).collect();
        let options = LoaderOptions::for_target(Some(target));
        let mut loader =
            WindowLoader::<u8>::new(source.clone(), all.clone(), schedule, options).unwrap();
        let mut count = 0;
        for loaded in &mut loader {
            let loaded = loaded.unwrap();
            let n = loaded.window().read_len();
            workspace
                .process_stored(loaded.into_upload(), SampleFormat::I16, n)
                .unwrap();
            count += 1;
        }
        workspace.sync().unwrap();
        assert_eq!(count, 200, "on {target}");
        assert_eq!(loader.stats().buffers_allocated, 2, "on {target}");
        // The last window arrived intact.
        let last = schedule.window(199).unwrap().read();
        let expected: Vec<f32> = all
            .iter()
            .flat_map(|&c| last.clone().map(move |s| (c, s)))
            .map(|(c, s)| f32::from(source.stored_value(c, s)))
            .collect();
        assert_eq!(
            workspace.output().to_host(client).unwrap(),
            expected,
            "on {target}"
        );
    });
    DONE.store(true, Ordering::SeqCst);
}
