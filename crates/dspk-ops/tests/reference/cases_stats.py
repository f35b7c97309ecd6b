"""Reference cases for the statistics, non-linear filter and peak tests (tests/stats.rs,
tests/nonlinear.rs, tests/peaks.rs).

Inputs are float32 (what the device holds), multiples of 1/16 so the files stay small, stored
exactly; outputs are what numpy/scipy give
for those float32 values: means and standard deviations in float64, medians and median filters
as numpy/scipy compute them on the float32 array (exact elements), Gaussian smoothing in
float64, peaks as scipy.signal.find_peaks sample indices.
"""

import warnings

import numpy as np
from scipy import ndimage, signal

SEED = 20261130


def quantise(x):
    """float32 multiples of 1/16: exact, and short in the reference files."""
    return (np.round(np.asarray(x) * 16.0) / 16.0).astype(np.float32)


def stats_case(rng, channels, samples):
    x = rng.normal(0.0, 20.0, (channels, samples)) + rng.uniform(-500.0, 500.0, (channels, 1))
    # The last channel is quantised (int16-like data): repeated values around the middle.
    x[-1] = np.round(x[-1] / 4.0) * 4.0
    x = quantise(x)
    x64 = x.astype(np.float64)
    return {
        "x": x,
        "mean": x64.mean(axis=1),
        "std": x64.std(axis=1),
        "median": np.median(x, axis=1),
        "madnoise": np.median(np.abs(x), axis=1).astype(np.float64) / 0.6745,
    }


def medfilt_case(rng, channels, samples, sizes):
    x = np.round(rng.normal(0.0, 10.0, (channels, samples))).astype(np.float32)
    case = {"x": x, "sizes": np.array(sizes)}
    with warnings.catch_warnings():
        # scipy warns when the kernel is longer than the signal (zero padding, as tested).
        warnings.simplefilter("ignore")
        for k in sizes:
            case[f"k{k}"] = np.stack([signal.medfilt(row, k) for row in x])
    return case


def gaussian_case(rng, channels, samples, sigmas):
    x = quantise(rng.normal(0.0, 10.0, (channels, samples)))
    case = {"x": x, "sigmas": np.array(sigmas)}
    for i, sigma in enumerate(sigmas):
        case[f"s{i}"] = ndimage.gaussian_filter1d(x.astype(np.float64), sigma, axis=1)
    return case


def device_rule(values, height, distance):
    """The device's distance rule (see dspk_ops::PeakDetector): a local maximum (scipy's,
    plateaus included) at or above `height` survives when no other such maximum within
    `distance - 1` samples is higher, or as high and earlier."""
    candidates, _ = signal.find_peaks(values, height=height)
    kept = []
    for p in candidates:
        rivals = [q for q in candidates if q != p and abs(int(q) - int(p)) < distance]
        if all(values[q] < values[p] or (values[q] == values[p] and q > p) for q in rivals):
            kept.append(p)
    return np.array(kept, dtype=np.int64)


def spikes_case(rng, channels, samples, height, distance):
    """Noise with negative spike-like deflections; peaks of -x as Kilosort-style detection
    finds them. Checked here: scipy's sequential distance rule and the device rule agree."""
    t = np.arange(samples)
    x = rng.normal(0.0, 1.0, (channels, samples))
    x = ndimage.gaussian_filter1d(x, 1.0, axis=1) * 2.0
    for c in range(channels):
        time = 30
        while time < samples - 30:
            amplitude = rng.uniform(8.0, 25.0)
            x[c] -= amplitude * np.exp(-0.5 * ((t - time) / 2.0) ** 2)
            x[c] += 0.3 * amplitude * np.exp(-0.5 * ((t - time - 8) / 5.0) ** 2)
            time += int(rng.integers(25, 200))
    x = quantise(x)
    channel_of, sample_of = [], []
    for c in range(channels):
        peaks, _ = signal.find_peaks(-x[c], height=height, distance=distance)
        assert np.array_equal(peaks, device_rule(-x[c], height, distance)), c
        channel_of += [c] * len(peaks)
        sample_of += list(peaks)
    return {
        "x": x,
        "height": height,
        "distance": distance,
        "channel": np.array(channel_of),
        "sample": np.array(sample_of),
    }


def plateau_case():
    """Flat peaks (scipy takes the middle, rounding down), a plateau at the end (no peak),
    equal neighbours and a NaN (no peak next to it)."""
    x = np.array(
        [0, 1, 1, 0, 2, 2, 2, 1, 3, 3, 3, 3, 0, 4, 1, 1, 4, 4, 2, 7, np.nan, 6, 5, 5, 5],
        dtype=np.float32,
    )
    peaks, _ = signal.find_peaks(x)
    return {"x": x, "sample": peaks}


def cases():
    rng = np.random.default_rng(SEED)
    return {
        "stats_odd": stats_case(rng, 4, 1001),
        "stats_even": stats_case(rng, 3, 64),
        "medfilt": medfilt_case(rng, 3, 257, [1, 3, 5, 11, 31]),
        "medfilt_short": medfilt_case(rng, 2, 5, [3, 11]),
        "gaussian": gaussian_case(rng, 2, 201, [0.5, 1.0, 2.5, 10.0]),
        "gaussian_short": gaussian_case(rng, 2, 7, [0.8, 3.0]),
        "peaks_spikes": spikes_case(rng, 3, 2000, 5.0, 20),
        "peaks_plateau": plateau_case(),
    }
