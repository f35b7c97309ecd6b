//! The command line: what each command takes (read with the front-end's
//! [`Reader`](dspk_cli::flags::Reader)), and the help texts.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::PathBuf;

use dspk::ComputeTarget;
use dspk::io::PlainBinary;
use dspk::kilosort::KilosortSettings;
use dspk_cli::flags::{Arg, Reader};
use dspk_cli::recording::PlainArgs;
use dspk_cli::settings::parse_set;

/// What the command line asked for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Command {
    /// Print a help text (`dspk --help`, `dspk help sort`, `dspk sort --help`).
    Help(Topic),
    /// Print the version.
    Version,
    /// `dspk info REC [--n-chan-bin N --fs HZ [--dtype TYPE]]`.
    Info {
        /// The recording.
        recording: PathBuf,
        /// How to read it as a plain binary file, when given.
        plain: Option<PlainBinary>,
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
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ConvertArgs {
    /// The recording to convert.
    pub recording: PathBuf,
    /// How to read it as a plain binary file, when given.
    pub plain: Option<PlainBinary>,
    /// The format written.
    pub to: OutputFormat,
    /// The file (raw, sidecar) or folder (zarr) written.
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
    /// Only the dspk JSON sidecar of a plain binary file, beside it (`REC.json`).
    Sidecar,
}

/// The arguments of `dspk sort`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SortArgs {
    /// The recording to sort.
    pub recording: PathBuf,
    /// How to read it as a plain binary file (`--n-chan-bin`, `--fs`, `--dtype`), when given.
    pub plain: Option<PlainBinary>,
    /// `--device N`: the device of the runtime to sort on (else `DSPK_DEVICE`, else the
    /// runtime's default).
    pub device: Option<usize>,
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
    let mut plain = PlainArgs::default();
    while let Some(arg) = reader.next()? {
        match arg {
            Arg::Help => return Ok(Command::Help(Topic::Info)),
            Arg::Flag(flag) => {
                if !plain.read(&mut reader, &flag)? {
                    return Err(reader.unknown(&flag));
                }
            }
            Arg::Positional => {}
        }
    }
    let mut paths = reader.positional(&["REC"])?;
    Ok(Command::Info {
        recording: paths.remove(0),
        plain: plain.finish("info")?,
    })
}

fn parse_convert(args: Vec<OsString>) -> Result<Command, String> {
    let mut reader = Reader::new("convert", args);
    let (mut to, mut overwrite) = (None, false);
    let mut plain = PlainArgs::default();
    while let Some(arg) = reader.next()? {
        match arg {
            Arg::Help => return Ok(Command::Help(Topic::Convert)),
            Arg::Flag(flag) if flag == "--to" => {
                let format = match reader.text("--to")?.as_str() {
                    "raw" => OutputFormat::Raw,
                    "zarr" => OutputFormat::Zarr,
                    "sidecar" => OutputFormat::Sidecar,
                    other => {
                        return Err(format!(
                            "convert --to {other}: the formats written are raw, zarr and sidecar"
                        ));
                    }
                };
                reader.once(&mut to, format, "--to")?;
            }
            Arg::Flag(flag) if flag == "--overwrite" => overwrite = true,
            Arg::Flag(flag) => {
                if !plain.read(&mut reader, &flag)? {
                    return Err(reader.unknown(&flag));
                }
            }
            Arg::Positional => {}
        }
    }
    let plain = plain.finish("convert")?;
    let (recording, out) = if to == Some(OutputFormat::Sidecar) {
        if plain.is_none() {
            return Err(
                "convert --to sidecar describes a plain binary file: give --n-chan-bin \
                        and --fs (and --dtype unless it is int16)"
                    .to_string(),
            );
        }
        let recording = reader.positional(&["REC"])?.remove(0);
        let out = dspk::io::sidecar_path(&recording);
        (recording, out)
    } else {
        let [recording, out]: [PathBuf; 2] = reader
            .positional(&["REC", "OUT"])?
            .try_into()
            .map_err(|_| "convert needs REC and OUT".to_string())?;
        (recording, out)
    };
    let to = to.ok_or("convert needs --to raw, --to zarr or --to sidecar")?;
    Ok(Command::Convert(ConvertArgs {
        recording,
        plain,
        to,
        out,
        overwrite,
    }))
}

