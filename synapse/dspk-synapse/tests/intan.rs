//! Intan `.rhd`: files written here from Intan's "RHD2000 Application Note: Data File Formats"
//! (no library writes `.rhd`), read back exactly; bad headers and data refused with errors
//! naming the file.

mod common;

use std::path::{Path, PathBuf};

use dspk_core::{RationalTime, RecordingSource, test_util::check_recording_source};
use dspk_io::{Detection, Format};
use dspk_synapse::Error;
use dspk_synapse::intan::{IntanFormat, IntanRecording, RhdHeader, RhdSignalType};

// Signal types of the format note.
const AMPLIFIER: i16 = 0;
const AUX: i16 = 1;
const SUPPLY: i16 = 2;
const ADC: i16 = 3;
const DIGITAL_IN: i16 = 4;

struct Channel {
    name: &'static str,
    signal_type: i16,
    enabled: bool,
}

struct Group {
    name: &'static str,
    enabled: bool,
    /// The channel count written for a disabled group (whose records are not written).
    disabled_count: i16,
    channels: Vec<Channel>,
}

/// What a test file holds: version, rate, notes, signal groups.
struct RhdFile {
    major: i16,
    minor: i16,
    rate: f32,
    notes: [Option<&'static str>; 3],
    temp_sensors: i16,
    reference: &'static str,
    groups: Vec<Group>,
    first_timestamp: i32,
}

fn channel(name: &'static str, signal_type: i16, enabled: bool) -> Channel {
    Channel {
        name,
        signal_type,
        enabled,
    }
}

/// A `QString`: byte length (`0xFFFFFFFF` for null), then UTF-16LE.
fn qstring(out: &mut Vec<u8>, text: Option<&str>) {
    match text {
        None => out.extend_from_slice(&u32::MAX.to_le_bytes()),
        Some(text) => {
            let units: Vec<u16> = text.encode_utf16().collect();
            out.extend_from_slice(&(units.len() as u32 * 2).to_le_bytes());
            for unit in units {
                out.extend_from_slice(&unit.to_le_bytes());
            }
        }
    }
}

fn i16le(out: &mut Vec<u8>, v: i16) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn f32le(out: &mut Vec<u8>, v: f32) {
    out.extend_from_slice(&v.to_le_bytes());
}

impl RhdFile {
    /// Version 1.3 (60-sample blocks): two ports, one disabled group, disabled amplifier
    /// channels, aux, supply, ADC and digital inputs, a temperature sensor, a null note.
    fn v1() -> Self {
        Self {
            major: 1,
            minor: 3,
            rate: 20000.0,
            notes: [Some("first note"), None, Some("µ-électrode ✓")],
            temp_sensors: 1,
            reference: "",
            groups: vec![
                Group {
                    name: "Port A",
                    enabled: true,
                    disabled_count: 0,
                    channels: vec![
                        channel("A-000", AMPLIFIER, true),
                        channel("A-001", AMPLIFIER, false),
                        channel("A-002", AMPLIFIER, true),
                        channel("A-AUX1", AUX, true),
                        channel("A-AUX2", AUX, true),
                        channel("A-VDD1", SUPPLY, true),
                    ],
                },
                Group {
                    name: "Port B",
                    enabled: false,
                    disabled_count: 32,
                    channels: vec![],
                },
                Group {
                    name: "Port C",
                    enabled: true,
                    disabled_count: 0,
                    channels: vec![
                        channel("C-010", AMPLIFIER, false),
                        channel("C-011", AMPLIFIER, true),
                    ],
                },
                Group {
                    name: "Board ADC Inputs",
                    enabled: true,
                    disabled_count: 0,
                    channels: vec![channel("ADC-00", ADC, true), channel("ADC-01", ADC, false)],
                },
                Group {
                    name: "Board Digital Inputs",
                    enabled: true,
                    disabled_count: 0,
                    channels: vec![channel("DIN-00", DIGITAL_IN, true)],
                },
            ],
            first_timestamp: -120,
        }
    }

    /// Version 3.0 (128-sample blocks, reference channel name), no temperature sensors.
    fn v3() -> Self {
        Self {
            major: 3,
            minor: 0,
            rate: 30000.0,
            notes: [None, None, None],
            temp_sensors: 0,
            reference: "Hardware: A-000",
            groups: vec![Group {
                name: "Port A",
                enabled: true,
                disabled_count: 0,
                channels: vec![
                    channel("A-000", AMPLIFIER, true),
                    channel("A-001", AMPLIFIER, true),
                    channel("A-002", AMPLIFIER, false),
                    channel("A-003", AMPLIFIER, true),
                    channel("A-004", AMPLIFIER, true),
                    channel("A-AUX1", AUX, true),
                ],
            }],
            first_timestamp: 0,
        }
    }

