//! Phy folders: the three fixtures (`tests/fixtures/phy/`) read with the values of their
//! `expected.json` and README, write -> read round trips, and bad folders refused with errors
//! naming the file.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{
    CHANNELS, SAMPLES, expected, fixture, i16s, matrix_channel_major, matrix_value, writable_copy,
};
use dspk_io::NpyArray;
use dspk_io::{Detection, Format};
use dspk_synapse::Error;
use dspk_synapse::phy::{
    Array, ClusterColumn, ParamValue, PhyFolder, PhyFormat, PhyParams, PhyWriteOptions, read_phy,
    write_phy,
};
use serde_json::Value;

/// A fresh folder under the system's temporary folder, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!("dspk-phy-{name}-{}", std::process::id()));
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

/// Copies a fixture folder into a fresh temporary folder.
fn copy_fixture(style: &str, name: &str) -> TempDir {
    let dir = TempDir::new(name);
    writable_copy(&fixture(&format!("phy/{style}")), &dir.0);
    dir
}

fn read_fixture(style: &str) -> PhyFolder {
    read_phy(fixture(&format!("phy/{style}"))).unwrap_or_else(|e| panic!("phy/{style} reads: {e}"))
}

/// The spike trains of `expected.json`'s `spikes`.
fn expected_trains() -> BTreeMap<u32, Vec<i64>> {
    let spikes = &expected("phy")["spikes"];
    spikes
        .as_object()
        .expect("spikes object")
        .iter()
        .map(|(unit, times)| {
            let times = times
                .as_array()
                .expect("times")
                .iter()
                .map(|t| t.as_i64().expect("integer time"))
                .collect();
            (unit.parse().expect("unit id"), times)
        })
        .collect()
}

/// The shape `expected.json` gives for `file` in `files`, with the `(n, 1)` vectors squeezed
/// as the reader returns them.
fn expected_shape(files: &Value, file: &str) -> Vec<usize> {
    let shape: Vec<usize> = files[file]["shape"]
        .as_array()
        .unwrap_or_else(|| panic!("{file} shape"))
        .iter()
        .map(|d| usize::try_from(d.as_u64().expect("dimension")).expect("usize"))
        .collect();
    shape
}

/// Checks what the three fixtures have in common (same spikes and channels).
fn check_common(folder: &PhyFolder, files: &Value) {
    assert_eq!(folder.spike_trains(), expected_trains());
    let mut times = folder.spike_times.clone();
    times.sort_unstable();
    assert_eq!(folder.spike_times, times, "spike times are sorted");
    assert_eq!(folder.spike_clusters, folder.spike_templates);
    assert_eq!(
        folder.num_spikes(),
        expected_shape(files, "spike_times.npy")[0]
    );
    assert_eq!(
        folder.templates.shape(),
        expected_shape(files, "templates.npy")
    );
    assert_eq!(
        folder.num_templates(),
        expected("phy")["phylib_n_templates"].as_u64().expect("n") as usize
    );
    assert_eq!(
        folder.num_channels(),
        expected("phy")["phylib_n_channels"].as_u64().expect("n") as usize
    );
    assert_eq!(folder.channel_map, [0, 1, 2, 3]);
    // README: channel_positions = [[0,0],[0,20],[16,40],[16,60]].
    assert_eq!(
        folder.channel_positions,
        [[0.0, 0.0], [0.0, 20.0], [16.0, 40.0], [16.0, 60.0]]
    );
    let amplitudes = folder.amplitudes.as_ref().expect("amplitudes");
    assert_eq!(amplitudes.len(), folder.num_spikes());
    let similar = folder
        .similar_templates
        .as_ref()
        .expect("similar templates");
    assert_eq!(
        similar.shape(),
        expected_shape(files, "similar_templates.npy")
    );
    assert_eq!(similar.get(&[1, 1]), Some(&1.0));
    assert_eq!(similar.get(&[0, 1]), similar.get(&[1, 0]));
    let wmi = folder
        .whitening_mat_inv
        .as_ref()
        .expect("whitening_mat_inv");
    assert_eq!(wmi.shape(), expected_shape(files, "whitening_mat_inv.npy"));
    let features = folder.pc_features.as_ref().expect("pc_features");
    assert_eq!(features.shape(), expected_shape(files, "pc_features.npy"));
    let ind = folder.pc_feature_ind.as_ref().expect("pc_feature_ind");
    assert_eq!(ind.shape(), expected_shape(files, "pc_feature_ind.npy"));
    assert_eq!(ind.values(), [0, 1, 2, 3].repeat(3));
    let params = &folder.params;
    assert_eq!(params.dat_path, [PathBuf::from("recording.dat")]);
    assert_eq!(params.n_channels_dat, CHANNELS);
    assert_eq!(params.dtype.to_string(), "<i2");
    assert_eq!(params.offset, 0);
    assert_eq!(params.sample_rate, 30000.0);
    assert!(!params.hp_filtered);
}

