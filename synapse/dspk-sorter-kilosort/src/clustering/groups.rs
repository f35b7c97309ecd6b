//! The clustering stages around the graph clustering of one group (`docs/KILOSORT4.md` §6.1,
//! §6.2, §6.8 and §8.1): spikes are grouped by where their detecting item (a universal
//! template centre, or later a learned template) sits on the probe, each group's features are
//! laid out on the union of its items' channels, the groups are clustered in parallel, and
//! every cluster's mean features become its template (Kilosort's `Wall`).
//!
//! Difference from Kilosort 4.1.7, on purpose: it makes every group with fewer than 1 000
//! spikes one cluster, whatever the group holds (on a 384-channel probe with 96 groups most
//! groups are that small, and their units are merged). Here a group is clustered when it holds
//! at least [`min_cluster_group`](crate::KilosortSettings::min_cluster_group) spikes.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::clustering::group::{GraphSettings, cluster_group};
use crate::{Error, KilosortSettings, Result};

/// What is clustered: spikes, each attached to one item (a universal template centre or a
/// learned template) with features on that item's channels.
#[derive(Debug, Clone, Copy)]
pub(super) struct ClusterInput<'a> {
    /// `[x, y]` µm of each item.
    pub item_positions: &'a [[f32; 2]],
    /// `[items, nc]` row-major: the channels of each item, nearest first.
    pub item_channels: &'a [u32],
    /// Channels per item.
    pub nc: usize,
    /// Principal components per channel.
    pub p: usize,
    /// The item of each spike.
    pub spike_item: &'a [u32],
    /// `[spikes, nc, p]` row-major features, on the spike's item's channels.
    pub features: &'a [f32],
    /// Each spike's time in seconds, when the merge tree may ask whether two branches are
    /// cross-refractory (Kilosort's "template" mode, §8.1); `None` in the "spikes" mode.
    pub times: Option<&'a [f64]>,
}

/// The clusters found: a label per spike and each cluster's mean features.
#[derive(Debug, Clone, PartialEq)]
pub struct Clusters {
    /// Cluster of each spike, `0..count`.
    pub labels: Vec<u32>,
    /// Number of clusters.
    pub count: usize,
    /// `[count, channels, p]` row-major: each cluster's mean features over its spikes, zero
    /// on the channels a spike has no feature on (Kilosort's `Wall`).
    pub features: Vec<f32>,
    /// Spikes of each cluster.
    pub sizes: Vec<usize>,
}

/// Clusters `input`'s spikes by probe section: groups at the x centres of the channels'
/// x positions (`channel_positions`, §6.1) and every `2 dmin` µm along y, each group clustered
/// on its own ([`cluster_group`], with the landmark floor and split guard of a small probe
/// when the channels fall in at most 4 groups and the settings leave them unset), the groups
/// in parallel on up to `threads` threads. Cluster ids are numbered group by group (x centre
/// outer, y centre inner), so the result does not depend on the thread count.
///
/// # Errors
///
/// [`Error::Input`] when the input's lengths disagree, an item or channel index is out of range
/// or a feature is not finite; the graph clustering's errors.
pub(super) fn cluster_spikes(
    input: &ClusterInput,
    channels: usize,
    channel_positions: &[[f32; 2]],
    dmin: f32,
    settings: &KilosortSettings,
    threads: usize,
) -> Result<Clusters> {
    let channel_x: Vec<f32> = channel_positions.iter().map(|p| p[0]).collect();
    check(input, channels)?;
    let groups = assign_groups(input.item_positions, &channel_x, dmin, settings.x_centers);
    // Spikes of each group, in spike order.
    let n_groups = groups.iter().map(|&g| g + 1).max().unwrap_or(0);
    let mut members = vec![Vec::new(); n_groups];
    for (s, &item) in input.spike_item.iter().enumerate() {
        members[groups[item as usize]].push(s);
    }
    let probe_groups = assign_groups(channel_positions, &channel_x, dmin, settings.x_centers)
        .iter()
        .map(|&g| g + 1)
        .max()
        .unwrap_or(0);
    let graph = settings.graph(probe_groups);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Vec<u32>>>>> =
        Mutex::new((0..n_groups).map(|_| None).collect());
    let work = || {
        loop {
            let g = next.fetch_add(1, Ordering::Relaxed);
            if g >= n_groups {
                break;
            }
            let labels = cluster_one(input, &members[g], &graph, settings.min_cluster_group);
            if let Ok(mut slots) = results.lock() {
                slots[g] = Some(labels);
            }
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..threads.max(1).min(n_groups.max(1)) {
            scope.spawn(work);
        }
        work();
    });
    let results = results.into_inner().map_err(|_| Error::Input {
        what: "clustering",
        reason: "a clustering thread panicked".to_string(),
    })?;

    let n = input.spike_item.len();
    let mut labels = vec![0u32; n];
    let mut count = 0usize;
    for (g, result) in results.into_iter().enumerate() {
        let group_labels = result.unwrap_or_else(|| Ok(Vec::new()))?;
        let mut used = 0usize;
        for (&s, &l) in members[g].iter().zip(&group_labels) {
            labels[s] = (count + l as usize) as u32;
            used = used.max(l as usize + 1);
        }
        count += used;
    }
    let (features, sizes) = cluster_means(input, &labels, count, channels);
    Ok(Clusters {
        labels,
        count,
        features,
        sizes,
    })
}

