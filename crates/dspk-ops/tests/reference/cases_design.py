"""Reference cases for dspk_ops::design and dspk_ops::linalg (scipy.signal / numpy.linalg).

Filter designs are stored as numbered entries `params_<i>` + outputs `<what>_<i>` with a scalar
`count`, so the Rust tests loop over them. Band kinds: 0 lowpass, 1 highpass, 2 bandpass,
3 bandstop. Windows: 0 hamming, 1 kaiser (beta in params).
"""

import numpy as np
from scipy import signal

BTYPES = ["lowpass", "highpass", "bandpass", "bandstop"]


def _iir_case(designs):
    case = {"count": len(designs)}
    for i, (params, sos) in enumerate(designs):
        case[f"params_{i}"] = params
        case[f"sos_{i}"] = sos
        case[f"zi_{i}"] = signal.sosfilt_zi(sos)
    return case


def butter_case():
    designs = []
    fs = 30000.0
    for order in range(1, 9):
        for kind, wn in enumerate([300.0, 300.0, (300.0, 6000.0), (300.0, 6000.0)]):
            sos = signal.butter(order, wn, BTYPES[kind], output="sos", fs=fs)
            lo, hi = (wn, 0.0) if np.isscalar(wn) else wn
            designs.append(([kind, order, lo, hi, fs], sos))
    for kind, order, lo, hi, fs in [
        (0, 5, 0.2, 0.0, 2.0),
        (1, 4, 0.45, 0.0, 2.0),
        (2, 2, 0.1, 0.9, 2.0),
        (3, 5, 0.3, 0.35, 2.0),
        (0, 8, 14000.0, 0.0, 30000.0),
        (2, 4, 1.0, 14000.0, 30000.0),
    ]:
        wn = lo if kind < 2 else (lo, hi)
        sos = signal.butter(order, wn, BTYPES[kind], output="sos", fs=fs)
        designs.append(([kind, order, lo, hi, fs], sos))
    return _iir_case(designs)


def cheby1_case():
    designs = []
    for kind, order, rp, lo, hi, fs in [
        (0, 4, 1.0, 1000.0, 0.0, 30000.0),
        (1, 5, 0.5, 300.0, 0.0, 30000.0),
        (2, 3, 1.0, 300.0, 6000.0, 30000.0),
        (3, 4, 0.5, 45.0, 55.0, 1000.0),
        (0, 1, 3.0, 0.3, 0.0, 2.0),
        (0, 8, 0.05, 0.8 / 2, 0.0, 2.0),
        (0, 8, 0.05, 0.8 / 3, 0.0, 2.0),
        (2, 6, 0.1, 0.05, 0.2, 2.0),
    ]:
        wn = lo if kind < 2 else (lo, hi)
        sos = signal.cheby1(order, rp, wn, BTYPES[kind], output="sos", fs=fs)
        designs.append(([kind, order, lo, hi, fs, rp], sos))
    return _iir_case(designs)


def notch_case():
    case = {}
    cases = [(50.0, 30.0, 30000.0), (60.0, 30.0, 30000.0), (50.0, 35.0, 1000.0), (0.3, 2.0, 2.0)]
    case["count"] = len(cases)
    for i, (w0, q, fs) in enumerate(cases):
        b, a = signal.iirnotch(w0, q, fs)
        case[f"params_{i}"] = [w0, q, fs]
        case[f"ba_{i}"] = np.concatenate([b, a])
    return case


def fir_case():
    case = {}
    firs = [
        (0, 31, 1000.0, 0.0, 30000.0, 0, 0.0),
        (0, 32, 1000.0, 0.0, 30000.0, 0, 0.0),
        (0, 101, 3000.0, 0.0, 30000.0, 1, 8.6),
        (0, 100, 3000.0, 0.0, 30000.0, 1, 8.6),
        (1, 51, 300.0, 0.0, 30000.0, 0, 0.0),
        (1, 75, 0.3, 0.0, 2.0, 1, 5.0),
        (2, 61, 300.0, 6000.0, 30000.0, 0, 0.0),
        (2, 60, 300.0, 6000.0, 30000.0, 1, 6.0),
        (3, 71, 0.2, 0.4, 2.0, 0, 0.0),
        (0, 1, 0.5, 0.0, 2.0, 0, 0.0),
        (0, 2, 0.5, 0.0, 2.0, 1, 3.0),
    ]
    case["count"] = len(firs)
    for i, (kind, numtaps, lo, hi, fs, win, beta) in enumerate(firs):
        window = "hamming" if win == 0 else ("kaiser", beta)
        cutoff = lo if kind < 2 else [lo, hi]
        pass_zero = BTYPES[kind]
        h = signal.firwin(numtaps, cutoff, window=window, pass_zero=pass_zero, fs=fs)
        case[f"params_{i}"] = [kind, numtaps, lo, hi, fs, win, beta]
        case[f"taps_{i}"] = h
    atten = [5.0, 21.0, 21.5, 30.0, 50.0, 50.5, 60.0, 80.0, 120.0]
    case["beta_atten"] = atten
    case["beta"] = [signal.kaiser_beta(a) for a in atten]
    ord_in = [(8.0, 0.1), (40.0, 0.05), (60.0, 0.01), (-65.0, 0.02), (100.0, 0.001)]
    case["kaiserord_in"] = ord_in
    case["kaiserord_out"] = [signal.kaiserord(r, w) for r, w in ord_in]
    att_in = [(11, 0.1), (101, 0.02), (1001, 0.001)]
    case["kaiser_atten_in"] = att_in
    case["kaiser_atten_out"] = [signal.kaiser_atten(n, w) for n, w in att_in]
    case["hamming_9"] = signal.get_window("hamming", 9, fftbins=False)
    case["kaiser_8"] = signal.get_window(("kaiser", 14.0), 8, fftbins=False)
    return case