/// A label column as `cluster -> label`.
fn labels(column: &ClusterColumn) -> Vec<&str> {
    column.values.values().map(String::as_str).collect()
}

#[test]
fn si_export_reads_as_written() {
    let folder = read_fixture("si_export");
    let all = expected("phy");
    check_common(&folder, &all["files"]);
    // README: 14 spikes sorted by time.
    let times: Vec<i64> = [
        200, 300, 450, 700, 950, 1200, 1300, 1450, 1700, 1950, 2200, 2300, 2450, 2700,
    ]
    .to_vec();
    assert_eq!(folder.spike_times, times);
    assert_eq!(
        folder.spike_clusters,
        [0, 2, 1, 0, 1, 0, 2, 1, 0, 1, 0, 2, 1, 0]
    );
    assert_eq!(folder.params.template_scaling, None);
    assert!(folder.params.other.is_empty());
    assert!(folder.template_channels.is_none(), "no template_ind.npy");
    assert!(folder.whitening_mat.is_none());
    let group = folder.cluster_column("group").expect("group column");
    assert_eq!(group.file, "cluster_group.tsv");
    assert_eq!(labels(group), ["unsorted"; 3]);
    // Every cluster_*.tsv is kept, in file name order, and matches expected.json's text.
    let files: Vec<&str> = folder
        .cluster_columns
        .iter()
        .map(|c| c.file.as_str())
        .collect();
    assert_eq!(
        files,
        [
            "cluster_channel_group.tsv",
            "cluster_group.tsv",
            "cluster_si_unit_ids.tsv"
        ]
    );
    for column in &folder.cluster_columns {
        let text = all["files"][column.file.as_str()]
            .as_str()
            .expect("tsv text");
        let mut rebuilt = format!("cluster_id\t{}\n", column.name);
        for (id, value) in &column.values {
            rebuilt.push_str(&format!("{id}\t{value}\n"));
        }
        assert_eq!(rebuilt, text, "{}", column.file);
    }
}

#[test]
fn ks25_style_reads_fortran_order_and_crlf() {
    let folder = read_fixture("ks25_style");
    let all = expected("phy");
    let files = &all["ks25_style"]["files"];
    check_common(&folder, files);
    assert_eq!(folder.params.template_scaling, Some(20.0));
    let kslabel = folder.cluster_column("KSLabel").expect("KSLabel");
    let want: Vec<&str> = all["ks25_style"]["KSLabel"]
        .as_array()
        .expect("labels")
        .iter()
        .map(|v| v.as_str().expect("label"))
        .collect();
    assert_eq!(labels(kslabel), want);
    let names: Vec<&str> = folder
        .cluster_columns
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    let mut fields: Vec<&str> = all["ks25_style"]["phylib_metadata_fields"]
        .as_array()
        .expect("fields")
        .iter()
        .map(|v| v.as_str().expect("field"))
        .collect();
    fields.sort_unstable();
    assert_eq!(names, fields);
    // templates_ind.npy (float64, Fortran order) lists every channel for every template.
    let table = folder
        .template_channels
        .as_ref()
        .expect("templates_ind.npy");
    assert_eq!(table.shape(), expected_shape(files, "templates_ind.npy"));
    assert_eq!(table.values(), [0, 1, 2, 3].repeat(3));
    assert!(folder.whitening_mat.is_some());
}

