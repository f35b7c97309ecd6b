//! Reads a 1 GB raw recording window by window and prints the process's peak resident memory
//! before and after, to show that reading keeps host memory flat.
//!
//! ```text
//! cargo run -p dspk-io --release --example read_flat -- [folder] [gigabytes]
//! ```
//!
//! Writes `folder/flat.bin` (384 int16 channels from `SyntheticRecording`, 1 GB by default)
//! and its sidecar unless they exist, then reads it in one-second windows (30 000 samples x 384
//! channels, 23 MB) with `read_stored` into one reused buffer, checking a few values of each
//! window, and prints `VmHWM` (peak RSS) from `/proc/self/status` (Linux).

use std::path::PathBuf;
use std::time::Instant;

use dspk_core::{RecordingSource, SampleRate, SyntheticRecording};
use dspk_io::{RawRecording, RawWriteOptions, write_raw};

/// Peak resident set size in KiB, from `/proc/self/status` (0 where unavailable).
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmHWM:"))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kib| kib.parse().ok())
        })
        .unwrap_or(0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let folder = args.next().map_or_else(std::env::temp_dir, PathBuf::from);
    let gigabytes: f64 = args.next().map_or(Ok(1.0), |g| g.parse())?;
    const CHANNELS: usize = 384;
    let samples = (gigabytes * 1e9 / (CHANNELS * 2) as f64) as u64;
    let rate = SampleRate::from_hz(30_000)?;
    let source = SyntheticRecording::new(CHANNELS, samples, rate, 7)?;
    let data = folder.join("flat.bin");
    let expected_len = samples * CHANNELS as u64 * 2;
    if std::fs::metadata(&data).map(|m| m.len()).ok() != Some(expected_len) {
        let start = Instant::now();
        write_raw(&source, &data, RawWriteOptions::default())?;
        println!(
            "wrote {} ({expected_len} bytes) in {:.1?}",
            data.display(),
            start.elapsed()
        );
    }
    println!("peak RSS before reading: {} KiB", peak_rss_kib());

    let recording = RawRecording::open(&data)?;
    let window = 30_000u64;
    let channels = recording.info().all_channels();
    let mut buffer = vec![0u8; CHANNELS * window as usize * 2];
    let after_buffer = peak_rss_kib();
    let start = Instant::now();
    let mut first = 0;
    while first < samples {
        let end = (first + window).min(samples);
        let bytes = CHANNELS * (end - first) as usize * 2;
        recording.read_stored(&channels, first..end, &mut buffer[..bytes])?;
        // Spot-check one value per window against the generator.
        let m = (end - first) as usize;
        let channel = (first / window) as usize % CHANNELS;
        let at = (channel * m + m / 2) * 2;
        let value = i16::from_le_bytes([buffer[at], buffer[at + 1]]);
        assert_eq!(value, source.stored_value(channel, first + m as u64 / 2));
        first = end;
    }
    let elapsed = start.elapsed();
    println!(
        "read {expected_len} bytes in {} windows in {elapsed:.1?} ({:.0} MB/s)",
        samples.div_ceil(window),
        expected_len as f64 / elapsed.as_secs_f64() / 1e6
    );
    println!(
        "peak RSS with the window buffer ({} KiB): {after_buffer} KiB",
        buffer.len() / 1024
    );
    println!("peak RSS after reading everything: {} KiB", peak_rss_kib());
    Ok(())
}
