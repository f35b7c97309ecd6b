"""Reference cases for IIR filters with poles near z = 1 (tests/low_cut.rs).

The input is not stored: both sides compute it from `signal()` below (a DC offset of 500, two
sines and a uniform hash noise of standard deviation 1, rounded to float32), so only scipy's
outputs at chosen indices and each output's peak need committing. Filters are scipy's own
designs (stored, so the device kernels are checked apart from our design code).

Two sweeps: `lowcut_ci` (a representative subset, run by CI) and `lowcut_full` (Butterworth and
Chebyshev I orders 1-8, high-pass and band-pass, cut-offs fs/30000 to fs/4, zero and
steady-state starts and zero phase, 1e3 to 1e6 samples, plus 1e7-sample cases; run by the
ignored test).
"""

import numpy as np
from scipy import signal as sig

FS = 30000.0
OFFSET = 500.0
MASK = np.uint64(0xFFFFFFFFFFFFFFFF)
# mode codes: 0 forward from zero, 1 forward from steady state, 2 zero phase
MODES = (0, 1, 2)


def splitmix(n):
    """splitmix64 of the integers n (uint64 arithmetic wraps)."""
    with np.errstate(over="ignore"):
        z = n.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def signal(samples, f_in, f_out):
    """The test input (float32 values as float64): OFFSET + 20 sin(2 pi f_in n / fs)
    + 20 sin(2 pi f_out n / fs + 1) + sqrt(12) (u(n) - 0.5), u from splitmix64(n)."""
    n = np.arange(samples, dtype=np.float64)
    u = (splitmix(np.arange(samples)) >> np.uint64(11)).astype(np.float64) * 2.0**-53
    x = (
        OFFSET
        + 20.0 * np.sin(2.0 * np.pi * f_in * n / FS)
        + 20.0 * np.sin(2.0 * np.pi * f_out * n / FS + 1.0)
        + np.sqrt(12.0) * (u - 0.5)
    )
    return x.astype(np.float32).astype(np.float64)


def design(family, order, btype, fc):
    """scipy's sos and the in-band / out-of-band test frequencies."""
    if btype == "highpass":
        wn, f_in = fc, min(3.0 * fc, 0.3 * FS)
    else:
        hi = min(300.0 * fc, 0.45 * FS)
        wn, f_in = [fc, hi], np.sqrt(fc * hi)
    if family == "butter":
        sos = sig.butter(order, wn, btype=btype, output="sos", fs=FS)
    else:
        sos = sig.cheby1(order, 1.0, wn, btype=btype, output="sos", fs=FS)
    return sos, f_in, fc / 4.0


def run(sos, x, mode):
    if mode == 0:
        return sig.sosfilt(sos, x)
    if mode == 1:
        return sig.sosfilt(sos, x, zi=sig.sosfilt_zi(sos) * x[0])[0]
    return sig.sosfiltfilt(sos, x)


def add(out, rng, tag, family, order, btype, fc, samples, modes, checks):
    sos, f_in, f_out = design(family, order, btype, fc)
    x = signal(samples, f_in, f_out)
    kind = (0 if family == "butter" else 1) * 2 + (0 if btype == "highpass" else 1)
    out[f"{tag}_sos"] = sos
    # filter: family/type code, order, cut-off, in-band and out-of-band frequencies, samples
    out[f"{tag}_filter"] = [kind, order, fc, f_in, f_out, samples]
    for mode in modes:
        y = run(sos, x, mode)
        # the last samples, block-edge-prone positions and random ones
        index = np.unique(
            np.concatenate(
                [
                    np.arange(max(0, samples - 4), samples),
                    np.arange(0, min(4, samples)),
                    rng.integers(0, samples, size=checks),
                ]
            )
        )
        out[f"{tag}_m{mode}_index"] = index
        out[f"{tag}_m{mode}_value"] = y[index]
        out[f"{tag}_m{mode}_peak"] = np.max(np.abs(y))


def cases():
    rng = np.random.default_rng(20261202)
    ci = {}
    subset = [
        # the cases: 1-300 Hz band-pass, 1 Hz fifth-order high-pass (at most four
        # sections each: lavapipe compiles the kernels once per section count, slowly)
        ("butter", 3, "bandpass", 1.0, 60011),
        ("butter", 5, "highpass", 1.0, 60011),
        ("butter", 8, "highpass", FS / 30000, 200_000),
        ("cheby1", 4, "bandpass", FS / 30000, 100_000),
        ("cheby1", 4, "highpass", FS / 3000, 30_000),
        ("butter", 3, "bandpass", FS / 300, 10_000),
        ("cheby1", 5, "highpass", FS / 30, 1000),
        ("butter", 2, "highpass", FS / 4, 4000),
        ("butter", 1, "highpass", FS / 30000, 1_000_000),
    ]
    for i, (family, order, btype, fc, samples) in enumerate(subset):
        add(ci, rng, f"c{i}", family, order, btype, fc, samples, MODES, 24)
    ci["count"] = len(subset)

    full = {}
    lengths = [1000, 10_000, 100_000, 1_000_000]
    i = 0
    for family in ("butter", "cheby1"):
        for btype in ("highpass", "bandpass"):
            cutoffs = [FS / 30000, FS / 3000, FS / 300, FS / 30]
            if btype == "highpass":
                cutoffs.append(FS / 4)
            for order in range(1, 9):
                for fc in cutoffs:
                    samples = lengths[(i + order) % len(lengths)]
                    add(full, rng, f"c{i}", family, order, btype, fc, samples, MODES, 16)
                    i += 1
    for family, order, btype, fc in [
        ("butter", 3, "bandpass", 1.0),
        ("cheby1", 8, "highpass", FS / 30000),
    ]:
        add(full, rng, f"c{i}", family, order, btype, fc, 10_000_000, MODES, 16)
        i += 1
    full["count"] = i
    # two sections whose pole radii differ by about one ulp: scipy's order is its rounding's
    order = {"sos": sig.butter(10, [150.0, 14850.0], btype="bandpass", output="sos", fs=FS)}
    return {"lowcut_ci": ci, "lowcut_full": full, "design_butter_ulp_order": order}