    /// Version 1.0: no temperature count, board mode or reference; unsigned timestamps.
    fn v1_0() -> Self {
        Self {
            major: 1,
            minor: 0,
            temp_sensors: 0,
            groups: vec![Group {
                name: "Port A",
                enabled: true,
                disabled_count: 0,
                channels: vec![
                    channel("A-000", AMPLIFIER, true),
                    channel("A-001", AMPLIFIER, true),
                ],
            }],
            first_timestamp: 3_000_000_000u32 as i32,
            ..Self::v1()
        }
    }

    fn samples_per_block(&self) -> usize {
        if self.major == 1 { 60 } else { 128 }
    }

    fn saved(&self, signal_type: i16) -> usize {
        self.groups
            .iter()
            .filter(|g| g.enabled)
            .flat_map(|g| &g.channels)
            .filter(|c| c.enabled && c.signal_type == signal_type)
            .count()
    }

    fn header(&self) -> Vec<u8> {
        let mut h = Vec::new();
        h.extend_from_slice(&0xC691_2702u32.to_le_bytes());
        i16le(&mut h, self.major);
        i16le(&mut h, self.minor);
        f32le(&mut h, self.rate);
        i16le(&mut h, 1); // DSP enabled
        for v in [1.0, 0.1, 7500.0, 1.0, 0.1, 7500.0] {
            f32le(&mut h, v); // actual / desired DSP cutoff, lower and upper bandwidth
        }
        i16le(&mut h, 2); // notch 60 Hz
        f32le(&mut h, 1000.0);
        f32le(&mut h, 1000.0);
        for note in self.notes {
            qstring(&mut h, note);
        }
        let version = (self.major, self.minor);
        if version >= (1, 1) {
            i16le(&mut h, self.temp_sensors);
        }
        if version >= (1, 3) {
            i16le(&mut h, 0); // evaluation board mode
        }
        if version >= (2, 0) {
            qstring(&mut h, Some(self.reference));
        }
        i16le(&mut h, self.groups.len() as i16);
        for group in &self.groups {
            qstring(&mut h, Some(group.name));
            qstring(&mut h, Some(&group.name[..1]));
            i16le(&mut h, i16::from(group.enabled));
            if !group.enabled {
                i16le(&mut h, group.disabled_count);
                i16le(&mut h, group.disabled_count);
                continue;
            }
            i16le(&mut h, group.channels.len() as i16);
            let amplifiers = group
                .channels
                .iter()
                .filter(|c| c.signal_type == AMPLIFIER)
                .count();
            i16le(&mut h, amplifiers as i16);
            for (order, c) in group.channels.iter().enumerate() {
                qstring(&mut h, Some(c.name));
                qstring(&mut h, Some(&format!("{}-custom", c.name)));
                i16le(&mut h, order as i16);
                i16le(&mut h, order as i16);
                i16le(&mut h, c.signal_type);
                i16le(&mut h, i16::from(c.enabled));
                i16le(&mut h, order as i16); // chip channel
                i16le(&mut h, 0); // board stream
                for v in [0, 0, 0, 1] {
                    i16le(&mut h, v); // spike scope settings
                }
                f32le(&mut h, 150_000.0 + order as f32);
                f32le(&mut h, -45.5);
            }
        }
        h
    }

    /// Data blocks: amplifier channel `k` at sample `t` holds [`amplifier_value`]; every other
    /// section holds a marker that must never be read as amplifier data.
    fn blocks(&self, num_blocks: usize) -> Vec<u8> {
        let n = self.samples_per_block();
        let mut d = Vec::new();
        for b in 0..num_blocks {
            for i in 0..n {
                let t = self.first_timestamp.wrapping_add((b * n + i) as i32);
                d.extend_from_slice(&t.to_le_bytes());
            }
            for k in 0..self.saved(AMPLIFIER) {
                for i in 0..n {
                    d.extend_from_slice(&amplifier_value(b * n + i, k).to_le_bytes());
                }
            }
            let words = (n / 4) * self.saved(AUX)
                + self.saved(SUPPLY)
                + self.temp_sensors as usize
                + n * self.saved(ADC)
                + if self.saved(DIGITAL_IN) > 0 { n } else { 0 };
            for _ in 0..words {
                d.extend_from_slice(&0xA5A5u16.to_le_bytes());
            }
        }
        d
    }