/// Labels of one group's spikes: one cluster when the group is smaller than `min_group`, the
/// graph clustering of their features on the union of the group's channels otherwise.
fn cluster_one(
    input: &ClusterInput,
    members: &[usize],
    graph: &GraphSettings,
    min_group: usize,
) -> Result<Vec<u32>> {
    if members.len() < min_group.max(2) {
        return Ok(vec![0; members.len()]);
    }
    let (nc, p) = (input.nc, input.p);
    // The union of the channels of the group's items, sorted.
    let mut used: Vec<u32> = members
        .iter()
        .flat_map(|&s| {
            let item = input.spike_item[s] as usize;
            input.item_channels[item * nc..(item + 1) * nc]
                .iter()
                .copied()
        })
        .collect();
    used.sort_unstable();
    used.dedup();
    let d = used.len() * p;
    let mut x = vec![0f32; members.len() * d];
    for (row, &s) in members.iter().enumerate() {
        let item = input.spike_item[s] as usize;
        for (i, &c) in input.item_channels[item * nc..(item + 1) * nc]
            .iter()
            .enumerate()
        {
            // `used` holds every channel of every member's item.
            let col = used.binary_search(&c).unwrap_or(0);
            let from = (s * nc + i) * p;
            x[row * d + col * p..row * d + (col + 1) * p]
                .copy_from_slice(&input.features[from..from + p]);
        }
    }
    let mut refractory = |a: &[usize], b: &[usize]| -> bool {
        let Some(times) = input.times else {
            return false;
        };
        let train = |rows: &[usize]| {
            let mut t: Vec<f64> = rows.iter().map(|&r| times[members[r]]).collect();
            t.sort_by(f64::total_cmp);
            t
        };
        crate::algorithms::ccg::tree_cross_refractory(&train(a), &train(b))
    };
    cluster_group(&x, members.len(), d, graph, &mut refractory)
}

/// Each cluster's mean features on every channel (`[count, channels, p]`) and its size.
fn cluster_means(
    input: &ClusterInput,
    labels: &[u32],
    count: usize,
    channels: usize,
) -> (Vec<f32>, Vec<usize>) {
    let (nc, p) = (input.nc, input.p);
    let mut sums = vec![0f64; count * channels * p];
    let mut sizes = vec![0usize; count];
    for (s, &l) in labels.iter().enumerate() {
        let l = l as usize;
        sizes[l] += 1;
        let item = input.spike_item[s] as usize;
        for (i, &c) in input.item_channels[item * nc..(item + 1) * nc]
            .iter()
            .enumerate()
        {
            let at = (l * channels + c as usize) * p;
            let from = (s * nc + i) * p;
            for q in 0..p {
                sums[at + q] += f64::from(input.features[from + q]);
            }
        }
    }
    let features = sums
        .chunks(channels * p)
        .zip(&sizes)
        .flat_map(|(row, &size)| {
            let scale = 1.0 / size.max(1) as f64;
            row.iter().map(move |&v| (v * scale) as f32)
        })
        .collect();
    (features, sizes)
}

/// The group of each item (§6.1): the nearest point of the grid of x centres and y centres
/// (squared distance, ties to the lower group index `jx * |y| + jy`), renumbered to the groups
/// that hold an item, in grid order.
#[must_use]
pub(super) fn assign_groups(
    items: &[[f32; 2]],
    channel_x: &[f32],
    dmin: f32,
    x_centers: Option<usize>,
) -> Vec<usize> {
    let xs = x_centres(channel_x, x_centers);
    let ys = y_centres(items, dmin);
    let grid: Vec<usize> = items
        .iter()
        .map(|&[x, y]| {
            let mut best = (f64::INFINITY, 0usize);
            for (jx, &cx) in xs.iter().enumerate() {
                for (jy, &cy) in ys.iter().enumerate() {
                    let d = (f64::from(x) - cx).powi(2) + (f64::from(y) - cy).powi(2);
                    if d < best.0 {
                        best = (d, jx * ys.len() + jy);
                    }
                }
            }
            best.1
        })
        .collect();
    let mut used: Vec<usize> = grid.clone();
    used.sort_unstable();
    used.dedup();
    grid.iter()
        .map(|g| used.binary_search(g).unwrap_or(0))
        .collect()
}

