"""Checks dspk-synapse's probe writers against the Python readers.

Run after `cargo test -p dspk-synapse --test probe` (its `files_for_the_python_check` test
writes the files to `target/tmp/probe_check/`):

    python3 synapse/dspk-synapse/tests/probe_check.py target/tmp/probe_check

- `group.json` (`write_probeinterface`) must load with `probeinterface.read_probeinterface`
  and give the probe group the test wrote (`sample_group` in tests/probe.rs).
- `kilosort4.json` (`write_kilosort_json`) must load as Kilosort 4's `load_probe` loads a
  `.json` probe (`json.load`, lists to numpy arrays: `chanMap` int32, others float32, the
  keys `chanMap`, `xc`, `yc`, `n_chan` required); uses kilosort itself when it is installed.

Exits non-zero on the first mismatch. CI runs it (`.ci/run`, probeinterface 0.4.2 in a venv).
"""

import json
import sys
from pathlib import Path

import numpy as np
import probeinterface as pi


def check_probeinterface(path: Path) -> None:
    group = pi.read_probeinterface(path)
    assert len(group.probes) == 2, len(group.probes)
    first, second = group.probes
    np.testing.assert_array_equal(
        first.contact_positions, [[0, 0], [0, 12.5], [250, -7.25], [250, 20]]
    )
    np.testing.assert_array_equal(first.device_channel_indices, [3, 1, -1, 0])
    assert list(first.contact_ids) == ["s0e0", "s0e1", "s1e0", "s1e1"], first.contact_ids
    assert list(first.shank_ids) == ["0", "0", "1", "1"], first.shank_ids
    assert first.annotations.get("name") == "two-shank", first.annotations
    assert first.ndim == 2 and first.si_units == "um"
    assert list(first.contact_shapes) == ["circle"] * 4
    np.testing.assert_array_equal(second.contact_positions, [[1e-3, 5], [3, 1e6]])
    np.testing.assert_array_equal(second.device_channel_indices, [4, 2])
    # All-empty contact ids: probeinterface numbers them itself.
    assert list(second.contact_ids) == ["0", "1"], second.contact_ids
    # The group as SpikeInterface wires it: global device channels across probes.
    np.testing.assert_array_equal(
        group.get_global_device_channel_indices()["device_channel_indices"],
        [3, 1, -1, 0, 4, 2],
    )


def load_like_kilosort4(path: Path) -> dict:
    try:
        from kilosort.io import load_probe  # noqa: PLC0415 (optional)
    except ImportError:
        with open(path) as f:
            probe = json.load(f)
        for key, value in list(probe.items()):
            if isinstance(value, list):
                probe[key] = np.array(value, dtype=np.int32 if key == "chanMap" else np.float32)
        for key in ("chanMap", "yc", "xc", "n_chan"):
            assert key in probe, key
        return probe
    return load_probe(path)


def check_kilosort4(path: Path) -> None:
    probe = load_like_kilosort4(path)
    np.testing.assert_array_equal(probe["chanMap"], [3, 1, 0])
    np.testing.assert_array_equal(probe["xc"], [0, 0, 250])
    np.testing.assert_array_equal(probe["yc"], [0, 12.5, 20])
    np.testing.assert_array_equal(probe["kcoords"], [0, 0, 1])
    assert probe["n_chan"] == 3, probe["n_chan"]


def main() -> None:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "target/tmp/probe_check")
    check_probeinterface(folder / "group.json")
    check_kilosort4(folder / "kilosort4.json")
    print(f"probeinterface {pi.__version__}: {folder} ok")


if __name__ == "__main__":
    main()
