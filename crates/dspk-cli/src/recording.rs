//! Opening a recording of any format dspk reads, or a plain binary file described on the
//! command line as Kilosort's `n_chan_bin`, `fs` and `data_dtype` describe it ([`PlainArgs`]),
//! its probe (its own or from a probe file), and the raw file a Phy folder can point at.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dspk::io::{ByteOrder, NpyArray, PlainBinary, RawRecording, SampleOrder};
use dspk::kilosort::SortProbe;
use dspk::synapse::phy::PhyParams;
use dspk::synapse::probe::{read_kilosort_json, read_kilosort_mat, read_prb, read_probeinterface};
use dspk::synapse::spikeglx::SpikeGlxRecording;
use dspk::synapse::{Contact, Probe};
use dspk::{RecordingInfo, RecordingSource};

use crate::flags::Reader;

/// The format name of a plain binary file opened with a [`PlainBinary`] description.
pub const PLAIN_FORMAT: &str = "plain-binary";

/// A recording opened through the registry of every format compiled in, or as a plain binary
/// file.
pub struct Opened {
    /// The format's name (`spikeglx`, `dspk-raw`, [`PLAIN_FORMAT`], ...).
    pub format: String,
    /// The recording.
    pub source: Arc<dyn RecordingSource>,
    /// The description a plain binary file was opened with; `None` when a format recognised
    /// the path.
    pub plain: Option<PlainBinary>,
}

impl Opened {
    /// The raw file Phy can show traces from ([`phy_dat_file`]; a plain binary file is one
    /// itself, with all its columns).
    #[must_use]
    pub fn phy_dat(&self, path: &Path) -> Option<PhyDat> {
        match &self.plain {
            Some(plain) => Some(PhyDat {
                path: absolute(path),
                columns: plain.num_channels,
            }),
            None => phy_dat_file(path, &self.format),
        }
    }

    /// The file the samples are read from, where it is one file ([`data_file`]).
    #[must_use]
    pub fn data_file(&self, path: &Path) -> Option<PathBuf> {
        match self.plain {
            Some(_) => Some(path.to_path_buf()),
            None => data_file(path, &self.format),
        }
    }
}

/// Opens `path` with the format that recognises it.
///
/// # Errors
///
/// The registry's: the path does not exist or cannot be read (naming it), no format
/// recognises it (listing the formats), or the reader's own error (a malformed sidecar's JSON
/// error with its line and column).
pub fn open(path: &Path) -> Result<Opened, dspk::io::Error> {
    let registry = dspk::synapse::registry();
    let format = registry
        .detect(path)
        .map_or("none", |f| f.name())
        .to_string();
    let source = registry.open(path)?;
    Ok(Opened {
        format,
        source: Arc::from(source),
        plain: None,
    })
}

/// Opens `path` as the plain binary file `plain` describes, whatever else describes it (a
/// sidecar or a `.meta` beside it is not read); with `None`, as [`open`].
///
/// # Errors
///
/// As [`open`] (a file no format recognises says how to read it as a plain binary file);
/// with `plain`, as [`RawRecording::open_plain`] (a length that is not a whole number of
/// samples, with the arithmetic).
pub fn open_with(path: &Path, plain: Option<&PlainBinary>) -> Result<Opened, Box<dyn Error>> {
    let Some(plain) = plain else {
        return open(path).map_err(|error| match error {
            dspk::io::Error::UnknownFormat { .. } if path.is_file() => format!(
                "{error}; a plain binary file (Kilosort's .bin) is read with --n-chan-bin N \
                 --fs HZ [--dtype TYPE]"
            )
            .into(),
            error => error.into(),
        });
    };
    dspk::io::check_readable(path)?;
    let source = RawRecording::open_plain(path, plain)?;
    Ok(Opened {
        format: PLAIN_FORMAT.to_string(),
        source: Arc::new(source),
        plain: Some(plain.clone()),
    })
}

