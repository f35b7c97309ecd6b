"""Writes fixture_npy_reference.json: for every .npy file under tests/fixtures, what numpy
reads (dtype, shape, Fortran order, and the values in C order, or for larger arrays their sum,
an order-sensitive weighted sum and the first ten values), so the tests need no Python.

Run from this folder: python3 make_fixture_npy_reference.py
"""

import glob
import json
import os

import numpy as np

root = os.path.join("..", "..", "..", "..", "tests", "fixtures")
reference = {}
for path in sorted(glob.glob(os.path.join(root, "**", "*.npy"), recursive=True)):
    a = np.load(path, allow_pickle=False)
    entry = {
        "dtype": a.dtype.str,
        "shape": list(a.shape),
        "fortran_order": bool(a.flags["F_CONTIGUOUS"] and not a.flags["C_CONTIGUOUS"] and a.ndim > 1),
    }
    flat = a.ravel(order="C")
    if a.dtype.kind in "US":
        entry["strings"] = [str(v) for v in flat]
    elif flat.size <= 100:
        entry["values"] = [float(v) for v in flat]
    else:
        values = flat.astype(np.float64)
        weights = (np.arange(flat.size) % 97 + 1).astype(np.float64)
        entry["sum"] = float(values.sum())
        entry["weighted_sum"] = float((values * weights).sum())
        entry["first"] = [float(v) for v in values[:10]]
    reference[os.path.relpath(path, root).replace(os.sep, "/")] = entry
with open("fixture_npy_reference.json", "w") as f:
    json.dump(reference, f, indent=1)
