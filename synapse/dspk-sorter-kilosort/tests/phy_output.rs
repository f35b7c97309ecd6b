//! The sorter's Phy folder (`docs/KILOSORT4.md` §9): a hand-made sorting written with
//! `write_phy_folder` and read back with dspk-synapse's `read_phy` and `NpyArray`, field by
//! field and dtype by dtype; existing folders, disagreeing sortings and an empty sorting.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use dspk_io::NpyArray;
use dspk_sorter_kilosort::export::phy::{PhyOutput, write_phy_folder};
use dspk_sorter_kilosort::export::sorting::{Sorting, UnitLabel};
use dspk_sorter_kilosort::{Error, KilosortSettings};
use dspk_synapse::phy::{PhyParams, read_phy};

/// Channels sorted.
const CHANNELS: usize = 6;
/// Columns of the raw file (the sorted channels are a subset).
const COLUMNS: usize = 8;
/// Samples in the recording.
const SAMPLES: u64 = 30_000;
/// Sample rate, Hz.
const RATE: f64 = 30_000.0;

/// A fresh folder under the system's temporary folder, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let path =
            std::env::temp_dir().join(format!("dspk-sort-phy-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create temp dir");
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A deterministic generator (64-bit LCG, high bits).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in [-1, 1).
    fn signed(&mut self) -> f32 {
        (self.next() as f32 / (1u64 << 31) as f32) * 2.0 - 1.0
    }
}

/// A small sorting whose parts agree: `units` units, `spikes` kept spikes in time order (some
/// at the same sample), duplicates dropped between them, 11-sample templates, 3 components on
/// 4 feature channels.
fn sorting(units: usize, spikes: usize) -> Sorting {
    let (nt, p, pc_channels) = (11, 3, 4);
    let mut rng = Lcg(0x5eed ^ ((units as u64) << 16) ^ spikes as u64);
    let mut spike_times: Vec<i64> = (0..spikes).map(|_| rng.below(SAMPLES) as i64).collect();
    spike_times.sort_unstable();
    if spikes > 2 {
        spike_times[1] = spike_times[0];
    }
    let spike_clusters: Vec<u32> = (0..spikes)
        .map(|i| {
            if i < units {
                i as u32
            } else {
                rng.below(units as u64) as u32
            }
        })
        .collect();
    let spike_templates = spike_clusters
        .iter()
        .map(|&u| 2 * u + rng.below(2) as u32)
        .collect();
    let mut kept = Vec::new();
    for i in 0..spikes {
        if i % 7 == 3 {
            kept.push(false);
        }
        kept.push(true);
    }
    let pc_feature_ind = (0..units)
        .flat_map(|k| (0..pc_channels).map(move |i| ((k + i) % CHANNELS) as u32))
        .collect();
    let mut values = |count: usize, scale: f32| -> Vec<f32> {
        (0..count).map(|_| scale * rng.signed()).collect()
    };
    let amplitudes = values(spikes, 5.0).iter().map(|a| 10.0 + a).collect();
    let pc_features = values(spikes * p * pc_channels, 3.0);
    let unit_features = values(units * CHANNELS * p, 2.0);
    let templates = values(units * nt * CHANNELS, 1.0);
    let similar_templates = (0..units * units)
        .map(|i| {
            if i / units.max(1) == i % units.max(1) {
                1.0
            } else {
                0.25
            }
        })
        .collect();
    let contamination_pct = (0..units).map(|k| 12.25 * k as f64 + 0.05).collect();
    let unit_amplitudes = (0..units).map(|k| 20.0 + 3.37 * k as f32).collect();
    let spike_positions = (0..spikes)
        .map(|i| [16.0 + (i % 3) as f32, 20.0 * (i % 5) as f32 + 0.5])
        .collect();
    let labels = (0..units)
        .map(|k| {
            if k % 2 == 0 {
                UnitLabel::Good
            } else {
                UnitLabel::Mua
            }
        })
        .collect();
    Sorting {
        sample_rate: RATE,
        num_samples: SAMPLES,
        channels: CHANNELS,
        nt,
        nt0min: 4,
        p,
        spike_times,
        spike_clusters,
        spike_templates,
        amplitudes,
        spike_positions,
        kept,
        pc_features,
        pc_feature_ind,
        pc_channels,
        unit_features,
        templates,
        labels,
        contamination_pct,
        unit_amplitudes,
        similar_templates,
        shadow_units: 0,
    }
}

