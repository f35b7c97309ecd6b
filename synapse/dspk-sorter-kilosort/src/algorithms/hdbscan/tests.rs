//! HDBSCAN's device path against its `f64` host path, on every compiled runtime; the tree
//! steps on hand-checked cases; input errors. (Equality with sklearn itself:
//! `tests/hdbscan_reference.rs`.)

use cubecl::client::Client;
use dspk_core::test_util::{Rng, for_each_runtime};

use super::exact::{self, Distances, Edge};
use super::launch::{self, MARGIN};
use super::{
    HdbscanSettings, hdbscan_labels, hdbscan_labels_device, hdbscan_labels_host, kernel,
    labels_on_host_up_to, tree,
};
use crate::Error;

/// `blobs` Gaussian blobs of `per_blob` points (spread 0.3, centres spread 2) and `noise`
/// uniform points in [-3, 3], `dim` values each, interleaved.
fn blob_points(rng: &mut Rng, dim: usize, blobs: usize, per_blob: usize, noise: usize) -> Vec<f32> {
    let centres: Vec<Vec<f64>> = (0..blobs)
        .map(|_| (0..dim).map(|_| 2.0 * rng.normal()).collect())
        .collect();
    let mut rows: Vec<Vec<f32>> = Vec::new();
    for centre in &centres {
        for _ in 0..per_blob {
            rows.push(
                centre
                    .iter()
                    .map(|c| (c + 0.3 * rng.normal()) as f32)
                    .collect(),
            );
        }
    }
    for _ in 0..noise {
        rows.push((0..dim).map(|_| rng.uniform(-3.0, 3.0) as f32).collect());
    }
    // A seeded shuffle, so clusters are not contiguous.
    for i in (1..rows.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        rows.swap(i, j);
    }
    rows.concat()
}

/// The sorted weights of a tree's edges.
fn sorted_weights(edges: &[Edge]) -> Vec<f64> {
    let mut w: Vec<f64> = edges.iter().map(|e| e.weight).collect();
    w.sort_by(f64::total_cmp);
    w
}

/// The host path's core distances and Prim's tree.
fn host_tree(points: &[f32], dim: usize, k: usize) -> (Vec<f64>, Vec<Edge>) {
    let distances = Distances::new(points, dim, 4);
    let core = exact::core_distances(&distances, k, 4);
    let tree = exact::prim_tree(&distances, &core);
    (core, tree)
}

/// Device tree, host Prim's tree, device labels and host labels agree on `points`.
fn check_against_host(client: &Client, points: &[f32], dim: usize, settings: &HdbscanSettings) {
    let n = points.len() / dim;
    let k = settings.min_samples.unwrap_or(settings.min_cluster_size);
    let prim = host_tree(points, dim, k).1;
    let device = launch::device_tree(client, points, dim, k).unwrap();
    assert_eq!(device.len(), n - 1);
    let (a, b) = (sorted_weights(&device), sorted_weights(&prim));
    let total = |w: &[f64]| w.iter().sum::<f64>();
    assert!(
        (total(&a) - total(&b)).abs() <= 1e-9 * total(&b),
        "tree weights {} (device) vs {} (Prim)",
        total(&a),
        total(&b)
    );
    assert_eq!(a, b, "sorted edge weights, n {n} dim {dim}");
    let host = hdbscan_labels_host(points, dim, settings, 4).unwrap();
    let labels = hdbscan_labels_device(client, points, dim, settings).unwrap();
    assert_eq!(labels, host, "labels, n {n} dim {dim}");
}

#[test]
fn device_tree_and_labels_match_host_on_random_inputs() {
    for_each_runtime(|_, client| {
        let mut rng = Rng::new(7);
        for (dim, blobs, per_blob, noise, mcs, min_samples) in [
            (61, 3, 70, 43, 20, None),
            (3, 4, 37, 29, 9, Some(5)),
            (1, 2, 30, 11, 5, None),
            (7, 1, 50, 17, 4, Some(1)),
        ] {
            let points = blob_points(&mut rng, dim, blobs, per_blob, noise);
            let settings = HdbscanSettings {
                min_cluster_size: mcs,
                min_samples,
            };
            check_against_host(client, &points, dim, &settings);
        }
    });
}

