"""Writes `lag_alignment.json`: the lags that the project's benchmark scorer (`score.py
--max-lag-ms`, its `align_lags`) chooses for a few sortings, for `tests/emg_groundtruth.rs`
to match with `dspk_synapse::groundtruth::align_lags`.

    pip install numpy
    python3 synapse/dspk-synapse/tests/reference/make_lag_alignment.py PATH/TO/score.py

Each case holds the ground-truth and sorted spike vectors (sample, label), the sample rate, the
lag bound and coincidence window, and per sorted cluster (ascending labels) the lag in samples,
the ground-truth unit and the coincidence count `align_lags` returned. The sortings are made
so that every rule of the choice matters: clusters late or early by a constant with jitter (a
flat-topped histogram: the tent decides), a cluster mixing two units at two lags (the larger
box wins), extra spikes, a cluster of random spikes, lags at the bound, and a sample
rate where rounding and truncation of the windows differ. No time is shifted below 0.
"""

import importlib.util
import json
import pathlib
import sys

import numpy as np

OUT = pathlib.Path(__file__).with_name("lag_alignment.json")


def load_score(path):
    spec = importlib.util.spec_from_file_location("score", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def regular(rng, n, start, mean, cv):
    """`n` quasi-regular spike samples from `start`."""
    return (start + np.cumsum(rng.normal(mean, cv * mean, n).clip(mean / 2))).astype(np.int64)


def case(rng, fs, max_lag_ms, delta_ms, plan):
    """Ground truth of four units and a sorting built from `plan`: per cluster a list of
    `(gt unit, fraction kept, lag, jitter)` parts, or `("noise", count)`."""
    gt = [regular(rng, 120, 2000 + 500 * u, 900 + 150 * u, 0.2) for u in range(4)]
    gt_t = np.concatenate(gt)
    gt_c = np.concatenate([np.full(t.size, u, np.int64) for u, t in enumerate(gt)])
    st, sc = [], []
    for label, parts in enumerate(plan):
        for part in parts:
            if part[0] == "noise":
                times = rng.integers(2000, int(gt_t.max()), part[1])
            else:
                unit, keep, lag, jitter = part
                times = gt[unit][rng.random(gt[unit].size) < keep]
                times = times + lag + rng.integers(-jitter, jitter + 1, times.size)
            st.append(times)
            sc.append(np.full(times.size, 10 + label, np.int64))
    st, sc = np.concatenate(st), np.concatenate(sc)
    order = np.argsort(st, kind="stable")
    st, sc = st[order], sc[order]
    order = np.argsort(gt_t, kind="stable")
    gt_t, gt_c = gt_t[order], gt_c[order]
    return gt_t, gt_c, st, sc, fs, max_lag_ms, delta_ms


def main():
    score = load_score(sys.argv[1])
    rng = np.random.default_rng(7)
    plans = [
        # 30 kHz, +-2 ms (60 samples), +-0.4 ms (12 samples).
        (30000.0, 2.0, 0.4, [
            [(0, 0.95, 25, 0)],
            [(1, 0.9, -40, 3)],
            [(2, 0.8, 0, 6), ("noise", 30)],
            [(3, 0.7, 60, 2)],
            [(0, 0.5, -10, 1), (1, 0.8, 30, 1)],
            [("noise", 15)],
        ]),
        # 32 kHz: L = round(48.0) = 48, w = round(12.8) = 13 (truncation would give 12).
        (32000.0, 1.5, 0.4, [
            [(3, 0.9, -47, 9)],
            [(2, 1.0, 13, 13)],
            [(1, 0.6, 5, 0), (2, 0.6, -5, 0)],
            [(0, 0.9, 48, 0)],
        ]),
        # A window as wide as the lag bound: L = w = 12.
        (30000.0, 0.4, 0.4, [
            [(0, 0.9, 7, 2)],
            [(1, 0.9, -12, 0)],
            [(2, 0.9, 3, 5), ("noise", 40)],
        ]),
    ]
    cases = []
    for fs, max_lag_ms, delta_ms, plan in plans:
        gt_t, gt_c, st, sc, fs, max_lag_ms, delta_ms = case(rng, fs, max_lag_ms, delta_ms, plan)
        shifted, info = score.align_lags(gt_t, gt_c, st, sc, fs, max_lag_ms, delta_ms)
        assert shifted.min() >= 0
        cases.append({
            "sample_rate_hz": fs,
            "max_lag_ms": max_lag_ms,
            "delta_ms": delta_ms,
            "gt_samples": gt_t.tolist(),
            "gt_labels": gt_c.tolist(),
            "sorted_samples": st.tolist(),
            "sorted_labels": sc.tolist(),
            "lags": [
                {"cluster": j, "lag_samples": v["lag_samples"], "gt_unit": v["gt_unit"],
                 "coincidences": v["coincidences"]}
                for j, v in sorted(info.items())
            ],
        })
    OUT.write_text(json.dumps({"numpy": np.__version__, "cases": cases}, separators=(",", ":")) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
