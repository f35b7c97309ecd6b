//! What the `sort` example needs around the sorter: a progress bar per stage, a recording
//! opened with its probe (its own or from a probe file), and the raw file a Phy folder can
//! name. The `dspk` command (`crates/dspk-cli`, `recording.rs` and `progress.rs`) does the same
//! for its `sort`; the two stay alike until these move into dspk-synapse.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use dspk::RecordingSource;
use dspk::io::{ByteOrder, NpyArray, RawRecording, SampleOrder};
use dspk::synapse::phy::PhyParams;
use dspk::synapse::probe::{read_kilosort_json, read_kilosort_mat, read_prb, read_probeinterface};
use dspk::synapse::spikeglx::SpikeGlxRecording;
use dspk::synapse::{Contact, Probe};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// What the terminal shows now.
enum Shown {
    /// A pass over the recording: its bar.
    Pass(&'static str, ProgressBar),
    /// Between passes (a host stage runs, reported only when it ends): a spinner with the time.
    Waiting(ProgressBar),
}

/// The bars of a sort's stages. A pass's bar counts its windows with an ETA of its own and is
/// left drawn when the pass ends; a host stage (clustering, merges), which reports only when it
/// ends, shows a spinner while it runs and then one line with its time. Nothing is drawn when
/// stderr is not a terminal (logs stay clean).
pub struct StageBars {
    shown: Option<Shown>,
}

/// The bar of a pass.
fn pass_style() -> ProgressStyle {
    ProgressStyle::with_template("{msg:>24} [{bar:30}] {pos}/{len} windows, {elapsed} (eta {eta})")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

/// A spinner while a host stage runs.
fn waiting() -> ProgressBar {
    let spinner = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    spinner.set_style(
        ProgressStyle::with_template("{msg:>24} {spinner} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    spinner.set_message("working");
    spinner.enable_steady_tick(Duration::from_millis(200));
    spinner
}

impl StageBars {
    /// A spinner until the first report (the first stages run on the host).
    #[must_use]
    pub fn new() -> Self {
        Self {
            shown: Some(Shown::Waiting(waiting())),
        }
    }

    /// Shows that `done` of `total` windows of `stage` are done.
    pub fn update(&mut self, stage: &'static str, done: usize, total: usize) {
        let ended = done >= total;
        match self.shown.take() {
            Some(Shown::Pass(name, bar)) if name == stage => {
                bar.set_length(total as u64);
                bar.set_position(done as u64);
                self.shown = Some(if ended {
                    bar.abandon();
                    Shown::Waiting(waiting())
                } else {
                    Shown::Pass(name, bar)
                });
                return;
            }
            Some(Shown::Pass(_, bar)) => bar.abandon(),
            Some(Shown::Waiting(spinner)) if ended && total <= 1 => {
                // A host stage that has just ended: the spinner ran for it.
                spinner.set_style(
                    ProgressStyle::with_template("{msg:>24} done in {elapsed}")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                spinner.set_message(stage);
                spinner.abandon();
                self.shown = Some(Shown::Waiting(waiting()));
                return;
            }
            Some(Shown::Waiting(spinner)) => spinner.finish_and_clear(),
            None => {}
        }
        let bar = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
        bar.set_style(pass_style());
        bar.set_message(stage);
        bar.set_position(done as u64);
        self.shown = Some(if ended {
            bar.abandon();
            Shown::Waiting(waiting())
        } else {
            Shown::Pass(stage, bar)
        });
    }

    /// Ends the display (call when the sort returns, before printing its report).
    pub fn finish(mut self) {
        match self.shown.take() {
            Some(Shown::Pass(_, bar)) => bar.abandon(),
            Some(Shown::Waiting(spinner)) => spinner.finish_and_clear(),
            None => {}
        }
    }
}

impl Default for StageBars {
    fn default() -> Self {
        Self::new()
    }
}

/// A recording of any format dspk opens, with its format's name.
pub struct Opened {
    /// The format (`spikeglx`, `dspk-raw`, ...).
    pub format: String,
    /// The recording.
    pub source: Arc<dyn RecordingSource>,
}

/// Opens `path` with the format that recognises it (`dspk::synapse::registry`).
///
/// # Errors
///
/// The path does not exist, no format recognises it, or the reader's error.
pub fn open_recording(path: &Path) -> Result<Opened, dspk::io::Error> {
    let registry = dspk::synapse::registry();
    let format = registry
        .detect(path)
        .map_or("none", |f| f.name())
        .to_string();
    let source = Arc::from(registry.open(path)?);
    Ok(Opened { format, source })
}

/// The probe to sort with, and where it came from: `file` when given (probeinterface or
/// Kilosort `.json`, `.prb`, Kilosort `chanMap.mat`; several probes become one, each on shanks
/// of its own), else the recording's own (SpikeGLX and mtscomp `.meta`, NWB electrodes with
/// the feature `formats`, a SpikeInterface binary folder's `probegroup.json`, a Phy folder's
/// channel map and positions).
///
/// # Errors
///
/// The file cannot be read, or there is neither a file nor a probe in the recording.
pub fn sort_probe(
    recording: &Path,
    format: &str,
    file: Option<&Path>,
) -> Result<(Probe, String), Box<dyn Error>> {
    if let Some(file) = file {
        return Ok((read_probe_file(file)?, file.display().to_string()));
    }
    let own = match format {
        "spikeglx" => SpikeGlxRecording::open(recording)?.probe().cloned(),
        "mtscomp" => dspk::synapse::mtscomp::MtscompRecording::open(recording)?
            .probe()
            .cloned(),
        #[cfg(feature = "formats")]
        "nwb" => dspk::synapse::nwb::NwbRecording::open(recording)?
            .probe()
            .cloned(),
        "phy" => phy_probe(phy_folder(recording))?,
        "spikeinterface-binary" => {
            let folder = if recording.is_dir() {
                recording
            } else {
                recording.parent().unwrap_or(Path::new("."))
            };
            let group = folder.join("probegroup.json");
            if group.is_file() {
                Some(one_probe(read_probeinterface(&group)?, &group)?)
            } else {
                None
            }
        }
        _ => None,
    };
    own.map(|probe| (probe, format!("the recording ({format})")))
        .ok_or_else(|| {
            format!(
                "{}: a {format} recording carries no probe; give one with --probe FILE",
                recording.display()
            )
            .into()
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

/// Reads a probe file by its extension (see [`sort_probe`]).
fn read_probe_file(path: &Path) -> Result<Probe, Box<dyn Error>> {
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
                one_probe(read_probeinterface(path)?, path)
            }
        }
        Some("prb") => one_probe(read_prb(path)?, path),
        Some("mat") => Ok(read_kilosort_mat(path)?),
        _ => Err(format!(
            "{}: not a probe file (probeinterface or Kilosort .json, .prb, chanMap .mat)",
            path.display()
        )
        .into()),
    }
}

/// The probes of one file as one: each probe's shanks numbered after the previous probe's.
fn one_probe(probes: Vec<Probe>, path: &Path) -> Result<Probe, Box<dyn Error>> {
    if probes.len() == 1 {
        return Ok(probes.into_iter().next().ok_or("no probe")?);
    }
    if probes.is_empty() {
        return Err(format!("{}: the file holds no probe", path.display()).into());
    }
    let (mut contacts, mut first_shank, mut names) = (Vec::new(), 0u32, Vec::new());
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

/// `path` made absolute (against the current folder; symbolic links kept): phylib reads a
/// relative `dat_path` against the Phy folder, not where the sort ran.
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The raw file Phy's `params.py` can name for a recording, and its values per sample: a
/// SpikeGLX `.bin` (channels, then the sync word), or a dspk raw file or SpikeInterface binary
/// folder stored interleaved, little-endian, without a header. `None` otherwise.
#[must_use]
pub fn phy_dat_file(path: &Path, format: &str) -> Option<(PathBuf, usize)> {
    let raw = match format {
        "spikeglx" => {
            let glx = SpikeGlxRecording::open(path).ok()?;
            let columns = glx.info().num_channels() + glx.num_digital();
            return Some((absolute(glx.data_path()), columns));
        }
        "phy" => {
            let folder = phy_folder(path);
            PhyParams::read(&folder.join("params.py"))
                .ok()?
                .open_recording(folder)
                .ok()?
        }
        "dspk-raw" => RawRecording::open(path).ok()?,
        "spikeinterface-binary" => RawRecording::open_spikeinterface(path).ok()?,
        _ => return None,
    };
    let plain = raw.order() == SampleOrder::Interleaved
        && raw.byte_order() == ByteOrder::Little
        && raw.header_bytes() == 0;
    plain.then(|| (absolute(raw.data_path()), raw.info().num_channels()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(path: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(path)
    }

    #[test]
    fn probes_come_from_files_or_the_recording() {
        let linear = [[0.0, 0.0], [0.0, 20.0], [16.0, 40.0], [16.0, 60.0]];
        let si = fixture("si_binary/si_binary_folder");
        for file in [
            None,
            Some("probe/linear4_kilosort4.json"),
            Some("probe/linear4_canonical.prb"),
        ] {
            let file = file.map(fixture);
            let (probe, _) = sort_probe(&si, "spikeinterface-binary", file.as_deref()).unwrap();
            assert_eq!(probe.channel_positions(4).unwrap(), linear, "{file:?}");
        }
        let oe = fixture("openephys/2024-05-01_12-00-00");
        let error = sort_probe(&oe, "openephys-binary", None).unwrap_err();
        assert!(error.to_string().contains("--probe FILE"), "{error}");
    }

    #[test]
    fn phy_reads_plain_raw_files_and_spikeglx_bins() {
        let si = fixture("si_binary/si_binary_folder");
        let dat = phy_dat_file(&si, "spikeinterface-binary").unwrap();
        assert_eq!(dat, (si.join("traces_cached_seg0.raw"), 4));
        let glx = fixture("spikeglx/np1/fixture_g0/fixture_g0_imec0/fixture_g0_t0.imec0.ap.bin");
        assert_eq!(phy_dat_file(&glx, "spikeglx"), Some((glx.clone(), 5)));
        assert_eq!(phy_dat_file(&glx, "openephys-binary"), None);
    }
}