#[test]
fn ks4_style_reads() {
    let folder = read_fixture("ks4_style");
    let all = expected("phy");
    check_common(&folder, &all["ks4_style"]["files"]);
    let want: Vec<&str> = all["ks4_style"]["KSLabel"]
        .as_array()
        .expect("labels")
        .iter()
        .map(|v| v.as_str().expect("label"))
        .collect();
    let kslabel = folder.cluster_column("KSLabel").expect("KSLabel");
    assert_eq!(kslabel.file, "cluster_KSLabel.tsv");
    assert_eq!(labels(kslabel), want);
    // Kilosort 4 writes cluster_group.tsv with a `KSLabel` header too.
    let group_file = folder
        .cluster_columns
        .iter()
        .find(|c| c.file == "cluster_group.tsv")
        .expect("cluster_group.tsv");
    assert_eq!(group_file.name, "KSLabel");
    assert_eq!(labels(group_file), want);
}

#[test]
fn the_three_styles_hold_the_same_arrays() {
    let si = read_fixture("si_export");
    let ks25 = read_fixture("ks25_style");
    let ks4 = read_fixture("ks4_style");
    // ks25's Fortran-order float32 templates equal ks4's C-order ones, and the float64
    // templates of the SpikeInterface export rounded to float32.
    assert_eq!(ks25.templates, ks4.templates);
    assert_eq!(si.templates, ks4.templates);
    assert_eq!(ks25.pc_features, ks4.pc_features);
    assert_eq!(si.pc_features, ks4.pc_features);
    assert_eq!(ks25.amplitudes, ks4.amplitudes);
    assert_eq!(ks25.similar_templates, ks4.similar_templates);
    assert_eq!(ks25.whitening_mat, ks4.whitening_mat);
    assert_eq!(si.spike_times, ks4.spike_times);
    // The templates are not all zeros (a real waveform somewhere on every template).
    let shape = ks4.templates.shape();
    for unit in 0..shape[0] {
        let peak = (0..shape[1] * shape[2])
            .map(|i| ks4.templates.values()[unit * shape[1] * shape[2] + i].abs())
            .fold(0.0f32, f32::max);
        assert!(peak > 100.0, "template {unit} peak {peak}");
    }
}

/// A small sorting built here: three templates over four channels, a fourth cluster split off
/// template 0, labels, and values chosen to exercise each dtype.
fn synthetic() -> PhyFolder {
    let trains = expected_trains();
    let mut spikes: Vec<(i64, u32)> = trains
        .iter()
        .flat_map(|(&unit, times)| times.iter().map(move |&t| (t, unit)))
        .collect();
    spikes.sort_unstable();
    let spike_times: Vec<i64> = spikes.iter().map(|s| s.0).collect();
    let spike_templates: Vec<u32> = spikes.iter().map(|s| s.1).collect();
    // Spikes of template 0 after sample 1500 become cluster 3 (a split in phy).
    let spike_clusters: Vec<u32> = spikes
        .iter()
        .map(|&(t, unit)| if unit == 0 && t > 1500 { 3 } else { unit })
        .collect();
    let amplitudes = (0..spikes.len()).map(|i| 10.0 + i as f32 * 0.5).collect();
    let (units, samples) = (3, 30);
    let templates: Vec<f32> = (0..units * samples * CHANNELS)
        .map(|i| {
            let (u, s, c) = (
                i / (samples * CHANNELS),
                i / CHANNELS % samples,
                i % CHANNELS,
            );
            let shape = -((s as f32 - 10.0) / 3.0).powi(2);
            (u as f32 + 1.0) * 50.0 * shape.exp() * (1.0 - 0.2 * c as f32) - 0.25 * c as f32
        })
        .collect();
    let mut params = PhyParams::new("recording.dat", CHANNELS, 30000.0);
    params
        .other
        .insert("note".into(), ParamValue::Str("written by dspk".into()));
    let column = |name: &str, values: &[&str]| {
        ClusterColumn::new(
            name,
            values
                .iter()
                .enumerate()
                .map(|(i, v)| (i as u32, (*v).to_string()))
                .collect(),
        )
    };
    PhyFolder {
        params,
        spike_times,
        spike_templates,
        spike_clusters,
        amplitudes: Some(amplitudes),
        templates: Array::new(vec![units, samples, CHANNELS], templates).expect("templates"),
        template_channels: None,
        channel_map: vec![0, 1, 2, 3],
        channel_positions: vec![[0.0, 0.0], [0.0, 20.0], [16.0, 40.0], [16.0, 60.0]],
        similar_templates: Some(
            Array::new(
                vec![units, units],
                vec![1.0, 0.5, 0.25, 0.5, 1.0, 0.125, 0.25, 0.125, 1.0],
            )
            .expect("similar"),
        ),
        whitening_mat: None,
        whitening_mat_inv: Some(
            Array::new(
                vec![CHANNELS, CHANNELS],
                (0..CHANNELS * CHANNELS)
                    .map(|i| if i % 5 == 0 { 2.0 } else { 0.0 })
                    .collect(),
            )
            .expect("wmi"),
        ),
        pc_features: None,
        pc_feature_ind: None,
        cluster_columns: vec![
            column("KSLabel", &["good", "mua", "good", "good"]),
            column("group", &["good", "noise", "unsorted", "mua"]),
        ],
    }
}

