//! The Standard Intan RHD2000 header at the start of every `.rhd` file (Intan, "RHD2000
//! Application Note: Data File Formats").

use std::path::Path;

use crate::{Error, Result};

/// The first four bytes of every `.rhd` file (little-endian `0xC6912702`).
pub const RHD_MAGIC: u32 = 0xC691_2702;

/// The longest `QString` accepted, in bytes (a note or a name; real ones are a few hundred).
const MAX_STRING_BYTES: u32 = 1 << 20;

/// What one channel of a signal group carries (the header's "signal type").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RhdSignalType {
    /// 0: an RHD2000 amplifier channel (electrode voltage, 0.195 µV per step, offset binary).
    Amplifier,
    /// 1: an RHD2000 auxiliary input (sampled once every four amplifier samples).
    AuxInput,
    /// 2: an RHD2000 supply voltage (sampled once per data block).
    SupplyVoltage,
    /// 3: a board ADC input.
    BoardAdc,
    /// 4: a board digital input (all inputs share one 16-bit word per sample).
    DigitalInput,
    /// 5: a board digital output (all outputs share one 16-bit word per sample).
    DigitalOutput,
}

impl RhdSignalType {
    fn from_code(code: i16) -> Option<Self> {
        Some(match code {
            0 => Self::Amplifier,
            1 => Self::AuxInput,
            2 => Self::SupplyVoltage,
            3 => Self::BoardAdc,
            4 => Self::DigitalInput,
            5 => Self::DigitalOutput,
            _ => return None,
        })
    }
}

/// One channel record of the header.
#[derive(Debug, Clone, PartialEq)]
pub struct RhdChannel {
    /// The native channel name (`"A-000"`).
    pub native_name: String,
    /// The user's name for the channel (often equal to the native name).
    pub custom_name: String,
    /// The channel's native order in its group.
    pub native_order: i16,
    /// The user's order in its group.
    pub custom_order: i16,
    /// What the channel carries.
    pub signal_type: RhdSignalType,
    /// Whether the channel was saved (only enabled channels have data in the blocks).
    pub enabled: bool,
    /// The channel on its RHD2000 chip.
    pub chip_channel: i16,
    /// The board data stream (USB data stream) of the chip.
    pub board_stream: i16,
    /// The last measured electrode impedance magnitude, in ohms.
    pub impedance_magnitude: f32,
    /// The last measured electrode impedance phase, in degrees.
    pub impedance_phase: f32,
}

/// One signal group of the header (a headstage port or the board's inputs).
#[derive(Debug, Clone, PartialEq)]
pub struct RhdSignalGroup {
    /// The group name (`"Port A"`).
    pub name: String,
    /// The group prefix (`"A"`).
    pub prefix: String,
    /// Whether the group was enabled. The channel records of a disabled group are not read
    /// (as Intan's own readers do), so a disabled group has no channels here.
    pub enabled: bool,
    /// The group's amplifier channel count as the file states it (not checked against the
    /// records: Intan's readers ignore it).
    pub num_amplifier_channels: usize,
    /// The channel records, in file order.
    pub channels: Vec<RhdChannel>,
}

