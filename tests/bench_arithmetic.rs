//! The benchmarks' arithmetic (`benches/common/`), tested apart from a device: each bench
//! includes the modules it prints with (`#[path = "common/..."]`), and this test target
//! includes all of them the same way and holds their tests, so they run under `cargo test`
//! (benches are only built by `cargo test`, and a bench without the test harness drops its
//! `#[test]` functions).

#[path = "../benches/common/loader.rs"]
mod loader_figures;
#[path = "../benches/common/memory.rs"]
mod memory;
#[path = "../benches/common/preprocess.rs"]
mod preprocess_figures;
#[path = "../benches/common/rates.rs"]
mod rates;
#[path = "../benches/common/upload.rs"]
mod upload_figures;
#[path = "../benches/common/view.rs"]
mod view_figures;

/// `benches/common/loader.rs`.
mod loader_tests {
    use crate::loader_figures::*;

    #[test]
    fn recordings_are_whole_windows_of_int16() {
        // 4 GB of 384 channels in windows of 60 000: 46.08 MB a window, 86.8 -> 87 windows.
        let r = BenchRecording::of_bytes(4_000_000_000, 384, 60_000);
        assert_eq!(r.windows(), 87);
        assert_eq!(r.samples, 87 * 60_000);
        assert_eq!(r.bytes(), 87 * 46_080_000);
        assert_eq!(BenchRecording::of_bytes(1, 384, 60_000).windows(), 1);
        // A file: trailing bytes of a partial sample are left out, the last window is short.
        let f = BenchRecording::of_file(768 * 100_001 + 5, 384, 60_000).unwrap();
        assert_eq!(
            (f.samples, f.windows(), f.bytes()),
            (100_001, 2, 768 * 100_001)
        );
        assert_eq!(BenchRecording::of_file(767, 384, 60_000), None);
    }

    #[test]
    fn window_parts_cover_each_window_once() {
        let r = BenchRecording::of_file(768 * 100_001, 384, 60_000).unwrap();
        assert_eq!(r.frame_bytes(), 768);
        assert_eq!(r.window_part(0, 0, 1), 0..60_000);
        assert_eq!(r.window_part(0, 0, 0), 0..60_000);
        assert_eq!(r.window_part(0, 1, 8), 7_500..15_000);
        assert_eq!(r.window_part(1, 0, 3), 60_000..80_000);
        // The last window holds 40 001 samples: its parts are clipped, the last one empty.
        assert_eq!(r.window_part(1, 1, 3), 80_000..100_000);
        assert_eq!(r.window_part(1, 2, 3), 100_000..100_001);
        assert_eq!(r.window_part(1, 6, 7), 100_001..100_001);
        for parts in 1..=16 {
            for window in 0..r.windows() {
                let pieces: Vec<_> = (0..parts)
                    .map(|p| r.window_part(window, p, parts))
                    .collect();
                assert_eq!(pieces[0].start, window * 60_000);
                assert_eq!(
                    pieces[parts as usize - 1].end,
                    ((window + 1) * 60_000).min(r.samples)
                );
                assert!(pieces.windows(2).all(|pair| pair[0].end == pair[1].start));
            }
        }
    }

    #[test]
    fn rates_and_rows() {
        let (gbps, per_s) = rates(46_080_000 * 117, 117, 1.0);
        assert!((gbps - 5.391_36).abs() < 1e-9 && (per_s - 117.0).abs() < 1e-12);
        let (gbps, per_s) = rates(2_000_000_000, 40, 0.5);
        assert!((gbps - 4.0).abs() < 1e-12 && (per_s - 80.0).abs() < 1e-12);
        assert!(rates(1, 1, 0.0).0.is_finite());
        assert_eq!(resident_percent(0, 0), 100.0);
        assert_eq!(resident_percent(25, 100), 25.0);
        let row = table_row("cache", "loader", 8, (2_000_000_000, 40), 0.5, 99.96);
        assert_eq!(
            row,
            "cache   loader                         8     4.00       80.0    0.500     100.0"
        );
        assert_eq!(table_header().len(), row.len());
    }