#[test]
fn write_then_read_is_equal() {
    let dir = TempDir::new("round-trip");
    let folder = synthetic();
    write_phy(&dir.0, &folder, &PhyWriteOptions::default()).expect("write");
    let back = read_phy(&dir.0).expect("read back");
    assert_eq!(back, folder);
    // The dtypes and shapes Kilosort 4 writes.
    let dtype = |name: &str| {
        let array = NpyArray::read(dir.0.join(name)).expect(name);
        (array.dtype().to_string(), array.shape().to_vec())
    };
    let n = folder.num_spikes() as u64;
    assert_eq!(dtype("spike_times.npy"), ("<i8".into(), vec![n]));
    assert_eq!(dtype("spike_templates.npy"), ("<i4".into(), vec![n]));
    assert_eq!(dtype("spike_clusters.npy"), ("<i4".into(), vec![n]));
    assert_eq!(dtype("amplitudes.npy"), ("<f4".into(), vec![n]));
    assert_eq!(dtype("templates.npy"), ("<f4".into(), vec![3, 30, 4]));
    assert_eq!(dtype("channel_map.npy"), ("<i4".into(), vec![4]));
    assert_eq!(dtype("channel_positions.npy"), ("<f4".into(), vec![4, 2]));
    assert_eq!(dtype("whitening_mat_inv.npy"), ("<f8".into(), vec![4, 4]));
    assert!(!dir.0.join("template_ind.npy").exists(), "dense templates");
    let params = std::fs::read_to_string(dir.0.join("params.py")).expect("params.py");
    assert_eq!(
        params,
        "dat_path = r'recording.dat'\nn_channels_dat = 4\ndtype = 'int16'\noffset = 0\n\
         sample_rate = 30000.0\nhp_filtered = False\nnote = 'written by dspk'\n"
    );
    let group = std::fs::read_to_string(dir.0.join("cluster_group.tsv")).expect("group");
    assert_eq!(
        group,
        "cluster_id\tgroup\n0\tgood\n1\tnoise\n2\tunsorted\n3\tmua\n"
    );
}

#[test]
fn fixtures_round_trip() {
    for style in ["si_export", "ks25_style", "ks4_style"] {
        let dir = TempDir::new(&format!("fixture-{style}"));
        let mut folder = read_fixture(style);
        write_phy(&dir.0, &folder, &PhyWriteOptions::default()).expect("write");
        let back = read_phy(&dir.0).expect("read back");
        // Kilosort's every-channel `templates_ind.npy` is not written (the templates are
        // dense); nothing else changes.
        folder.template_channels = None;
        assert_eq!(back, folder, "{style}");
    }
}

