"""Checks a Phy folder written by dspk's `write_phy` with phylib and SpikeInterface.

CI runs it (`.ci/run`, in a venv with the versions named there); by hand:

    DSPK_PHY_OUT=/tmp/dspk-phy cargo test -p dspk-synapse --test phy -- --ignored write_for_python
    python3 synapse/dspk-synapse/tests/phy_check.py /tmp/dspk-phy

The Rust test leaves the folder in `<out>/phy` and what it wrote in `<out>/written.json`.
This script opens the folder with phylib's `load_model` (the loader behind phy's template GUI)
and SpikeInterface's `read_phy`, and asserts that the spike times, clusters, templates,
amplitudes, channels, positions, whitening, similarity, labels and the raw recording they
return equal what was written, and that phylib did not have to add files to the folder.

Needs numpy, phylib, spikeinterface and pandas (SpikeInterface's `read_phy` imports it):
`pip install phylib==2.7.1 spikeinterface==0.105.3 pandas==3.1.1`.
"""

import json
import sys
from pathlib import Path

import numpy as np


def stored_matrix(samples, channels):
    """The fixtures' stored int16 matrix (tests/fixtures/README.md), sample-major."""
    t = np.arange(samples, dtype=np.uint64)[:, None]
    c = np.arange(channels, dtype=np.uint64)[None, :]
    h = (t * np.uint64(2654435761) + c * np.uint64(40503)) % np.uint64(2**32)
    v = ((37 * (c + 1) * t + 1000 * c) % 4001).astype(np.int64) - 2000
    v = v + (h >> np.uint64(24)).astype(np.int64) - 128
    v[100, :] = 32767
    v[101, :] = -32768
    return v.astype(np.int16)


def check_phylib(folder, written):
    from phylib.io.model import load_model

    before = sorted(p.name for p in folder.iterdir())
    model = load_model(folder / "params.py")
    try:
        times = np.asarray(written["spike_times"], dtype=np.int64)
        clusters = np.asarray(written["spike_clusters"])
        templates = np.asarray(written["templates"], dtype=np.float32).reshape(
            written["templates_shape"]
        )
        channels = len(written["channel_map"])

        assert np.array_equal(model.spike_samples, times), "phylib spike_samples"
        assert np.allclose(model.spike_times, times / written["sample_rate"]), "spike_times (s)"
        assert np.array_equal(model.spike_clusters, clusters), "phylib spike_clusters"
        assert np.array_equal(model.spike_templates, written["spike_templates"]), "spike_templates"
        assert np.array_equal(
            model.amplitudes, np.asarray(written["amplitudes"], dtype=np.float32)
        ), "amplitudes"
        assert model.sparse_templates.cols is None, "dense templates"
        assert model.sparse_templates.data.dtype == np.float32
        assert np.array_equal(model.sparse_templates.data, templates), "templates"
        assert model.n_templates == templates.shape[0]
        assert model.n_samples_waveforms == templates.shape[1]
        assert model.n_channels == channels
        assert np.array_equal(model.channel_mapping, written["channel_map"]), "channel_map"
        assert np.array_equal(
            model.channel_positions, np.asarray(written["channel_positions"])
        ), "channel_positions"
        assert np.array_equal(
            model.similar_templates.ravel(), np.asarray(written["similar_templates"], np.float32)
        ), "similar_templates"
        assert np.array_equal(model.wmi.ravel(), written["whitening_mat_inv"]), "wmi"
        assert model.sample_rate == written["sample_rate"]
        assert model.n_channels_dat == written["n_channels_dat"]
        for name in ("KSLabel", "group"):
            got = {str(k): v for k, v in model.metadata[name].items()}
            assert got == written[name], f"metadata {name}: {got}"
        # A cluster split off one template takes that template's waveform in phylib.
        for cluster in sorted(set(clusters.tolist()) - set(written["spike_templates"])):
            source = sorted(set(np.asarray(written["spike_templates"])[clusters == cluster]))
            assert model.merge_map[cluster] == source, model.merge_map
            assert np.array_equal(
                model.sparse_clusters.data[cluster], templates[source[0]]
            ), f"cluster {cluster} waveform"
        traces = np.asarray(model.traces[0 : model.traces.shape[0]])
        assert traces.shape == (written["samples"], channels), traces.shape
        assert np.array_equal(traces, stored_matrix(written["samples"], channels)), "traces"
        after = sorted(p.name for p in folder.iterdir())
        added = sorted(set(after) - set(before))
        assert not added, f"phylib added files: {added}"
    finally:
        model.close()
    print(
        f"phylib {__import__('phylib').__version__} load_model: {len(times)} spikes, "
        f"{len(set(clusters))} clusters, templates {templates.shape}, {channels} channels, "
        "traces equal the stored matrix, no files added: OK"
    )


def check_spikeinterface(folder, written):
    import spikeinterface
    import spikeinterface.extractors as se

    sorting = se.read_phy(folder)
    times = np.asarray(written["spike_times"], dtype=np.int64)
    clusters = np.asarray(written["spike_clusters"])
    assert sorting.get_sampling_frequency() == written["sample_rate"]
    unit_ids = sorted(int(u) for u in sorting.unit_ids)
    assert unit_ids == sorted(set(clusters.tolist())), unit_ids
    for unit in sorting.unit_ids:
        train = sorting.get_unit_spike_train(unit_id=unit)
        assert np.array_equal(train, times[clusters == int(unit)]), f"unit {unit}"
    labels = {str(u): v for u, v in zip(sorting.unit_ids, sorting.get_property("KSLabel"))}
    assert labels == written["KSLabel"], labels
    quality = {str(u): v for u, v in zip(sorting.unit_ids, sorting.get_property("quality"))}
    assert quality == written["group"], quality
    print(
        f"spikeinterface {spikeinterface.__version__} read_phy: units {unit_ids}, "
        "spike trains, KSLabel and quality (group) equal: OK"
    )


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} <DSPK_PHY_OUT folder>")
    out = Path(sys.argv[1])
    written = json.loads((out / "written.json").read_text())
    folder = out / "phy"
    check_phylib(folder, written)
    check_spikeinterface(folder, written)


if __name__ == "__main__":
    main()
