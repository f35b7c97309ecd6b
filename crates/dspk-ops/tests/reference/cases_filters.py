"""Reference cases for the device filters (tests/filters.rs): multi-channel inputs filtered by
scipy with scipy's own designs (stored beside them, so the device kernels are checked apart
from our design code)."""

import numpy as np
from scipy import signal

FS = 30000.0


def recording(rng, channels, samples):
    """Noise, a slow oscillation, a DC offset and a few spike-like troughs, in microvolts."""
    t = np.arange(samples) / FS
    x = 10.0 * rng.standard_normal((channels, samples))
    x += 40.0 * np.sin(2 * np.pi * 7.0 * t) + 50.0
    for c in range(channels):
        for centre in rng.integers(30, samples - 30, size=4):
            k = np.arange(samples) - centre
            x[c] -= 120.0 * np.exp(-((k / 7.5) ** 2))
    return x


def cases():
    rng = np.random.default_rng(20261130)
    out = {}

    x = recording(rng, 2, 801)
    sos = signal.butter(3, 300.0, btype="highpass", output="sos", fs=FS)
    zi = signal.sosfilt_zi(sos)
    out["filters_highpass"] = {
        "x": x,
        "sos": sos,
        "sosfiltfilt": signal.sosfiltfilt(sos, x, axis=1),
        "sosfilt": signal.sosfilt(sos, x, axis=1),
        "sosfilt_steady": np.stack(
            [signal.sosfilt(sos, row, zi=zi * row[0])[0] for row in x]
        ),
    }

    x = recording(rng, 2, 701)
    sos = signal.butter(4, [300.0, 6000.0], btype="bandpass", output="sos", fs=FS)
    notch = np.concatenate(signal.iirnotch(60.0, 30.0, fs=FS)).reshape(1, 6)
    out["filters_bandpass"] = {
        "x": x,
        "sos": sos,
        "sosfiltfilt": signal.sosfiltfilt(sos, x, axis=1),
        "notch": notch,
        "notch_sosfiltfilt": signal.sosfiltfilt(notch, x, axis=1),
    }

    x = recording(rng, 2, 401)
    taps = signal.firwin(31, 3000.0, fs=FS)
    case = {"x": x, "taps": taps, "lfilter": signal.lfilter(taps, [1.0], x, axis=1)}
    for up, down in [(3, 2), (1, 3), (2, 1)]:
        case[f"resample_{up}_{down}"] = signal.resample_poly(x, up, down, axis=1)
    for q in (2, 3):
        case[f"decimate_iir_{q}"] = signal.decimate(x, q, axis=1)
        case[f"decimate_fir_{q}"] = signal.decimate(x, q, ftype="fir", axis=1)
    out["filters_fir"] = case
    return out
