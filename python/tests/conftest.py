"""Shared fixtures: one small ground-truth recording from SpikeInterface's generator (seed
fixed), sorted once by ``dspk.sort`` for the tests that compare against it."""

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

#: The generated recording: small enough that a debug build sorts it in about a minute on
#: lavapipe (CI), large enough for several units on 32 channels.
GT = dict(durations=[10.0], num_channels=32, num_units=10, seed=2205)


@pytest.fixture(scope="session")
def ground_truth():
    import spikeinterface.full as si

    recording, sorting = si.generate_ground_truth_recording(**GT)
    return recording, sorting


@pytest.fixture(scope="session")
def python_sort(ground_truth, tmp_path_factory):
    """``dspk.sort`` of the ground truth (a SpikeInterface recording read through
    ``get_traces``), with its Phy folder, and the progress calls it made."""
    import dspk

    recording, _ = ground_truth
    out = tmp_path_factory.mktemp("python_sort") / "phy"
    calls = []
    result = dspk.sort(recording, out=out, progress=lambda *call: calls.append(call))
    return result, calls


@pytest.fixture(scope="session")
def dspk_command():
    """The ``dspk`` command: ``DSPK_CLI``, else ``$CARGO_TARGET_DIR/debug/dspk``, else
    ``dspk`` on the PATH."""
    candidates = [os.environ.get("DSPK_CLI")]
    target = os.environ.get("CARGO_TARGET_DIR")
    if target:
        candidates.append(str(Path(target) / "debug" / "dspk"))
    candidates.append(str(Path(__file__).resolve().parents[2] / "target" / "debug" / "dspk"))
    candidates.append(shutil.which("dspk"))
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return candidate
    pytest.fail("no dspk command: build it (cargo build -p dspk-cli) or set DSPK_CLI")


def spike_arrays(folder):
    """``spike_times`` and ``spike_clusters`` of a Phy folder."""
    folder = Path(folder)
    return (
        np.load(folder / "spike_times.npy").ravel(),
        np.load(folder / "spike_clusters.npy").ravel(),
    )
