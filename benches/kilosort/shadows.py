"""Which units of a finished sort (a Phy folder: ours, Kilosort's or another sorter's) the
shadow rule of `shadow_ms` would remove, and the sort without them for `score.py`.

The rule as `synapse/dspk-sorter-kilosort/src/export/shadows.rs` applies it inside the sort
(decision 0005, item 14), here from the folder's files: units are judged from the largest
(norm of `templates.npy`) down against the units kept so far; a kept unit labelled `good` in
`cluster_KSLabel.tsv` is a partner of a smaller unit when the share of that unit's spikes with
one of its spikes within the window exceeds chance (`n_partner (2 w + 1) / samples`) by at
least 0.1, and the unit is removed when at least half of its spikes lie that close to a
partner's. Inside the sort the rule sees the spikes before the EMUsort preset moves them to
each unit's peak, and before Phy's files are written, so on our own folders this is a check,
not the same computation.

    python3 benches/kilosort/shadows.py SORT_DIR OUT_DIR [--window-ms 1.0]

OUT_DIR gets spike_times.npy, spike_clusters.npy and params.py without the removed units.
"""

import argparse
import csv
import pathlib
import shutil

import numpy as np

EXCESS = 0.1
SHARE = 0.5


def near(times, other, window):
    """Whether each of `times` has one of the sorted `other` within `window` samples."""
    if len(other) == 0:
        return np.zeros(len(times), bool)
    i = np.clip(np.searchsorted(other, times), 1, max(len(other) - 1, 1))
    return np.minimum(np.abs(times - other[i - 1]), np.abs(times - other[i])) <= window


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sort_dir", type=pathlib.Path)
    parser.add_argument("out_dir", type=pathlib.Path)
    parser.add_argument("--window-ms", type=float, default=1.0)
    args = parser.parse_args()
    d = args.sort_dir
    times = np.load(d / "spike_times.npy").ravel().astype(np.int64)
    clusters = np.load(d / "spike_clusters.npy").ravel()
    sizes = np.linalg.norm(np.load(d / "templates.npy"), axis=(1, 2))
    with open(d / "cluster_KSLabel.tsv") as f:
        rows = [r for r in csv.reader(f, delimiter="\t") if r[0] != "cluster_id"]
    good = {int(r[0]): r[1] == "good" for r in rows}
    with open(d / "params.py") as f:
        rate = float(next(line.split("=")[1] for line in f if line.startswith("sample_rate")))
    window = int(args.window_ms * rate / 1000)
    samples = times.max() + 1
    units = np.unique(clusters)
    trains = {u: np.sort(times[clusters == u]) for u in units}
    kept, removed = [], []
    for u in sorted(units, key=lambda u: (-sizes[u], u)):
        locked = np.zeros(len(trains[u]), bool)
        for partner in (k for k in kept if good.get(int(k), False)):
            close = near(trains[u], trains[partner], window)
            if close.mean() - min(1.0, len(trains[partner]) * (2 * window + 1) / samples) >= EXCESS:
                locked |= close
        if locked.mean() >= SHARE:
            removed.append((int(u), round(float(locked.mean()), 2)))
        else:
            kept.append(u)
    print(f"{len(removed)} of {len(units)} units are shadows (unit, share): {removed}")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    keep = np.isin(clusters, kept)
    np.save(args.out_dir / "spike_times.npy", times[keep])
    np.save(args.out_dir / "spike_clusters.npy", clusters[keep])
    shutil.copy(d / "params.py", args.out_dir / "params.py")


if __name__ == "__main__":
    main()
