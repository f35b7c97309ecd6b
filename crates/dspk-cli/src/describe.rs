//! Recordings, probes, sizes and rates as the front-end prints them: what `dspk info` says of a
//! recording (and `dspk sort` and the `inspect` example before they read it) from its header
//! alone, and bytes and rates in decimal units.

use std::fmt::Write as _;
use std::path::Path;

use dspk::RecordingSource;
use dspk::synapse::Probe;

/// Channels listed one by one; more are summarised in one line.
pub const LISTED: usize = 8;

/// `bytes` in decimal units, as [`dspk::format_bytes`] writes them (`"46.08 MB"`,
/// `"1.20 GB"`), rounded to whole bytes (negative or NaN counts as 0).
#[must_use]
pub fn human_bytes(bytes: f64) -> String {
    dspk::format_bytes(bytes.max(0.0).round() as u64)
}

/// `bytes` moved in `seconds` as a decimal rate: `"6.31 GB/s"`.
#[must_use]
pub fn human_rate(bytes: f64, seconds: f64) -> String {
    format!("{}/s", human_bytes(bytes / seconds.max(f64::MIN_POSITIVE)))
}

/// How a channel's stored values become physical ones: `"0.5 uV per unit, offset -10 uV"`
/// (the offset left out when zero, the unit when the channel has none).
#[must_use]
pub fn describe_scaling(gain: f64, offset: f64, unit: &str) -> String {
    let unit = if unit.is_empty() {
        String::new()
    } else {
        format!(" {unit}")
    };
    if offset == 0.0 {
        format!("{gain}{unit} per unit")
    } else {
        format!("{gain}{unit} per unit, offset {offset}{unit}")
    }
}

/// The header of `recording`, read from `path` as `format`:
///
/// ```text
/// path:      tests/fixtures/si_binary/si_binary_folder
/// format:    spikeinterface-binary
/// recording: 4 channels x 3000 samples at 30000 Hz (0.100 s), stored as I16, starts at 0 s
///      0 A0               0.195 uV per unit
///   ...
/// ```
#[must_use]
pub fn describe(path: &Path, format: &str, recording: &dyn RecordingSource) -> String {
    let info = recording.info();
    let mut text = String::new();
    let _ = writeln!(text, "path:      {}", path.display());
    let _ = writeln!(text, "format:    {format}");
    let _ = writeln!(
        text,
        "recording: {} channels x {} samples at {} ({:.3} s), stored as {:?}, starts at {} s",
        info.num_channels(),
        info.num_samples,
        info.sample_rate,
        info.duration().as_secs_f64(),
        info.stored_format,
        info.start_time.as_secs_f64(),
    );
    for (index, channel) in info.channels.iter().enumerate().take(LISTED) {
        let _ = writeln!(
            text,
            "  {index:>4} {:<16} {}",
            channel.name,
            describe_scaling(channel.gain, channel.offset, &channel.unit)
        );
    }
    if info.num_channels() > LISTED {
        let _ = writeln!(text, "  ... {} more", info.num_channels() - LISTED);
    }
    if !info.metadata.is_empty() {
        let _ = writeln!(text, "metadata:  {} entries", info.metadata.len());
    }
    text
}

/// The `probe:` line of `dspk info`: the recording's probe, or that it has none.
#[must_use]
pub fn probe_line(probe: Option<&Probe>) -> String {
    match probe {
        Some(probe) => format!("probe:     {}\n", describe_probe(probe)),
        None => "probe:     none in the recording\n".to_string(),
    }
}

/// A probe in one line: contacts, shanks, how many are wired to a channel, and its name.
#[must_use]
pub fn describe_probe(probe: &Probe) -> String {
    let mut shanks: Vec<u32> = probe.contacts().iter().map(|c| c.shank).collect();
    shanks.sort_unstable();
    shanks.dedup();
    let wired = probe
        .contacts()
        .iter()
        .filter(|c| c.device_channel.is_some())
        .count();
    let name = if probe.name.is_empty() {
        String::new()
    } else {
        format!(" ({:?})", probe.name)
    };
    format!(
        "{} contacts on {} shank{}, {wired} wired to channels{name}",
        probe.num_contacts(),
        shanks.len(),
        if shanks.len() == 1 { "" } else { "s" },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    // Guards inspect's gains: they were printed as `value = stored x 5e-1 + -1e1 uV`.
    #[test]
    fn scaling_reads_as_a_sentence() {
        assert_eq!(
            describe_scaling(0.5, -10.0, "uV"),
            "0.5 uV per unit, offset -10 uV"
        );
        assert_eq!(describe_scaling(0.195, 0.0, "uV"), "0.195 uV per unit");
        assert_eq!(describe_scaling(2.0, 1.5, ""), "2 per unit, offset 1.5");
    }

    #[test]
    fn a_recording_is_described_from_its_header() {
        let rate = dspk::SampleRate::from_hz(30_000).unwrap();
        let recording = dspk::SyntheticRecording::new(10, 60_000, rate, 1).unwrap();
        let text = describe(Path::new("x.bin"), "dspk-raw", &recording);
        assert!(
            text.contains("recording: 10 channels x 60000 samples at 30000 Hz (2.000 s)"),
            "{text}"
        );
        assert!(text.contains("  ... 2 more\n"), "{text}");
        assert_eq!(probe_line(None), "probe:     none in the recording\n");
    }

    #[test]
    fn sizes_and_rates_in_decimal_units() {
        assert_eq!(human_bytes(46_080_000.0), "46.08 MB");
        assert_eq!(human_bytes(-3.0), human_bytes(0.0));
        assert_eq!(human_rate(6_310_000_000.0, 1.0), "6.31 GB/s");
        assert_eq!(
            human_rate(2_000_000.0, 0.0),
            human_rate(2e6, f64::MIN_POSITIVE)
        );
    }
}
