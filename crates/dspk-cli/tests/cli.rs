//! The `dspk` binary run as a user runs it: help, usage errors, `info` and `convert` on the
//! reader fixtures (`tests/fixtures`, README there), and a missing recording.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `dspk` with `args`.
fn dspk(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dspk"))
        .args(args)
        .env("NODEVICE_SELECT", "1")
        .output()
        .expect("the dspk binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A fixture of the workspace's `tests/fixtures`.
fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(path)
}

/// An empty folder of this test's own under cargo's temporary directory.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("dspk-cli-{name}"));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const NP1: &str = "spikeglx/np1/fixture_g0/fixture_g0_imec0/fixture_g0_t0.imec0.ap.bin";
const SI_BINARY: &str = "si_binary/si_binary_folder";

#[test]
fn help_explains_commands_recordings_and_settings() {
    for args in [&["--help"][..], &["-h"], &["help"]] {
        let output = dspk(args);
        assert_eq!(output.status.code(), Some(0), "{args:?}");
        let text = stdout(&output);
        for expected in [
            "dspk sort REC",
            "dspk convert REC",
            "SpikeGLX",
            "DSPK_RUNTIME",
            "Exit status",
        ] {
            assert!(
                text.contains(expected),
                "{args:?}: `{expected}` missing:\n{text}"
            );
        }
    }
    for args in [
        &["sort", "--help"][..],
        &["help", "sort"],
        &["sort", "x.bin", "-h"],
    ] {
        let output = dspk(args);
        assert_eq!(output.status.code(), Some(0), "{args:?}");
        let text = stdout(&output);
        for expected in [
            "--probe FILE",
            "Th_learned = 5.0",
            "nblocks = 1",
            "spike_times.npy",
        ] {
            assert!(
                text.contains(expected),
                "{args:?}: `{expected}` missing:\n{text}"
            );
        }
    }
    let output = dspk(&["convert", "--help"]);
    assert!(stdout(&output).contains("--to raw"));
}

#[test]
fn usage_errors_exit_2_with_the_problem_and_the_usage() {
    for (args, problem) in [
        (&[][..], "no command given"),
        (&["srot", "x"], "unknown command `srot`"),
        (&["sort"], "sort needs REC"),
        (&["info", "a", "b"], "unexpected argument `b`"),
        (
            &["convert", "a", "b", "--to", "csv"],
            "the formats written are raw, zarr and sidecar",
        ),
        (
            &["sort", "x.bin", "--set", "Th_learnd=7"],
            "unknown setting `Th_learnd`",
        ),
        (&["sort", "x.bin", "--set", "nt=60"], "--set nt=60"),
    ] {
        let output = dspk(args);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        let text = stderr(&output);
        assert!(text.starts_with("error: "), "{args:?}: {text}");
        assert!(
            text.contains(problem),
            "{args:?}: `{problem}` missing: {text}"
        );
        assert!(text.contains("usage: dspk sort REC"), "{args:?}: {text}");
        assert!(stdout(&output).is_empty(), "{args:?}");
    }
}

#[test]
fn info_prints_the_header_channels_and_probe() {
    let output = dspk(&["info", fixture(NP1).to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    for expected in [
        "format:    spikeglx\n",
        "recording: 4 channels x 3000 samples at 30000 Hz (0.100 s), stored as I16",
        "2.34375 uV per unit",
        "0.5859375 uV per unit",
        "probe:     4 contacts on 1 shank, 4 wired to channels",
    ] {
        assert!(text.contains(expected), "`{expected}` missing:\n{text}");
    }
    let output = dspk(&["info", fixture(SI_BINARY).to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.contains("format:    spikeinterface-binary\n"),
        "{text}"
    );
    assert!(
        text.contains("  1 A1               0.5 uV per unit, offset -10 uV"),
        "{text}"
    );
    let output = dspk(&[
        "info",
        fixture("openephys/2024-05-01_12-00-00").to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stdout(&output).contains("probe:     none in the recording"));
}

/// The stored values of every channel of `recording`, channel-major.
fn stored(recording: &dyn dspk::RecordingSource) -> Vec<u8> {
    let info = recording.info();
    let mut out =
        vec![0; info.num_channels() * info.num_samples as usize * info.stored_format.size()];
    recording
        .read_stored(&info.all_channels(), 0..info.num_samples, &mut out)
        .unwrap();
    out
}

#[test]
fn convert_to_raw_reads_back_as_the_source() {
    let dir = scratch("convert");
    for (name, source) in [("si", SI_BINARY), ("np1", NP1)] {
        let source = fixture(source);
        let out = dir.join(format!("{name}.dat"));
        let args = [
            "convert",
            source.to_str().unwrap(),
            "--to",
            "raw",
            out.to_str().unwrap(),
        ];
        let output = dspk(&args);
        assert_eq!(output.status.code(), Some(0), "{name}: {}", stderr(&output));
        assert!(stdout(&output).contains("wrote"), "{}", stdout(&output));

        let original = dspk::open(&source).unwrap();
        let copy = dspk::open(&out).unwrap();
        assert_eq!(copy.info().channels, original.info().channels, "{name}");
        assert_eq!(
            copy.info().sample_rate,
            original.info().sample_rate,
            "{name}"
        );
        assert_eq!(stored(copy.as_ref()), stored(original.as_ref()), "{name}");

        // Again: refused without --overwrite, done with it.
        let output = dspk(&args);
        assert_eq!(output.status.code(), Some(1), "{name}");
        assert!(
            stderr(&output).contains("already exists; give --overwrite"),
            "{}",
            stderr(&output)
        );
        let mut again = args.to_vec();
        again.push("--overwrite");
        assert_eq!(dspk(&again).status.code(), Some(0), "{name}");
    }
    // The SpikeInterface folder's traces are interleaved int16 without a header: the same bytes.
    assert_eq!(
        std::fs::read(dir.join("si.dat")).unwrap(),
        std::fs::read(fixture(SI_BINARY).join("traces_cached_seg0.raw")).unwrap()
    );
    // Converting a recording onto its own data file is refused, even with --overwrite.
    let own = dir.join("si.dat");
    let output = dspk(&[
        "convert",
        own.to_str().unwrap(),
        "--to",
        "raw",
        own.to_str().unwrap(),
        "--overwrite",
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("would overwrite the recording"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_missing_recording_exits_1_naming_the_path() {
    let missing = Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-such-recording.bin");
    for command in ["info", "sort"] {
        let output = dspk(&[command, missing.to_str().unwrap()]);
        assert_eq!(output.status.code(), Some(1), "{command}");
        let text = stderr(&output);
        assert!(text.starts_with("error: "), "{text}");
        assert!(
            text.contains(missing.to_str().unwrap()),
            "{command}: {text}"
        );
        assert!(!text.contains("usage:"), "{text}");
    }
}

#[test]
fn sort_refuses_a_recording_without_a_probe_before_sorting() {
    let output = dspk(&[
        "sort",
        fixture("openephys/2024-05-01_12-00-00").to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("give one with --probe FILE"),
        "{}",
        stderr(&output)
    );
}

#[cfg(feature = "formats")]
#[test]
fn convert_to_zarr_reads_back_as_the_source() {
    let dir = scratch("zarr");
    let (source, out) = (fixture(NP1), dir.join("np1.zarr"));
    let args = [
        "convert",
        source.to_str().unwrap(),
        "--to",
        "zarr",
        out.to_str().unwrap(),
    ];
    let output = dspk(&args);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let (original, copy) = (dspk::open(&source).unwrap(), dspk::open(&out).unwrap());
    assert_eq!(copy.info().channels, original.info().channels);
    assert_eq!(stored(copy.as_ref()), stored(original.as_ref()));
    let info = dspk(&["info", out.to_str().unwrap()]);
    assert!(
        stdout(&info).contains("format:    zarr\n"),
        "{}",
        stdout(&info)
    );
    // --overwrite replaces a store, never another folder.
    let mut again = args.to_vec();
    again.push("--overwrite");
    assert_eq!(dspk(&again).status.code(), Some(0));
    let folder = dir.join("notes");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("keep.txt"), "mine").unwrap();
    let output = dspk(&[
        "convert",
        source.to_str().unwrap(),
        "--to",
        "zarr",
        folder.to_str().unwrap(),
        "--overwrite",
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("is not one"),
        "{}",
        stderr(&output)
    );
    assert!(folder.join("keep.txt").is_file());
}

/// The runtimes to sort on: those `DSPK_TEST_RUNTIMES` names (as the workspace's device tests
/// read it), else the binary's own choice.
fn test_runtimes() -> Vec<Option<String>> {
    match std::env::var("DSPK_TEST_RUNTIMES") {
        Ok(names) if !names.trim().is_empty() => names
            .split(',')
            .map(|n| Some(n.trim().to_string()))
            .collect(),
        _ => vec![None],
    }
}

#[test]
fn sort_writes_a_phy_folder_naming_the_raw_file() {
    use dspk::synapse::groundtruth::{GroundTruthConfig, GroundTruthRecording};

    let dir = scratch("sort");
    // 16 channels x 4 s with 4 units: small enough for software Vulkan.
    let recording = GroundTruthRecording::generate(&GroundTruthConfig {
        channels: 16,
        num_samples: 120_000,
        units: 4,
        seed: 7,
        ..GroundTruthConfig::default()
    })
    .unwrap();
    let data = dir.join("rec.dat");
    dspk::io::write_raw(&recording, &data, dspk::io::RawWriteOptions::default()).unwrap();
    let probe = dir.join("probe.json");
    dspk::synapse::probe::write_probeinterface(&probe, &[recording.probe().clone()]).unwrap();

    for runtime in test_runtimes() {
        let out = dir.join(format!("sorted-{}", runtime.as_deref().unwrap_or("best")));
        let args = [
            "sort",
            data.to_str().unwrap(),
            "--probe",
            probe.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--set",
            "nblocks=0",
        ];
        let mut command = Command::new(env!("CARGO_BIN_EXE_dspk"));
        command.args(args).env("NODEVICE_SELECT", "1");
        if let Some(runtime) = &runtime {
            command.env("DSPK_RUNTIME", runtime);
        }
        let output = command.output().unwrap();
        assert_eq!(
            output.status.code(),
            Some(0),
            "{runtime:?}: {}",
            stderr(&output)
        );
        let text = stdout(&output);
        for expected in [
            "format:    dspk-raw",
            "16 channels into",
            "settings:  nblocks=0 (the others Kilosort4's defaults)",
            "stage      detection:",
            "sorted:",
        ] {
            assert!(text.contains(expected), "`{expected}` missing:\n{text}");
        }
        for file in [
            "spike_times.npy",
            "spike_clusters.npy",
            "templates.npy",
            "dspk_report.txt",
            "summary.png",
        ] {
            assert!(out.join(file).is_file(), "{file} missing");
        }
        let params = std::fs::read_to_string(out.join("params.py")).unwrap();
        assert!(
            params.contains(&format!("dat_path = r'{}'", data.display())),
            "{params}"
        );
        assert!(params.contains("n_channels_dat = 16"), "{params}");
        // The same folder again: refused before sorting.
        let output = Command::new(env!("CARGO_BIN_EXE_dspk"))
            .args(args)
            .env("NODEVICE_SELECT", "1")
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1));
        assert!(
            stderr(&output).contains("already holds a Phy folder"),
            "{}",
            stderr(&output)
        );
        assert!(!stdout(&output).contains("runtime:"), "{}", stdout(&output));
    }
}

#[cfg(target_os = "linux")]
#[test]
fn sort_refuses_a_phy_folder_it_cannot_create_before_sorting() {
    let output = dspk(&[
        "sort",
        fixture(SI_BINARY).to_str().unwrap(),
        "--out",
        "/proc/dspk-sort",
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("Phy folder: /proc/dspk-sort: cannot create a folder in /proc"),
        "{}",
        stderr(&output)
    );
    assert!(!stdout(&output).contains("runtime:"), "{}", stdout(&output));
}

/// A plain int16 file of `columns` x `samples` (value = sample) and a Kilosort probe JSON of
/// `sites` sites wired to columns 0.. in a scratch folder `name`: the file and the probe.
fn plain_file(name: &str, columns: usize, samples: usize, sites: usize) -> (PathBuf, PathBuf) {
    let dir = scratch(name);
    let data = dir.join("data.bin");
    let bytes: Vec<u8> = (0..samples)
        .flat_map(|s| (0..columns).flat_map(move |_| (s as i16).to_le_bytes()))
        .collect();
    std::fs::write(&data, bytes).unwrap();
    let list = |f: &dyn Fn(usize) -> String| (0..sites).map(f).collect::<Vec<_>>().join(", ");
    let probe = dir.join("probe.json");
    std::fs::write(
        &probe,
        format!(
            "{{\"chanMap\": [{}], \"xc\": [{}], \"yc\": [{}], \"kcoords\": [{}], \"n_chan\": {sites}}}",
            list(&|c| c.to_string()),
            list(&|c| format!("{}.0", 32 * (c % 2))),
            list(&|c| format!("{}.0", 20 * (c / 2))),
            list(&|_| "0.0".to_string()),
        ),
    )
    .unwrap();
    (data, probe)
}

#[test]
fn a_plain_binary_file_is_read_with_its_channel_count_and_rate() {
    let (data, _) = plain_file("plain-info", 4, 30, 4);
    let path = data.to_str().unwrap();
    // Without a description: what no format recognises, and how to describe it.
    let output = dspk(&["info", path]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("no format recognises this path")
            && stderr(&output).contains("read with --n-chan-bin N --fs HZ"),
        "{}",
        stderr(&output)
    );
    let output = dspk(&["info", path, "--n-chan-bin", "4", "--fs", "30000"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    for expected in [
        "format:    plain-binary\n",
        "recording: 4 channels x 30 samples at 30000 Hz",
    ] {
        assert!(text.contains(expected), "`{expected}` missing:\n{text}");
    }
    // The sidecar written for later runs: then no flags are needed.
    let args = [
        "convert",
        path,
        "--to",
        "sidecar",
        "--n-chan-bin",
        "4",
        "--fs",
        "30000",
    ];
    let output = dspk(&args);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(Path::new(&format!("{path}.json")).is_file());
    let output = dspk(&["info", path]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("format:    dspk-raw\n"),
        "{}",
        stdout(&output)
    );
    let output = dspk(&args);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("already exists"),
        "{}",
        stderr(&output)
    );
    // A sidecar broken by hand says where.
    std::fs::write(format!("{path}.json"), "{\"format\": \"dspk-raw\",, }").unwrap();
    let output = dspk(&["info", path]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains(&format!(
            "{path}.json: invalid JSON: key must be a string at line 1 column 23"
        )),
        "{}",
        stderr(&output)
    );
}

#[test]
fn sort_reads_a_plain_file_leaves_the_sync_channel_out_and_checks_the_device_index() {
    // 385 columns (384 sites and SpikeGLX's sync channel) and a 384-site probe.
    let (data, probe) = plain_file("plain-sort", 385, 30, 384);
    let (path, probe) = (data.to_str().unwrap(), probe.to_str().unwrap());
    let out = data.with_file_name("sorted");
    // A wrong channel count: refused with the arithmetic, before anything else.
    let output = dspk(&[
        "sort",
        path,
        "--set",
        "n_chan_bin=384",
        "--set",
        "fs=30000",
        "--probe",
        probe,
    ]);
    assert_eq!(output.status.code(), Some(1));
    let text = stderr(&output);
    assert!(
        text.contains("23100 bytes is not a whole number of samples of 384 channels of int16")
            && text.contains("23100 = 30 x 768 + 60")
            && text.contains("385"),
        "{text}"
    );
    for runtime in test_runtimes() {
        let mut command = Command::new(env!("CARGO_BIN_EXE_dspk"));
        command
            .args([
                "sort",
                path,
                "--n-chan-bin",
                "385",
                "--fs",
                "30000",
                "--probe",
                probe,
                "--out",
                out.to_str().unwrap(),
                "--device",
                "7",
            ])
            .env("NODEVICE_SELECT", "1");
        if let Some(runtime) = &runtime {
            command.env("DSPK_RUNTIME", runtime);
        }
        let output = command.output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{runtime:?}");
        let text = stdout(&output);
        for expected in [
            "format:    plain-binary\n",
            "recording: 385 channels x 30 samples",
            "probe:     384 contacts, from ",
            "; channel 384 of 385 (SpikeGLX's sync channel) is not on the probe and is not sorted",
        ] {
            assert!(text.contains(expected), "`{expected}` missing:\n{text}");
        }
        let error = stderr(&output);
        assert!(
            error.contains("device 7 of the")
                && error.contains("runtime was asked for, but it has"),
            "{error}"
        );
    }
}