    #[test]
    fn thread_lists() {
        assert_eq!(parse_thread_list("1,2, 4,8,16"), Some(vec![1, 2, 4, 8, 16]));
        assert_eq!(parse_thread_list("3"), Some(vec![3]));
        assert_eq!(parse_thread_list("1,0"), None);
        assert_eq!(parse_thread_list(""), None);
        assert_eq!(parse_thread_list("two"), None);
    }
}

/// `benches/common/preprocess.rs`.
mod preprocess_tests {
    use crate::preprocess_figures::*;

    /// A 384 x 60 000 window: 46.08 MB of int16, 92.16 MB of f32.
    const INT16: u64 = 384 * 60_000 * 2;
    const F32: u64 = 384 * 60_000 * 4;

    // The floor of docs/PERFORMANCE.md: one pass over 92.16 MB at 4.26 TB/s is 0.0216 ms;
    // the chain's 11.5 passes 0.2488 ms, and its 1.8433 ms 7.41 times that.
    #[test]
    fn preprocess_fields_compare_stages_with_the_memory_floor() {
        assert!((floor_ms(1.0, F32, 4260.0) - 0.021_634).abs() < 1e-6);
        assert_eq!(
            stage_fields(1.8433, 11.5, (F32, INT16), 4260.0),
            "ms=1.8433 passes=11.5 floor_ms=0.2488 floor_ratio=7.41 int16_gbps=25.0"
        );
        assert_eq!(
            stage_fields(0.0616, 1.5, (F32, INT16), 4260.0),
            "ms=0.0616 passes=1.5 floor_ms=0.0325 floor_ratio=1.90 int16_gbps=748.1"
        );
        assert_eq!(
            device_chain_fields(1.8433, INT16),
            "device_windows_per_s=542.5 device_int16_gbps=25.0"
        );
        // 100 windows of 384 x (60 000 + 2 x 503 halo) int16 in 100 / 53.3 s.
        let bytes = 100 * 384 * (60_000 + 2 * 503) * 2;
        assert_eq!(
            streamed_fields(100, bytes, 100.0 / 53.3),
            "streamed_windows_per_s=53.3 streamed_int16_gbps=2.50"
        );
    }
}

/// `benches/common/rates.rs`.
mod rates_tests {
    use dspk::SampleFormat;

    use crate::rates::*;

    // Guards the preprocess bench's streamed figure, which counted each int16 window's bytes
    // twice (`data().len() * 2` of a buffer already in bytes): docs/PERFORMANCE.md printed
    // 6.1 GB/s for 66.1 windows/s of 384 x 60 000, which is 3.05 GB/s. (That a stream
    // uploads these bytes is tested with dspk-cli's streamed passes.)
    #[test]
    fn a_stored_int16_window_counts_two_bytes_per_value() {
        assert_eq!(
            window_bytes(384, 60_000, SampleFormat::I16),
            384 * 60_000 * 2
        );
        assert_eq!(window_bytes(3, 5, SampleFormat::I16), 30);
        assert_eq!(window_bytes(3, 5, SampleFormat::F32), 60);
        let per_s = gb_per_s(window_bytes(384, 60_000, SampleFormat::I16), 1.0 / 66.1);
        assert!((per_s - 3.046).abs() < 1e-3, "{per_s}");
        assert_eq!(gb_per_s(2_000_000_000, 0.5), 4.0);
        assert_eq!(gb_per_ms(2_000_000_000, 500.0), 4.0);
    }
}

/// `benches/common/upload.rs`.
mod upload_tests {
    use crate::upload_figures::*;

    /// A 384 x 60 000 window: 46.08 MB of int16, 92.16 MB of f32.
    const INT16: u64 = 384 * 60_000 * 2;
    const F32: u64 = 384 * 60_000 * 4;

    #[test]
    fn the_median_is_the_middle_value_in_milliseconds() {
        assert_eq!(median_ms(&[0.003, 0.001, 0.002]), 2.0);
        assert_eq!(median_ms(&[0.004, 0.001, 0.002, 0.003]), 3.0);
        assert!(median_ms(&[]).is_nan());
    }

