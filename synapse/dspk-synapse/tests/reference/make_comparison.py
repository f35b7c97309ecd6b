"""Writes `comparison.json`: SpikeInterface's ground-truth comparison of a few sortings, for
`tests/groundtruth.rs` to match.

    pip install --break-system-packages spikeinterface pandas numba
    python3 synapse/dspk-synapse/tests/reference/make_comparison.py

Each case holds the two sortings (unit ids and spike sample indices) and what
`spikeinterface.comparison.compare_sorter_to_ground_truth(..., exhaustive_gt=True)` returned:
`delta_frames`, the match-count and agreement matrices, the Hungarian and best matches,
per-GT-unit counts and performance (Hungarian and best match modes), well-detected, redundant,
overmerged, false-positive and bad units. The versions used are written into the file.
"""

import json
import pathlib

import numpy as np
import pandas
import scipy
import spikeinterface
import spikeinterface.comparison as scmp
import spikeinterface.core as sc

OUT = pathlib.Path(__file__).with_name("comparison.json")


def sorting(units, fs):
    """A NumpySorting from `{id: samples}` (ids kept in the given order)."""
    return sc.NumpySorting.from_unit_dict(
        [{u: np.asarray(s, dtype=np.int64) for u, s in units.items()}], fs
    )


def trains(s):
    return {str(u): [int(v) for v in s.get_unit_spike_train(u)] for u in s.unit_ids}


def jitter_keep(rng, samples, keep, jitter, n_samples):
    """A fraction `keep` of `samples`, each moved by up to `jitter` samples, kept in range."""
    samples = np.asarray(samples)
    chosen = samples[rng.random(samples.size) < keep]
    moved = chosen + rng.integers(-jitter, jitter + 1, chosen.size)
    return np.sort(np.clip(moved, 0, n_samples - 1))


def noise(rng, rate, seconds, fs):
    n = rng.poisson(rate * seconds)
    return np.sort(rng.integers(0, int(seconds * fs), n))


def opt_str(v):
    return None if v in (-1, "") else str(v)


def run_case(name, gt, tested, fs, **options):
    c = scmp.compare_sorter_to_ground_truth(gt, tested, exhaustive_gt=True, **options)
    perf = c.get_performance(method="by_unit", output="pandas")
    counts = c.count_score
    best = scmp.compare_sorter_to_ground_truth(
        gt, tested, exhaustive_gt=True, match_mode="best", **options
    )
    perf_best = best.get_performance(method="by_unit", output="pandas")
    gt_ids = [str(u) for u in gt.unit_ids]
    tested_ids = [str(u) for u in tested.unit_ids]

    def perf_dict(p):
        return {
            k: [float(p.loc[u, k]) for u in gt.unit_ids]
            for k in ["accuracy", "recall", "precision", "false_discovery_rate", "miss_rate"]
        }

    categories = c.count_units_categories()
    return {
        "name": name,
        "sampling_frequency": fs,
        "options": {
            k: options.get(k, d)
            for k, d in [
                ("delta_time", 0.4),
                ("match_score", 0.5),
                ("chance_score", 0.1),
                ("well_detected_score", 0.8),
                ("redundant_score", 0.2),
                ("overmerged_score", 0.2),
            ]
        },
        "gt": {"ids": gt_ids, "trains": [trains(gt)[u] for u in gt_ids]},
        "tested": {"ids": tested_ids, "trains": [trains(tested)[u] for u in tested_ids]},
        "delta_frames": int(c.delta_frames),
        "match_count": c.match_event_count.values.astype(int).tolist(),
        "agreement": c.agreement_scores.values.astype(float).tolist(),
        "hungarian_match_12": [opt_str(c.hungarian_match_12[u]) for u in gt.unit_ids],
        "best_match_12": [opt_str(c.best_match_12[u]) for u in gt.unit_ids],
        "best_match_21": [opt_str(c.best_match_21[u]) for u in tested.unit_ids],
        "tp": [int(counts.loc[u, "tp"]) for u in gt.unit_ids],
        "fn": [int(counts.loc[u, "fn"]) for u in gt.unit_ids],
        "fp": [int(counts.loc[u, "fp"]) for u in gt.unit_ids],
        "performance": perf_dict(perf),
        "performance_best": perf_dict(perf_best),
        "well_detected": [str(u) for u in c.get_well_detected_units()],
        "redundant": [str(u) for u in c.get_redundant_units()],
        "overmerged": [str(u) for u in c.get_overmerged_units()],
        "false_positive": [str(u) for u in c.get_false_positive_units()],
        "bad": [str(u) for u in c.get_bad_units()],
        "categories": {k: int(v) for k, v in categories.items()},
    }


