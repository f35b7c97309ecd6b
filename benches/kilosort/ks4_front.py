#!/usr/bin/env python3
"""Upstream Kilosort4 4.1.7 on a ground-truth bench gen_ground_truth.py folder, for the side-by-side
figures of docs/PERFORMANCE.md: the whole sort through the bench's run_ks4.py (its stage times,
`runtime_drift` and `runtime_st0` among them), with the universal-template detection it runs
(`spikedetect.run`, once for drift and once for detection) captured on the way, so its
detection recall can be scored exactly as the `kilosort_front` example scores ours: the
fraction of true spikes of units above 50 uV with a detection within 0.4 ms of the trough (a
detection's trough is 10 samples before its Kilosort time at nt = 61, nt0min = 20).

    python3 ks4_front.py --gt GT_DIR --bench BENCH_DIR [--device cuda]

Prints `KS4_STAGE name seconds` lines, `KS4_DETECTION pass spikes seconds` lines and one
`KS4_RECALL found total recall` line.
"""
import argparse
import json
import os
import sys
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gt", required=True)
    ap.add_argument("--bench", required=True, help="the folder holding run_ks4.py")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()

    sys.path.insert(0, args.bench)
    import run_ks4
    from kilosort import spikedetect

    calls = []
    original = spikedetect.run

    def timed_run(*a, **k):
        started = time.time()
        st, tF, ops = original(*a, **k)
        calls.append((np.array(st, copy=True), time.time() - started))
        return st, tF, ops

    spikedetect.run = timed_run
    run_ks4.main(["--gt", args.gt, "--device", args.device, "--no-score"])
    spikedetect.run = original

    with open(os.path.join(args.gt, "ks4_out", "run_info.json")) as f:
        info = json.load(f)
    for name, seconds in sorted(info["ks_runtime_fields"].items()):
        print(f"KS4_STAGE {name} {seconds:.3f}")
    print(f"KS4_STAGE wall {info['wall_s']:.3f}")
    for i, (st, seconds) in enumerate(calls):
        print(f"KS4_DETECTION {'drift' if i + 1 < len(calls) else 'final'} {st.shape[0]} {seconds:.3f}")

    with open(os.path.join(args.gt, "recording.json")) as f:
        meta = json.load(f)
    fs = meta["sample_rate_hz"]
    amplitudes = np.asarray(meta["ground_truth"]["peak_amplitude_uv"])
    times = np.load(os.path.join(args.gt, "gt_spike_times.npy"))
    units = np.load(os.path.join(args.gt, "gt_spike_clusters.npy"))
    truth = np.sort(times[amplitudes[units] >= 50.0])
    troughs = np.sort(np.round(calls[-1][0][:, 0] * fs).astype(np.int64) - 10)
    tolerance = round(0.4 * fs / 1000)
    i = np.searchsorted(troughs, truth - tolerance)
    found = int(np.sum((i < troughs.size) & (troughs[np.minimum(i, troughs.size - 1)] <= truth + tolerance)))
    print(f"KS4_RECALL {found} {truth.size} {found / max(truth.size, 1):.4f}")


if __name__ == "__main__":
    main()
