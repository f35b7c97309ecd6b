"""Writes the sklearn HDBSCAN labels that `tests/hdbscan_reference.rs` compares against.

Run from this folder with scikit-learn 1.9 and numpy in any environment:

    python3 -m venv venv && venv/bin/pip install scikit-learn numpy
    venv/bin/python hdbscan_reference.py

It writes `hdbscan_fixtures.npz`: for each case NAME, `NAME_points` (float32, n x dim) and
`NAME_labels` (int32, n: `sklearn.cluster.HDBSCAN(min_cluster_size=MCS).fit(points)` with every
other parameter at its default, the settings EMUsort uses), and `NAME_min_cluster_size`.
The points are drawn from a seeded generator, so the file is reproducible.

sklearn merges edges of equal weight in the order numpy's unstable `argsort` leaves them, which
depends on the machine; when such a merge hangs one point between two groups of at least
`min_cluster_size` points, that point's label depends on it. `NAME_tie_dependent` (uint8, n)
marks the points whose label changed when sklearn saw the points shuffled (8 shuffles).
"""

import numpy as np
import sklearn
from sklearn.cluster import HDBSCAN


def blobs(rng, dim, centres, per_blob, spread, noise, box):
    """Gaussian blobs around `centres` plus `noise` uniform points in [-box, box]^dim."""
    parts = [c + spread * rng.standard_normal((per_blob, dim)) for c in centres]
    parts.append(rng.uniform(-box, box, (noise, dim)))
    points = np.concatenate(parts).astype(np.float32)
    return points[rng.permutation(len(points))]


def tie_dependent(points, labels, mcs, rng, shuffles=8):
    """The points whose label changes when sklearn sees the points in another order (each of
    `shuffles` shuffles changes the order in which ties meet), each shuffle's clusters mapped
    onto `labels`' by their largest overlap."""
    changed = np.zeros(len(points), dtype=bool)
    for _ in range(shuffles):
        order = rng.permutation(len(points))
        shuffled = HDBSCAN(min_cluster_size=mcs, copy=True).fit(points[order]).labels_
        back = np.empty_like(shuffled)
        back[order] = shuffled
        mapped = np.full_like(back, -1)
        for c in np.unique(back[back >= 0]):
            members = back == c
            mapped[members] = np.bincount(labels[members] + 1).argmax() - 1
        changed |= mapped != labels
    return changed


def main():
    rng = np.random.default_rng(2026)
    cases = {}

    # 61-dimensional clips: 3 blobs of different spreads and sizes, uniform noise.
    dim = 61
    centres = [rng.normal(0.0, 1.0, dim) * 2.0 for _ in range(3)]
    clips = np.concatenate([
        blobs(rng, dim, [centres[0]], 260, 0.35, 0, 1.0),
        blobs(rng, dim, [centres[1]], 180, 0.5, 0, 1.0),
        blobs(rng, dim, [centres[2]], 120, 0.25, 0, 1.0),
        rng.uniform(-4.0, 4.0, (150, dim)),
    ]).astype(np.float32)
    cases["clips61"] = (clips[rng.permutation(len(clips))], 20)

    # 2-D: 3 blobs and noise, 617 points, and a few exact duplicates.
    plane = blobs(rng, 2, [np.array([0.0, 0.0]), np.array([4.0, 1.0]),
                          np.array([1.5, 4.5])], 170, 0.6, 107, 7.0)
    plane[100:104] = plane[7]
    cases["plane2"] = (plane, 20)

    # 2-D with a smaller min_cluster_size (more, smaller clusters).
    small = blobs(rng, 2, [np.array([x, y]) for x in (0.0, 3.0, 6.0) for y in (0.0, 3.0)],
                  40, 0.5, 61, 5.0)
    cases["plane2_mcs7"] = (small, 7)

    out = {}
    for name, (points, mcs) in cases.items():
        labels = HDBSCAN(min_cluster_size=mcs, copy=True).fit(points).labels_.astype(np.int32)
        ambiguous = tie_dependent(points, labels, mcs, rng)
        out[f"{name}_points"] = points
        out[f"{name}_labels"] = labels
        out[f"{name}_min_cluster_size"] = np.array([mcs], dtype=np.int64)
        out[f"{name}_tie_dependent"] = ambiguous.astype(np.uint8)
        counts = np.bincount(labels + 1)
        print(f"{name}: {points.shape}, noise {counts[0]}, clusters {counts[1:].tolist()}, "
              f"tie-dependent labels at {np.flatnonzero(ambiguous).tolist()}")
    np.savez("hdbscan_fixtures.npz", **out)
    print(f"sklearn {sklearn.__version__}, numpy {np.__version__}")


if __name__ == "__main__":
    main()
