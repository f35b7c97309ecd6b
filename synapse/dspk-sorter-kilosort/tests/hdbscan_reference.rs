//! Equality with `sklearn.cluster.HDBSCAN` (sklearn 1.9) on the same points: the labels in
//! `tests/reference/hdbscan/hdbscan_fixtures.npz` were written by
//! `tests/reference/hdbscan/hdbscan_reference.py` (how to rerun it: that script's doc).
//!
//! Labels must be equal at every point except those whose sklearn label itself depends on the
//! order in which sklearn meets edges of equal weight (the script marks them by shuffling the
//! points; one point hung between two clusters at one distance): at most 1% of the points.

use std::path::Path;

use dspk_core::test_util::for_each_runtime;
use dspk_sorter_kilosort::hdbscan::{HdbscanSettings, hdbscan_labels, hdbscan_labels_host};

/// One reference case: points (`n x dim`, f32), sklearn's labels, `min_cluster_size`.
struct Case {
    name: &'static str,
    points: Vec<f32>,
    dim: usize,
    labels: Vec<i32>,
    /// Whether sklearn's label of each point changed when it saw the points shuffled.
    tie_dependent: Vec<bool>,
    min_cluster_size: usize,
}

impl Case {
    /// Asserts that `labels` equal sklearn's at every point whose label does not depend on ties.
    fn check(&self, labels: &[i32], on: &str) {
        let ties = self.tie_dependent.iter().filter(|&&t| t).count();
        assert!(
            100 * ties <= self.labels.len(),
            "{}: {ties} tie-dependent labels",
            self.name
        );
        assert_eq!(labels.len(), self.labels.len());
        for (i, (&ours, &theirs)) in labels.iter().zip(&self.labels).enumerate() {
            if !self.tie_dependent[i] {
                assert_eq!(ours, theirs, "{} point {i} on {on}", self.name);
            }
        }
    }
}

fn cases() -> Vec<Case> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/hdbscan/hdbscan_fixtures.npz");
    let mut archive = dspk_io::NpzArchive::open(path).unwrap();
    ["clips61", "plane2", "plane2_mcs7"]
        .into_iter()
        .map(|name| {
            let points = archive.read(&format!("{name}_points")).unwrap();
            let dim = points.shape()[1] as usize;
            let points: Vec<f32> = points.to_f64().unwrap().iter().map(|&v| v as f32).collect();
            let labels = archive.read(&format!("{name}_labels")).unwrap();
            let labels: Vec<i32> = labels.to_f64().unwrap().iter().map(|&v| v as i32).collect();
            let ties = archive.read(&format!("{name}_tie_dependent")).unwrap();
            let tie_dependent: Vec<bool> =
                ties.to_f64().unwrap().iter().map(|&v| v != 0.0).collect();
            let mcs = archive.read(&format!("{name}_min_cluster_size")).unwrap();
            let min_cluster_size = mcs.to_f64().unwrap()[0] as usize;
            assert_eq!(points.len(), labels.len() * dim, "{name}");
            Case {
                name,
                points,
                dim,
                labels,
                tie_dependent,
                min_cluster_size,
            }
        })
        .collect()
}

fn settings(case: &Case) -> HdbscanSettings {
    HdbscanSettings {
        min_cluster_size: case.min_cluster_size,
        min_samples: None,
    }
}

#[test]
fn host_labels_equal_sklearn() {
    for case in cases() {
        let labels = hdbscan_labels_host(&case.points, case.dim, &settings(&case)).unwrap();
        case.check(&labels, "host");
    }
}

#[test]
fn device_labels_equal_sklearn() {
    let cases = cases();
    for_each_runtime(|target, client| {
        for case in &cases {
            let labels = hdbscan_labels(client, &case.points, case.dim, &settings(case)).unwrap();
            case.check(&labels, &target.to_string());
        }
    });
}
