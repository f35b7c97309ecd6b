//! The command line: what each command takes (read with the front-end's
//! [`Reader`](dspk_cli::flags::Reader)), and the help texts.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::PathBuf;

use dspk::ComputeTarget;
use dspk::kilosort::KilosortSettings;
use dspk_cli::flags::{Arg, Reader};
use dspk_cli::settings::parse_set;

/// What the command line asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Command {
    /// Print a help text (`dspk --help`, `dspk help sort`, `dspk sort --help`).
    Help(Topic),
    /// Print the version.
    Version,
    /// `dspk info REC`.
    Info {
        /// The recording.
        recording: PathBuf,
    },
    /// `dspk convert REC --to raw|zarr OUT`.
    Convert(ConvertArgs),
    /// `dspk sort REC ...`.
    Sort(SortArgs),
}

/// Which help text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Topic {
    /// The overview: commands, recordings, runtimes, exit codes.
    Overview,
    /// `sort`.
    Sort,
    /// `info`.
    Info,
    /// `convert`.
    Convert,
}

/// The arguments of `dspk convert`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConvertArgs {
    /// The recording to convert.
    pub recording: PathBuf,
    /// The format written.
    pub to: OutputFormat,
    /// The file (raw) or folder (zarr) written.
    pub out: PathBuf,
    /// Replace an existing `out`.
    pub overwrite: bool,
}

/// A format `dspk convert` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutputFormat {
    /// Interleaved little-endian samples and a dspk JSON sidecar (`OUT.json`).
    Raw,
    /// A Zarr v3 store in SpikeInterface's layout.
    Zarr,
}

/// The arguments of `dspk sort`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SortArgs {
    /// The recording to sort.
    pub recording: PathBuf,
    /// A probe file, when the recording's own probe is not to be used (or it has none).
    pub probe: Option<PathBuf>,
    /// The Phy folder written (default: beside the recording, see [`default_out_dir`]).
    pub out: Option<PathBuf>,
    /// `--preset NAME`: the settings the `--set`s start from (`kilosort4` by default).
    pub preset: Option<String>,
    /// `--set KEY=VALUE` pairs, in order.
    pub sets: Vec<(String, String)>,
    /// Replace an existing Phy folder.
    pub overwrite: bool,
}

/// The Phy folder of a sort of `recording` when `--out` is not given: `<stem>_dspk_sort` beside
/// it (`/data/run_g0_t0.imec0.ap.bin` -> `/data/run_g0_t0.imec0.ap_dspk_sort`; a folder
/// `/data/session` -> `/data/session_dspk_sort`).
pub(crate) fn default_out_dir(recording: &std::path::Path) -> PathBuf {
    let stem = recording
        .file_stem()
        .map_or_else(|| OsString::from("recording"), OsString::from);
    let mut name = stem;
    name.push("_dspk_sort");
    recording.with_file_name(name)
}

/// Reads the arguments after the program name.
///
/// # Errors
///
/// A usage message: an unknown command or flag, a missing recording or value, an argument too
/// many, a `--set` without `=`, a flag given twice.
pub(crate) fn parse(args: Vec<OsString>) -> Result<Command, String> {
    let mut args = args.into_iter();
    let Some(command) = args.next() else {
        return Err("no command given".to_string());
    };
    let rest: Vec<OsString> = args.collect();
    match command.to_str() {
        Some("-h" | "--help") => Ok(Command::Help(Topic::Overview)),
        Some("-V" | "--version") => Ok(Command::Version),
        Some("help") => match rest.first().map(|a| a.to_str()) {
            None => Ok(Command::Help(Topic::Overview)),
            Some(Some(name)) => topic(name).map(Command::Help).ok_or_else(|| {
                format!("no help on `{name}`: the commands are sort, info, convert")
            }),
            Some(None) => Err("no help on a name that is not UTF-8".to_string()),
        },
        Some("info") => parse_info(rest),
        Some("convert") => parse_convert(rest),
        Some("sort") => parse_sort(rest),
        Some(other) => Err(format!(
            "unknown command `{other}`: the commands are sort, info, convert"
        )),
        None => Err(format!("unknown command {command:?}")),
    }
}

/// The topic a command name asks help on.
fn topic(name: &str) -> Option<Topic> {
    match name {
        "sort" => Some(Topic::Sort),
        "info" => Some(Topic::Info),
        "convert" => Some(Topic::Convert),
        _ => None,
    }
}

