#!/usr/bin/env python3
"""Kilosort 4.1.7 reference values for dspk-sorter-kilosort's equality tests (KILOSORT4.md §11).

The recording is ours (dspk-synapse's deterministic generator); the test regenerates it, so
only Kilosort's outputs are committed. Write the input, then run this where Kilosort 4.1.7,
torch, numpy and scipy are installed (the H200 machine, wheels of the ground-truth bench tools):

    DSPK_KS_REF_OUT=DIR cargo test -p dspk-sorter-kilosort --test kilosort_reference \
        -- --ignored --exact write_reference_input
    python3 ks4_reference.py --input DIR --out tests/reference --device cuda

Both runs use `templates_from_data = False` with *our* universal templates
(`universal_templates.npz`, written here from a closed formula, MIT like the rest of the repo,
not Kilosort's GPL file), so no random number enters before detection. Kilosort's detection is
called through its public `run_kilosort`; the script records what `spikedetect.run` returns and
stops the sort after the last detection pass (clustering is not needed for these values).

Writes into --out:
  universal_templates.npz  wTEMP [6, 61], wPCA [6, 61] (float32)
  ks4_static.npz           nblocks = 0: xcup, ycup, iC, Wrot, fwav, st0 [n, 6], tF [n, 10, 6]
  ks4_rigid.npz            nblocks = 1: dshift [batches, 1], st_drift [n, 6] (the drift pass)
  ks4_nonrigid.npz         nblocks = 5: dshift [batches, 9], yblk [9], st_drift [n, 6]
  recording.json           the input's description (its checksum ties it to the generator)
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np


def universal_templates():
    """Six unit-norm spike shapes (trough at sample 20 of 61) and six orthonormal components.

    Shapes: a negative Gaussian trough of width a followed by a positive bump of height b at
    lag c and width d; components: the leading right singular vectors of 96 such shapes with
    parameters on a grid, each with its largest-magnitude entry made positive.
    """
    t = np.arange(61, dtype=np.float64) - 20.0

    def shape(a, b, c, d):
        w = -np.exp(-t**2 / (2 * a * a)) + b * np.exp(-(t - c)**2 / (2 * d * d))
        return w / np.linalg.norm(w)

    wtemp = np.stack([shape(a, b, c, d) for a, b, c, d in [
        (2.0, 0.30, 9.0, 5.0), (3.0, 0.35, 11.0, 7.0), (4.0, 0.40, 13.0, 8.0),
        (1.5, 0.50, 7.0, 4.0), (5.0, 0.25, 16.0, 10.0), (2.5, 0.15, 10.0, 12.0)]])
    grid = [shape(a, b, c, d) for a in (1.5, 2.5, 3.5, 5.0) for b in (0.1, 0.3, 0.5)
            for c in (8.0, 12.0) for d in (4.0, 6.0, 9.0, 12.0)]
    _, _, vt = np.linalg.svd(np.stack(grid), full_matrices=False)
    wpca = vt[:6]
    signs = np.sign(wpca[np.arange(6), np.argmax(np.abs(wpca), axis=1)])
    wpca = wpca * signs[:, None]
    return wtemp.astype(np.float32), wpca.astype(np.float32)


def to_numpy(v):
    if hasattr(v, "detach"):
        return v.detach().cpu().numpy()
    return np.asarray(v)


class Stop(Exception):
    pass


def run(args, nblocks, templates_path):
    import torch
    from kilosort import run_kilosort, spikedetect

    with open(os.path.join(args.input, "recording.json")) as f:
        meta = json.load(f)
    with open(os.path.join(args.input, "chanMap.json")) as f:
        cm = json.load(f)
    probe = {
        "chanMap": np.asarray(cm["chanMap"], dtype=np.int32),
        "xc": np.asarray(cm["xc"], dtype=np.float32),
        "yc": np.asarray(cm["yc"], dtype=np.float32),
        "kcoords": np.asarray(cm["kcoords"], dtype=np.float32),
        "n_chan": int(cm["n_chan"]),
    }
    settings = {"n_chan_bin": int(meta["n_channels"]), "fs": float(meta["sample_rate_hz"]),
                "templates_from_data": False, "nblocks": nblocks}
    calls = []
    expected = 2 if nblocks > 0 else 1
    original = spikedetect.run
    spikedetect.template_path = lambda basename="wTEMP.npz": templates_path

    def recording_run(*a, **k):
        st, tF, ops = original(*a, **k)
        calls.append((np.array(st, copy=True), to_numpy(tF).copy(), ops))
        if len(calls) == expected:
            raise Stop()
        return st, tF, ops

    spikedetect.run = recording_run
    try:
        run_kilosort(settings=settings, probe=probe,
                     filename=os.path.join(args.input, meta["file"]),
                     results_dir=os.path.join(args.work, f"nblocks{nblocks}"),
                     data_dtype="int16", device=torch.device(args.device))
    except Stop:
        pass
    finally:
        spikedetect.run = original
    if len(calls) != expected:
        sys.exit(f"expected {expected} detection passes, saw {len(calls)}")
    return calls


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default=None, help="Kilosort's results dir (default: OUT/work)")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    args.work = args.work or os.path.join(args.out, "work")
    os.makedirs(args.out, exist_ok=True)

    wtemp, wpca = universal_templates()
    templates_path = os.path.join(args.out, "universal_templates.npz")
    np.savez(templates_path, wTEMP=wtemp, wPCA=wpca)

    (st0, tF, ops), = run(args, 0, templates_path)
    print("ops keys:", sorted(k for k in ops.keys() if isinstance(k, str)))
    np.savez(os.path.join(args.out, "ks4_static.npz"),
             xcup=to_numpy(ops["xcup"]), ycup=to_numpy(ops["ycup"]),
             iC=to_numpy(ops["iC"]), Wrot=to_numpy(ops["Wrot"]), fwav=to_numpy(ops["fwav"]),
             st0=st0, tF=tF)
    print(f"static: {st0.shape[0]} spikes, {to_numpy(ops['xcup']).size} centres")

    (st_drift, _, _), (_, _, ops) = run(args, 1, templates_path)
    dshift = to_numpy(ops["dshift"])
    np.savez(os.path.join(args.out, "ks4_rigid.npz"), dshift=dshift, st_drift=st_drift)
    print(f"rigid: {st_drift.shape[0]} drift-pass spikes, dshift {dshift.ravel().tolist()}")
    (st_drift, _, _), (_, _, ops) = run(args, 5, templates_path)
    dshift = to_numpy(ops["dshift"])
    np.savez(os.path.join(args.out, "ks4_nonrigid.npz"), dshift=dshift,
             yblk=to_numpy(ops["yblk"]), st_drift=st_drift)
    print(f"non-rigid: dshift shape {dshift.shape}, blocks at {to_numpy(ops['yblk']).tolist()}")
    shutil.copy(os.path.join(args.input, "recording.json"), os.path.join(args.out, "recording.json"))


if __name__ == "__main__":
    main()
