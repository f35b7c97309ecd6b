"""Checks the sorter's Phy folder (`write_phy_folder`) with phylib and SpikeInterface.

CI runs it (`.ci/run`, in the venv with the versions named there); by hand:

    DSPK_SORT_PHY_OUT=/tmp/sort-phy cargo test -p dspk-sorter-kilosort --test phy_output \
        -- --ignored --exact write_for_python
    python3 synapse/dspk-sorter-kilosort/tests/phy_output_check.py /tmp/sort-phy

The Rust test leaves the folder in `<out>/phy` (with its raw file `recording.dat`) and what it
wrote in `<out>/written.json`. This script opens the folder with phylib's `load_model` (the
loader behind phy's template GUI), SpikeInterface's `read_kilosort`, `read_phy` and
`read_kilosort_as_analyzer`, and asserts that spike times lie inside the recording, every
unit's spike times are sorted, the unit ids are the ids of `spike_clusters.npy`, the labels are
`cluster_KSLabel.tsv`'s, the Kilosort 4 extras (`spike_detection_templates.npy`,
`spike_positions.npy`, `channel_shanks.npy`) are what was written, and that no reader crashed
or added files to the folder.

Needs numpy, phylib, spikeinterface and pandas (SpikeInterface's `read_phy` imports it):
`pip install phylib==2.7.1 spikeinterface==0.105.3 pandas==3.1.1`.
"""

import json
import sys
import warnings
from pathlib import Path

import numpy as np


def check_trains(name, trains, written):
    """`trains` ({unit id: spike samples}) against what was written: the same units, each
    train sorted, inside the recording, and equal to the written times of that unit."""
    times = np.asarray(written["spike_times"], dtype=np.int64)
    clusters = np.asarray(written["spike_clusters"], dtype=np.int64)
    assert sorted(trains) == sorted(set(clusters.tolist())), f"{name}: units {sorted(trains)}"
    for unit, train in trains.items():
        train = np.asarray(train)
        assert np.all(np.diff(train) >= 0), f"{name}: unit {unit}'s times are not sorted"
        assert train.size == 0 or (
            train.min() >= 0 and train.max() < written["num_samples"]
        ), f"{name}: unit {unit} has a spike outside the recording"
        assert np.array_equal(train, times[clusters == unit]), f"{name}: unit {unit}'s train"


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
        assert np.array_equal(model.spike_samples, times), "phylib spike_samples"
        assert np.array_equal(model.spike_clusters, clusters), "phylib spike_clusters"
        assert np.array_equal(model.spike_templates, clusters), "spike_templates = clusters"
        check_trains(
            "phylib",
            {int(u): model.spike_samples[model.spike_clusters == u] for u in model.cluster_ids},
            written,
        )
        assert np.array_equal(
            model.amplitudes, np.asarray(written["amplitudes"], dtype=np.float32)
        ), "amplitudes"
        assert np.array_equal(model.sparse_templates.data, templates), "templates"
        assert model.n_channels == len(written["channel_map"])
        assert np.array_equal(model.channel_mapping, written["channel_map"]), "channel_map"
        assert np.array_equal(model.channel_shanks, written["channel_shanks"]), "channel_shanks"
        assert model.sample_rate == written["sample_rate"]
        labels = {str(k): v for k, v in model.metadata["KSLabel"].items()}
        assert labels == written["KSLabel"], f"phylib KSLabel {labels}"
        attributes = model.spike_attributes
        assert np.array_equal(
            attributes["detection_templates"], written["spike_detection_templates"]
        ), "spike_detection_templates.npy"
        assert np.array_equal(
            attributes["positions"], np.asarray(written["spike_positions"], dtype=np.float32)
        ), "spike_positions.npy"
        traces = model.traces
        assert traces is not None and traces.shape[0] == written["num_samples"], "raw traces"
        # A unit's waveforms come from the raw file through the channel map.
        model.get_template_spike_waveforms(int(clusters[0]))
        after = sorted(p.name for p in folder.iterdir())
        added = sorted(set(after) - set(before))
        assert not added, f"phylib added files: {added}"
    finally:
        model.close()
    print(
        f"phylib {__import__('phylib').__version__} load_model: {len(times)} spikes, "
        f"{len(set(clusters.tolist()))} clusters, templates {templates.shape}, KSLabel, "
        "spike attributes, no files added: OK"
    )


def check_sorting(name, sorting, written):
    """A SpikeInterface sorting against what was written."""
    assert sorting.get_sampling_frequency() == written["sample_rate"], name
    trains = {int(u): sorting.get_unit_spike_train(unit_id=u) for u in sorting.unit_ids}
    check_trains(name, trains, written)
    labels = {str(u): v for u, v in zip(sorting.unit_ids, sorting.get_property("KSLabel"))}
    assert labels == written["KSLabel"], f"{name}: KSLabel {labels}"
    for column in ("ContamPct", "Amplitude"):
        values = sorting.get_property(column)
        for unit, value in zip(sorting.unit_ids, values):
            want = float(f"{written[column][int(unit)]:.1f}")
            assert value == want, f"{name}: {column} of unit {unit}: {value}, want {want}"


def check_spikeinterface(folder, written):
    import spikeinterface
    import spikeinterface.extractors as se

    check_sorting("read_kilosort", se.read_kilosort(folder), written)
    check_sorting("read_phy", se.read_phy(folder), written)
    good = se.read_kilosort(folder, keep_good_only=True)
    want = sorted(int(u) for u, label in written["KSLabel"].items() if label == "good")
    assert sorted(int(u) for u in good.unit_ids) == want, f"keep_good_only: {good.unit_ids}"

    with warnings.catch_warnings():
        # No gain or offset is given, and there is no ops.npy to say nt0min: both warn.
        warnings.simplefilter("ignore")
        analyzer = se.read_kilosort_as_analyzer(folder)
    average = analyzer.get_extension("templates").get_data()
    assert average.shape == tuple(written["templates_shape"]), average.shape
    locations = analyzer.get_extension("spike_locations").get_data()
    positions = np.asarray(written["spike_positions"], dtype=np.float32)
    assert np.array_equal(locations["x"], positions[:, 0]), "spike locations x"
    assert np.array_equal(locations["y"], positions[:, 1]), "spike locations y"
    print(
        f"spikeinterface {spikeinterface.__version__} read_kilosort, read_phy: units, sorted "
        "trains inside the recording, KSLabel, ContamPct, Amplitude; keep_good_only; "
        "read_kilosort_as_analyzer: templates and spike locations: OK"
    )


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} <DSPK_SORT_PHY_OUT folder>")
    out = Path(sys.argv[1])
    written = json.loads((out / "written.json").read_text())
    folder = out / "phy"
    check_phylib(folder, written)
    check_spikeinterface(folder, written)


if __name__ == "__main__":
    main()