fn parse_sort(args: Vec<OsString>) -> Result<Command, String> {
    let mut reader = Reader::new("sort", args);
    let (mut probe, mut out, mut sets, mut overwrite) = (None, None, Vec::new(), false);
    let (mut preset, mut device) = (None, None);
    let mut plain = PlainArgs::default();
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
                "--set" => {
                    let (key, value) = parse_set(&reader.text("--set")?)?;
                    // Kilosort's names for how to read the file go to the recording.
                    if !plain.setting("sort", &key, &value)? {
                        sets.push((key, value));
                    }
                }
                "--preset" => {
                    let name = reader.text("--preset")?;
                    reader.once(&mut preset, name, "--preset")?;
                }
                "--device" => {
                    let index = reader.whole("--device", 0..=u64::from(u16::MAX))?;
                    // At most u16::MAX, so it fits a usize.
                    reader.once(&mut device, index as usize, "--device")?;
                }
                "--overwrite" => overwrite = true,
                _ => {
                    if !plain.read(&mut reader, &flag)? {
                        return Err(reader.unknown(&flag));
                    }
                }
            },
            Arg::Positional => {}
        }
    }
    let mut paths = reader.positional(&["REC"])?;
    Ok(Command::Sort(SortArgs {
        recording: paths.remove(0),
        plain: plain.finish("sort")?,
        device,
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
                [--n-chan-bin N --fs HZ [--dtype TYPE]] [--device N]
       dspk info REC [--n-chan-bin N --fs HZ [--dtype TYPE]]
       dspk convert REC --to raw|zarr OUT [--overwrite] [--n-chan-bin N --fs HZ [--dtype TYPE]]
       dspk convert REC --to sidecar --n-chan-bin N --fs HZ [--dtype TYPE] [--overwrite]
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
                    `dspk convert --to raw` and `--to sidecar` write), or the sidecar itself
  Phy folder        the raw recording its params.py names
  plain binary      any headerless file of interleaved little-endian samples (Kilosort's
                    .bin), read as --n-chan-bin N --fs HZ [--dtype TYPE] describe it (then
                    nothing else about the file is read)
[formats]: only in a dspk built with `--features formats`.

  --n-chan-bin N  values per sample in the file (Kilosort's n_chan_bin: 385 for a SpikeGLX
                  Neuropixels 1.0 .ap.bin, 384 sites and the sync channel); the file's length
                  must be a whole number of samples.
  --fs HZ         the sample rate (Kilosort's fs: 30000, 30000.12).
  --dtype TYPE    int16 (the default), uint16, int32 or float32 (Kilosort's data_dtype).";

/// The runtime paragraph, naming the runtimes compiled into this binary.
fn runtimes() -> String {
    let compiled: Vec<&str> = ComputeTarget::compiled().iter().map(|t| t.name()).collect();
    format!(
        "The device: DSPK_RUNTIME=wgpu|cuda|hip|cpu picks the runtime, among those this binary was
built with ({}; cargo features wgpu, cuda, hip, cpu). Unset, the best available: a GPU
(CUDA, HIP, then wgpu on Vulkan/Metal/DX12), then the CPU runtime, then software Vulkan.
DSPK_DEVICE=N picks the runtime's Nth device (from 0; one GPU per process on a machine with
several); unset, its default device.",
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
            "dspk info REC [--n-chan-bin N --fs HZ [--dtype TYPE]]

Prints what the recording holds without reading its samples: its format, channels x samples
at the sample rate (and the duration), the stored sample type, when it starts, each channel's
name and scaling (the first {listed}), metadata entries, and its probe where the format has one.

{RECORDINGS}",
            listed = dspk_cli::describe::LISTED,
        ),
        Topic::Convert => format!(
            "dspk convert REC --to raw|zarr OUT [--overwrite] [--n-chan-bin N --fs HZ [--dtype TYPE]]
dspk convert REC --to sidecar --n-chan-bin N --fs HZ [--dtype TYPE] [--overwrite]

Writes the recording's stored values, untouched, in another format, with its channels, gains,
offsets, units and sample rate:
  --to raw    OUT is a data file: interleaved little-endian samples (no header), and the
              sidecar OUT.json beside it; dspk opens either, and the data file is what Phy's
              dat_path and Kilosort read (int16 recordings).
  --to zarr   OUT is a new folder: a Zarr v3 store in SpikeInterface's layout (zstd chunks of
              one second), which SpikeInterface's read_zarr opens. Needs a dspk built with
              `--features formats`.
  --to sidecar  no OUT: writes only the dspk sidecar REC.json beside a plain binary file
              (described with --n-chan-bin, --fs, --dtype), leaving the file as it is, so
              that later runs (dspk sort REC, dspk info REC) need no flags to read it.
  --overwrite replace OUT if it exists (refused otherwise).

{RECORDINGS}"
        ),
        Topic::Sort => format!(
            "dspk sort REC [--probe FILE] [--out DIR] [--preset NAME] [--set KEY=VALUE ...] [--overwrite]
          [--n-chan-bin N --fs HZ [--dtype TYPE]] [--device N]

Sorts the recording with Kilosort4's algorithm on the device (preprocessing, drift correction,
detection, clustering, template matching, merges) and writes a Phy folder. Progress is shown per
stage on a terminal; at the end each stage's time and memory is printed.

  --probe FILE   the probe: probeinterface JSON (.json), Kilosort's probe JSON (.json) or
                 chanMap.mat (.mat), or a .prb file. Default: the recording's own probe
                 (SpikeGLX and mtscomp .meta, NWB electrodes, a SpikeInterface binary
                 folder's probegroup.json); formats without one need --probe. Only the
                 probe's channels are sorted: with a 384-site probe, the sync channel of a
                 385-channel SpikeGLX file is left out, as Kilosort leaves it out.
  --n-chan-bin N --fs HZ [--dtype TYPE]
                 read REC as a plain binary file, as Kilosort does (below); also as
                 --set n_chan_bin=N, --set fs=HZ, --set data_dtype=TYPE. Give --probe too.
  --device N     the runtime's Nth device (from 0), for one GPU per process; overrides
                 DSPK_DEVICE. An index past the devices present is refused, naming how many
                 there are.
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
What each does: Kilosort4's documentation, and docs/KILOSORT4.md in dspk's repository. Eleven
are dspk's own, not Kilosort4's: templates_file (wTEMP/wPCA .npz when templates_from_data is
false), templates_seed, resident_bytes (device memory that keeps the recording on the device
between passes; null: all but a reserve for the passes' scratch, 1/8 of the device and at
least 8 GB), min_cluster_group (smallest group clustering splits),
tree_cross_refractory (the final merge tree keeps cross-refractory branches apart),
min_cluster_landmarks and min_split_points_per_feature (landmark floor and split guard of the
clustering; null: on for probes whose channels fall in at most 4 clustering groups),
max_cluster_spikes (a larger clustering group clusters this many spikes and assigns the rest;
null: every spike), drift_split_overlap (the merges also join units of similarity >= 0.8 whose
spikes fell at different drift shifts, sharing at most this much of them; null: Kilosort's
merges only), min_isi_ms (a unit's spikes closer than this are one spike, the larger kept;
null: off; the EMUsort preset: 2.5), shadow_ms (a unit whose spikes mostly lie within this of
larger units' spikes, beyond chance, is removed as their shadow; null: off). Two of Kilosort's
defaults differ: Th_universal 6 and Th_learned 5 (Kilosort: 9 and 8).

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
                plain: None,
                device: None,
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
            (
                "convert a b",
                "convert needs --to raw, --to zarr or --to sidecar",
            ),
            ("convert a --to sidecar", "give --n-chan-bin and --fs"),
            (
                "convert a b --to sidecar --n-chan-bin 4 --fs 1",
                "unexpected argument `b`",
            ),
            (
                "sort a --n-chan-bin 4",
                "needs both --n-chan-bin and --fs (missing --fs)",
            ),
            ("info a --fs 30000 --dtype int16", "(missing --n-chan-bin)"),
            (
                "sort a --n-chan-bin 0 --fs 1",
                "--n-chan-bin needs a whole number from 1",
            ),
            (
                "sort a --n-chan-bin 4 --fs fast",
                "--fs needs a sample rate in Hz",
            ),
            (
                "sort a --n-chan-bin 4 --fs 1 --dtype float64",
                "int16, uint16, int32",
            ),
            (
                "sort a --n-chan-bin 4 --fs 1 --dtype >i2",
                "(little-endian)",
            ),
            (
                "sort a --n-chan-bin 4 --set n_chan_bin=5",
                "--n-chan-bin given twice (from --set n_chan_bin=5)",
            ),
            ("sort a --device -1", "--device needs a whole number from 0"),
            ("sort a --device 1 --device 2", "--device given twice"),
            ("convert a --to raw", "missing OUT"),
            (
                "convert a b --to bin",
                "the formats written are raw, zarr and sidecar",
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
                plain: None,
                to: OutputFormat::Zarr,
                out: "out.zarr".into(),
                overwrite: false,
            })
        );
        assert_eq!(
            parse(args("info -")).unwrap(),
            Command::Info {
                recording: "-".into(),
                plain: None,
            }
        );
    }

    // `--set n_chan_bin=16` used to be an unknown setting: Kilosort's names for how to read
    // the file describe the recording, as the flags do.
    #[test]
    fn plain_binary_flags_and_kilosort_names_describe_the_file() {
        let rate = |hz| dspk::SampleRate::from_hz(hz).unwrap();
        for line in [
            "sort data.bin --n-chan-bin 385 --fs 30000 --dtype int16 --probe chanMap.mat \
             --device 1",
            "sort data.bin --set n_chan_bin=385 --set fs=30000.0 --set data_dtype=<i2 \
             --probe chanMap.mat --device 1",
        ] {
            let Command::Sort(sort) = parse(args(line)).unwrap() else {
                panic!("{line}: not a sort");
            };
            assert_eq!(
                sort.plain,
                Some(PlainBinary::new(385, rate(30_000))),
                "{line}"
            );
            assert_eq!(sort.device, Some(1), "{line}");
            assert!(sort.sets.is_empty(), "{line}");
        }
        let Command::Sort(sort) =
            parse(args("sort d.bin --n-chan-bin 8 --fs 20000 --dtype float32")).unwrap()
        else {
            panic!("not a sort");
        };
        let plain = sort.plain.unwrap();
        assert_eq!(plain.format, dspk::SampleFormat::F32);
        assert_eq!(
            parse(args("convert d.bin --to sidecar --n-chan-bin 8 --fs 20000")).unwrap(),
            Command::Convert(ConvertArgs {
                recording: "d.bin".into(),
                plain: Some(PlainBinary::new(8, rate(20_000))),
                to: OutputFormat::Sidecar,
                out: "d.bin.json".into(),
                overwrite: false,
            })
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