    fn write(&self, path: &Path, num_blocks: usize) {
        let mut bytes = self.header();
        bytes.extend(self.blocks(num_blocks));
        std::fs::write(path, bytes).unwrap();
    }
}

/// The stored amplifier value of sample `t`, channel `k`, with both extremes present.
fn amplifier_value(t: usize, k: usize) -> u16 {
    match t {
        5 => 0,
        6 => u16::MAX,
        7 => 32768,
        _ => ((t * 7919 + k * 104_729 + (t * t) % 977) % 65536) as u16,
    }
}

/// A fresh temporary folder, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("dspk-synapse-intan-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn read_u16(
    source: &dyn RecordingSource,
    channels: &[usize],
    samples: std::ops::Range<u64>,
) -> Vec<u16> {
    let mut bytes = vec![0u8; channels.len() * (samples.end - samples.start) as usize * 2];
    source.read_stored(channels, samples, &mut bytes).unwrap();
    bytes
        .chunks_exact(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .collect()
}

/// Reads the whole file back and compares every value, stored and scaled, with what was
/// written.
fn check_round_trip(spec: &RhdFile, num_blocks: usize, names: &[&str], start: RationalTime) {
    let scratch = Scratch::new(&format!("v{}-{}", spec.major, spec.minor));
    let path = scratch.file("session_240101_120000.rhd");
    spec.write(&path, num_blocks);
    let recording = IntanRecording::open(&path).unwrap();
    let info = recording.info();
    let n = spec.samples_per_block();
    assert_eq!(recording.num_blocks(), num_blocks as u64);
    assert_eq!(info.num_samples, (num_blocks * n) as u64);
    assert_eq!(info.sample_rate.as_hz(), f64::from(spec.rate));
    assert_eq!(info.stored_format, dspk_core::SampleFormat::U16);
    assert_eq!(info.start_time, start);
    let got: Vec<&str> = info.channels.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(got, names);
    for channel in &info.channels {
        assert_eq!(channel.gain, 0.195);
        assert_eq!(channel.offset, -32768.0 * 0.195);
        assert_eq!(channel.unit, "uV");
    }

    let total = info.num_samples;
    let all: Vec<usize> = (0..names.len()).collect();
    let stored = read_u16(&recording, &all, 0..total);
    let mut scaled = vec![0f32; stored.len()];
    recording.read(&all, 0..total, &mut scaled).unwrap();
    for k in 0..names.len() {
        for t in 0..total as usize {
            let i = k * total as usize + t;
            let v = amplifier_value(t, k);
            assert_eq!(stored[i], v, "channel {k} sample {t}");
            // (v - 32768) * 0.195 uV, as Intan's reader computes it.
            let want = ((f64::from(v) - 32768.0) * 0.195) as f32;
            assert_eq!(scaled[i], want, "channel {k} sample {t}");
        }
    }
    // A window across block edges, channels out of order.
    let window = (n as u64 - 5)..(2 * n as u64 + 3);
    let got = read_u16(&recording, &[names.len() - 1, 0], window.clone());
    let want: Vec<u16> = [names.len() - 1, 0]
        .iter()
        .flat_map(|&k| window.clone().map(move |t| amplifier_value(t as usize, k)))
        .collect();
    assert_eq!(got, want);
    check_recording_source(&recording);

    assert_eq!(IntanFormat.detect(&path), Detection::ByMetadata);
    let opened = IntanFormat.open(&path).unwrap();
    assert_eq!(read_u16(opened.as_ref(), &all, 0..total), stored);
}

#[test]
fn version_1_3_with_disabled_channels_and_groups_reads_back_exactly() {
    check_round_trip(
        &RhdFile::v1(),
        5,
        &["A-000-custom", "A-002-custom", "C-011-custom"],
        RationalTime::new(-120, 20000).unwrap(),
    );
}

#[test]
fn version_3_0_uses_128_sample_blocks() {
    check_round_trip(
        &RhdFile::v3(),
        4,
        &[
            "A-000-custom",
            "A-001-custom",
            "A-003-custom",
            "A-004-custom",
        ],
        RationalTime::ZERO,
    );
}

#[test]
fn version_1_0_has_unsigned_timestamps_and_a_shorter_header() {
    check_round_trip(
        &RhdFile::v1_0(),
        3,
        &["A-000-custom", "A-001-custom"],
        RationalTime::new(3_000_000_000, 20000).unwrap(),
    );
}

#[test]
fn header_fields_are_kept() {
    let spec = RhdFile::v1();
    let bytes = spec.header();
    let path = Path::new("memory.rhd");
    let header = RhdHeader::parse(&bytes, path).unwrap();
    assert_eq!((header.version_major, header.version_minor), (1, 3));
    assert_eq!(header.sample_rate, 20000.0);
    assert!(header.dsp_enabled);
    assert_eq!(header.actual_upper_bandwidth_hz, 7500.0);
    assert_eq!(header.notch_filter_hz, Some(60));
    assert_eq!(
        header.notes,
        ["first note", "", "µ-électrode ✓"].map(String::from)
    );
    assert_eq!(header.num_temperature_sensors, 1);
    assert_eq!(header.header_len, bytes.len() as u64);
    assert_eq!(header.samples_per_block(), 60);
    assert_eq!(header.groups.len(), 5);
    assert!(!header.groups[1].enabled);
    assert!(header.groups[1].channels.is_empty());
    assert_eq!(header.groups[0].num_amplifier_channels, 3);
    assert_eq!(header.groups[1].num_amplifier_channels, 32);
    let amplifiers: Vec<&str> = header
        .saved_of(RhdSignalType::Amplifier)
        .map(|c| c.native_name.as_str())
        .collect();
    assert_eq!(amplifiers, ["A-000", "A-002", "C-011"]);
    assert_eq!(header.groups[0].channels[1].impedance_magnitude, 150_001.0);
    // 60 timestamps (4 B) + 3 amplifiers x 60 + 2 aux x 15 + 1 supply + 1 temperature
    // + 1 ADC x 60 + 60 digital words (2 B each).
    assert_eq!(
        header.block_bytes(),
        Some(60 * 4 + (180 + 30 + 1 + 1 + 60 + 60) * 2)
    );
    let v3 = RhdHeader::parse(&RhdFile::v3().header(), path).unwrap();
    assert_eq!(v3.reference_channel, "Hardware: A-000");
    assert_eq!(v3.samples_per_block(), 128);
    assert_eq!(v3.notes, [String::new(), String::new(), String::new()]);
}

#[test]
fn a_header_longer_than_the_first_read_is_read_whole() {
    let scratch = Scratch::new("long-notes");
    let path = scratch.file("long.rhd");
    let long: &'static str = Box::leak("n".repeat(400_000).into_boxed_str());
    let spec = RhdFile {
        notes: [Some(long), Some(long), None],
        ..RhdFile::v3()
    };
    spec.write(&path, 2);
    let recording = IntanRecording::open(&path).unwrap();
    assert!(recording.header().header_len > 1 << 20);
    assert_eq!(recording.header().notes[1].len(), 400_000);
    assert_eq!(
        read_u16(&recording, &[3], 0..256),
        (0..256).map(|t| amplifier_value(t, 3)).collect::<Vec<_>>()
    );
}

fn assert_error(error: &Error, path: &Path, words: &str) {
    let message = error.to_string();
    assert!(
        message.contains(&path.display().to_string()),
        "`{message}` does not name {}",
        path.display()
    );
    assert!(
        message.contains(words),
        "`{message}` does not say `{words}`"
    );
}

#[test]
fn data_that_is_not_whole_blocks_is_truncated() {
    let scratch = Scratch::new("partial");
    let path = scratch.file("partial.rhd");
    let spec = RhdFile::v1();
    let mut bytes = spec.header();
    let mut data = spec.blocks(3);
    data.truncate(data.len() - 100);
    bytes.extend(data);
    std::fs::write(&path, &bytes).unwrap();
    let error = IntanRecording::open(&path).unwrap_err();
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Truncated { .. })),
        "{error:?}"
    );
    assert_error(&error, &path, "3 data blocks of 904 bytes");
}