fn parse_info(args: Vec<OsString>) -> Result<Command, String> {
    let mut reader = Reader::new("info", args);
    while let Some(arg) = reader.next()? {
        match arg {
            Arg::Help => return Ok(Command::Help(Topic::Info)),
            Arg::Flag(flag) => return Err(reader.unknown(&flag)),
            Arg::Positional => {}
        }
    }
    let mut paths = reader.positional(&["REC"])?;
    Ok(Command::Info {
        recording: paths.remove(0),
    })
}

fn parse_convert(args: Vec<OsString>) -> Result<Command, String> {
    let mut reader = Reader::new("convert", args);
    let (mut to, mut overwrite) = (None, false);
    while let Some(arg) = reader.next()? {
        match arg {
            Arg::Help => return Ok(Command::Help(Topic::Convert)),
            Arg::Flag(flag) if flag == "--to" => {
                let format = match reader.text("--to")?.as_str() {
                    "raw" => OutputFormat::Raw,
                    "zarr" => OutputFormat::Zarr,
                    other => {
                        return Err(format!(
                            "convert --to {other}: the formats written are raw and zarr"
                        ));
                    }
                };
                reader.once(&mut to, format, "--to")?;
            }
            Arg::Flag(flag) if flag == "--overwrite" => overwrite = true,
            Arg::Flag(flag) => return Err(reader.unknown(&flag)),
            Arg::Positional => {}
        }
    }
    let [recording, out]: [PathBuf; 2] = reader
        .positional(&["REC", "OUT"])?
        .try_into()
        .map_err(|_| "convert needs REC and OUT".to_string())?;
    let to = to.ok_or("convert needs --to raw or --to zarr")?;
    Ok(Command::Convert(ConvertArgs {
        recording,
        to,
        out,
        overwrite,
    }))
}

fn parse_sort(args: Vec<OsString>) -> Result<Command, String> {
    let mut reader = Reader::new("sort", args);
    let (mut probe, mut out, mut sets, mut overwrite) = (None, None, Vec::new(), false);
    let mut preset = None;
    while let Some(arg) = reader.next()? {
        match arg {
            Arg::Help => return Ok(Command::Help(Topic::Sort)),
            Arg::Flag(flag) => match flag.as_str() {
                "--probe" => {
                    let path = reader.path("--probe")?;
                    reader.once(&mut probe, path, "--probe")?;
                }
                "--out" => {
                    let path = reader.path("--out")?;
                    reader.once(&mut out, path, "--out")?;
                }
                "--set" => sets.push(parse_set(&reader.text("--set")?)?),
                "--preset" => {
                    let name = reader.text("--preset")?;
                    reader.once(&mut preset, name, "--preset")?;
                }
                "--overwrite" => overwrite = true,
                _ => return Err(reader.unknown(&flag)),
            },
            Arg::Positional => {}
        }
    }
    let mut paths = reader.positional(&["REC"])?;
    Ok(Command::Sort(SortArgs {
        recording: paths.remove(0),
        probe,
        out,
        preset,
        sets,
        overwrite,
    }))
}

/// The usage lines (printed after a usage error).
pub(crate) const USAGE: &str = "\
usage: dspk sort REC [--probe FILE] [--out DIR] [--preset NAME] [--set KEY=VALUE ...] [--overwrite]
       dspk info REC
       dspk convert REC --to raw|zarr OUT [--overwrite]
       dspk help [COMMAND]   (or dspk COMMAND --help)";

/// What REC may be, for the help texts.
const RECORDINGS: &str = "\
REC is a recording, given the way you would point any tool at it; its format is recognised
from the path and metadata files (`dspk info REC` shows what dspk sees):
  SpikeGLX          a .bin with its .meta beside it (x.imec0.ap.bin), or the .meta
  mtscomp           a compressed SpikeGLX .cbin (with its .ch and .meta)
  Open Ephys        a binary-format recording folder, or its structure.oebin
  Intan             an .rhd file (amplifier channels)
  NWB               an .nwb file (HDF5) or an NWB-Zarr store (ElectricalSeries)   [formats]
  SpikeInterface    a binary folder (binary.json) or a Zarr store (.zarr)         [zarr: formats]
  raw binary        a data file with a dspk sidecar FILE.json beside it (what
                    `dspk convert --to raw` writes), or the sidecar itself
  Phy folder        the raw recording its params.py names
[formats]: only in a dspk built with `--features formats`.";

/// The runtime paragraph, naming the runtimes compiled into this binary.
fn runtimes() -> String {
    let compiled: Vec<&str> = ComputeTarget::compiled().iter().map(|t| t.name()).collect();
    format!(
        "The device: DSPK_RUNTIME=wgpu|cuda|hip|cpu picks the runtime, among those this binary was
built with ({}; cargo features wgpu, cuda, hip, cpu). Unset, the best available: a GPU
(CUDA, HIP, then wgpu on Vulkan/Metal/DX12), then the CPU runtime, then software Vulkan.",
        if compiled.is_empty() {
            "none".to_string()
        } else {
            compiled.join(", ")
        }
    )
}