def perturbed():
    """Eight GT units; each found with its own loss, jitter and extra spikes, listed in a
    shuffled order under new ids, plus a noise unit."""
    fs, seconds = 30000.0, 4.0
    n = int(fs * seconds)
    gt = sc.generate_sorting(
        num_units=8, sampling_frequency=fs, durations=[seconds],
        firing_rates=[6, 9, 12, 15, 18, 20, 8, 10], refractory_period_ms=4.0, seed=2026,
    )
    rng = np.random.default_rng(7)
    keep = [1.0, 0.95, 0.85, 0.7, 0.5, 0.3, 0.9, 0.6]
    jitter = [0, 3, 8, 12, 15, 5, 11, 2]
    extra = [0.0, 2.0, 5.0, 1.0, 0.0, 3.0, 10.0, 0.5]
    units = {}
    for i, u in enumerate(gt.unit_ids):
        found = jitter_keep(rng, gt.get_unit_spike_train(u), keep[i], jitter[i], n)
        found = np.sort(np.concatenate([found, noise(rng, extra[i], seconds, fs)]))
        units[f"s{i}"] = found
    units["noise"] = noise(rng, 12.0, seconds, fs)
    order = ["s3", "noise", "s0", "s7", "s5", "s1", "s6", "s2", "s4"]
    return run_case("perturbed", gt, sorting({u: units[u] for u in order}, fs), fs)


def split_merge():
    """Six GT units: one split in two, two merged into one, one found twice (a redundant
    copy), one found well, one missed; plus a noise unit and a unit sharing a few spikes."""
    fs, seconds = 30000.0, 4.0
    n = int(fs * seconds)
    gt = sc.generate_sorting(
        num_units=6, sampling_frequency=fs, durations=[seconds],
        firing_rates=[14, 10, 12, 9, 11, 7], refractory_period_ms=3.0, seed=11,
    )
    rng = np.random.default_rng(3)
    t = {str(u): gt.get_unit_spike_train(u) for u in gt.unit_ids}
    ids = [str(u) for u in gt.unit_ids]
    first = rng.random(t[ids[0]].size) < 0.7
    units = {
        "split_a": t[ids[0]][first],
        "split_b": t[ids[0]][~first],
        "merged": np.sort(np.concatenate([t[ids[1]], t[ids[2]]])),
        "copy_good": jitter_keep(rng, t[ids[3]], 0.92, 4, n),
        "copy_part": jitter_keep(rng, t[ids[3]], 0.55, 6, n),
        "good": jitter_keep(rng, t[ids[4]], 0.97, 2, n),
        "noise": noise(rng, 9.0, seconds, fs),
        "few": np.sort(
            np.concatenate([jitter_keep(rng, t[ids[4]], 0.25, 1, n), noise(rng, 6.0, seconds, fs)])
        ),
    }
    return run_case("split_merge", gt, sorting(units, fs), fs)


def edges():
    """Hand-made trains: jitter at exactly delta_frames (12) and one more, bursts (several
    spikes of one train within delta of one spike of the other; `burst3` against `pair`
    counts 3 matches before the cap at the tested unit's 2 spikes), a repeated sample, empty
    units on both sides, more tested units than GT units."""
    fs = 30000.0
    base = np.arange(1000, 61000, 3000)  # 20 spikes
    gt = sorting(
        {
            "at_delta": base,
            "past_delta": base + 500,
            "burst": np.array([5000, 5005, 5010, 20000, 20004, 40000, 40030, 40031]),
            "empty": np.array([], dtype=np.int64),
            "dup": np.array([100, 100, 300, 900, 900, 2000]),
            "burst3": np.array([70000, 70004, 70008]),
        },
        fs,
    )
    tested = sorting(
        {
            "plus12": base + 12,
            "plus13": base + 500 + 13,
            "minus12": base[:10] - 12,
            "burst_one": np.array([5003, 20002, 20010, 40015, 40031]),
            "t_empty": np.array([], dtype=np.int64),
            "dup_t": np.array([100, 105, 300, 300, 890, 2000]),
            "pair": np.array([70005, 70010]),
        },
        fs,
    )
    return run_case("edges", gt, tested, fs)


def other_rates():
    """Rates where delta_time * rate is not whole (32 kHz: 12.8 -> 12 frames; 24414.0625 Hz
    with 0.5 ms: 12.2 -> 12), and non-default scores."""
    cases = []
    for name, fs, delta in [("rate_32k", 32000.0, 0.4), ("rate_tdt", 24414.0625, 0.5)]:
        seconds = 3.0
        n = int(fs * seconds)
        gt = sc.generate_sorting(
            num_units=5, sampling_frequency=fs, durations=[seconds],
            firing_rates=[10, 14, 8, 12, 16], refractory_period_ms=4.0, seed=5,
        )
        rng = np.random.default_rng(int(fs))
        units = {}
        for i, u in enumerate(gt.unit_ids):
            units[f"u{i}"] = jitter_keep(rng, gt.get_unit_spike_train(u), [0.9, 0.6, 0.4, 0.8, 0.35][i], 13, n)
        units["extra"] = noise(rng, 5.0, seconds, fs)
        cases.append(
            run_case(
                name, gt, sorting(units, fs), fs,
                delta_time=delta, match_score=0.3, chance_score=0.05,
                well_detected_score=0.7, redundant_score=0.1, overmerged_score=0.3,
            )
        )
    return cases


def main():
    cases = [perturbed(), split_merge(), edges(), *other_rates()]
    header = {
        "generator": "synapse/dspk-synapse/tests/reference/make_comparison.py",
        "spikeinterface": spikeinterface.__version__,
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "pandas": pandas.__version__,
    }
    OUT.write_text(json.dumps({"versions": header, "cases": cases}, separators=(",", ":")) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")
    for case in cases:
        print(case["name"], case["delta_frames"], case["hungarian_match_12"], case["categories"])


if __name__ == "__main__":
    main()