    // Guards `upload --windows 20`, whose source held 20 windows while the sequential run
    // from the loader's buffers reads the default 30 reps + 2 warm-ups.
    #[test]
    fn the_upload_source_holds_every_window_read() {
        for (windows, reps) in [(20, 30), (200, 30), (1, 1), (33, 30), (4, 2)] {
            let repeats = upload_source_repeats(windows, reps, 4);
            assert!(repeats * 4 >= windows.max(reps + 2), "{windows} {reps}");
            assert!(
                (repeats - 1) * 4 < windows.max(reps + 2),
                "{windows} {reps}"
            );
        }
        assert_eq!(upload_source_repeats(20, 30, 4), 8);
        assert_eq!(upload_source_repeats(200, 30, 4), 50);
        assert_eq!(upload_source_repeats(1, u64::MAX, 4), u64::MAX / 4 + 1);
    }

    // The H200 figures of docs/PERFORMANCE.md (2026-12-01), recomputed from their times.
    #[test]
    fn upload_fields_are_bytes_over_the_times_they_name() {
        assert_eq!(
            upload_sequential_fields(INT16, 8.234, 40.925, 0.179, 49.5),
            "bytes=46080000 read_ms=8.234 upload_ms=40.925 unpack_ms=0.179 total_ms=49.500 \
             upload_gbps=1.13"
        );
        assert_eq!(
            stored_over_f32_upload(40.925, 21.294),
            "stored_over_f32_upload=1.922"
        );
        // Upload and unpack together: 46.08 MB in 0.991 ms.
        assert_eq!(
            upload_and_unpack_fields(INT16, 0.991),
            "upload_and_unpack_ms=0.991 upload_and_unpack_gbps=46.50"
        );
        assert_eq!(
            loader_only_fields(200, INT16, 200.0 / 117.9),
            "windows=200 windows_per_s=117.9 read_gbps=5.43"
        );
        assert_eq!(
            upload_pipelined_fields(200, 1.531, (INT16, INT16), &[1.0, 0.317], &[0.1, 0.05]),
            "pipelined_windows=200 seconds=1.531 windows_per_s=130.6 input_gbps=6.02 \
             int16_equiv_gbps=6.02 waiting_for_reader_s=1.317 in_upload_calls_s=0.150"
        );
        // The f32 path uploads twice the bytes; its int16 equivalent is half its input.
        assert_eq!(
            upload_pipelined_fields(100, 2.0, (F32, INT16), &[], &[]),
            "pipelined_windows=100 seconds=2.000 windows_per_s=50.0 input_gbps=4.61 \
             int16_equiv_gbps=2.30 waiting_for_reader_s=0.000 in_upload_calls_s=0.000"
        );
    }
}

/// `benches/common/view.rs`.
mod view_tests {
    use crate::view_figures::*;

    #[test]
    fn sizes_and_rates() {
        // 384 channels x 10 min at 30 kHz of int16: 13.824 GB.
        let bytes = recording_bytes(384, 600 * 30_000, 2);
        assert_eq!(bytes, 13_824_000_000);
        let (gbps, realtime) = build_rates(bytes, 600 * 30_000, 30_000.0, 4.0);
        assert!((gbps - 3.456).abs() < 1e-12);
        assert!((realtime - 150.0).abs() < 1e-12);
        assert!((bytes_per_recording_byte(1_000, 16_000) - 0.0625).abs() < 1e-15);
        assert!(build_rates(1, 1, 1.0, 0.0).0.is_finite());
    }

    #[test]
    fn medians() {
        assert_eq!(latency_ms(&[0.003, 0.001, 0.002]), (2.0, 3.0));
        assert_eq!(latency_ms(&[0.004, 0.001]), (4.0, 4.0));
        assert!(latency_ms(&[]).0.is_nan());
    }
}

/// `benches/common/memory.rs`.
mod memory_tests {
    use crate::memory::*;

    #[test]
    fn resident_memory_from_the_status_text() {
        let status = "Name:\tbench\nVmPeak:\t  100 kB\nVmRSS:\t   2048 kB\nThreads:\t4\n";
        assert_eq!(resident_bytes(status), Some(2 * 1024 * 1024));
        assert_eq!(resident_bytes("VmRSS: lots"), None);
        assert_eq!(resident_bytes("VmRSS: 12 MB"), None);
        assert_eq!(resident_bytes("Name: x"), None);
    }
}
