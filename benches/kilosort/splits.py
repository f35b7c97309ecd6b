#!/usr/bin/env python3
"""Where a sort split its true units: for each ground-truth unit, the sorted clusters its spikes
went to, the learned templates (matching's templates, the outcome of the first clustering)
those spikes were matched with, and the true drift at each part's spikes.

    python3 benches/kilosort/splits.py SORTED_FOLDER --gt GT_FOLDER [--min-share 0.1]

SORTED_FOLDER is a Phy/Kilosort folder (spike_times.npy, spike_clusters.npy and, when the
sorter wrote it, spike_detection_templates.npy: the learned template each spike was matched
with, before the final clustering; Kilosort 4 and dspk write it); GT_FOLDER a
folder of the ground-truth bench tools' gen_ground_truth.py (gt_spike_times.npy,
gt_spike_clusters.npy, gt_unit_displacements.npy, recording.json).

A true spike is found when a sorted spike lies within 0.4 ms of it (the nearest one; the bench
tools' score.py uses the same window). A unit's *parts* are the sorted clusters that hold at
least --min-share of its found spikes. A unit with two parts or more is split, and the split
is put down to:

- `first clustering`: its parts were matched with different learned templates (the split was
  there before matching, so the final clustering and the merges inherited it);
- `final clustering`: its parts share their main learned template (the final clustering split
  the spikes of one template, and the merges did not join them again).

Each part's true displacement (µm, along the probe, at its spikes' times: mean and 10-90 %
range) is printed, with the `batch overlap` of the unit's two largest parts: the sum over
batches (--batch-seconds, Kilosort's 2 s) of the smaller of the two parts' shares of their
spikes in that batch, 1 for two parts that fire alike throughout (a clustering split by
waveform) and 0 for parts that never fire in one batch (a split by time: parts of a unit whose
corrected waveform changed with the drift). A symmetric drift puts parts at the two ends of
the drift and in its middle at the same mean, so the range and the overlap say more than the
mean (`drift gap`: the spread of the parts' means). Numpy only.
"""

import argparse
import json
import os
import sys

import numpy as np

WINDOW_MS = 0.4


def load(folder, name):
    return np.load(os.path.join(folder, name))


def nearest(sorted_times, times, window):
    """Index of the sorted spike nearest to each of `times` (sorted_times ascending), or -1
    where none lies within `window` samples."""
    right = np.searchsorted(sorted_times, times)
    left = np.clip(right - 1, 0, len(sorted_times) - 1)
    right = np.clip(right, 0, len(sorted_times) - 1)
    d_left = np.abs(sorted_times[left] - times)
    d_right = np.abs(sorted_times[right] - times)
    best = np.where(d_right < d_left, right, left)
    dist = np.minimum(d_left, d_right)
    return np.where(dist <= window, best, -1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sorted")
    parser.add_argument("--gt", required=True)
    parser.add_argument("--min-share", type=float, default=0.1)
    parser.add_argument("--batch-seconds", type=float, default=2.0)
    args = parser.parse_args()

    meta = json.load(open(os.path.join(args.gt, "recording.json")))
    fs = float(meta["sample_rate_hz"])
    gt_times = load(args.gt, "gt_spike_times.npy").astype(np.int64)
    gt_units = load(args.gt, "gt_spike_clusters.npy").astype(np.int64)
    disp = load(args.gt, "gt_unit_displacements.npy")  # time x units x (x, y)
    disp_hz = float(meta.get("ground_truth", {}).get("displacement_sampling_hz", 5.0))

    times = load(args.sorted, "spike_times.npy").astype(np.int64).ravel()
    clusters = load(args.sorted, "spike_clusters.npy").astype(np.int64).ravel()
    templates_path = os.path.join(args.sorted, "spike_detection_templates.npy")
    templates = (
        np.load(templates_path).astype(np.int64).ravel()
        if os.path.exists(templates_path)
        else None
    )
    order = np.argsort(times, kind="stable")
    times, clusters = times[order], clusters[order]
    if templates is not None:
        templates = templates[order]

    window = int(round(WINDOW_MS * fs / 1000.0))
    counts = {"one cluster": 0, "first clustering": 0, "final clustering": 0, "missed": 0}
    drift_split = 0
    time_split = 0
    rows = []
    for unit in np.unique(gt_units):
        t = gt_times[gt_units == unit]
        hit = nearest(times, t, window)
        found = hit >= 0
        if found.sum() < max(10, 0.2 * len(t)):
            counts["missed"] += 1
            rows.append(f"unit {unit:3d}: {len(t)} spikes, {found.sum()} found: missed")
            continue
        got = clusters[hit[found]]
        ids, n = np.unique(got, return_counts=True)
        share = n / found.sum()
        parts = ids[share >= args.min_share]
        if len(parts) < 2:
            counts["one cluster"] += 1
            continue
        # Per part: its share, main learned template, mean true displacement (y) at its spikes.
        found_times = t[found]
        step = np.clip((found_times / fs * disp_hz).astype(np.int64), 0, disp.shape[0] - 1)
        y = disp[step, unit, 1] if disp.ndim == 3 else disp[step, unit]
        desc = []
        mains = []
        depths = []
        for part in parts:
            mask = got == part
            depth = float(np.mean(y[mask]))
            low, high = np.percentile(y[mask], [10, 90])
            depths.append(depth)
            main = None
            if templates is not None:
                tids, tn = np.unique(templates[hit[found]][mask], return_counts=True)
                main = int(tids[np.argmax(tn)])
                mains.append(main)
            desc.append(
                f"cluster {part} {mask.sum() / found.sum():.0%}"
                + (f" (template {main})" if main is not None else "")
                + f" at {depth:+.1f} um ({low:+.0f}..{high:+.0f})"
            )
        stage = (
            "first clustering"
            if templates is not None and len(set(mains)) > 1
            else "final clustering"
        )
        counts[stage] += 1
        gap = max(depths) - min(depths)
        drift_split += gap > 5.0
        batch = (found_times / (args.batch_seconds * fs)).astype(np.int64)
        largest = parts[np.argsort(-share[share >= args.min_share], kind="stable")[:2]]
        shares = [
            np.bincount(batch[got == part], minlength=batch.max() + 1) / (got == part).sum()
            for part in largest
        ]
        overlap = float(np.minimum(shares[0], shares[1]).sum())
        time_split += overlap < 0.5
        rows.append(
            f"unit {unit:3d}: {len(t)} spikes, {found.mean():.0%} found, split at the {stage}, "
            f"drift gap {gap:.1f} um, batch overlap {overlap:.2f}: " + "; ".join(desc)
        )
    print("\n".join(rows))
    split = counts["first clustering"] + counts["final clustering"]
    print(
        f"SPLITS units={len(np.unique(gt_units))} one_cluster={counts['one cluster']} "
        f"split={split} first_clustering={counts['first clustering']} "
        f"final_clustering={counts['final clustering']} drift_gap_over_5um={drift_split} "
        f"batch_overlap_under_0.5={time_split} "
        f"missed={counts['missed']} min_share={args.min_share}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
