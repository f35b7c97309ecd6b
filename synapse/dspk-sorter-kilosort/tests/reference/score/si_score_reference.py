#!/usr/bin/env python3
"""SpikeInterface 0.104.7 reference values for dspk-sorter-kilosort's EMUsort score (`src/score`).

EMUsort 1.1.0 ranks sorts with SpikeInterface quality metrics (KILOSORT4.md §10.2). This script
builds small sortings with chosen spike trains and per-spike amplitudes, asks SpikeInterface for
the metrics with EMUsort's parameters and writes them, with the inputs, to `si_metrics.json`
beside this file. Run it in a throwaway virtual environment:

    python3 -m venv VENV
    VENV/bin/pip install spikeinterface==0.104.7 scipy numba
    VENV/bin/python tests/reference/score/si_score_reference.py

The metrics go through SpikeInterface's public `compute_*` functions on a `SortingAnalyzer`
(a one-channel recording of zeros). Amplitude cutoff reads the `spike_amplitudes` extension,
whose values are replaced by the chosen amplitudes before the metric runs; the fixture stores
the amplitudes as SpikeInterface hands them back per unit (float32). The SNR is an input of the
score (the sorter computes it from templates and noise), so each unit's SNR is a chosen number
here; the per-unit score is EMUsort's product of factors evaluated with numpy on those values.

NaN (a metric SpikeInterface leaves undefined) is written as null. A unit's spike times are a
list, or, for the train 0, s, 2s, ... with one spike per amplitude, the step s alone
("times_step").
"""
import json
import math
from pathlib import Path

import numpy as np
import spikeinterface as si
from spikeinterface.core import NumpyRecording, NumpySorting, create_sorting_analyzer
from spikeinterface.metrics.quality.misc_metrics import (
    compute_amplitude_cutoffs,
    compute_firing_ranges,
    compute_presence_ratios,
    compute_refrac_period_violations,
)
from spikeinterface.metrics.spiketrain.metrics import compute_firing_rates

assert si.__version__ == "0.104.7", si.__version__

SETTINGS = {
    "refractory_ms": 1.0,
    "censored_ms": 0.0,
    "presence_bin_s": 20.0,
    "presence_mean_fr_ratio": 0.5,
    "amplitude_bins": 32,
    "amplitude_smoothing_bins": 3,
    "amplitude_bins_min_ratio": 4,
    "firing_range_bin_s": 0.5,
    "firing_range_percentiles": [5.0, 95.0],
}


def refractory_train(rng, rate_hz, t0_s, t1_s, fs, refractory_s=0.002):
    """Poisson train at `rate_hz` between t0 and t1 with a dead time after each spike (samples)."""
    t = t0_s + np.cumsum(rng.exponential(1.0 / rate_hz, int(rate_hz * (t1_s - t0_s) * 2) + 10)
                         + refractory_s)
    t = t[t < t1_s]
    return np.floor(t * fs).astype(np.int64)