/// A parsed Standard Intan RHD2000 header (file versions 1.0 to 3.x).
///
/// Field order follows Intan's data file format note: magic, version, sample rate and
/// amplifier frequency parameters, notch mode, impedance test frequencies, three notes
/// (`QString`s: a `u32` byte length, `0xFFFFFFFF` for a null string, then UTF-16LE), the number
/// of temperature sensors (version 1.1 on), the evaluation board mode (1.3 on), the reference
/// channel name (2.0 on), then the signal groups and their channels.
#[derive(Debug, Clone, PartialEq)]
pub struct RhdHeader {
    /// Major file version (1, 2 or 3).
    pub version_major: i16,
    /// Minor file version.
    pub version_minor: i16,
    /// Amplifier samples per second, as stored (`single`).
    pub sample_rate: f32,
    /// Whether the DSP offset-removal high-pass filter was on.
    pub dsp_enabled: bool,
    /// The DSP high-pass cutoff in effect, in Hz.
    pub actual_dsp_cutoff_hz: f32,
    /// The amplifier's analog high-pass cutoff in effect, in Hz.
    pub actual_lower_bandwidth_hz: f32,
    /// The amplifier's analog low-pass cutoff in effect, in Hz.
    pub actual_upper_bandwidth_hz: f32,
    /// The DSP cutoff the user asked for, in Hz.
    pub desired_dsp_cutoff_hz: f32,
    /// The high-pass cutoff the user asked for, in Hz.
    pub desired_lower_bandwidth_hz: f32,
    /// The low-pass cutoff the user asked for, in Hz.
    pub desired_upper_bandwidth_hz: f32,
    /// The software notch filter during acquisition: `None`, `Some(50)` or `Some(60)` Hz (the
    /// data in the file is not notch-filtered either way).
    pub notch_filter_hz: Option<u32>,
    /// The impedance test frequency the user asked for, in Hz.
    pub desired_impedance_test_hz: f32,
    /// The impedance test frequency in effect, in Hz.
    pub actual_impedance_test_hz: f32,
    /// The three notes (a null `QString` reads as empty).
    pub notes: [String; 3],
    /// Temperature sensors saved in each block (0 before version 1.1).
    pub num_temperature_sensors: u16,
    /// The evaluation board mode (0 before version 1.3); it sets the board ADC scale.
    pub eval_board_mode: i16,
    /// The hardware reference channel name (empty before version 2.0).
    pub reference_channel: String,
    /// The signal groups, in file order.
    pub groups: Vec<RhdSignalGroup>,
    /// Bytes of header: data blocks start here.
    pub header_len: u64,
}

/// A little-endian reader over the header bytes that reports where it ran out.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    path: &'a Path,
}

impl Reader<'_> {
    fn take(&mut self, n: usize, what: &str) -> Result<&[u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len());
        let Some(end) = end else {
            return Err(Error::Io(dspk_io::Error::Truncated {
                path: self.path.to_path_buf(),
                what: format!("the .rhd header ({what} at byte {})", self.at),
                needed: self.at as u64 + n as u64,
                actual: self.bytes.len() as u64,
            }));
        };
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn i16(&mut self, what: &str) -> Result<i16> {
        Ok(i16::from_le_bytes(self.array(what)?))
    }

    fn f32(&mut self, what: &str) -> Result<f32> {
        Ok(f32::from_le_bytes(self.array(what)?))
    }

    /// A count stored as `int16` that must not be negative.
    fn count(&mut self, what: &str) -> Result<usize> {
        let at = self.at;
        let value = self.i16(what)?;
        usize::try_from(value).map_err(|_| {
            Error::invalid(
                self.path,
                format!("{what} at byte {at} is negative ({value})"),
            )
        })
    }

    /// A boolean stored as `int16` 0 or 1.
    fn flag(&mut self, what: &str) -> Result<bool> {
        let at = self.at;
        match self.i16(what)? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(Error::invalid(
                self.path,
                format!("{what} at byte {at} is {other}, not 0 or 1"),
            )),
        }
    }

    /// A `QString`: `u32` byte length (`0xFFFFFFFF` = null, read as empty), then UTF-16LE.
    fn qstring(&mut self, what: &str) -> Result<String> {
        let at = self.at;
        let len = self.u32(what)?;
        if len == u32::MAX {
            return Ok(String::new());
        }
        if len > MAX_STRING_BYTES || len % 2 != 0 {
            return Err(Error::invalid(
                self.path,
                format!(
                    "{what} at byte {at}: a string of {len} bytes (UTF-16 needs an even length \
                     of at most {MAX_STRING_BYTES})"
                ),
            ));
        }
        // `take` checks the length against the bytes there before anything is decoded.
        let bytes = self.take(len as usize, what)?;
        let units = bytes
            .chunks_exact(2)
            .map(|pair| u16::from_le_bytes([pair[0], pair[1]]));
        char::decode_utf16(units)
            .collect::<std::result::Result<String, _>>()
            .map_err(|_| Error::invalid(self.path, format!("{what} at byte {at} is not UTF-16")))
    }
}