RATIOS = [(1, 2), (2, 1), (3, 2), (2, 3), (1, 3), (4, 6), (5, 5)]


def resample_case():
    rng = np.random.default_rng(1)
    x = rng.standard_normal(201)
    case = {"x": x, "count": len(RATIOS)}
    for i, (up, down) in enumerate(RATIOS):
        g = np.gcd(up, down)
        u, d = up // g, down // g
        case[f"ratio_{i}"] = [up, down]
        if u != d:
            m = max(u, d)
            case[f"taps_{i}"] = signal.firwin(20 * m + 1, 1.0 / m, window=("kaiser", 5.0)) * u
        case[f"y_{i}"] = signal.resample_poly(x, up, down)
    return case


def decimate_case():
    rng = np.random.default_rng(2)
    x = rng.standard_normal(301)
    case = {"x": x}
    for q in (2, 3):
        case[f"iir_sos_{q}"] = signal.cheby1(8, 0.05, 0.8 / q, output="sos")
        case[f"iir_y_{q}"] = signal.decimate(x, q)
        case[f"fir_taps_{q}"] = signal.firwin(20 * q + 1, 1.0 / q, window="hamming")
        case[f"fir_y_{q}"] = signal.decimate(x, q, ftype="fir")
    return case


def filter_case():
    rng = np.random.default_rng(3)
    x = rng.standard_normal(501) * 50.0 + 10.0
    fs = 30000.0
    hp = signal.butter(3, 300.0, "highpass", output="sos", fs=fs)
    bp = signal.butter(3, (300.0, 6000.0), "bandpass", output="sos", fs=fs)
    zi = signal.sosfilt_zi(bp) * x[0]
    y_zi, zf = signal.sosfilt(bp, x, zi=zi)
    fir = signal.firwin(31, 3000.0, fs=fs)
    b, a = signal.butter(2, 1000.0, fs=fs)
    return {
        "x": x,
        "hp_sos": hp,
        "bp_sos": bp,
        "hp_sosfilt": signal.sosfilt(hp, x),
        "hp_sosfiltfilt": signal.sosfiltfilt(hp, x),
        "bp_sosfiltfilt": signal.sosfiltfilt(bp, x),
        "bp_sosfiltfilt_pad50": signal.sosfiltfilt(bp, x, padlen=50),
        "bp_sosfilt_zi": y_zi,
        "bp_zf": zf,
        "fir": fir,
        "fir_lfilter": signal.lfilter(fir, [1.0], x),
        "fir_filtfilt": signal.filtfilt(fir, [1.0], x),
        "fir_zi": signal.lfilter_zi(fir, [1.0]),
        "iir_b": b,
        "iir_a": a,
        "iir_lfilter": signal.lfilter(b, a, x),
        "iir_filtfilt": signal.filtfilt(b, a, x),
        "iir_zi": signal.lfilter_zi(b, a),
    }


def eigh_cases():
    rng = np.random.default_rng(4)
    cases = {}
    for n in (1, 2, 7, 33):
        m = rng.standard_normal((n, n))
        a = (m + m.T) / 2
        w, v = np.linalg.eigh(a)
        cases[f"linalg_eigh_{n}"] = {"a": a, "w": w, "v": v}
    return cases


def whiten_case():
    rng = np.random.default_rng(5)
    channels, samples = 12, 301
    mix = rng.standard_normal((channels, channels)) * 0.3 + np.eye(channels)
    x = mix @ rng.standard_normal((channels, samples)) + 0.5
    cov = np.cov(x)
    second = x @ x.T / samples
    eps = 1e-6
    w, e = np.linalg.eigh(second)
    zca = (e / np.sqrt(w + eps)) @ e.T
    # Two-column probe, 20 um pitch; local ZCA over the 5 nearest channels (self first, ties by
    # channel index), row c = row of c in its neighbourhood's ZCA.
    pos = np.array([[(c % 2) * 32.0, (c // 2) * 20.0] for c in range(channels)])
    k = 5
    local = np.zeros((channels, channels))
    for c in range(channels):
        d = ((pos - pos[c]) ** 2).sum(axis=1)
        ix = np.argsort(d, kind="stable")[:k]
        wl, el = np.linalg.eigh(second[np.ix_(ix, ix)])
        zl = (el / np.sqrt(wl + eps)) @ el.T
        local[c, ix] = zl[0]
    return {
        "x": x,
        "cov": cov,
        "second": second,
        "eps": eps,
        "zca": zca,
        "positions": pos,
        "k": k,
        "local": local,
    }


def cases():
    out = {
        "design_butter": butter_case(),
        "design_cheby1": cheby1_case(),
        "design_notch": notch_case(),
        "design_fir": fir_case(),
        "design_resample": resample_case(),
        "design_decimate": decimate_case(),
        "design_filter": filter_case(),
        "linalg_whiten": whiten_case(),
    }
    out.update(eigh_cases())
    return out