#[test]
fn sparse_templates_and_unrounded_positions() {
    let dir = TempDir::new("sparse");
    let mut folder = synthetic();
    let values = folder.templates.values()[..3 * 30 * 2].to_vec();
    folder.templates = Array::new(vec![3, 30, 2], values).expect("sparse templates");
    folder.template_channels =
        Some(Array::new(vec![3, 2], vec![0, 1, 1, 2, 3, -1]).expect("table"));
    folder.channel_positions[3] = [16.0, 60.1];
    folder.whitening_mat_inv = None;
    folder.whitening_mat = Some(
        Array::new(
            vec![4, 4],
            vec![
                2.0, 0.0, 0.0, 0.0, 0.0, 4.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0, 1.0,
            ],
        )
        .expect("wm"),
    );
    write_phy(&dir.0, &folder, &PhyWriteOptions::default()).expect("write");
    let back = read_phy(&dir.0).expect("read back");
    assert_eq!(back.template_channels, folder.template_channels);
    assert_eq!(back.templates, folder.templates);
    // 60.1 is not a float32: the positions are written as float64, unrounded.
    assert_eq!(back.channel_positions, folder.channel_positions);
    let positions = NpyArray::read(dir.0.join("channel_positions.npy")).expect("positions");
    assert_eq!(positions.dtype().to_string(), "<f8");
    // The inverse of the whitening matrix is written so phylib need not write it.
    assert_eq!(
        back.whitening_mat_inv.expect("inverse").values(),
        [
            0.5, 0.0, 0.0, 0.0, 0.0, 0.25, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 1.0
        ]
    );
}

#[test]
fn overwrite_needs_the_option_and_removes_stale_files() {
    let dir = copy_fixture("ks4_style", "overwrite");
    let folder = synthetic();
    let error = write_phy(&dir.0, &folder, &PhyWriteOptions::default())
        .expect_err("existing folder")
        .to_string();
    assert!(error.contains("already holds a Phy folder"), "{error}");
    write_phy(&dir.0, &folder, &PhyWriteOptions { overwrite: true }).expect("overwrite");
    for stale in [
        "templates_ind.npy",
        "pc_features.npy",
        "cluster_Amplitude.tsv",
        "whitening_mat.npy",
    ] {
        assert!(!dir.0.join(stale).exists(), "{stale} removed");
    }
    assert_eq!(read_phy(&dir.0).expect("read back"), folder);
}

#[test]
fn inconsistent_folders_are_refused_before_writing() {
    let dir = TempDir::new("refused");
    let target = dir.0.join("out");
    let mut folder = synthetic();
    folder.spike_templates[3] = 7;
    let error = write_phy(&target, &folder, &PhyWriteOptions::default())
        .expect_err("template 7 of 3")
        .to_string();
    assert!(
        error.contains("spike_templates.npy: spike 3 has template 7, templates.npy has 3"),
        "{error}"
    );
    assert!(!target.exists(), "nothing written");
    let mut folder = synthetic();
    folder.cluster_columns[0].values.insert(9, "a\tb".into());
    let error = write_phy(&target, &folder, &PhyWriteOptions::default())
        .expect_err("tab in a label")
        .to_string();
    assert!(error.contains("cluster_KSLabel.tsv"), "{error}");
}

/// Writes `array` over `dir/name`.
fn replace(dir: &Path, name: &str, dtype: &str, shape: Vec<u64>, data: Vec<u8>) {
    NpyArray::new(dtype.parse().expect("dtype"), false, shape, data)
        .expect("array")
        .write(dir.join(name))
        .expect("write");
}

/// Reads `dir`, expecting an error; returns it with its message.
fn refused(dir: &Path) -> (Error, String) {
    let error = read_phy(dir).expect_err("refused");
    let message = error.to_string();
    (error, message)
}

