#!/usr/bin/env python3
"""Writes the scipy/numpy reference values the dspk-ops tests compare against.

Run from anywhere: `python3 crates/dspk-ops/tests/reference/make_reference.py`
(needs numpy and scipy; the versions used are written into every file). The tests read the
`.ref` files this writes and need no Python.

Each `cases_*.py` module beside this script has a function `cases()` returning a dict
`{case_name: {key: array_like or scalar}}`; each case becomes `<case_name>.ref`:

    # comment lines (versions, how the case was made)
    key: shape d0 d1 ... | v0 v1 v2 ...

with values in Python's `repr` (round-trips f64 exactly) in C order. Inputs are stored beside
the outputs, so the tests need not reproduce numpy's random generator.
"""

import importlib
import pathlib
import sys

import numpy as np
import scipy

HERE = pathlib.Path(__file__).resolve().parent


def format_value(value):
    array = np.asarray(value, dtype=np.float64)
    shape = " ".join(str(d) for d in array.shape)
    values = " ".join(repr(float(v)) for v in array.ravel(order="C"))
    return f"shape {shape} | {values}"


def write_case(name, case):
    lines = [
        f"# {name}: written by make_reference.py with numpy {np.__version__}, scipy {scipy.__version__}",
    ]
    for key, value in case.items():
        if not key.replace("_", "").isalnum():
            raise ValueError(f"{name}: bad key {key!r}")
        lines.append(f"{key}: {format_value(value)}")
    (HERE / f"{name}.ref").write_text("\n".join(lines) + "\n")


def main():
    sys.path.insert(0, str(HERE))
    modules = sorted(p.stem for p in HERE.glob("cases_*.py"))
    if len(sys.argv) > 1:
        modules = [m for m in modules if m in sys.argv[1:]]
    for module_name in modules:
        module = importlib.import_module(module_name)
        for name, case in module.cases().items():
            write_case(name, case)
            print(f"{module_name}: {name}.ref")


if __name__ == "__main__":
    main()
