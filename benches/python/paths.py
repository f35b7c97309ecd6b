#!/usr/bin/env python3
"""One sort of a bench-tools recording through one of dspk's Python ways in, timed inside the
process from before ``import dspk`` to the Phy folder written; or several recordings through
SpikeInterface's ``run_sorter_jobs`` on a Dask ``LocalCluster`` sharing one device. Used by
``benches/python/paths.sh`` (which compares them with the ``dspk`` command's wall time).

    paths.py python GT_FOLDER OUT      # dspk.sort(path of recording.bin) -> OUT
    paths.py si GT_FOLDER OUT          # si.run_sorter("dspk_kilosort4", binary recording) -> OUT
    paths.py jobs WORKERS OUT GT_FOLDER...   # run_sorter_jobs(engine="dask"), one job each

``GT_FOLDER`` is a folder written by the bench tools' ``gen_ground_truth.py``
(``recording.bin``, ``recording.json``, ``chanMap.json``) with dspk's sidecar beside it
(``benches/kilosort/cases.sh``'s ``ensure_recording``). Each run prints ``PATH_WALL NAME
SECONDS s`` (from the start of the process), ``PATH_CALL NAME SECONDS s`` (the call alone:
``dspk.sort`` or ``si.run_sorter``, after the imports) and, for ``jobs``, one line per job: its
folder's units and spikes, or its error.
"""
import json
import sys
import time
from pathlib import Path

STARTED = time.perf_counter()


def binary_recording(gt):
    """The bench recording as SpikeInterface's binary recording with its probe (int16, gains in
    uV): what a SpikeInterface user has before ``run_sorter``."""
    import numpy as np
    import spikeinterface.full as si
    from probeinterface import Probe

    meta = json.loads((gt / "recording.json").read_text())
    recording = si.read_binary(
        gt / "recording.bin",
        sampling_frequency=meta["sample_rate_hz"],
        dtype="int16",
        num_channels=meta["n_channels"],
        gain_to_uV=meta["gain_uv_per_count"],
        offset_to_uV=meta["offset_uv"],
    )
    probe = Probe(ndim=2, si_units="um")
    probe.set_contacts(positions=np.asarray(meta["channel_positions_um"]), shapes="square",
                       shape_params={"width": 12})
    probe.set_device_channel_indices(np.arange(meta["n_channels"]))
    probe.set_shank_ids([str(s) for s in meta["probe"]["shank_ids"]])
    recording.set_probe(probe)  # in place (SpikeInterface 0.105)
    return recording


def main(argv):
    way = argv[0]
    if way == "python":
        import dspk

        gt, out = Path(argv[1]), Path(argv[2])
        called = time.perf_counter()
        result = dspk.sort(gt / "recording.bin", probe=gt / "chanMap.json", out=out, progress=False)
        print(f"PATH_CALL python {time.perf_counter() - called:.2f} s")
        print(f"dspk.sort: {result.num_units} units, {len(result.spike_times)} spikes")
    elif way == "si":
        import spikeinterface.full as si

        import dspk.spikeinterface  # noqa: F401  (registers the sorters)

        gt, out = Path(argv[1]), Path(argv[2])
        recording = binary_recording(gt)
        called = time.perf_counter()
        sorting = si.run_sorter("dspk_kilosort4", recording, folder=out)
        print(f"PATH_CALL si {time.perf_counter() - called:.2f} s")
        print(f"run_sorter: {len(sorting.unit_ids)} units, {sorting.to_spike_vector().size} spikes")
    elif way == "jobs":
        import spikeinterface.full as si
        from dask import distributed

        import dspk.spikeinterface

        workers, out = int(argv[1]), Path(argv[2])
        gts = [Path(p) for p in argv[3:]]
        jobs = [dict(sorter_name="dspk_kilosort4", recording=binary_recording(gt),
                     folder=out / gt.name, raise_error=False) for gt in gts]
        with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True) as cluster:
            with distributed.Client(cluster) as client:
                dspk.spikeinterface.register_on_dask(client)
                submitted = time.perf_counter()
                si.run_sorter_jobs(jobs, engine="dask", engine_kwargs={"client": client})
                print(f"PATH_WALL jobs-only {time.perf_counter() - submitted:.2f} s")
        for gt in gts:
            folder = out / gt.name
            log = json.loads((folder / "spikeinterface_log.json").read_text())
            if log["error"]:
                print(f"JOB {gt.name}: error: {log['error_trace'][-1].strip()}")
            else:
                sorting = si.read_sorter_folder(folder)
                print(f"JOB {gt.name}: {len(sorting.unit_ids)} units, "
                      f"{sorting.to_spike_vector().size} spikes, run_time {log['run_time']:.2f} s")
    else:
        raise SystemExit(f"unknown way {way!r}: python, si or jobs")
    print(f"PATH_WALL {way} {time.perf_counter() - STARTED:.2f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