#[test]
fn bad_headers_are_refused_without_panics_or_huge_allocations() {
    let path = Path::new("bad.rhd");
    let good = RhdFile::v1().header();
    let parse = |bytes: &[u8]| RhdHeader::parse(bytes, path).unwrap_err();

    let mut wrong_magic = good.clone();
    wrong_magic[0] ^= 0xFF;
    assert_error(
        &parse(&wrong_magic),
        path,
        "not an Intan .rhd file: magic number 0xc69127fd",
    );

    let mut version_4 = good.clone();
    version_4[4..6].copy_from_slice(&4i16.to_le_bytes());
    let error = parse(&version_4);
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Unsupported { .. })),
        "{error:?}"
    );
    assert_error(&error, path, "RHD file version 4.3");

    // Notes start at byte 48 (after 12 bytes of magic, version and rate, the DSP flag, six
    // frequencies, the notch mode and two impedance frequencies): cut inside the first note.
    let error = parse(&good[..58]);
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Truncated { .. })),
        "{error:?}"
    );
    assert_error(&error, path, "note 1 at byte 52");
    // Every shorter prefix is an error too, never a panic.
    for cut in 0..good.len() {
        assert!(
            RhdHeader::parse(&good[..cut], path).is_err(),
            "prefix of {cut} bytes"
        );
    }

    let mut absurd_string = good.clone();
    absurd_string[48..52].copy_from_slice(&0x7FFF_FFF0u32.to_le_bytes());
    assert_error(&parse(&absurd_string), path, "a string of 2147483632 bytes");
    let mut odd_string = good.clone();
    odd_string[48..52].copy_from_slice(&7u32.to_le_bytes());
    assert_error(&parse(&odd_string), path, "a string of 7 bytes");

    // The group count (after notes, temperature count and board mode): absurd and negative.
    let notes_end = 48 + (4 + 20) + 4 + (4 + 26);
    let groups_at = notes_end + 4;
    assert_eq!(
        i16::from_le_bytes([good[groups_at], good[groups_at + 1]]),
        5
    );
    let mut many_groups = good.clone();
    many_groups[groups_at..groups_at + 2].copy_from_slice(&i16::MAX.to_le_bytes());
    let error = parse(&many_groups);
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Truncated { .. })),
        "{error:?}"
    );
    assert_error(&error, path, "signal group 5: name");
    let mut negative = good.clone();
    negative[groups_at..groups_at + 2].copy_from_slice(&(-3i16).to_le_bytes());
    assert_error(
        &parse(&negative),
        path,
        &format!("number of signal groups at byte {groups_at} is negative (-3)"),
    );

    // A channel count far beyond the bytes there.
    let mut many_channels = RhdFile::v3();
    many_channels.groups[0].channels.truncate(1);
    let mut bytes = many_channels.header();
    // One channel record: two QStrings (5 and 12 characters), ten int16, two single.
    let count_at = bytes.len() - (4 + 10 + 4 + 24 + 20 + 8) - 4;
    assert_eq!(
        i16::from_le_bytes([bytes[count_at], bytes[count_at + 1]]),
        1
    );
    bytes[count_at..count_at + 2].copy_from_slice(&30000i16.to_le_bytes());
    bytes[count_at + 2..count_at + 4].copy_from_slice(&30000i16.to_le_bytes());
    assert_error(
        &parse(&bytes),
        path,
        "signal group 0, channel 1: native name",
    );

    let mut unknown_type = RhdFile::v3();
    unknown_type.groups[0].channels[1].signal_type = 9;
    assert_error(
        &parse(&unknown_type.header()),
        path,
        "signal group 0, channel 1: signal type at byte",
    );
}