/// A plain binary file's description from the command line, Kilosort's way: `--n-chan-bin N`
/// (values per sample in the file), `--fs HZ` (the sample rate) and `--dtype TYPE` (`int16`
/// by default; `uint16`, `int32`, `float32`, or a numpy string such as `<i2`), or the same as
/// Kilosort's setting names (`--set n_chan_bin=385`, `fs`, `data_dtype`).
///
/// ```
/// use dspk_cli::flags::Reader;
/// use dspk_cli::recording::PlainArgs;
///
/// let args = ["data.bin", "--n-chan-bin", "385", "--fs", "30000"].map(std::ffi::OsString::from);
/// let mut reader = Reader::new("sort", args);
/// let mut plain = PlainArgs::default();
/// reader.read_flags(|reader, flag| match plain.read(reader, flag)? {
///     true => Ok(()),
///     false => Err(reader.unknown(flag)),
/// })?;
/// let plain = plain.finish("sort")?.expect("described");
/// assert_eq!((plain.num_channels, plain.sample_rate.as_hz()), (385, 30000.0));
/// # Ok::<(), String>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlainArgs {
    /// `--n-chan-bin`.
    pub n_chan_bin: Option<usize>,
    /// `--fs`.
    pub fs: Option<dspk::SampleRate>,
    /// `--dtype`.
    pub dtype: Option<dspk::SampleFormat>,
}