impl RhdHeader {
    /// Parses the header at the start of `bytes` (data after it is ignored; `path` names the
    /// file in errors). [`header_len`](Self::header_len) says where it ended.
    ///
    /// # Errors
    ///
    /// [`dspk_io::Error::Invalid`] for a wrong magic number, a negative count, a flag that is not 0/1,
    /// an unknown signal type or notch mode, a string with an odd or absurd length or invalid
    /// UTF-16, a non-positive sample rate; [`dspk_io::Error::Unsupported`] for a file version other
    /// than 1.x, 2.x or 3.x; [`dspk_io::Error::Truncated`] when `bytes` ends inside the header.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Self> {
        let mut r = Reader { bytes, at: 0, path };
        let magic = r.u32("magic number")?;
        if magic != RHD_MAGIC {
            return Err(Error::invalid(
                path,
                format!(
                    "not an Intan .rhd file: magic number {magic:#010x}, expected {RHD_MAGIC:#010x}"
                ),
            ));
        }
        let version_major = r.i16("major version")?;
        let version_minor = r.i16("minor version")?;
        if !(1..=3).contains(&version_major) || version_minor < 0 {
            return Err(Error::unsupported(
                path,
                format!(
                    "RHD file version {version_major}.{version_minor} (versions 1.x, 2.x and 3.x \
                     are known)"
                ),
            ));
        }
        let at_least = |major: i16, minor: i16| (version_major, version_minor) >= (major, minor);
        let sample_rate = r.f32("sample rate")?;
        if !(sample_rate.is_finite() && sample_rate > 0.0) {
            return Err(Error::invalid(
                path,
                format!("sample rate {sample_rate} is not a positive number"),
            ));
        }
        let dsp_enabled = r.flag("DSP enabled")?;
        let actual_dsp_cutoff_hz = r.f32("actual DSP cutoff")?;
        let actual_lower_bandwidth_hz = r.f32("actual lower bandwidth")?;
        let actual_upper_bandwidth_hz = r.f32("actual upper bandwidth")?;
        let desired_dsp_cutoff_hz = r.f32("desired DSP cutoff")?;
        let desired_lower_bandwidth_hz = r.f32("desired lower bandwidth")?;
        let desired_upper_bandwidth_hz = r.f32("desired upper bandwidth")?;
        let notch_at = r.at;
        let notch_filter_hz = match r.i16("notch filter mode")? {
            0 => None,
            1 => Some(50),
            2 => Some(60),
            other => {
                return Err(Error::invalid(
                    path,
                    format!("notch filter mode at byte {notch_at} is {other} (0, 1 or 2)"),
                ));
            }
        };
        let desired_impedance_test_hz = r.f32("desired impedance test frequency")?;
        let actual_impedance_test_hz = r.f32("actual impedance test frequency")?;
        let notes = [
            r.qstring("note 1")?,
            r.qstring("note 2")?,
            r.qstring("note 3")?,
        ];
        let num_temperature_sensors = if at_least(1, 1) {
            r.count("number of temperature sensors")? as u16
        } else {
            0
        };
        let eval_board_mode = if at_least(1, 3) {
            r.i16("evaluation board mode")?
        } else {
            0
        };
        let reference_channel = if at_least(2, 0) {
            r.qstring("reference channel name")?
        } else {
            String::new()
        };
        let num_groups = r.count("number of signal groups")?;
        // Each group record takes at least 14 bytes, so the loop is bounded by the input; the
        // vectors grow with what was read, never with a count from the file.
        let mut groups = Vec::new();
        for g in 0..num_groups {
            groups.push(parse_group(&mut r, g)?);
        }
        Ok(Self {
            version_major,
            version_minor,
            sample_rate,
            dsp_enabled,
            actual_dsp_cutoff_hz,
            actual_lower_bandwidth_hz,
            actual_upper_bandwidth_hz,
            desired_dsp_cutoff_hz,
            desired_lower_bandwidth_hz,
            desired_upper_bandwidth_hz,
            notch_filter_hz,
            desired_impedance_test_hz,
            actual_impedance_test_hz,
            notes,
            num_temperature_sensors,
            eval_board_mode,
            reference_channel,
            groups,
            header_len: r.at as u64,
        })
    }

    /// Amplifier samples per data block: 60 for version 1.x files (the RHD2000 evaluation
    /// board software), 128 from version 2.0 on (Recording Controller and RHX software).
    #[must_use]
    pub fn samples_per_block(&self) -> usize {
        if self.version_major == 1 { 60 } else { 128 }
    }

    /// The saved (enabled) channels of the enabled groups, in file order.
    pub fn saved_channels(&self) -> impl Iterator<Item = &RhdChannel> {
        self.groups
            .iter()
            .filter(|g| g.enabled)
            .flat_map(|g| &g.channels)
            .filter(|c| c.enabled)
    }

    /// The saved channels of one signal type, in file order (the order of their data in each
    /// block).
    pub fn saved_of(&self, signal_type: RhdSignalType) -> impl Iterator<Item = &RhdChannel> {
        self.saved_channels()
            .filter(move |c| c.signal_type == signal_type)
    }

    /// Bytes of one data block: per sample a timestamp (`i32`; `u32` before 1.2), the
    /// amplifier channels (`u16` each), a quarter as many auxiliary samples, one supply sample
    /// and one temperature sample per sensor per block, the board ADC channels, and one word
    /// each for the digital inputs and outputs if any is saved; `None` if it overflows `u64`.
    #[must_use]
    pub fn block_bytes(&self) -> Option<u64> {
        let n = self.samples_per_block() as u64;
        let count = |t| self.saved_of(t).count() as u64;
        let words = n
            .checked_mul(count(RhdSignalType::Amplifier))?
            .checked_add((n / 4).checked_mul(count(RhdSignalType::AuxInput))?)?
            .checked_add(count(RhdSignalType::SupplyVoltage))?
            .checked_add(u64::from(self.num_temperature_sensors))?
            .checked_add(n.checked_mul(count(RhdSignalType::BoardAdc))?)?
            .checked_add(if count(RhdSignalType::DigitalInput) > 0 {
                n
            } else {
                0
            })?
            .checked_add(if count(RhdSignalType::DigitalOutput) > 0 {
                n
            } else {
                0
            })?;
        words.checked_mul(2)?.checked_add(4 * n)
    }
}