/// The probe and run around a sorting: channels 1..=6 of an 8-column int16 file, two shanks,
/// a symmetric positive definite whitening matrix.
struct Run {
    channel_map: Vec<u32>,
    channel_positions: Vec<[f32; 2]>,
    channel_shanks: Vec<u32>,
    whitening: Vec<f64>,
}

impl Run {
    fn new() -> Self {
        let whitening = (0..CHANNELS * CHANNELS)
            .map(|i| {
                let (r, c) = (i / CHANNELS, i % CHANNELS);
                if r == c {
                    1.5 + 0.1 * r as f64
                } else {
                    0.2 / (r.abs_diff(c) as f64).powi(2)
                }
            })
            .collect();
        Self {
            channel_map: (1..=CHANNELS as u32).collect(),
            channel_positions: (0..CHANNELS)
                .map(|c| {
                    [
                        if c < 3 { 0.0 } else { 250.0 },
                        20.0 * (c % 3) as f32 + 0.25,
                    ]
                })
                .collect(),
            channel_shanks: (0..CHANNELS as u32).map(|c| c / 3).collect(),
            whitening,
        }
    }

    fn output<'a>(&'a self, sorting: &'a Sorting, dat_path: &Path) -> PhyOutput<'a> {
        PhyOutput {
            sorting,
            channel_map: &self.channel_map,
            channel_positions: &self.channel_positions,
            channel_shanks: &self.channel_shanks,
            whitening: &self.whitening,
            params: PhyParams::new(dat_path, COLUMNS, RATE),
            settings_json: KilosortSettings::default().to_json(),
            report: "preprocessing: 0.1 s\ndetection: 3 spikes\n".into(),
        }
    }
}