#[test]
fn device_tree_does_not_depend_on_units_per_cube() {
    // Cubes of 1, 2, 8, 64 units, the most the device allows and one less (an odd count):
    // every point's nearest points and cheapest edges are computed alone in the same order, so
    // the trees are the same, and their weights are Prim's. Few dimensions: each count and
    // dimension is a kernel variant to compile, slow on lavapipe for long unrolled loops.
    for_each_runtime(|target, client| {
        let mut rng = Rng::new(23);
        let most = dspk_ops::launch::cube_units(client, dspk_ops::launch::CUBE_DIM);
        let mut counts = vec![1, 2, 8, 64, most, most.saturating_sub(1)];
        counts.retain(|u| (1..=most).contains(u));
        counts.sort_unstable();
        counts.dedup();
        for (dim, k) in [(2, 5), (9, 7)] {
            let points = blob_points(&mut rng, dim, 2, 45, 31);
            let prim = sorted_weights(&host_tree(&points, dim, k).1);
            let reference = launch::device_tree(client, &points, dim, k).unwrap();
            assert_eq!(sorted_weights(&reference), prim, "{target}: dim {dim}");
            for &units in &counts {
                let tree = launch::device_tree_in_cubes(client, &points, dim, k, units).unwrap();
                assert_eq!(
                    tree, reference,
                    "{target}: dim {dim}, cubes of {units} units"
                );
            }
        }
    });
}

#[test]
fn nearest_points_give_exact_core_distances() {
    for_each_runtime(|_, client| {
        let mut rng = Rng::new(11);
        let (dim, k) = (61, 20);
        // Over 65 535 coordinates: llvmpipe stops shaders after 65 535 loop iterations, which
        // the kernel's unrolled coordinate loops keep it far from.
        let points = blob_points(&mut rng, dim, 2, 550, 101);
        let n = points.len() / dim;
        let slots = k + MARGIN;
        let x = crate::runner::buffers::upload(client, &points).unwrap();
        let nearest = crate::runner::buffers::alloc::<u32>(client, n * slots).unwrap();
        let units = dspk_ops::launch::cube_units(client, dspk_ops::launch::CUBE_DIM);
        kernel::nearest_points::launch(
            client,
            dspk_ops::launch::cube_count_for(n, units),
            cubecl::prelude::CubeDim::new_1d(units),
            x.arg(points.len()),
            nearest.arg(n * slots),
            n as u32,
            dim,
            slots,
            7,
        );
        let found = nearest.to_host(client).unwrap();
        for i in 0..n {
            // The first candidate is the point itself, then (f32) distances increase.
            assert_eq!(found[i * slots] as usize, i, "point {i}");
        }
        let core = exact::core_distances_among(&points, dim, k, &found, slots).unwrap();
        assert_eq!(core, host_tree(&points, dim, k).0);
    });
}