#[test]
fn files_without_amplifiers_or_with_a_bad_header_are_refused_by_open() {
    let scratch = Scratch::new("open-errors");
    let mut no_amplifiers = RhdFile::v3();
    for c in &mut no_amplifiers.groups[0].channels {
        c.enabled = c.signal_type != AMPLIFIER;
    }
    let path = scratch.file("aux_only.rhd");
    no_amplifiers.write(&path, 1);
    assert_error(
        &IntanRecording::open(&path).unwrap_err(),
        &path,
        "no saved amplifier channels",
    );

    let path = scratch.file("not_intan.rhd");
    std::fs::write(&path, b"RIFF....WAVEfmt ").unwrap();
    assert_eq!(IntanFormat.detect(&path), Detection::ByName);
    assert_error(
        &IntanRecording::open(&path).unwrap_err(),
        &path,
        "magic number",
    );
    let Err(error) = IntanFormat.open(&path) else {
        panic!("a file without the magic number opened");
    };
    assert_eq!(error.path(), path);

    // The header-only file of the one-file-per-signal-type layout.
    let folder = scratch.0.join("per_signal");
    std::fs::create_dir_all(&folder).unwrap();
    let info = folder.join("info.rhd");
    RhdFile::v3().write(&info, 0);
    std::fs::write(folder.join("amplifier.dat"), [0u8; 16]).unwrap();
    let error = IntanRecording::open(&info).unwrap_err();
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Unsupported { .. })),
        "{error:?}"
    );
    assert_error(&error, &info, "one-file-per-signal-type");

    assert_eq!(
        IntanFormat.detect(&common::fixture("openephys")),
        Detection::No
    );
    assert_eq!(
        IntanFormat.detect(&common::fixture("openephys/expected.json")),
        Detection::No
    );
}
