"""Writes the small, deliberately odd NWB (HDF5) files that tests/nwb.rs reads.

Run from this folder with h5py installed (written with h5py 3.16.0, numpy 2.4):
    python3 make.py
Each file has the NWB layout dspk's reader needs (an ElectricalSeries in /acquisition, the
electrodes table) with one thing changed; `good.nwb` has nothing changed (so a failure of a
bad file is due to its one change). The data is the fixtures' matrix (see
tests/fixtures/README.md at the workspace root), 64 samples x 4 channels.
"""

import h5py
import numpy as np

SAMPLES, CHANNELS = 64, 4


def matrix():
    t = np.arange(SAMPLES, dtype=np.uint64)[:, None]
    c = np.arange(CHANNELS, dtype=np.uint64)[None, :]
    h = (t * 2654435761 + c * 40503) % (1 << 32)
    v = ((37 * (c + 1) * t + 1000 * c) % 4001).astype(np.int64) - 2000 + ((h >> 24).astype(np.int64) - 128)
    return v.astype(np.int16)


def write(name, data=None, channel_conversion=(0.25, 0.5, 1.0, 2.34375), electrodes=(0, 1, 2, 3),
          timing="rate", extra_series=False):
    with h5py.File(name, "w") as f:
        f.attrs["neurodata_type"] = "NWBFile"
        f.attrs["namespace"] = "core"
        f.attrs["nwb_version"] = "2.11.0"
        table = f.create_group("general/extracellular_ephys/electrodes")
        table.attrs["neurodata_type"] = "ElectrodesTable"
        table.create_dataset("id", data=np.arange(4, dtype=np.int64))
        table.create_dataset("x", data=np.array([0.0, 0.0, 16.0, 16.0]))
        table.create_dataset("y", data=np.array([0.0, 20.0, 40.0, 60.0]))
        table.create_dataset("group_name", data=["a", "a", "b", "b"], dtype=h5py.string_dtype())
        acquisition = f.create_group("acquisition")
        names = ["ElectricalSeries"] + (["AnotherSeries"] if extra_series else [])
        for series_name in names:
            series = acquisition.create_group(series_name)
            series.attrs["neurodata_type"] = "ElectricalSeries"
            series.attrs["namespace"] = "core"
            d = series.create_dataset("data", data=matrix() if data is None else data,
                                      chunks=None if data is not None else (16, 4))
            d.attrs["conversion"] = 1e-6
            d.attrs["offset"] = -1e-4
            d.attrs["unit"] = "volts"
            series.create_dataset("channel_conversion", data=np.array(channel_conversion, dtype=np.float64))
            e = series.create_dataset("electrodes", data=np.array(electrodes, dtype=np.int64))
            e.attrs["table"] = table.ref
            if timing == "rate":
                s = series.create_dataset("starting_time", data=2.5)
                s.attrs["rate"] = 20000.0
            elif timing == "timestamps":
                series.create_dataset("timestamps", data=1.5 + np.arange(SAMPLES) / 25000.0)
            elif timing == "jitter":
                stamps = 1.5 + np.arange(SAMPLES) / 25000.0
                stamps[40] += 1e-5
                series.create_dataset("timestamps", data=stamps)
        # Not an ElectricalSeries: never listed.
        other = acquisition.create_group("Position")
        other.attrs["neurodata_type"] = "Position"


write("good.nwb")
write("two_series.nwb", extra_series=True)
write("big_endian.nwb", data=matrix().astype(">i2"))
write("float_data.nwb", data=matrix().astype(np.float32))
write("one_dimensional.nwb", data=matrix()[:, 0])
write("channel_conversion_3.nwb", channel_conversion=(0.25, 0.5, 1.0))
write("electrode_outside_table.nwb", electrodes=(0, 1, 2, 9))
write("timestamps.nwb", timing="timestamps")
write("timestamps_jitter.nwb", timing="jitter")
write("no_timing.nwb", timing=None)