#[test]
fn host_distances_as_matrix_or_rows_give_the_same_tree() {
    let mut rng = Rng::new(31);
    for (dim, k) in [(61, 20), (2, 5)] {
        let points = blob_points(&mut rng, dim, 3, 60, 47);
        let n = points.len() / dim;
        let matrix = Distances::with_matrix_up_to(&points, dim, 4, n);
        let rows = Distances::with_matrix_up_to(&points, dim, 4, n - 1);
        assert!(matches!(matrix, Distances::Matrix { .. }));
        assert!(matches!(rows, Distances::Rows(_)));
        let core = exact::core_distances(&matrix, k, 4);
        assert_eq!(core, exact::core_distances(&rows, k, 4), "dim {dim}");
        // One thread or three: the same values (each computed by one thread alone).
        let Distances::Matrix { values, .. } = &matrix else {
            unreachable!()
        };
        let Distances::Matrix { values: single, .. } =
            Distances::with_matrix_up_to(&points, dim, 1, n)
        else {
            unreachable!()
        };
        assert_eq!(values, &single, "dim {dim}");
        assert_eq!(core, exact::core_distances(&rows, k, 3), "dim {dim}");
        // Each core distance is the k-th smallest distance, computed pair by pair.
        for (i, &c) in core.iter().enumerate() {
            let mut d: Vec<f64> = (0..n)
                .map(|j| {
                    crate::algorithms::rows::squared_distance(
                        &points[i * dim..(i + 1) * dim],
                        &points[j * dim..(j + 1) * dim],
                    )
                    .sqrt()
                })
                .collect();
            d.sort_by(f64::total_cmp);
            assert_eq!(c, d[k - 1], "dim {dim} point {i}");
        }
        let tree = exact::prim_tree(&matrix, &core);
        assert_eq!(tree, exact::prim_tree(&rows, &core), "dim {dim}");
        // Each edge's weight is the mutual reachability of its ends.
        for e in &tree {
            assert_eq!(e.weight, exact::reachability(&points, dim, &core, e.a, e.b));
        }
    }
}

#[test]
fn host_or_device_by_point_count_give_the_same_labels() {
    for_each_runtime(|target, client| {
        let mut rng = Rng::new(17);
        let (dim, settings) = (
            3,
            HdbscanSettings {
                min_cluster_size: 9,
                min_samples: Some(5),
            },
        );
        let points = blob_points(&mut rng, dim, 4, 37, 29);
        let n = points.len() / dim;
        let host = hdbscan_labels_host(&points, dim, &settings, 4).unwrap();
        assert!(host.iter().any(|&l| l < 0) && host.iter().any(|&l| l >= 2));
        assert_eq!(
            hdbscan_labels(client, &points, dim, &settings, 2).unwrap(),
            host
        );
        for limit in [n, n - 1] {
            let labels = labels_on_host_up_to(client, &points, dim, &settings, 2, limit).unwrap();
            assert_eq!(labels, host, "{target}: host up to {limit} of {n} points");
        }
        // Device only: values whose squared distances overflow f32 are refused there.
        let mut large = points.clone();
        large[4] = 1e30;
        assert!(labels_on_host_up_to(client, &large, dim, &settings, 2, n).is_ok());
        assert!(matches!(
            labels_on_host_up_to(client, &large, dim, &settings, 2, n - 1),
            Err(Error::Input { .. })
        ));
    });
}

#[test]
fn duplicates_match_host() {
    for_each_runtime(|_, client| {
        let mut rng = Rng::new(5);
        let dim = 2;
        let mut points = blob_points(&mut rng, dim, 2, 40, 21);
        // 25 copies of one point (core distance 0 at min_samples 20: a cluster born at
        // infinite lambda) and 3 copies of another.
        let first = points[..dim].to_vec();
        let other = points[10 * dim..11 * dim].to_vec();
        for _ in 0..24 {
            points.extend_from_slice(&first);
        }
        for _ in 0..2 {
            points.extend_from_slice(&other);
        }
        for mcs in [5, 20] {
            let settings = HdbscanSettings {
                min_cluster_size: mcs,
                min_samples: None,
            };
            check_against_host(client, &points, dim, &settings);
        }
    });
}

#[test]
fn two_groups_on_a_line() {
    // 11 points at 0..10 and 11 at 100..110: two clusters, the one holding point 0 first.
    let mut points: Vec<f32> = (0..11).map(|i| 100.0 + i as f32).collect();
    points.extend((0..11).map(|i| i as f32));
    points.swap(0, 15);
    let settings = HdbscanSettings {
        min_cluster_size: 5,
        min_samples: Some(3),
    };
    let labels = hdbscan_labels_host(&points, 1, &settings, 2).unwrap();
    let expected: Vec<i32> = points
        .iter()
        .map(|&v| i32::from(v >= 50.0) ^ i32::from(points[0] >= 50.0))
        .collect();
    assert_eq!(labels, expected);
    // A lone far point is noise.
    points.push(1000.0);
    let labels = hdbscan_labels_host(&points, 1, &settings, 2).unwrap();
    assert_eq!(labels[22], -1);
    assert!(labels[..22].iter().all(|&l| l >= 0));
}