impl PlainArgs {
    /// Reads `flag`'s value when it is one of `--n-chan-bin`, `--fs`, `--dtype`; whether it
    /// was.
    ///
    /// # Errors
    ///
    /// A usage message: no value, a value that is not a channel count from 1 to
    /// [`MAX_PLAIN_CHANNELS`](dspk::io::MAX_PLAIN_CHANNELS), a rate or a recording sample
    /// type, or the flag given twice.
    pub fn read(&mut self, reader: &mut Reader, flag: &str) -> Result<bool, String> {
        match flag {
            "--n-chan-bin" | "--fs" | "--dtype" => {
                let value = reader.text(flag)?;
                self.set(reader.command(), flag, &value)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Takes `--set KEY=VALUE` when KEY is Kilosort's name of one of these (`n_chan_bin`,
    /// `fs`, `data_dtype`); whether it was.
    ///
    /// # Errors
    ///
    /// As [`read`](Self::read), naming the setting.
    pub fn setting(&mut self, command: &str, key: &str, value: &str) -> Result<bool, String> {
        let flag = match key {
            "n_chan_bin" => "--n-chan-bin",
            "fs" => "--fs",
            "data_dtype" => "--dtype",
            _ => return Ok(false),
        };
        self.set(command, flag, value)
            .map_err(|e| format!("{e} (from --set {key}={value})"))?;
        Ok(true)
    }

    /// Sets what `flag` names from its text.
    fn set(&mut self, command: &str, flag: &str, value: &str) -> Result<(), String> {
        let twice = || format!("{command}: {flag} given twice");
        match flag {
            "--n-chan-bin" => {
                let most = dspk::io::MAX_PLAIN_CHANNELS;
                let n = value
                    .trim()
                    .parse()
                    .ok()
                    .filter(|n| (1..=most).contains(n))
                    .ok_or_else(|| {
                        format!(
                            "{command} {flag} needs a whole number from 1 to {most} (values per \
                             sample in the file), got `{value}`"
                        )
                    })?;
                if self.n_chan_bin.replace(n).is_some() {
                    return Err(twice());
                }
            }
            "--fs" => {
                let rate = value
                    .parse()
                    .map_err(|e| format!("{command} {flag} needs a sample rate in Hz: {e}"))?;
                if self.fs.replace(rate).is_some() {
                    return Err(twice());
                }
            }
            _ => {
                let format = value
                    .trim()
                    .parse::<dspk::io::Dtype>()
                    .ok()
                    .filter(|d| d.order == ByteOrder::Little)
                    .and_then(|d| d.sample_format())
                    .ok_or_else(|| {
                        format!(
                            "{command} {flag} `{value}`: the sample types read are int16, \
                             uint16, int32 and float32 (little-endian)"
                        )
                    })?;
                if self.dtype.replace(format).is_some() {
                    return Err(twice());
                }
            }
        }
        Ok(())
    }

    /// The description: `None` when no flag was given.
    ///
    /// # Errors
    ///
    /// A usage message when some were given but not both `--n-chan-bin` and `--fs`.
    pub fn finish(self, command: &str) -> Result<Option<PlainBinary>, String> {
        match (self.n_chan_bin, self.fs) {
            (None, None) if self.dtype.is_none() => Ok(None),
            (Some(n), Some(rate)) => {
                let mut plain = PlainBinary::new(n, rate);
                if let Some(format) = self.dtype {
                    plain.format = format;
                }
                Ok(Some(plain))
            }
            (n, _) => Err(format!(
                "{command}: a plain binary file needs both --n-chan-bin and --fs (missing {})",
                if n.is_none() { "--n-chan-bin" } else { "--fs" }
            )),
        }
    }
}

/// Refuses the recording at `path` when it has no samples: there is nothing to read, sort or
/// show (the header alone may still be described).
///
/// # Errors
///
/// `<path>: the recording holds no samples (<n> channels of 0 samples): nothing to read`.
pub fn require_samples(path: &Path, info: &RecordingInfo) -> Result<(), String> {
    if info.num_samples == 0 {
        Err(format!(
            "{}: the recording holds no samples ({} channels of 0 samples): nothing to read",
            path.display(),
            info.num_channels()
        ))
    } else {
        Ok(())
    }
}

/// The probe a recording of `format` at `path` describes itself, where the format has one:
/// SpikeGLX and mtscomp (the `.meta`'s geometry), NWB (the electrodes table; feature
/// `formats`), a SpikeInterface binary folder (its `probegroup.json`), a Phy folder (its
/// `channel_map.npy`, `channel_positions.npy` and `channel_shanks.npy`). `None` for the others.
///
/// # Errors
///
/// What the reader reports when the metadata holding the probe cannot be read.
pub fn recording_probe(path: &Path, format: &str) -> Result<Option<Probe>, Box<dyn Error>> {
    Ok(match format {
        "spikeglx" => SpikeGlxRecording::open(path)?.probe().cloned(),
        "mtscomp" => dspk::synapse::mtscomp::MtscompRecording::open(path)?
            .probe()
            .cloned(),
        #[cfg(feature = "formats")]
        "nwb" => dspk::synapse::nwb::NwbRecording::open(path)?
            .probe()
            .cloned(),
        "phy" => phy_probe(phy_folder(path))?,
        "spikeinterface-binary" => {
            let folder = if path.is_dir() {
                path
            } else {
                path.parent().unwrap_or(Path::new("."))
            };
            let group = folder.join("probegroup.json");
            if group.is_file() {
                Some(one_probe(read_probeinterface(&group)?, &group)?)
            } else {
                None
            }
        }
        _ => None,
    })
}

/// The folder of a Phy recording path (the folder, or the folder of its `params.py`).
fn phy_folder(path: &Path) -> &Path {
    if path.file_name().is_some_and(|n| n == "params.py") {
        path.parent().unwrap_or(Path::new("."))
    } else {
        path
    }
}

/// The probe of a Phy folder: channel `c` at `channel_positions[c]`, wired to raw-file column
/// `channel_map[c]`, on shank `channel_shanks[c]` (0 without that file or for a value that is
/// not a whole number); `None` without a
/// channel map or positions.
fn phy_probe(folder: &Path) -> Result<Option<Probe>, Box<dyn Error>> {
    let (map, positions) = (
        folder.join("channel_map.npy"),
        folder.join("channel_positions.npy"),
    );
    if !map.is_file() || !positions.is_file() {
        return Ok(None);
    }
    let map = NpyArray::read(&map)?.to_i64()?;
    let xy = NpyArray::read(&positions)?.to_f64()?;
    if xy.len() != 2 * map.len() {
        return Err(format!(
            "{}: {} values for {} channels of channel_map.npy (2 per channel)",
            positions.display(),
            xy.len(),
            map.len()
        )
        .into());
    }
    let shanks_file = folder.join("channel_shanks.npy");
    let shanks = if shanks_file.is_file() {
        NpyArray::read(&shanks_file)?.to_f64()?
    } else {
        vec![0.0; map.len()]
    };
    let contacts = map
        .iter()
        .enumerate()
        .map(|(c, &column)| Contact {
            id: c.to_string(),
            position: [xy[2 * c], xy[2 * c + 1]],
            // Kilosort writes the shanks as floats (its `kcoords`).
            shank: shanks
                .get(c)
                .filter(|s| s.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(*s))
                .map_or(0, |&s| s as u32),
            device_channel: usize::try_from(column).ok(),
        })
        .collect();
    Ok(Some(
        Probe::new("phy", contacts).map_err(|e| format!("{}: {e}", folder.display()))?,
    ))
}

/// Reads a probe file, by its extension: `.json` (probeinterface, or Kilosort's probe JSON when
/// it has a `chanMap`), `.prb`, `.mat` (Kilosort's `chanMap.mat`). Several probes in one file
/// (a probe group, `.prb` channel groups) become one probe, each on shanks of its own.
///
/// # Errors
///
/// An unknown extension, or what the reader reports (naming the file).
pub fn read_probe_file(path: &Path) -> Result<Probe, Box<dyn Error>> {
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match extension.as_deref() {
        Some("json") => {
            let text = dspk::io::read_small_file(path, dspk::io::METADATA_LIMIT)?;
            let kilosort = serde_json::from_slice::<serde_json::Value>(&text)
                .ok()
                .is_some_and(|v| v.get("chanMap").is_some());
            if kilosort {
                Ok(read_kilosort_json(path)?)
            } else {
                Ok(one_probe(read_probeinterface(path)?, path)?)
            }
        }
        Some("prb") => Ok(one_probe(read_prb(path)?, path)?),
        Some("mat") => Ok(read_kilosort_mat(path)?),
        _ => Err(format!(
            "{}: not a probe file dspk reads (probeinterface or Kilosort .json, .prb, Kilosort \
             chanMap .mat)",
            path.display()
        )
        .into()),
    }
}

/// The probes of one file as one probe: the only one, or all of them with each probe's shanks
/// numbered after the previous probe's.
///
/// # Errors
///
/// No probe at all, or contacts that together break a probe's rules (a channel wired twice).
fn one_probe(probes: Vec<Probe>, path: &Path) -> Result<Probe, Box<dyn Error>> {
    if probes.len() == 1 {
        return Ok(probes.into_iter().next().ok_or("no probe")?);
    }
    if probes.is_empty() {
        return Err(format!("{}: the file holds no probe", path.display()).into());
    }
    let mut contacts: Vec<Contact> = Vec::new();
    let mut first_shank = 0u32;
    let mut names = Vec::new();
    for probe in &probes {
        let top = probe.contacts().iter().map(|c| c.shank).max().unwrap_or(0);
        contacts.extend(probe.contacts().iter().map(|c| Contact {
            shank: first_shank + c.shank,
            ..c.clone()
        }));
        first_shank += top + 1;
        names.push(probe.name.clone());
    }
    Probe::new(names.join(" + "), contacts)
        .map_err(|e| format!("{}: the probes together: {e}", path.display()).into())
}

/// The probe to sort with: the file given, else the recording's own.
///
/// # Errors
///
/// The probe file cannot be read, or there is neither a file nor a probe in the recording
/// (saying to give `--probe`).
pub fn sort_probe(
    recording: &Path,
    format: &str,
    file: Option<&Path>,
) -> Result<(Probe, String), Box<dyn Error>> {
    if let Some(file) = file {
        return Ok((read_probe_file(file)?, file.display().to_string()));
    }
    match recording_probe(recording, format)? {
        Some(probe) => Ok((probe, format!("the recording ({format})"))),
        None => Err(format!(
            "{}: a {format} recording carries no probe; give one with --probe FILE \
             (probeinterface .json, Kilosort .json or chanMap .mat, .prb)",
            recording.display()
        )
        .into()),
    }
}

/// The channels to sort and where they came from: the probe of [`sort_probe`] against a
/// recording of `num_channels` channels; or, when `line_pitch` is given (EMUsort's
/// `line_probe_pitch`) and neither a file nor the recording names a probe, every channel in
/// file order on EMUsort's line.
///
/// # Errors
///
/// As [`sort_probe`] (without `line_pitch`); a probe that names channels the recording lacks.
pub fn sort_channels(
    recording: &Path,
    format: &str,
    file: Option<&Path>,
    num_channels: usize,
    line_pitch: Option<f64>,
) -> Result<(SortProbe, String), Box<dyn Error>> {
    let found = match sort_probe(recording, format, file) {
        Ok(found) => found,
        Err(_) if file.is_none() && line_pitch.is_some() => {
            let pitch = line_pitch.unwrap_or_default();
            let line = SortProbe::line((0..num_channels).collect(), pitch)?;
            return Ok((
                line,
                format!("no probe: all {num_channels} channels on a line {pitch} um apart"),
            ));
        }
        Err(error) => return Err(error),
    };
    let (probe, from) = found;
    let channels = SortProbe::from_probe(&probe, num_channels, &[])
        .map_err(|e| format!("the probe from {from} and the recording: {e}"))?;
    let left_out = left_out_note(channels.channels(), num_channels);
    Ok((
        channels,
        format!("{} contacts, from {from}{left_out}", probe.num_contacts()),
    ))
}

/// What the probe leaves out of a recording of `num_channels` channels, for the probe line:
/// nothing, SpikeGLX's sync channel (column 384 of 385 beside a 384-site probe, which
/// Kilosort leaves out the same way: only the probe's channels are sorted), or a count.
fn left_out_note(sorted: &[usize], num_channels: usize) -> String {
    let left_out = num_channels.saturating_sub(sorted.len());
    if left_out == 0 {
        String::new()
    } else if num_channels == 385 && sorted.len() == 384 && !sorted.contains(&384) {
        "; channel 384 of 385 (SpikeGLX's sync channel) is not on the probe and is not sorted"
            .to_string()
    } else {
        format!(
            "; {left_out} of the recording's {num_channels} channels are not on the probe and are not sorted"
        )
    }
}

/// The file a recording's samples are read from, where it is one file: a SpikeGLX `.bin`, a
/// dspk raw file, a SpikeInterface binary folder's traces.
pub fn data_file(path: &Path, format: &str) -> Option<PathBuf> {
    match format {
        "spikeglx" => Some(
            SpikeGlxRecording::open(path)
                .ok()?
                .data_path()
                .to_path_buf(),
        ),
        "dspk-raw" | "spikeinterface-binary" => {
            Some(raw_recording(path, format)?.data_path().to_path_buf())
        }
        _ => None,
    }
}

/// A dspk raw file or SpikeInterface binary folder opened as what it is.
fn raw_recording(path: &Path, format: &str) -> Option<RawRecording> {
    match format {
        "dspk-raw" => RawRecording::open(path).ok(),
        "spikeinterface-binary" => RawRecording::open_spikeinterface(path).ok(),
        _ => None,
    }
}

/// A raw file Phy's `params.py` names as `dat_path`: interleaved little-endian samples, no
/// header, `columns` values per sample (the recording's channels first, in order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhyDat {
    /// The file.
    pub path: PathBuf,
    /// Values per sample in the file (`n_channels_dat`).
    pub columns: usize,
}

/// `path` made absolute (against the current folder; symbolic links kept): phylib reads a
/// relative `dat_path` against the Phy folder, not where the sort ran.
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The raw file behind a recording that Phy can show traces from: a SpikeGLX `.bin` (its sync
/// word is the last column, after the recording's channels), or a dspk raw file or
/// SpikeInterface binary folder stored interleaved, little-endian and without a header. `None`
/// for other layouts and for compressed and container formats: Phy then shows the sort
/// without raw traces.
pub fn phy_dat_file(path: &Path, format: &str) -> Option<PhyDat> {
    if format == "spikeglx" {
        let glx = SpikeGlxRecording::open(path).ok()?;
        return Some(PhyDat {
            path: absolute(glx.data_path()),
            columns: glx.info().num_channels() + glx.num_digital(),
        });
    }
    let raw = match format {
        "phy" => {
            let folder = phy_folder(path);
            PhyParams::read(&folder.join("params.py"))
                .ok()?
                .open_recording(folder)
                .ok()?
        }
        _ => raw_recording(path, format)?,
    };
    let plain = raw.order() == SampleOrder::Interleaved
        && raw.byte_order() == ByteOrder::Little
        && raw.header_bytes() == 0;
    plain.then(|| PhyDat {
        path: absolute(raw.data_path()),
        columns: raw.info().num_channels(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(path: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures")
            .join(path)
    }

    // Guards inspect (and `dspk sort`) on a zero-sample recording, which used to exit 0
    // having printed nothing about it.
    #[test]
    fn a_recording_without_samples_is_refused() {
        let channels = vec![dspk::ChannelInfo::new("A0", 1.0, 0.0, "uV")];
        let rate = dspk::SampleRate::from_hz(30_000).unwrap();
        let format = dspk::SampleFormat::I16;
        let empty = RecordingInfo::new(channels.clone(), 0, rate, format).unwrap();
        assert_eq!(
            require_samples(Path::new("x.bin"), &empty),
            Err(
                "x.bin: the recording holds no samples (1 channels of 0 samples): nothing to \
                 read"
                    .to_string()
            )
        );
        let one = RecordingInfo::new(channels, 1, rate, format).unwrap();
        assert_eq!(require_samples(Path::new("x.bin"), &one), Ok(()));
    }

    #[test]
    fn probes_are_read_from_every_probe_file() {
        for name in [
            "probe/linear4.json",
            "probe/linear4_kilosort4.json",
            "probe/linear4_canonical.prb",
            "probe/linear4_kilosortChanMap.mat",
        ] {
            let probe = read_probe_file(&fixture(name)).unwrap();
            assert_eq!(
                probe.channel_positions(4).unwrap(),
                vec![[0.0, 0.0], [0.0, 20.0], [16.0, 40.0], [16.0, 60.0]],
                "{name}"
            );
        }
        let error = read_probe_file(&fixture("README.md")).unwrap_err();
        assert!(error.to_string().contains("not a probe file"), "{error}");
    }

    #[test]
    fn recordings_carry_their_probes() {
        let si = fixture("si_binary/si_binary_folder");
        let probe = recording_probe(&si, "spikeinterface-binary")
            .unwrap()
            .unwrap();
        assert_eq!(probe.num_contacts(), 4);
        let glx = fixture("spikeglx/np1/fixture_g0/fixture_g0_imec0/fixture_g0_t0.imec0.ap.bin");
        let opened = open(&glx).unwrap();
        assert_eq!(opened.format, "spikeglx");
        let (probe, from) = sort_probe(&glx, &opened.format, None).unwrap();
        assert_eq!(from, "the recording (spikeglx)");
        // The contacts of the `.meta`'s geometry, relative to the first (the reader keeps
        // SpikeGLX's x origin, the fixture README gives probeinterface's).
        let positions = probe.channel_positions(4).unwrap();
        let relative: Vec<[f64; 2]> = positions
            .iter()
            .map(|p| [p[0] - positions[0][0], p[1] - positions[0][1]])
            .collect();
        assert_eq!(
            relative,
            vec![[0.0, 0.0], [32.0, 0.0], [-16.0, 20.0], [16.0, 20.0]]
        );
        // A Phy folder's channel map and positions.
        let phy = recording_probe(&fixture("phy/ks4_style"), "phy")
            .unwrap()
            .unwrap();
        let wired: Vec<Option<usize>> = phy.contacts().iter().map(|c| c.device_channel).collect();
        assert_eq!(wired, [Some(0), Some(1), Some(2), Some(3)]);
        let oe = fixture("openephys/2024-05-01_12-00-00");
        let error = sort_probe(&oe, "openephys-binary", None).unwrap_err();
        assert!(
            error.to_string().contains("give one with --probe"),
            "{error}"
        );
    }

    #[test]
    fn several_probes_become_one_on_separate_shanks() {
        let probe = |channel: usize| {
            Probe::new(
                "p",
                vec![Contact {
                    id: String::new(),
                    position: [0.0, channel as f64],
                    shank: 0,
                    device_channel: Some(channel),
                }],
            )
            .unwrap()
        };
        let merged = one_probe(vec![probe(0), probe(1)], Path::new("g.json")).unwrap();
        let shanks: Vec<u32> = merged.contacts().iter().map(|c| c.shank).collect();
        assert_eq!(shanks, [0, 1]);
        let clash = one_probe(vec![probe(0), probe(0)], Path::new("g.json")).unwrap_err();
        assert!(
            clash.to_string().starts_with("g.json: the probes together"),
            "{clash}"
        );
    }

    #[test]
    fn phy_reads_raw_files_and_spikeglx_bins() {
        let si = fixture("si_binary/si_binary_folder");
        assert_eq!(
            phy_dat_file(&si, "spikeinterface-binary"),
            Some(PhyDat {
                path: si.join("traces_cached_seg0.raw"),
                columns: 4
            })
        );
        // Four channels and the sync word.
        let glx = fixture("spikeglx/np1/fixture_g0/fixture_g0_imec0/fixture_g0_t0.imec0.ap.bin");
        assert_eq!(
            phy_dat_file(&glx, "spikeglx"),
            Some(PhyDat {
                path: glx.clone(),
                columns: 5
            })
        );
        let phy = fixture("phy/ks4_style");
        assert_eq!(
            phy_dat_file(&phy, "phy"),
            Some(PhyDat {
                path: phy.join("recording.dat"),
                columns: 4
            })
        );
        let oe = fixture("openephys/2024-05-01_12-00-00");
        assert_eq!(phy_dat_file(&oe, "openephys-binary"), None);
        // A relative recording path (tests run in the package's folder) is named absolute:
        // phylib would read it against the Phy folder.
        let relative = Path::new("../../tests/fixtures/si_binary/si_binary_folder");
        let dat = phy_dat_file(relative, "spikeinterface-binary").unwrap();
        assert!(dat.path.is_absolute(), "{}", dat.path.display());
        assert!(dat.path.is_file());
    }
}
