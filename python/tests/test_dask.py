"""Several sorts through SpikeInterface's Dask job engine on a two-worker local cluster: a job
whose recording is bad fails alone, with its error; the others' sortings are all there."""

import json

import numpy as np
import pytest


def test_run_sorter_jobs_on_dask(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    import spikeinterface.full as si
    from probeinterface import generate_linear_probe

    import dspk.spikeinterface

    jobs = []
    # Too short to sort (shorter than one template): refused by the sort's checks.
    bad = si.NumpyRecording([np.zeros((30, 8), dtype=np.int16)], sampling_frequency=30000.0)
    probe = generate_linear_probe(num_elec=8, ypitch=20)
    probe.set_device_channel_indices(np.arange(8))
    bad.set_probe(probe)
    recordings = [bad.save(folder=tmp_path / "bad", progress_bar=False)]
    for seed in (1, 2):
        recording, _ = si.generate_ground_truth_recording(
            durations=[5.0], num_channels=8, num_units=3, seed=seed
        )
        recordings.append(recording.save(folder=tmp_path / f"rec{seed}", progress_bar=False))
    for k, recording in enumerate(recordings):
        jobs.append(
            dict(
                sorter_name="dspk_kilosort4",
                recording=recording,
                folder=tmp_path / f"sort{k}",
                raise_error=False,
                nblocks=0,
            )
        )
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True) as cluster:
        with distributed.Client(cluster) as client:
            # The workers are other processes: they register the sorters too (a worker plugin,
            # as on a cluster whose workers come and go).
            dspk.spikeinterface.register_on_dask(client)
            si.run_sorter_jobs(jobs, engine="dask", engine_kwargs={"client": client})

    log = json.loads((tmp_path / "sort0" / "spikeinterface_log.json").read_text())
    assert log["error"] is True
    assert "shorter than one template" in "\n".join(log["error_trace"])
    for k in (1, 2):
        sorting = si.read_sorter_folder(tmp_path / f"sort{k}")
        assert len(sorting.unit_ids) > 0
        assert sorting.to_spike_vector().size > 0