/// The y centres of the groups: from `min(y) + dmin - 1` to below `max(y) + dmin + 1` in steps
/// of `2 dmin` (numpy's `arange`).
fn y_centres(items: &[[f32; 2]], dmin: f32) -> Vec<f64> {
    let (lo, hi) = items
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
            (lo.min(f64::from(p[1])), hi.max(f64::from(p[1])))
        });
    if !lo.is_finite() {
        return vec![0.0];
    }
    let dmin = f64::from(dmin).max(f64::MIN_POSITIVE);
    let (start, stop, step) = (lo + dmin - 1.0, hi + dmin + 1.0, 2.0 * dmin);
    let n = ((stop - start) / step).ceil().max(1.0) as usize;
    (0..n).map(|i| start + i as f64 * step).collect()
}

/// The x centres of the groups (§6.1): `count` 1-D k-means centres of the channels' x when
/// given; otherwise the peaks of a smoothed histogram of x (bins about 50 µm wide, 100 µm
/// margins), refined by 1-D k-means; one centre (the mean) when there is at most one peak.
fn x_centres(channel_x: &[f32], count: Option<usize>) -> Vec<f64> {
    let x: Vec<f64> = channel_x.iter().map(|&v| f64::from(v)).collect();
    if x.is_empty() {
        return vec![0.0];
    }
    let mean = x.iter().sum::<f64>() / x.len() as f64;
    let guesses = match count {
        Some(k) => {
            let mut sorted = x.clone();
            sorted.sort_by(f64::total_cmp);
            (0..k)
                .map(|i| sorted[(2 * i + 1) * sorted.len() / (2 * k)])
                .collect()
        }
        None => histogram_peaks(&x),
    };
    if guesses.len() <= 1 {
        return vec![mean];
    }
    kmeans_1d(&x, guesses)
}

/// Left edges of the peak bins of the smoothed channel-x histogram: edges
/// `linspace(min - 100, max + 100, floor((max - min) / 50) + 4)`, an integer histogram smoothed
/// by a Gaussian of σ = 0.5 bin (scipy's `gaussian_filter1d`, reflect, radius 2) and truncated
/// to integers, local maxima as scipy's `find_peaks` finds them (plateaus at their middle).
fn histogram_peaks(x: &[f64]) -> Vec<f64> {
    let (lo, hi) = x
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    let n_edges = ((hi - lo) / 50.0).floor() as usize + 4;
    let (first, last) = (lo - 100.0, hi + 100.0);
    let width = (last - first) / (n_edges - 1) as f64;
    let bins = n_edges - 1;
    let mut counts = vec![0i64; bins];
    for &v in x {
        let b = (((v - first) / width).floor() as usize).min(bins - 1);
        counts[b] += 1;
    }
    let kernel: Vec<f64> = {
        let raw: Vec<f64> = (-2i32..=2)
            .map(|i| (-0.5 * (f64::from(i) / 0.5).powi(2)).exp())
            .collect();
        let total: f64 = raw.iter().sum();
        raw.iter().map(|v| v / total).collect()
    };
    let reflect = |i: i64| -> usize {
        let n = bins as i64;
        let mut i = i;
        loop {
            if i < 0 {
                i = -i - 1;
            } else if i >= n {
                i = 2 * n - i - 1;
            } else {
                return i as usize;
            }
        }
    };
    let smooth: Vec<i64> = (0..bins as i64)
        .map(|b| {
            let v: f64 = (-2i64..=2)
                .map(|k| kernel[(k + 2) as usize] * counts[reflect(b + k)] as f64)
                .sum();
            v as i64
        })
        .collect();
    let mut peaks = Vec::new();
    let mut i = 1;
    while i + 1 < bins {
        if smooth[i] > smooth[i - 1] {
            let mut j = i;
            while j + 1 < bins && smooth[j + 1] == smooth[i] {
                j += 1;
            }
            if j + 1 < bins && smooth[j + 1] < smooth[i] {
                peaks.push(first + ((i + j) / 2) as f64 * width);
            }
            i = j + 1;
        } else {
            i += 1;
        }
    }
    peaks
}

