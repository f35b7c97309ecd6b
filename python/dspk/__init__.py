"""dspk: spike sorting with Kilosort4 (and EMUsort) on any GPU, from Python.

The same sorter as the ``dspk`` command, with the same settings (Kilosort4's names), the
same recordings and probes, and the same Phy folder::

    import dspk

    rec = dspk.open("data.bin", n_chan_bin=385, fs=30000)     # or any format dspk reads
    result = dspk.sort(rec, probe="chanMap.mat", settings={"Th_learned": 7}, out="sorted/")
    result.spike_times, result.spike_clusters, result.amplitudes, result.templates

A SpikeInterface recording is sorted as it is (``dspk.sort(si_recording)``): one that is a
single binary file (a binary recording or a saved folder) is read from that file by dspk's
reader; any other in chunks through ``get_traces`` unscaled (``return_in_uV=False``). Either
way int16 recordings reach the device as int16.
``import dspk.spikeinterface`` registers the sorters ``dspk_kilosort4`` and ``dspk_emusort``
with SpikeInterface (``si.run_sorter("dspk_kilosort4", recording, folder=...)``).

The runtime is chosen as everywhere in dspk: ``DSPK_RUNTIME=wgpu|cuda|hip|cpu`` among those
compiled in (the best available when unset), ``device=N`` (or ``DSPK_DEVICE=N``) its device.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Union

import numpy as np


def _quiet_vulkan_device_select() -> None:
    # Mesa's Vulkan device-selection layer makes libwayland print "XDG_RUNTIME_DIR is invalid"
    # on every Vulkan instance when there is no login session (SSH, containers, CI). As the
    # `dspk` command does, turn the layer off then, unless a device choice is asked of it
    # (it only orders GPUs on desktops with several). Done at import, before any device opens.
    if not sys.platform.startswith("linux"):
        return
    runtime_dir = os.environ.get("XDG_RUNTIME_DIR")
    if runtime_dir is not None and os.path.isabs(runtime_dir):
        return
    if any(name in os.environ for name in ("NODEVICE_SELECT", "MESA_VK_DEVICE_SELECT", "DRI_PRIME")):
        return
    os.environ["NODEVICE_SELECT"] = "1"


_quiet_vulkan_device_select()

from . import _dspk  # noqa: E402
from ._dspk import DspkError, Recording  # noqa: E402

__version__ = _dspk.__version__

__all__ = [
    "DspkError",
    "KilosortSettings",
    "Recording",
    "SortResult",
    "open",
    "runtime",
    "sort",
]

PathLike = Union[str, "os.PathLike[str]"]

#: Kilosort's names for how a plain binary file is read; given to ``open`` (or in a sort's
#: settings with a path), as ``dspk sort --set n_chan_bin=385`` takes them.
_PLAIN_KEYS = ("n_chan_bin", "fs", "data_dtype")


def _setting_text(key: str, value: Any) -> str:
    """A setting's value as the text ``--set KEY=VALUE`` gives it: strings as they are, paths
    as strings, everything else as JSON (``True`` -> ``true``, ``None`` -> ``null``, lists)."""
    if isinstance(value, str):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (np.ndarray, tuple)):
        value = list(np.asarray(value).tolist())
    try:
        return json.dumps(value)
    except TypeError:
        raise TypeError(
            f"setting {key}: a {type(value).__name__} is not a setting value "
            "(numbers, booleans, None, strings, paths and lists of numbers are)"
        ) from None


def _pairs(settings: Optional[Mapping[str, Any]]) -> list[tuple[str, str]]:
    if settings is None:
        return []
    if not isinstance(settings, Mapping):
        raise TypeError(
            f"settings must be a dict or dspk.KilosortSettings, not {type(settings).__name__}"
        )
    pairs = []
    for key, value in settings.items():
        if not isinstance(key, str):
            raise TypeError(f"setting names are strings, got {key!r}")
        pairs.append((key, _setting_text(key, value)))
    return pairs


class KilosortSettings(MutableMapping):
    """The sorter's settings under Kilosort4's names: a preset (``"kilosort4"``, the default,
    or ``"emusort"``) and the settings changed from it, each checked as it is set by the same
    parser as ``dspk sort --set KEY=VALUE`` (an unknown name, a wrong type or a value out of
    range raises ``ValueError`` with the command's message).

    ``settings["Th_learned"]`` (or ``settings.Th_learned``) reads every setting, changed or
    not; ``dict(settings)`` is all of them; ``settings.changed`` only those set.
    """

    def __init__(self, preset: Optional[str] = None, **settings: Any) -> None:
        object.__setattr__(self, "preset", preset)
        object.__setattr__(self, "changed", {})
        _dspk.settings_json(preset, [])
        for key, value in settings.items():
            self[key] = value

    def _all(self) -> dict:
        return json.loads(_dspk.settings_json(self.preset, _pairs(self.changed)))

    def __getitem__(self, key: str) -> Any:
        return self._all()[key]

    def __setitem__(self, key: str, value: Any) -> None:
        trial = dict(self.changed)
        trial[key] = value
        _dspk.settings_json(self.preset, _pairs(trial))
        self.changed[key] = value

    def __delitem__(self, key: str) -> None:
        del self.changed[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def __getattr__(self, key: str) -> Any:
        try:
            return self._all()[key]
        except KeyError:
            raise AttributeError(key) from None

    def __setattr__(self, key: str, value: Any) -> None:
        self[key] = value

    def to_json(self) -> str:
        """Every setting as JSON (what the Phy folder's ``dspk_settings.json`` holds)."""
        return _dspk.settings_json(self.preset, _pairs(self.changed))

    def __repr__(self) -> str:
        changed = ", ".join(f"{k}={v!r}" for k, v in self.changed.items())
        preset = f"preset={self.preset!r}" if self.preset else ""
        return f"KilosortSettings({', '.join(p for p in (preset, changed) if p)})"


def open(
    path: PathLike,
    n_chan_bin: Optional[int] = None,
    fs: Optional[float] = None,
    data_dtype: Optional[str] = None,
) -> Recording:
    """Opens a recording as ``dspk sort`` does: any format dspk reads (SpikeGLX, Open Ephys,
    a SpikeInterface binary folder, a dspk raw file, ...), or with ``n_chan_bin`` and ``fs``
    (and ``data_dtype``, int16 by default) a plain binary file as Kilosort reads it.

    Raises ``FileNotFoundError`` for a path that does not exist, ``ValueError`` for a wrong
    plain description, ``DspkError`` for what the reader reports.
    """
    plain = {"n_chan_bin": n_chan_bin, "fs": fs, "data_dtype": data_dtype}
    pairs = [(k, _setting_text(k, v)) for k, v in plain.items() if v is not None]
    return _dspk.open(os.fspath(path), pairs)


def _shank_numbers(recording: Any) -> np.ndarray:
    """Each channel's shank (Kilosort's ``kcoords``) from the probes attached to a
    SpikeInterface recording: a probe's ``shank_ids`` (numbers as they are, other names
    numbered in order of appearance), each probe's after the previous probe's; 0 without."""
    n = recording.get_num_channels()
    try:
        probes = recording.get_probegroup().probes
    except Exception:
        return np.zeros(n, dtype=np.uint32)
    shanks, first = [], 0
    for probe in probes:
        shank_ids = getattr(probe, "shank_ids", None)
        if shank_ids is None:
            shank_ids = [""] * probe.get_contact_count()
        ids = [str(s) for s in shank_ids]
        if all(s.isdigit() for s in ids):
            numbers = [int(s) for s in ids]
        else:
            order: dict[str, int] = {}
            numbers = [order.setdefault(s, len(order)) for s in ids]
        shanks.extend(first + s for s in numbers)
        first += max(numbers, default=-1) + 1
    if len(shanks) != n:
        return np.zeros(n, dtype=np.uint32)
    return np.asarray(shanks, dtype=np.uint32)


def _binary_file(recording: Any) -> Optional[tuple[str, int]]:
    """The file and header length of a SpikeInterface recording whose samples are one
    interleaved little-endian binary file (``is_binary_compatible()``: a binary recording or a
    saved binary folder, not sliced or preprocessed), else ``None``."""
    try:
        if not recording.is_binary_compatible():
            return None
        description = recording.get_binary_description()
    except Exception:
        return None
    paths = list(description.get("file_paths") or [])
    dtype = np.dtype(description.get("dtype"))
    if (
        len(paths) != 1
        or description.get("time_axis") != 0
        or description.get("num_channels") != recording.get_num_channels()
        or dtype != np.dtype(recording.get_dtype())
        or dtype.byteorder == ">"
        or not os.path.isfile(paths[0])
    ):
        return None
    return os.fspath(paths[0]), int(description.get("file_offset") or 0)


def _from_spikeinterface(recording: Any) -> Recording:
    """A SpikeInterface recording (its segment 0) as a ``dspk.Recording``: stored values with
    their gains and offsets, channel locations from ``get_channel_locations()``, shanks from
    the probe's ``shank_ids``. A recording that is one binary file (``is_binary_compatible()``)
    is read from that file by dspk's own reader, as ``dspk sort`` reads it; any other through
    ``get_traces`` (unscaled, SpikeInterface's default)."""
    segments = recording.get_num_segments()
    if segments != 1:
        raise ValueError(
            f"the recording has {segments} segments; dspk sorts one "
            "(spikeinterface.concatenate_recordings(...) joins them)"
        )
    try:
        locations = np.asarray(recording.get_channel_locations(), dtype=np.float64)
    except Exception as error:
        raise ValueError(
            "the recording has no channel locations, and the sorter needs them: attach a "
            "probe (recording.set_probe(probe), or probeinterface's generate_linear_probe), "
            f"or give dspk.sort a probe file (probe=...). SpikeInterface said: {error}"
        ) from error
    if locations.ndim != 2 or locations.shape[1] < 2:
        raise ValueError(f"channel locations of shape {locations.shape}; expected channels x 2")
    n = recording.get_num_channels()
    gains = recording.get_channel_gains()
    offsets = recording.get_channel_offsets()
    gains = np.ones(n) if gains is None else np.asarray(gains, dtype=np.float64)
    offsets = np.zeros(n) if offsets is None else np.asarray(offsets, dtype=np.float64)
    return _dspk.python_recording(
        recording,
        float(recording.get_sampling_frequency()),
        int(recording.get_num_samples(segment_index=0)),
        np.dtype(recording.get_dtype()).name,
        [str(c) for c in recording.get_channel_ids()],
        gains.tolist(),
        offsets.tolist(),
        np.ascontiguousarray(locations[:, :2]),
        _shank_numbers(recording).tolist(),
        _binary_file(recording),
    )


def _as_recording(recording: Any, plain: list[tuple[str, str]]) -> Recording:
    if isinstance(recording, Recording):
        if plain:
            raise ValueError(
                f"{', '.join(k for k, _ in plain)} describe a file to open; this recording is "
                "already open (give them to dspk.open, or pass the path)"
            )
        return recording
    if isinstance(recording, (str, os.PathLike)):
        return _dspk.open(os.fspath(recording), plain)
    if hasattr(recording, "get_traces") and hasattr(recording, "get_num_segments"):
        return _from_spikeinterface(recording)
    raise TypeError(
        "recording must be a dspk.Recording, a path or a SpikeInterface recording, not "
        f"{type(recording).__name__}"
    )


def _tqdm_progress() -> Optional[Callable[[str, int, int], None]]:
    """A callback drawing one tqdm bar per stage, or None without tqdm."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    state: dict[str, Any] = {"stage": None, "bar": None}

    def progress(stage: str, done: int, total: int) -> None:
        if stage != state["stage"]:
            if state["bar"] is not None:
                state["bar"].close()
            state["stage"] = stage
            state["bar"] = tqdm(total=total, desc=stage, unit="window", leave=False)
        bar = state["bar"]
        bar.total = total
        bar.update(done - bar.n)
        if done >= total:
            bar.close()
            state["stage"], state["bar"] = None, None

    return progress


@dataclass
class SortResult:
    """What a sort found, as Kilosort4's Phy folder holds it.

    ``spike_times`` (int64 samples, sorted), ``spike_clusters`` (uint32 unit of each spike),
    ``amplitudes`` (float32), ``templates`` (float32, units x nt x channels, whitened units),
    ``labels`` (``"good"`` or ``"mua"`` per unit), ``channel_map`` (the recording channel of
    each sorted channel) and ``channel_positions`` (um); ``warnings`` and ``report`` (each
    stage's time and memory, as ``dspk sort`` prints it), ``settings`` (every setting used),
    ``out`` (the Phy folder written, or None).
    """

    spike_times: np.ndarray
    spike_clusters: np.ndarray
    amplitudes: np.ndarray
    templates: np.ndarray
    labels: list
    sampling_frequency: float
    channel_map: np.ndarray
    channel_positions: np.ndarray
    warnings: list
    report: str
    settings: dict
    probe: str
    seconds: float
    out: Optional[Path] = field(default=None)

    @property
    def num_units(self) -> int:
        """Number of units."""
        return len(self.labels)

    @property
    def unit_ids(self) -> np.ndarray:
        """The units' ids, ``0..num_units``."""
        return np.arange(self.num_units)

    def __repr__(self) -> str:
        good = sum(label == "good" for label in self.labels)
        return (
            f"<dspk.SortResult: {self.num_units} units ({good} good), "
            f"{len(self.spike_times)} spikes, {len(self.warnings)} warnings>"
        )


def sort(
    recording: Any,
    probe: Optional[PathLike] = None,
    settings: Optional[Mapping[str, Any]] = None,
    preset: Optional[str] = "kilosort4",
    out: Optional[PathLike] = None,
    device: Optional[int] = None,
    progress: Union[None, bool, Callable[[str, int, int], Any]] = None,
    overwrite: bool = False,
) -> SortResult:
    """Sorts ``recording`` with Kilosort4 on the device, as ``dspk sort`` does.

    - ``recording``: a ``dspk.Recording`` (``dspk.open``), a path (opened as ``dspk.open``
      does; ``n_chan_bin``, ``fs`` and ``data_dtype`` in ``settings`` describe a plain binary
      file, as ``--set`` does), or a SpikeInterface recording (its channel locations and
      shanks are the probe).
    - ``probe``: a probe file (probeinterface or Kilosort ``.json``, ``chanMap.mat``, ``.prb``);
      default the recording's own.
    - ``settings``: a dict or ``KilosortSettings`` under Kilosort4's names, applied over
      ``preset`` (``"kilosort4"`` or ``"emusort"``) by the same parser as ``--set``.
    - ``out``: write the Phy folder there (refused when it holds one, unless ``overwrite``).
    - ``device``: the runtime's Nth device (default ``DSPK_DEVICE``, else the first).
    - ``progress``: a callable ``progress(stage, done, total)``; ``None`` draws tqdm bars when
      tqdm is installed; ``False`` shows nothing.

    The GIL is released while the device works (taken back only to read a Python recording's
    chunks and to call ``progress``). Raises ``ValueError`` (settings, probe, recording refused
    before reading), ``TypeError`` (wrong argument types), ``FileNotFoundError`` and
    ``DspkError`` (a RuntimeError: the device, a read, the Phy folder) with the cause chain.
    """
    if isinstance(settings, KilosortSettings):
        if settings.preset is not None and preset not in (None, "kilosort4", settings.preset):
            raise ValueError(
                f"preset={preset!r} and the settings' preset {settings.preset!r} disagree"
            )
        preset = settings.preset or preset
        settings = settings.changed
    pairs = _pairs(settings)
    plain = [(k, v) for k, v in pairs if k in _PLAIN_KEYS]
    sets = [(k, v) for k, v in pairs if k not in _PLAIN_KEYS]
    rec = _as_recording(recording, plain)
    if progress is None:
        progress = _tqdm_progress()
    elif progress is False:
        progress = None
    elif not callable(progress):
        raise TypeError("progress must be a callable(stage, done, total), None or False")
    if device is not None and (not isinstance(device, (int, np.integer)) or device < 0):
        raise TypeError(f"device must be a device index (an int from 0), not {device!r}")
    raw = _dspk.sort(
        rec,
        probe=None if probe is None else os.fspath(probe),
        preset=preset,
        sets=sets,
        out=None if out is None else os.fspath(out),
        overwrite=bool(overwrite),
        device=None if device is None else int(device),
        progress=progress,
    )
    raw["settings"] = json.loads(raw["settings"])
    raw["out"] = None if raw["out"] is None else Path(raw["out"])
    return SortResult(**raw)


def runtime(device: Optional[int] = None) -> tuple[str, str]:
    """The runtime ``DSPK_RUNTIME`` picks and the name of its device ``device`` (default
    ``DSPK_DEVICE``, else the first), as ``(runtime, device name)``. Opens the device."""
    return _dspk.runtime(device)