/// The help text of `topic`.
pub(crate) fn help(topic: Topic) -> String {
    match topic {
        Topic::Overview => format!(
            "dspk {version}: spike sorting with Kilosort4 on any GPU, and recording tools

{USAGE}

commands:
  sort      sort a recording (Kilosort4) into a Phy folder
  info      say what a recording holds: format, channels, samples, rate, gains, probe
  convert   write a recording as a raw binary file or a Zarr store

{RECORDINGS}

{runtimes}

Exit status: 0 success, 1 failure (the error and its causes on stderr), 2 usage error.
`dspk COMMAND --help` says more about a command.",
            version = env!("CARGO_PKG_VERSION"),
            runtimes = runtimes(),
        ),
        Topic::Info => format!(
            "dspk info REC

Prints what the recording holds without reading its samples: its format, channels x samples
at the sample rate (and the duration), the stored sample type, when it starts, each channel's
name and scaling (the first {listed}), metadata entries, and its probe where the format has one.

{RECORDINGS}",
            listed = dspk_cli::describe::LISTED,
        ),
        Topic::Convert => format!(
            "dspk convert REC --to raw|zarr OUT [--overwrite]

Writes the recording's stored values, untouched, in another format, with its channels, gains,
offsets, units and sample rate:
  --to raw    OUT is a data file: interleaved little-endian samples (no header), and the
              sidecar OUT.json beside it; dspk opens either, and the data file is what Phy's
              dat_path and Kilosort read (int16 recordings).
  --to zarr   OUT is a new folder: a Zarr v3 store in SpikeInterface's layout (zstd chunks of
              one second), which SpikeInterface's read_zarr opens. Needs a dspk built with
              `--features formats`.
  --overwrite replace OUT if it exists (refused otherwise).

{RECORDINGS}"
        ),
        Topic::Sort => format!(
            "dspk sort REC [--probe FILE] [--out DIR] [--preset NAME] [--set KEY=VALUE ...] [--overwrite]

Sorts the recording with Kilosort4's algorithm on the device (preprocessing, drift correction,
detection, clustering, template matching, merges) and writes a Phy folder. Progress is shown per
stage on a terminal; at the end each stage's time and memory is printed.

  --probe FILE   the probe: probeinterface JSON (.json), Kilosort's probe JSON (.json) or
                 chanMap.mat (.mat), or a .prb file. Default: the recording's own probe
                 (SpikeGLX and mtscomp .meta, NWB electrodes, a SpikeInterface binary
                 folder's probegroup.json); formats without one need --probe.
  --out DIR      the Phy folder (default: REC's name + _dspk_sort, beside REC).
  --preset NAME  the settings to start from: kilosort4 (the default) or emusort (EMUsort 1.1.0's
                 for intramuscular EMG: 250-5000 Hz band-pass and 60 Hz notch, no common
                 reference, no drift correction, channel delays removed, thresholds
                 [6, 9, 12, 15] pooled, HDBSCAN outlier removal, the channels on one line;
                 --set notch_hz=50 where mains is 50 Hz).
  --set KEY=VALUE  one Kilosort4 setting (repeat for several). KEY is Kilosort4's own name for
                 it (as in its settings dictionary and GUI); VALUE is JSON (9, 7.5, true, null,
                 [0.5, 0.5, 0.5]) or a plain path. Refused when unknown or out of range.
  --overwrite    replace the Phy folder if DIR already holds one (refused otherwise).

DIR holds, when the sort is done, the files Kilosort4 writes, which Phy (phy template-gui
DIR/params.py) and SpikeInterface's read_phy open:
  spike_times.npy, spike_clusters.npy, spike_templates.npy    each spike's sample and unit
  amplitudes.npy, spike_positions.npy, pc_features.npy        each spike's size, place, features
  templates.npy, similar_templates.npy, pc_feature_ind.npy    each unit's waveform
  cluster_KSLabel.tsv (good / mua), cluster_group.tsv, cluster_ContamPct.tsv,
  cluster_Amplitude.tsv                                        each unit's label and figures
  channel_map.npy, channel_positions.npy, channel_shanks.npy  the probe
  whitening_mat*.npy, templates_ind.npy, spike_detection_templates.npy, kept_spikes.npy
  params.py              where the raw data is (dat_path): the recording's own file where Phy
                         can read it (SpikeGLX .bin, a plain raw file), else none
  dspk_settings.json     the settings used;  dspk_report.txt  each stage's time and memory
  summary.png            drift, units on the probe, templates

Settings (KEY = default):
{settings}
What each does: Kilosort4's documentation, and docs/KILOSORT4.md in dspk's repository. Four
are dspk's own, not Kilosort4's: templates_file (wTEMP/wPCA .npz when templates_from_data is
false), templates_seed, resident_bytes (device memory that keeps the recording on the device
between passes; null: half the device) and min_cluster_group (smallest group clustering splits).

{RECORDINGS}

{runtimes}",
            settings = settings_table(),
            runtimes = runtimes(),
        ),
    }
}