fn parse_group(r: &mut Reader<'_>, g: usize) -> Result<RhdSignalGroup> {
    let what = |field: &str| format!("signal group {g}: {field}");
    let name = r.qstring(&what("name"))?;
    let prefix = r.qstring(&what("prefix"))?;
    let enabled = r.flag(&what("enabled"))?;
    let num_channels = r.count(&what("number of channels"))?;
    let num_amplifier_channels = r.count(&what("number of amplifier channels"))?;
    let mut channels = Vec::new();
    if enabled {
        for c in 0..num_channels {
            channels.push(parse_channel(r, g, c)?);
        }
    }
    Ok(RhdSignalGroup {
        name,
        prefix,
        enabled,
        num_amplifier_channels,
        channels,
    })
}

fn parse_channel(r: &mut Reader<'_>, g: usize, c: usize) -> Result<RhdChannel> {
    let what = |field: &str| format!("signal group {g}, channel {c}: {field}");
    let native_name = r.qstring(&what("native name"))?;
    let custom_name = r.qstring(&what("custom name"))?;
    let native_order = r.i16(&what("native order"))?;
    let custom_order = r.i16(&what("custom order"))?;
    let type_at = r.at;
    let code = r.i16(&what("signal type"))?;
    let signal_type = RhdSignalType::from_code(code).ok_or_else(|| {
        Error::invalid(
            r.path,
            format!(
                "{} at byte {type_at} is {code} (0 to 5 are known)",
                what("signal type")
            ),
        )
    })?;
    let enabled = r.flag(&what("enabled"))?;
    let chip_channel = r.i16(&what("chip channel"))?;
    let board_stream = r.i16(&what("board stream"))?;
    // Spike Scope trigger mode, voltage threshold, digital trigger channel, edge polarity.
    r.take(8, &what("spike scope settings"))?;
    let impedance_magnitude = r.f32(&what("impedance magnitude"))?;
    let impedance_phase = r.f32(&what("impedance phase"))?;
    Ok(RhdChannel {
        native_name,
        custom_name,
        native_order,
        custom_order,
        signal_type,
        enabled,
        chip_channel,
        board_stream,
        impedance_magnitude,
        impedance_phase,
    })
}
