"""Reference cases for the spatial operators (tests/spatial.rs): common average and median
reference (numpy.mean / numpy.median over axis 0), the channel second moment X X^T / n, and
channel mixing W @ X in dense and sparse (K indices and weights per output channel) form.

Inputs are rounded to float32 first, so the device sees exactly the values numpy used.
"""

import numpy as np


def f32(a):
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def window(rng, channels, samples):
    # Per-channel offsets and scales, like a filtered recording with a common component.
    common = rng.normal(0.0, 20.0, size=samples)
    x = rng.normal(0.0, 1.0, size=(channels, samples)) * rng.uniform(1.0, 50.0, size=(channels, 1))
    return f32(x + common + rng.uniform(-100.0, 100.0, size=(channels, 1)))


def cases():
    rng = np.random.default_rng(20261130)
    out = {}

    for name, (channels, samples) in {
        "spatial_car": (9, 37),
        "spatial_cmr_even": (8, 41),
        "spatial_cmr_odd": (7, 29),
    }.items():
        x = window(rng, channels, samples)
        if name == "spatial_cmr_even":
            # Ties across the middle: repeated values in a few columns.
            x[:4, 0] = 3.5
            x[2:6, 1] = -1.25
            x[:, 2] = 0.0
        if name == "spatial_car":
            out[name] = {"x": x, "out": x - np.mean(x, axis=0)}
        else:
            out[name] = {"x": x, "out": x - np.median(x, axis=0)}

    x = window(rng, 6, 333)
    out["spatial_covariance"] = {
        "x": x,
        "cov": x @ x.T / x.shape[1],
        "cov_centered": np.cov(x, bias=True),
    }

    channels, samples, k = 6, 45, 3
    x = window(rng, channels, samples)
    dense = f32(rng.normal(0.0, 1.0, size=(channels, channels)))
    indices = np.stack([rng.choice(channels, size=k, replace=False) for _ in range(channels)])
    weights = f32(rng.normal(0.0, 1.0, size=(channels, k)))
    sparse = np.zeros((channels, channels))
    for c in range(channels):
        sparse[c, indices[c]] = weights[c]
    out["spatial_mixing"] = {
        "x": x,
        "dense": dense,
        "dense_out": dense @ x,
        "indices": indices,
        "weights": weights,
        "sparse_out": sparse @ x,
    }
    return out