/// Every setting with its default, four to a line where they fit, from the settings' own JSON
/// (so the list cannot fall behind the settings).
fn settings_table() -> String {
    let defaults: serde_json::Value =
        serde_json::from_str(&KilosortSettings::default().to_json()).unwrap_or_default();
    let mut table = String::new();
    if let Some(map) = defaults.as_object() {
        let mut line = String::from(" ");
        for (key, value) in map {
            let entry = format!(" {key} = {value}");
            if line.len() + entry.len() > 95 {
                let _ = writeln!(table, "{line}");
                line = String::from(" ");
            }
            line.push_str(&entry);
            line.push(';');
        }
        let _ = writeln!(table, "{line}");
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<OsString> {
        line.split_whitespace().map(OsString::from).collect()
    }

    #[test]
    fn sort_reads_every_flag() {
        let parsed = parse(args(
            "sort rec.bin --probe p.json --set Th_learned=7 --out o --set nblocks=0 --overwrite \
             --preset emusort",
        ))
        .unwrap();
        assert_eq!(
            parsed,
            Command::Sort(SortArgs {
                recording: "rec.bin".into(),
                probe: Some("p.json".into()),
                out: Some("o".into()),
                preset: Some("emusort".into()),
                sets: vec![
                    ("Th_learned".into(), "7".into()),
                    ("nblocks".into(), "0".into())
                ],
                overwrite: true,
            })
        );
        assert_eq!(
            parse(args("sort rec.bin --help")).unwrap(),
            Command::Help(Topic::Sort)
        );
    }

    #[test]
    fn usage_errors_name_the_problem() {
        for (line, expected) in [
            ("", "no command given"),
            ("srot x", "unknown command `srot`"),
            ("sort", "sort needs REC (missing REC)"),
            ("sort a b", "unexpected argument `b`"),
            ("sort a --probe", "sort --probe needs a value"),
            ("sort a --prob x", "unknown flag `--prob`"),
            ("sort a --set nblocks", "expected KEY=VALUE"),
            ("sort a --out x --out y", "--out given twice"),
            ("sort a --preset x --preset y", "--preset given twice"),
            ("info", "info needs REC"),
            ("convert a b", "convert needs --to raw or --to zarr"),
            ("convert a --to raw", "missing OUT"),
            (
                "convert a b --to bin",
                "the formats written are raw and zarr",
            ),
            ("help frob", "no help on `frob`"),
        ] {
            let error = parse(args(line)).unwrap_err();
            assert!(error.contains(expected), "{line:?}: {error}");
        }
    }

    #[test]
    fn convert_and_info_read_their_paths() {
        assert_eq!(
            parse(args("convert in --to zarr out.zarr")).unwrap(),
            Command::Convert(ConvertArgs {
                recording: "in".into(),
                to: OutputFormat::Zarr,
                out: "out.zarr".into(),
                overwrite: false,
            })
        );
        assert_eq!(
            parse(args("info -")).unwrap(),
            Command::Info {
                recording: "-".into()
            }
        );
    }

    #[test]
    fn the_default_phy_folder_sits_beside_the_recording() {
        assert_eq!(
            default_out_dir("/data/run_g0_t0.imec0.ap.bin".as_ref()),
            PathBuf::from("/data/run_g0_t0.imec0.ap_dspk_sort")
        );
        assert_eq!(
            default_out_dir("/data/session/".as_ref()),
            PathBuf::from("/data/session_dspk_sort")
        );
        assert_eq!(
            default_out_dir("rec.zarr".as_ref()),
            PathBuf::from("rec_dspk_sort")
        );
    }

    #[test]
    fn the_sort_help_lists_every_setting() {
        let text = help(Topic::Sort);
        for key in [
            "Th_universal",
            "Th_learned",
            "nblocks",
            "batch_size",
            "do_CAR",
        ] {
            assert!(text.contains(&format!(" {key} = ")), "{key} missing");
        }
    }
}