#[test]
fn tree_refuses_edges_that_do_not_span() {
    let edge = |a, b| Edge { a, b, weight: 1.0 };
    assert!(tree::labels_from_tree(3, &[edge(0, 1)], 2).is_none());
    assert!(tree::labels_from_tree(3, &[edge(0, 1), edge(1, 0)], 2).is_none());
    assert!(tree::labels_from_tree(3, &[edge(0, 1), edge(1, 7)], 2).is_none());
    assert!(tree::labels_from_tree(3, &[edge(0, 1), edge(1, 2)], 2).is_some());
}

#[test]
fn bad_inputs_are_errors() {
    let settings = HdbscanSettings::default();
    let points = vec![0.5f32; 30 * 4];
    let input = |r: crate::Result<Vec<i32>>| matches!(r, Err(Error::Input { .. }));
    let setting = |r: crate::Result<Vec<i32>>| matches!(r, Err(Error::Setting { .. }));
    assert!(input(hdbscan_labels_host(&points, 0, &settings, 2)));
    assert!(input(hdbscan_labels_host(&points[..119], 4, &settings, 2)));
    assert!(input(hdbscan_labels_host(
        &points[..4 * 19],
        4,
        &settings,
        2
    )));
    let few_samples = HdbscanSettings {
        min_cluster_size: 2,
        min_samples: Some(31),
    };
    assert!(input(hdbscan_labels_host(&points, 4, &few_samples, 2)));
    for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        let mut p = points.clone();
        p[57] = bad;
        assert!(input(hdbscan_labels_host(&p, 4, &settings, 2)));
    }
    for (mcs, ms) in [(1, None), (0, None), (5, Some(0))] {
        let s = HdbscanSettings {
            min_cluster_size: mcs,
            min_samples: ms,
        };
        assert!(setting(hdbscan_labels_host(&points, 4, &s, 2)));
    }
    for_each_runtime(|_, client| {
        let mut p = points.clone();
        p[3] = f32::NAN;
        assert!(input(hdbscan_labels(client, &p, 4, &settings, 2)));
        assert!(input(hdbscan_labels_device(client, &p, 4, &settings)));
        p[3] = 1e30;
        assert!(input(hdbscan_labels_device(client, &p, 4, &settings)));
        let many = HdbscanSettings {
            min_cluster_size: 2,
            min_samples: Some(super::MAX_DEVICE_MIN_SAMPLES + 1),
        };
        let big = vec![0.5f32; 4 * 200];
        assert!(setting(hdbscan_labels_device(client, &big, 4, &many)));
        // All points equal: every weight is 0, one cluster, which is the root: all noise.
        for labels in [
            hdbscan_labels(client, &points, 4, &settings, 2),
            hdbscan_labels_device(client, &points, 4, &settings),
        ] {
            assert_eq!(labels.unwrap(), vec![-1; 30]);
        }
    });
}

/// Times the device path on 20 000 points of 61 values (3 blobs and noise).
#[test]
#[ignore = "timing: run by hand in release"]
fn time_20000_points_of_61() {
    for_each_runtime(|target, client| {
        let mut rng = Rng::new(3);
        let points = blob_points(&mut rng, 61, 3, 6000, 2000);
        let started = std::time::Instant::now();
        let labels =
            hdbscan_labels_device(client, &points, 61, &HdbscanSettings::default()).unwrap();
        let noise = labels.iter().filter(|&&l| l < 0).count();
        eprintln!(
            "{target}: 20000 x 61 in {:.2} s, {} clusters, {noise} noise",
            started.elapsed().as_secs_f64(),
            labels.iter().max().map_or(0, |&m| m + 1)
        );
    });
}