/// Reads `name` in `dir`, checks its dtype and shape, and returns its values as `f64`.
fn npy_f64(dir: &Path, name: &str, dtype: &str, shape: &[u64]) -> Vec<f64> {
    let array = NpyArray::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(array.dtype().to_string(), dtype, "{name} dtype");
    assert_eq!(array.shape(), shape, "{name} shape");
    assert!(!array.fortran_order(), "{name} C order");
    array.to_f64().unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Reads `name` in `dir`, checks its dtype and shape, and returns its values as `i64`.
fn npy_i64(dir: &Path, name: &str, dtype: &str, shape: &[u64]) -> Vec<i64> {
    let array = NpyArray::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(array.dtype().to_string(), dtype, "{name} dtype");
    assert_eq!(array.shape(), shape, "{name} shape");
    array.to_i64().unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Python's `'%.1f' % v` for the values the fixtures use (no ties, all positive).
fn one_decimal(v: f64) -> String {
    format!("{v:.1}")
}

/// Reads the folder `dir` back and compares every file with what `output` says.
fn assert_reads_back(dir: &Path, output: &PhyOutput) {
    let s = output.sorting;
    let (n, units, c) = (s.num_spikes(), s.num_units(), s.channels);
    let folder = read_phy(dir).expect("read_phy");
    assert_eq!(folder.params, output.params);
    assert_eq!(folder.spike_times, s.spike_times);
    assert_eq!(folder.spike_clusters, s.spike_clusters);
    assert_eq!(folder.spike_templates, s.spike_clusters, "template = unit");
    assert_eq!(folder.amplitudes.as_ref(), Some(&s.amplitudes));
    assert_eq!(folder.templates.shape(), [units, s.nt, c]);
    assert_eq!(folder.templates.values(), s.templates);
    let table = folder
        .template_channels
        .as_ref()
        .expect("templates_ind.npy");
    assert_eq!(table.shape(), [units, c]);
    let every: Vec<i64> = (0..units).flat_map(|_| 0..c as i64).collect();
    assert_eq!(table.values(), every);
    assert_eq!(folder.channel_map, output.channel_map);
    let positions: Vec<[f64; 2]> = output
        .channel_positions
        .iter()
        .map(|&[x, y]| [f64::from(x), f64::from(y)])
        .collect();
    assert_eq!(folder.channel_positions, positions);
    let similar = folder.similar_templates.as_ref().expect("similar");
    assert_eq!(similar.shape(), [units, units]);
    assert_eq!(similar.values(), s.similar_templates);
    let wrot = folder.whitening_mat.as_ref().expect("whitening_mat");
    assert_eq!(wrot.shape(), [c, c]);
    assert_eq!(wrot.values(), output.whitening);
    let inverse = folder
        .whitening_mat_inv
        .as_ref()
        .expect("whitening_mat_inv");
    assert_eq!(inverse.shape(), [c, c]);
    for i in 0..c {
        for j in 0..c {
            let product: f64 = (0..c)
                .map(|k| {
                    let ridge = if i == k { 1e-5 } else { 0.0 };
                    (output.whitening[i * c + k] + ridge) * inverse.values()[k * c + j]
                })
                .sum();
            let eye = if i == j { 1.0 } else { 0.0 };
            assert!(
                (product - eye).abs() < 1e-12,
                "(Wrot + 1e-5 I) inv [{i}, {j}] = {product}"
            );
        }
    }
    let features = folder.pc_features.as_ref().expect("pc_features");
    assert_eq!(features.shape(), [n, s.p, s.pc_channels]);
    assert_eq!(features.values(), s.pc_features);
    let ind = folder.pc_feature_ind.as_ref().expect("pc_feature_ind");
    assert_eq!(ind.shape(), [units, s.pc_channels]);
    assert_eq!(ind.values(), s.pc_feature_ind);

    let by_unit = |value: &dyn Fn(usize) -> String| -> BTreeMap<u32, String> {
        (0..units).map(|k| (k as u32, value(k))).collect()
    };
    let labels = by_unit(&|k| s.labels[k].as_str().to_string());
    let columns: Vec<(&str, &str, BTreeMap<u32, String>)> = folder
        .cluster_columns
        .iter()
        .map(|col| (col.file.as_str(), col.name.as_str(), col.values.clone()))
        .collect();
    let mut expected = vec![
        (
            "cluster_Amplitude.tsv",
            "Amplitude",
            by_unit(&|k| one_decimal(f64::from(s.unit_amplitudes[k]))),
        ),
        (
            "cluster_ContamPct.tsv",
            "ContamPct",
            by_unit(&|k| one_decimal(s.contamination_pct[k])),
        ),
        ("cluster_KSLabel.tsv", "KSLabel", labels.clone()),
        ("cluster_group.tsv", "KSLabel", labels),
    ];
    expected.sort_by(|a, b| a.0.cmp(b.0));
    assert_eq!(columns, expected);
    let label_text = std::fs::read(dir.join("cluster_KSLabel.tsv")).expect("KSLabel");
    let group_text = std::fs::read(dir.join("cluster_group.tsv")).expect("group");
    assert_eq!(label_text, group_text, "cluster_group.tsv is a copy");

    let n64 = n as u64;
    let detection = npy_i64(dir, "spike_detection_templates.npy", "<i4", &[n64]);
    let want: Vec<i64> = s.spike_templates.iter().map(|&t| i64::from(t)).collect();
    assert_eq!(detection, want);
    let spike_positions = npy_f64(dir, "spike_positions.npy", "<f4", &[n64, 2]);
    let want: Vec<f64> = s
        .spike_positions
        .iter()
        .flatten()
        .map(|&v| f64::from(v))
        .collect();
    assert_eq!(spike_positions, want);
    let kept = npy_i64(dir, "kept_spikes.npy", "|b1", &[s.kept.len() as u64]);
    let want: Vec<i64> = s.kept.iter().map(|&k| i64::from(k)).collect();
    assert_eq!(kept, want);
    let templates_ind = npy_i64(dir, "templates_ind.npy", "<i8", &[units as u64, c as u64]);
    assert_eq!(templates_ind, every);
    let shanks = npy_i64(dir, "channel_shanks.npy", "<i4", &[c as u64]);
    let want: Vec<i64> = output
        .channel_shanks
        .iter()
        .map(|&v| i64::from(v))
        .collect();
    assert_eq!(shanks, want);
    let wrot_dat = npy_f64(dir, "whitening_mat_dat.npy", "<f4", &[c as u64, c as u64]);
    let want: Vec<f64> = output
        .whitening
        .iter()
        .map(|&v| f64::from(v as f32))
        .collect();
    assert_eq!(wrot_dat, want);
    for (name, dtype, shape) in [
        ("spike_times.npy", "<i8", vec![n64]),
        ("spike_clusters.npy", "<i4", vec![n64]),
        ("spike_templates.npy", "<i4", vec![n64]),
        ("amplitudes.npy", "<f4", vec![n64]),
        (
            "templates.npy",
            "<f4",
            vec![units as u64, s.nt as u64, c as u64],
        ),
        (
            "similar_templates.npy",
            "<f4",
            vec![units as u64, units as u64],
        ),
        (
            "pc_features.npy",
            "<f4",
            vec![n64, s.p as u64, s.pc_channels as u64],
        ),
        (
            "pc_feature_ind.npy",
            "<i4",
            vec![units as u64, s.pc_channels as u64],
        ),
        ("channel_map.npy", "<i4", vec![c as u64]),
        ("channel_positions.npy", "<f4", vec![c as u64, 2]),
        ("whitening_mat.npy", "<f8", vec![c as u64, c as u64]),
        ("whitening_mat_inv.npy", "<f8", vec![c as u64, c as u64]),
    ] {
        let array = NpyArray::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            (array.dtype().to_string().as_str(), array.shape()),
            (dtype, shape.as_slice()),
            "{name}"
        );
    }
    let settings = std::fs::read_to_string(dir.join("dspk_settings.json")).expect("settings");
    assert_eq!(settings, output.settings_json);
    KilosortSettings::from_json(&settings).expect("the settings read back");
    let report = std::fs::read_to_string(dir.join("dspk_report.txt")).expect("report");
    assert_eq!(report, output.report);
}

#[test]
fn writes_and_reads_back() {
    let dir = TempDir::new("roundtrip");
    let sorting = sorting(4, 300);
    assert_eq!(sorting.trains().iter().filter(|t| t.is_empty()).count(), 0);
    let run = Run::new();
    let output = run.output(&sorting, &dir.0.join("recording.dat"));
    write_phy_folder(&dir.0, &output, false).expect("write");
    assert_reads_back(&dir.0, &output);
}

#[test]
fn refuses_an_existing_folder_without_overwrite() {
    let dir = TempDir::new("existing");
    let run = Run::new();
    let first = sorting(4, 300);
    write_phy_folder(&dir.0, &run.output(&first, Path::new("a.dat")), false).expect("write");
    let second = sorting(3, 120);
    let output = run.output(&second, Path::new("b.dat"));
    let error = write_phy_folder(&dir.0, &output, false).expect_err("an existing folder");
    assert!(matches!(error, Error::Synapse(_)), "{error:?}");
    assert!(
        error.to_string().contains("already holds a Phy folder"),
        "{error}"
    );
    // Untouched: the first sort reads back.
    assert_reads_back(&dir.0, &run.output(&first, Path::new("a.dat")));
    write_phy_folder(&dir.0, &output, true).expect("overwrite");
    assert_reads_back(&dir.0, &output);
}

#[test]
fn refuses_parts_that_disagree() {
    let good = sorting(4, 300);
    let run = Run::new();
    type Spoil = fn(&mut Sorting);
    let cases: [(&str, &str, Spoil); 12] = [
        ("Sorting::amplitudes", "299 values, expected 300", |s| {
            s.amplitudes.pop();
        }),
        ("Sorting::spike_clusters", "301 values, expected 300", |s| {
            s.spike_clusters.push(0)
        }),
        ("Sorting::spike_templates", "expected 300", |s| {
            s.spike_templates.clear()
        }),
        ("Sorting::spike_positions", "expected 300", |s| {
            s.spike_positions.truncate(5)
        }),
        ("Sorting::kept", "301 spikes marked kept", |s| {
            s.kept.push(true)
        }),
        (
            "Sorting::pc_features",
            "[kept spikes, p, pc_channels]",
            |s| {
                s.pc_features.pop();
            },
        ),
        ("Sorting::templates", "[units, nt, channels]", |s| s.nt += 1),
        ("Sorting::contamination_pct", "expected 4", |s| {
            s.contamination_pct.push(1.0)
        }),
        ("Sorting::similar_templates", "expected 16", |s| {
            s.similar_templates.truncate(4)
        }),
        (
            "Sorting::spike_clusters",
            "in unit 4, the sorting has 4 units",
            |s| {
                s.spike_clusters[10] = 4;
            },
        ),
        ("Sorting::spike_times", "times must not decrease", |s| {
            s.spike_times.swap(20, 200)
        }),
        (
            "Sorting::spike_times",
            "outside the recording's 100 samples",
            |s| {
                s.num_samples = 100;
            },
        ),
    ];
    for (what, reason, spoil) in cases {
        let dir = TempDir::new("spoiled");
        let mut bad = good.clone();
        spoil(&mut bad);
        let error =
            write_phy_folder(&dir.0, &run.output(&bad, Path::new("r.dat")), false).expect_err(what);
        match &error {
            Error::Input {
                what: field,
                reason: why,
            } => {
                assert_eq!(*field, what, "{error}");
                assert!(why.contains(reason), "{what}: {why}");
            }
            other => panic!("{what}: expected Error::Input, got {other:?}"),
        }
        let written = std::fs::read_dir(&dir.0).expect("list").count();
        assert_eq!(written, 0, "{what}: nothing written before the check");
    }

    let dir = TempDir::new("spoiled-run");
    let mut short = Run::new();
    short.channel_shanks.pop();
    let error = write_phy_folder(&dir.0, &short.output(&good, Path::new("r.dat")), false)
        .expect_err("shanks");
    assert!(
        matches!(
            error,
            Error::Input {
                what: "PhyOutput::channel_shanks",
                ..
            }
        ),
        "{error}"
    );
    let mut output = run.output(&good, Path::new("r.dat"));
    output.params.sample_rate = 25_000.0;
    let error = write_phy_folder(&dir.0, &output, false).expect_err("rate");
    assert!(
        matches!(
            error,
            Error::Input {
                what: "PhyOutput::params",
                ..
            }
        ),
        "{error}"
    );
    let mut output = run.output(&good, Path::new("r.dat"));
    output.params.n_channels_dat = CHANNELS;
    let error = write_phy_folder(&dir.0, &output, false).expect_err("columns");
    assert!(
        matches!(
            error,
            Error::Input {
                what: "PhyOutput::channel_map",
                ..
            }
        ),
        "{error}"
    );
    let mut singular = Run::new();
    singular.whitening = vec![0.0; CHANNELS * CHANNELS];
    singular.whitening[0] = -1e-5;
    let error = write_phy_folder(&dir.0, &singular.output(&good, Path::new("r.dat")), false)
        .expect_err("singular");
    assert!(
        matches!(
            error,
            Error::Input {
                what: "PhyOutput::whitening",
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn empty_sorting_reads_back() {
    let dir = TempDir::new("empty");
    let empty = sorting(0, 0);
    assert_eq!((empty.num_units(), empty.num_spikes()), (0, 0));
    let run = Run::new();
    let output = run.output(&empty, Path::new("recording.dat"));
    write_phy_folder(&dir.0, &output, false).expect("write");
    assert_reads_back(&dir.0, &output);
}

/// Writes a folder (and its raw file) for `tests/phy_output_check.py`, which opens it with
/// phylib and SpikeInterface:
/// `DSPK_SORT_PHY_OUT=/tmp/sort-phy cargo test -p dspk-sorter-kilosort --test phy_output --
/// --ignored --exact write_for_python`. The folder is `<out>/phy`; what was written is in
/// `<out>/written.json`.
#[test]
#[ignore = "writes a folder for tests/phy_output_check.py; needs DSPK_SORT_PHY_OUT"]
fn write_for_python() {
    let out = PathBuf::from(std::env::var("DSPK_SORT_PHY_OUT").expect("DSPK_SORT_PHY_OUT"));
    let dir = out.join("phy");
    let sorting = sorting(4, 300);
    let run = Run::new();
    let output = run.output(&sorting, Path::new("recording.dat"));
    std::fs::create_dir_all(&dir).expect("create");
    write_phy_folder(&dir, &output, true).expect("write");
    let raw: Vec<u8> = (0..SAMPLES)
        .flat_map(|t| {
            (0..COLUMNS as u64)
                .flat_map(move |c| (((t * 7 + c * 13) % 200) as i16 - 100).to_le_bytes())
        })
        .collect();
    std::fs::write(dir.join("recording.dat"), raw).expect("recording.dat");
    let labels: BTreeMap<String, &str> = sorting
        .labels
        .iter()
        .enumerate()
        .map(|(k, l)| (k.to_string(), l.as_str()))
        .collect();
    let written = serde_json::json!({
        "spike_times": sorting.spike_times,
        "spike_clusters": sorting.spike_clusters,
        "spike_detection_templates": sorting.spike_templates,
        "amplitudes": sorting.amplitudes,
        "spike_positions": sorting.spike_positions,
        "templates_shape": [sorting.num_units(), sorting.nt, sorting.channels],
        "templates": sorting.templates,
        "channel_map": run.channel_map,
        "channel_shanks": run.channel_shanks,
        "KSLabel": labels,
        "ContamPct": sorting.contamination_pct,
        "Amplitude": sorting.unit_amplitudes,
        "sample_rate": RATE,
        "num_samples": SAMPLES,
        "n_channels_dat": COLUMNS,
    });
    std::fs::write(
        out.join("written.json"),
        serde_json::to_string_pretty(&written).expect("json"),
    )
    .expect("written.json");
}