#[test]
fn bad_folders_are_refused_naming_the_file() {
    // A missing required file.
    let dir = copy_fixture("si_export", "missing");
    std::fs::remove_file(dir.0.join("spike_times.npy")).expect("remove");
    let (error, message) = refused(&dir.0);
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Missing { what, .. }) if what == "spike_times.npy"),
        "{message}"
    );

    // Spike arrays of different lengths.
    let dir = copy_fixture("ks4_style", "lengths");
    let clusters: Vec<u8> = (0..13i32).flat_map(|v| (v % 3).to_le_bytes()).collect();
    replace(&dir.0, "spike_clusters.npy", "<i4", vec![13], clusters);
    let (error, message) = refused(&dir.0);
    assert!(
        message.contains("13 spikes, spike_times.npy has 14"),
        "{message}"
    );
    assert_eq!(
        error.path(),
        Some(dir.0.join("spike_clusters.npy").as_path())
    );

    // Decreasing spike times.
    let dir = copy_fixture("ks4_style", "decreasing");
    let mut times: Vec<i64> = read_fixture("ks4_style").spike_times;
    times.swap(4, 5);
    replace(
        &dir.0,
        "spike_times.npy",
        "<i8",
        vec![14],
        times.iter().flat_map(|t| t.to_le_bytes()).collect(),
    );
    let (error, message) = refused(&dir.0);
    assert!(
        message.contains("spike times must not decrease"),
        "{message}"
    );
    assert_eq!(error.path(), Some(dir.0.join("spike_times.npy").as_path()));

    // A negative cluster id.
    let dir = copy_fixture("ks4_style", "negative");
    let clusters: Vec<u8> = (0..14i32)
        .flat_map(|v| if v == 2 { -1i32 } else { v % 3 }.to_le_bytes())
        .collect();
    replace(&dir.0, "spike_clusters.npy", "<i4", vec![14], clusters);
    let (_, message) = refused(&dir.0);
    assert!(
        message.contains("spike_clusters.npy: element 2 is -1"),
        "{message}"
    );

    // Templates over more channels than the channel map has.
    let dir = copy_fixture("si_export", "channels");
    replace(
        &dir.0,
        "channel_map.npy",
        "<i4",
        vec![3],
        (0..3i32).flat_map(i32::to_le_bytes).collect(),
    );
    let (error, message) = refused(&dir.0);
    assert!(
        message.contains("4 positions, channel_map.npy has 3"),
        "{message}"
    );
    assert_eq!(
        error.path(),
        Some(dir.0.join("channel_positions.npy").as_path())
    );

    // A truncated array.
    let dir = copy_fixture("ks4_style", "truncated");
    let bytes = std::fs::read(dir.0.join("amplitudes.npy")).expect("read");
    std::fs::write(dir.0.join("amplitudes.npy"), &bytes[..bytes.len() - 4]).expect("write");
    let (error, message) = refused(&dir.0);
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Truncated { .. })),
        "{message}"
    );
    assert!(message.contains("amplitudes.npy"), "{message}");
}

#[test]
fn bad_text_files_are_refused_naming_the_line() {
    let dir = copy_fixture("ks25_style", "params");
    let params = std::fs::read_to_string(dir.0.join("params.py")).expect("params");
    let broken = params.replace("offset = 0", "offset = int('0')");
    std::fs::write(dir.0.join("params.py"), broken).expect("write");
    let (error, message) = refused(&dir.0);
    assert!(message.contains("line 4"), "{message}");
    assert!(message.contains("`offset = int('0')`"), "{message}");
    assert_eq!(error.path(), Some(dir.0.join("params.py").as_path()));

    let dir = copy_fixture("ks25_style", "tsv");
    std::fs::write(
        dir.0.join("cluster_KSLabel.tsv"),
        "cluster_id\tKSLabel\r\n0\tgood\r\nx\tmua\r\n",
    )
    .expect("write");
    let (error, message) = refused(&dir.0);
    assert!(message.contains("line 3: the cluster id"), "{message}");
    assert_eq!(
        error.path(),
        Some(dir.0.join("cluster_KSLabel.tsv").as_path())
    );

    let dir = copy_fixture("si_export", "no-params");
    std::fs::remove_file(dir.0.join("params.py")).expect("remove");
    let (error, message) = refused(&dir.0);
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Missing { what, .. }) if what == "params.py"),
        "{message}"
    );
}

#[test]
fn a_params_py_path_opens_its_folder() {
    let folder = read_phy(fixture("phy/ks4_style/params.py")).expect("params.py path");
    assert_eq!(folder, read_fixture("ks4_style"));
}