/// Lloyd's 1-D k-means from `centres` until no centre moves by more than 1e-5 (or 100 rounds);
/// a centre that loses every point stays where it is.
fn kmeans_1d(x: &[f64], mut centres: Vec<f64>) -> Vec<f64> {
    for _ in 0..100 {
        let mut sums = vec![(0.0, 0usize); centres.len()];
        for &v in x {
            let nearest = centres
                .iter()
                .enumerate()
                .min_by(|a, b| (v - a.1).abs().total_cmp(&(v - b.1).abs()))
                .map_or(0, |(i, _)| i);
            sums[nearest].0 += v;
            sums[nearest].1 += 1;
        }
        let mut moved = 0f64;
        for (c, (sum, n)) in centres.iter_mut().zip(sums) {
            if n > 0 {
                let new = sum / n as f64;
                moved = moved.max((new - *c).abs());
                *c = new;
            }
        }
        if moved <= 1e-5 {
            break;
        }
    }
    centres
}

/// The input's lengths agree and its indices and values are in range.
fn check(input: &ClusterInput, channels: usize) -> Result<()> {
    let bad = |reason: String| {
        Err(Error::Input {
            what: "clustering input",
            reason,
        })
    };
    let (nc, p) = (input.nc, input.p);
    let items = input.item_positions.len();
    let n = input.spike_item.len();
    if input.item_channels.len() != items * nc {
        return bad(format!(
            "{} item channels for {items} items of {nc} channels",
            input.item_channels.len()
        ));
    }
    if input.features.len() != n * nc * p {
        return bad(format!(
            "{} feature values for {n} spikes of {nc} x {p}",
            input.features.len()
        ));
    }
    if let Some(times) = input.times
        && times.len() != n
    {
        return bad(format!("{} times for {n} spikes", times.len()));
    }
    if let Some(&c) = input
        .item_channels
        .iter()
        .find(|&&c| c as usize >= channels)
    {
        return bad(format!("channel {c} of {channels}"));
    }
    if let Some(s) = input.spike_item.iter().position(|&i| i as usize >= items) {
        return bad(format!(
            "spike {s} has item {} of {items}",
            input.spike_item[s]
        ));
    }
    if let Some(i) = input.features.iter().position(|v| !v.is_finite()) {
        return bad(format!(
            "feature {} of spike {} is not finite",
            i % (nc * p),
            i / (nc * p)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neuropixels_columns_make_one_x_centre_and_rows_every_two_dmin() {
        let x: Vec<f32> = (0..384).map(|c| [43.0, 11.0, 59.0, 27.0][c % 4]).collect();
        assert_eq!(x_centres(&x, None), vec![35.0]);
        let items: Vec<[f32; 2]> = (0..383).map(|r| [35.0, 20.0 + 10.0 * r as f32]).collect();
        let ys = y_centres(&items, 20.0);
        assert_eq!(ys[0], 39.0);
        assert_eq!(ys[1], 79.0);
        assert_eq!(*ys.last().unwrap_or(&0.0), 3839.0);
        assert_eq!(ys.len(), 96);
    }

    #[test]
    fn two_shanks_apart_give_two_x_centres() {
        let x: Vec<f32> = (0..64)
            .map(|c| {
                if c < 32 {
                    [0.0, 32.0][c % 2]
                } else {
                    [250.0, 282.0][c % 2]
                }
            })
            .collect();
        let xs = x_centres(&x, None);
        assert_eq!(xs.len(), 2, "{xs:?}");
        assert!(
            (xs[0] - 16.0).abs() < 1e-9 && (xs[1] - 266.0).abs() < 1e-9,
            "{xs:?}"
        );
        assert_eq!(x_centres(&x, Some(2)), xs);
    }

    #[test]
    fn groups_are_numbered_in_grid_order_without_gaps() {
        let items = [[0.0, 0.0], [0.0, 100.0], [0.0, 5.0], [0.0, 300.0]];
        let groups = assign_groups(&items, &[0.0, 0.0], 20.0, None);
        // y centres -1+20 = 19, 59, 99, ...: items at 0 and 5 share the first group.
        assert_eq!(groups, vec![0, 1, 0, 2]);
    }

    #[test]
    fn bad_input_is_refused() {
        let input = ClusterInput {
            item_positions: &[[0.0, 0.0]],
            item_channels: &[0, 1],
            nc: 2,
            p: 1,
            spike_item: &[0],
            features: &[1.0, f32::NAN],
            times: None,
        };
        let err = cluster_spikes(
            &input,
            2,
            &[[0.0, 0.0], [0.0, 20.0]],
            20.0,
            &KilosortSettings::default(),
            1,
        )
        .unwrap_err();
        assert!(err.to_string().contains("not finite"), "{err}");
        let wide = ClusterInput {
            item_channels: &[0, 5],
            features: &[1.0, 1.0],
            ..input
        };
        assert!(
            cluster_spikes(
                &wide,
                2,
                &[[0.0, 0.0], [0.0, 20.0]],
                20.0,
                &KilosortSettings::default(),
                1
            )
            .is_err()
        );
    }
}