def scenario_main(rng):
    """65.3 s at 30 kHz: three full 20 s presence bins and a partial one, 130 firing-range bins."""
    fs = 30000.0
    n = int(65.3 * fs)
    units = {}

    # 0: clean 20 Hz unit, positive amplitudes cut below a detection threshold.
    t = refractory_train(rng, 20.0, 0.0, 65.3, fs)
    a = rng.normal(60.0, 12.0, t.size)
    keep = a > 48.0
    units["clean_cut"] = (t[keep], a[keep], 9.0)

    # 1: contaminated 30 Hz unit (uniform extra spikes), negative amplitudes (sign flipped by SI).
    t = refractory_train(rng, 30.0, 0.0, 65.3, fs)
    extra = rng.integers(0, n, t.size // 5)
    t = np.sort(np.concatenate([t, extra]))
    units["contaminated_neg"] = (t, -rng.normal(80.0, 15.0, t.size), 3.5)

    # 2: a unit firing in the first 25 s only, with bursts; Gaussian amplitudes.
    t = refractory_train(rng, 15.0, 0.0, 25.0, fs)
    burst = (t[:40, None] + np.array([0, 45, 90])[None, :]).ravel()
    t = np.sort(np.concatenate([t, burst]))
    units["early_bursty"] = (t, rng.normal(100.0, 20.0, t.size), 5.0)

    # 3: few spikes (< 32 * 4 amplitudes: amplitude cutoff NaN), duplicate times, spikes on bin
    #    edges (20 s, 40 s, 60 s = the last full edge, closed) and in the trailing partial bin.
    edges = [0, 15000, 600000, 600000, 600010, 1200000, 1800000, 1800001, 1900000, n - 1]
    t = np.sort(np.concatenate([edges, rng.integers(0, n, 60)]))
    units["sparse_edges"] = (t, rng.normal(40.0, 5.0, t.size), 12.0)

    # 4: one spike: contamination NaN (score NaN, skipped by the mean).
    units["single"] = (np.array([123456]), np.array([50.0]), 6.0)

    # 5: no spikes at all: every metric NaN.
    units["empty"] = (np.array([], dtype=np.int64), np.array([], dtype=np.float64), 5.0)

    # 6: all amplitudes equal (the histogram's range widens by 0.5 on each side).
    t = refractory_train(rng, 5.0, 0.0, 65.3, fs)
    units["flat_amplitude"] = (t, np.full(t.size, 70.0), 7.5)
    # 7: presence on the threshold: 33 spikes (threshold floor(33 / 65.3 * 20 * 0.5) = 5), the
    #    last full bin holds 6 only with its spike on the closed right edge (60 s); a spike on
    #    the last firing-range edge (65 s) in the dropped tail.
    t = np.concatenate([np.linspace(1000, 590000, 11), np.linspace(601000, 1190000, 11),
                        np.linspace(1201000, 1790000, 5), [1800000],
                        [1850000, 1900000, 1920000, 1950000, n - 1]]).astype(np.int64)
    units["last_edge"] = (t, rng.normal(60.0, 5.0, t.size), 8.0)
    return fs, n, units


def scenario_edges(rng):
    """2.6 s at 1 kHz: five firing-range bins of 500 samples holding 1, 2, 3, 4 and 6 spikes,
    the sixth of the last on its closed right edge (sample 2500); spikes after it dropped."""
    fs = 1000.0
    n = 2600
    t = np.array([100, 600, 700, 1100, 1200, 1300, 1600, 1700, 1800, 1900,
                  2050, 2150, 2250, 2350, 2450, 2500, 2550, 2599])
    return fs, n, {"ramp": (t, rng.normal(20.0, 2.0, t.size), 5.0)}


def scenario_amplitudes(rng):
    """30 s at 30 kHz, 40 evenly spaced units whose amplitudes vary: Gaussian, cut Gaussian,
    whole numbers (values on bin edges), a few distinct values, negative, skewed; sizes around
    the 128-spike minimum (32 bins x 4)."""
    fs = 30000.0
    n = 900000
    units = {}
    for k in range(40):
        size = [127, 128, 129, 200][k % 4] if k < 8 else int(rng.integers(128, 400))
        mu, sd = rng.uniform(20.0, 120.0), rng.uniform(2.0, 25.0)
        kind = k % 6
        if kind == 0:
            a = rng.normal(mu, sd, size)
        elif kind == 1:
            a = rng.normal(mu, sd, size * 3)
            a = a[a > mu - rng.uniform(0.0, 1.5) * sd][:size]
        elif kind == 2:
            a = np.round(rng.normal(mu, sd / 3.0, size))
        elif kind == 3:
            a = rng.choice(np.round(rng.uniform(10.0, 90.0, int(rng.integers(1, 5))), 1), size)
        elif kind == 4:
            a = -rng.normal(mu, sd, size)
        else:
            a = mu * rng.lognormal(0.0, 0.5, size)
        # Spike i at i * (n // size): written to the file as that step only.
        t = np.arange(a.size, dtype=np.int64) * (n // a.size)
        units[f"a{k:02d}"] = (t, a, float(rng.uniform(2.0, 10.0)))
    return fs, n, units


def scenario_short(rng):
    """10 s at a TDT-like rate: shorter than one presence bin (presence NaN for every unit)."""
    fs = 24414.0625
    n = int(10.0 * fs)
    units = {}
    t = refractory_train(rng, 40.0, 0.0, 10.0, fs, refractory_s=0.0005)
    units["a"] = (t, rng.normal(55.0, 10.0, t.size), 6.0)
    t = refractory_train(rng, 12.0, 2.0, 7.0, fs)
    units["b"] = (t, -rng.normal(45.0, 8.0, t.size), 2.0)
    # 260 Hz with violations everywhere: contamination clipped to 1, firing-rate factor ~0.
    t = np.sort(rng.integers(0, n, 2600))
    units["fast_noisy"] = (t, rng.normal(30.0, 3.0, t.size), 4.0)
    return fs, n, units


def scenario_tiny(rng):
    """0.3 s: shorter than a firing-range bin too (firing range NaN)."""
    fs = 30000.0
    n = 9000
    t = np.array([10, 20, 40, 3000, 8999])
    return fs, n, {"x": (t, np.array([5.0, 6.0, 7.0, 8.0, 9.0]), 5.0)}


def metrics_for(fs, n, units):
    ids = list(units.keys())
    sorting = NumpySorting.from_unit_dict(
        {uid: np.asarray(units[uid][0], dtype=np.int64) for uid in ids}, sampling_frequency=fs)
    recording = NumpyRecording([np.zeros((n, 1), dtype=np.float32)], sampling_frequency=fs)
    recording.set_dummy_probe_from_locations(np.array([[0.0, 0.0]]))
    analyzer = create_sorting_analyzer(sorting, recording, sparse=False, format="memory")
    analyzer.compute(["random_spikes", "templates"])
    analyzer.compute("spike_amplitudes")

    # Replace the amplitudes by the chosen ones, unit by unit in spike-vector order.
    ext = analyzer.get_extension("spike_amplitudes")
    spikes = sorting.to_spike_vector()
    amps = np.zeros(spikes.size, dtype=np.float32)
    for unit_index, uid in enumerate(ids):
        where = np.flatnonzero(spikes["unit_index"] == unit_index)
        order = np.argsort(units[uid][0], kind="stable")
        amps[where] = np.asarray(units[uid][1], dtype=np.float32)[order]
    ext.data["amplitudes"] = amps
    by_unit = ext.get_data(outputs="by_unit", concatenated=True)

    rp_contamination, rp_violations = compute_refrac_period_violations(
        analyzer, refractory_period_ms=SETTINGS["refractory_ms"],
        censored_period_ms=SETTINGS["censored_ms"])
    presence = compute_presence_ratios(
        analyzer, bin_duration_s=SETTINGS["presence_bin_s"],
        mean_fr_ratio_thresh=SETTINGS["presence_mean_fr_ratio"])
    cutoff = compute_amplitude_cutoffs(
        analyzer, num_histogram_bins=SETTINGS["amplitude_bins"],
        histogram_smoothing_value=SETTINGS["amplitude_smoothing_bins"],
        amplitudes_bins_min_ratio=SETTINGS["amplitude_bins_min_ratio"])
    rate = compute_firing_rates(analyzer)
    frange = compute_firing_ranges(
        analyzer, bin_size_s=SETTINGS["firing_range_bin_s"],
        percentiles=tuple(SETTINGS["firing_range_percentiles"]))

    out = []
    scores = []
    for uid in ids:
        snr = units[uid][2]
        # EMUsort 1.1.0's per-unit score (KILOSORT4.md §10.2) in its grouping and arithmetic
        # (`get_emusort_scores`: math.prod of type I, type II, firing-rate validity and SNR
        # terms; 1e-8 added to the rate and range inside their sigmoids).
        type_1 = 1.0 - rp_contamination[uid]
        type_2 = presence[uid] * np.nan_to_num(1.0 - cutoff[uid], nan=0.0)
        validity = (1.0 / (1.0 + np.exp((rate[uid] + 1e-8) - 200.0))
                    * (1.0 / (1.0 + np.exp((frange[uid] + 1e-8) - 200.0))))
        snr_term = 1.0 - (1.0 / (1.0 + np.exp(snr - 4.0)))
        score = type_1 * type_2 * validity * snr_term
        scores.append(score)
        out.append({
            "unit": uid,
            **train_json(np.sort(units[uid][0])),
            "amplitudes": [shortest_f32(v) for v in by_unit[uid]],
            "snr": snr,
            "rp_violations": int(rp_violations[uid]),
            "rp_contamination": nan_to_none(rp_contamination[uid]),
            "presence_ratio": nan_to_none(presence[uid]),
            "amplitude_cutoff": nan_to_none(cutoff[uid]),
            "firing_rate": nan_to_none(rate[uid]),
            "firing_range": nan_to_none(frange[uid]),
            "score": nan_to_none(score),
        })
    finite = [s for s in scores if not math.isnan(s)]
    run_score = float(np.nanmean(scores)) if finite else None
    return {"sample_rate": fs, "num_samples": n, "units": out, "run_score": run_score}


def train_json(times):
    """`{"times_step": s}` for the train 0, s, 2s, ... (as many spikes as amplitudes), else
    `{"times": [...]}`."""
    if times.size > 1 and times[0] == 0 and np.all(np.diff(times) == times[1]):
        return {"times_step": int(times[1])}
    return {"times": [int(v) for v in times]}


def shortest_f32(v):
    """The shortest decimal that reads back as the same float32 (keeps the file small)."""
    return float(np.format_float_positional(np.float32(v), unique=True, trim="0"))


def nan_to_none(v):
    v = float(v)
    return None if math.isnan(v) else v


def main():
    rng = np.random.default_rng(20260101)
    scenarios = {}
    for name, make in [("main", scenario_main), ("short", scenario_short), ("tiny", scenario_tiny),
                       ("edges", scenario_edges), ("amplitudes", scenario_amplitudes)]:
        fs, n, units = make(rng)
        scenarios[name] = metrics_for(fs, n, units)
    doc = {
        "generator": "tests/reference/score/si_score_reference.py",
        "spikeinterface": si.__version__,
        "settings": SETTINGS,
        "scenarios": scenarios,
    }
    path = Path(__file__).with_name("si_metrics.json")
    path.write_text(json.dumps(doc) + "\n")
    print(f"wrote {path.name}: " + ", ".join(
        f"{k} {len(v['units'])} units, run score {v['run_score']}" for k, v in scenarios.items()))


if __name__ == "__main__":
    main()