#[test]
fn the_raw_recording_opens_from_params_py() {
    for style in ["si_export", "ks25_style", "ks4_style"] {
        let folder = fixture(&format!("phy/{style}"));
        assert_eq!(PhyFormat.detect(&folder), Detection::ByMetadata, "{style}");
        assert_eq!(
            PhyFormat.detect(&folder.join("params.py")),
            Detection::ByMetadata
        );
        let recording = PhyFormat.open(&folder).expect("recording");
        let info = recording.info();
        assert_eq!(info.num_channels(), CHANNELS);
        assert_eq!(info.num_samples, SAMPLES as u64);
        assert_eq!(info.sample_rate.as_hz(), 30000.0);
        let channels: Vec<usize> = (0..CHANNELS).collect();
        let mut stored = vec![0u8; CHANNELS * SAMPLES * 2];
        recording
            .read_stored(&channels, 0..SAMPLES as u64, &mut stored)
            .expect("read_stored");
        assert_eq!(i16s(&stored), matrix_channel_major(), "{style}");
        dspk_core::test_util::check_recording_source(recording.as_ref());
    }
    assert_eq!(PhyFormat.detect(&fixture("phy")), Detection::No);
    // Two raw files are refused, naming params.py.
    let dir = copy_fixture("ks4_style", "two-dat");
    let params = std::fs::read_to_string(dir.0.join("params.py")).expect("params");
    let two = params.replace(
        "dat_path = 'recording.dat'",
        "dat_path = ['recording.dat', 'recording.dat']",
    );
    std::fs::write(dir.0.join("params.py"), two).expect("write");
    let error = PhyParams::read(&dir.0.join("params.py"))
        .expect("two files parse")
        .open_recording(&dir.0)
        .expect_err("two files")
        .to_string();
    assert!(
        error.contains("params.py: unsupported: 2 raw files"),
        "{error}"
    );
}

/// Leaves a folder for `tests/phy_check.py` in `$DSPK_PHY_OUT`: the Phy folder in `phy/`
/// (with `recording.dat` = the fixtures' stored matrix) and what was written in
/// `written.json`. Run with
/// `DSPK_PHY_OUT=/tmp/phy cargo test -p dspk-synapse --test phy -- --ignored write_for_python`.
#[test]
#[ignore = "writes a folder for tests/phy_check.py; needs DSPK_PHY_OUT"]
fn write_for_python() {
    let out = PathBuf::from(std::env::var("DSPK_PHY_OUT").expect("DSPK_PHY_OUT"));
    let dir = out.join("phy");
    let folder = synthetic();
    std::fs::create_dir_all(&dir).expect("create");
    write_phy(&dir, &folder, &PhyWriteOptions { overwrite: true }).expect("write");
    let raw: Vec<u8> = (0..SAMPLES)
        .flat_map(|t| (0..CHANNELS).flat_map(move |c| matrix_value(t, c).to_le_bytes()))
        .collect();
    std::fs::write(dir.join("recording.dat"), raw).expect("recording.dat");
    let column = |name: &str| -> BTreeMap<String, String> {
        folder
            .cluster_column(name)
            .expect("column")
            .values
            .iter()
            .map(|(id, v)| (id.to_string(), v.clone()))
            .collect()
    };
    let written = serde_json::json!({
        "spike_times": folder.spike_times,
        "spike_templates": folder.spike_templates,
        "spike_clusters": folder.spike_clusters,
        "amplitudes": folder.amplitudes,
        "templates_shape": folder.templates.shape(),
        "templates": folder.templates.values(),
        "channel_map": folder.channel_map,
        "channel_positions": folder.channel_positions,
        "similar_templates": folder.similar_templates.as_ref().map(Array::values),
        "whitening_mat_inv": folder.whitening_mat_inv.as_ref().map(Array::values),
        "sample_rate": folder.params.sample_rate,
        "n_channels_dat": folder.params.n_channels_dat,
        "KSLabel": column("KSLabel"),
        "group": column("group"),
        "samples": SAMPLES,
    });
    std::fs::write(
        out.join("written.json"),
        serde_json::to_string_pretty(&written).expect("json"),
    )
    .expect("written.json");
}
