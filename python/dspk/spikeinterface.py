"""dspk's sorters for SpikeInterface: ``dspk_kilosort4`` (Kilosort4's defaults) and
``dspk_emusort`` (EMUsort's preset), registered in SpikeInterface's sorter list when this
module is imported::

    import spikeinterface.full as si
    import dspk.spikeinterface  # registers the sorters

    sorting = si.run_sorter("dspk_kilosort4", recording, folder="sorted", Th_learned=7)

The parameters are Kilosort4's settings under its own names (those of ``dspk sort --set``),
plus ``keep_good_only`` (SpikeInterface's, as for ``kilosort4``) and ``device`` (the runtime's
Nth device). The sort runs in-process: the recording SpikeInterface saved in the folder is read
from its binary file when it is one (``si.read_binary``, a saved folder), else chunk by chunk
through ``get_traces`` (int16 stays int16 up to the device either way), and the Phy folder is
written into ``sorter_output``. Processes that did not import this module (Dask workers)
register the sorters with :func:`register`; :func:`register_on_dask` does it on every worker
of a Dask cluster, those that join later included (a cluster that grows, such as
dask-jobqueue's ``SLURMCluster``).
"""

from __future__ import annotations

import json
from pathlib import Path

from spikeinterface.sorters import sorterlist
from spikeinterface.sorters.basesorter import BaseSorter

import dspk
from dspk import _dspk

__all__ = ["DspkEmusortSorter", "DspkKilosort4Sorter", "register", "register_on_dask"]

#: What each setting does (Kilosort4's names; dspk's own marked "dspk:").
SETTING_DESCRIPTIONS = {
    "batch_size": "Samples per batch (window owned); drift is estimated per batch",
    "nblocks": "Drift correction: 0 off, 1 rigid, n > 1 non-rigid with 2n-1 blocks along the probe",
    "Th_universal": "Universal-template detection threshold (whitened units)",
    "nt": "Template length in samples (odd)",
    "nt0min": "Trough index inside a template (None: floor(20 * nt / 61))",
    "nskip": "Every nskip-th batch enters the whitening covariance",
    "whitening_range": "Channels in each channel's local whitening neighbourhood",
    "highpass_cutoff": "High-pass cutoff in Hz (third-order Butterworth, zero-phase)",
    "do_CAR": "Subtract the median over channels from every sample",
    "invert_sign": "Negate the data first",
    "binning_depth": "um per depth bin of the drift fingerprints",
    "sig_interp": "um, width of the Gaussian kernel interpolating shifted channels",
    "drift_smoothing": "Gaussian sigmas of the drift scores along (shift, batch, block)",
    "dmin": "um between rows of template centres (None: the median vertical pitch)",
    "dminx": "um; template centres are about dminx / 2 apart horizontally",
    "min_template_size": "um, the smallest spatial Gaussian of the universal templates",
    "template_sizes": "Number of spatial scales of the universal templates",
    "nearest_chans": "Channels per template centre",
    "nearest_templates": "Template centres in the spatial maximum of detection",
    "max_channel_distance": "um; centres farther than this from every channel are dropped",
    "templates_from_data": "Learn the universal templates from the recording (else templates_file)",
    "n_templates": "Universal temporal templates (k-means clusters)",
    "n_pcs": "Principal components of the spike features",
    "Th_single_ch": "Single-channel peak threshold(s) the universal templates learn from",
    "clip_batch_stride": "dspk: universal-template clips come from every n-th batch",
    "clip_scaling": "dspk: clip scaling before learning templates: unit_norm (Kilosort4) or global (EMUsort)",
    "remove_spike_outliers": "EMUsort: drop clips HDBSCAN calls noise before the k-means",
    "hdbscan_min_cluster_size": "EMUsort: HDBSCAN's min_cluster_size (and min_samples)",
    "remove_chan_delays": "EMUsort: estimate and remove one delay per channel",
    "max_chan_delay_ms": "dspk: the longest channel delay searched, ms",
    "template_alignment": "dspk: align learned templates on the best channel (Kilosort4) or the channel sum (EMUsort)",
    "bandpass": "dspk: [low, high] Hz zero-phase band-pass first (None: none)",
    "bandpass_order": "dspk: order of that band-pass",
    "notch_hz": "dspk: Hz of a zero-phase notch after the band-pass (None: none)",
    "notch_q": "dspk: quality factor of the notch",
    "peak_spike_times": "dspk: spike times at each template's peak on its best channel (EMUsort)",
    "line_probe_pitch": "dspk: sort the channels on one line this many um apart (None: the probe)",
    "templates_file": "dspk: .npz with wTEMP and wPCA when templates_from_data is false",
    "templates_seed": "dspk: seed of the k-means learning the universal templates",
    "resident_bytes": "dspk: device bytes keeping the recording on the device between passes (None: all but 1/8, at least 8 GB)",
    "Th_learned": "Learned-template score a matched spike must exceed",
    "max_peels": "Matching-pursuit rounds per batch",
    "acg_threshold": "Refractory ratio below which a unit is labelled good",
    "ccg_threshold": "Refractory ratio of a cross-correlogram below which two units merge",
    "cluster_neighbors": "Neighbours of every spike in the clustering graph",
    "cluster_downsampling": "Every n-th spike of a group is a landmark of the graph",
    "max_cluster_subset": "At most this many landmarks per group",
    "cluster_init_seed": "Seed of the clustering's k-means++ initialisation",
    "duplicate_spike_ms": "A unit's spikes closer than this (ms) are one spike",
    "position_limit": "um; channels within this of the best channel place a spike",
    "x_centers": "Clustering groups across the probe's width (None: from the channels)",
    "min_cluster_group": "dspk: the smallest group the clustering splits",
    "tree_cross_refractory": "dspk: the final merge tree keeps cross-refractory branches apart "
    "(false: Kilosort 4.1.7's tree)",
    "min_cluster_landmarks": "dspk: the fewest landmarks a clustering group's graph gets "
    "(None: 100 on probes in at most 4 clustering groups, Kilosort's stride otherwise)",
    "min_split_points_per_feature": "dspk: a merge-tree node with fewer spikes per feature "
    "merges without the bimodality test (None: 4 where the landmark floor is on, else 0)",
    "max_cluster_spikes": "dspk: a clustering group of more spikes clusters this many, evenly "
    "spaced, and assigns the rest to their nearest landmarks' clusters (None: every spike)",
    "drift_split_overlap": "dspk: the merges also join units of template similarity >= 0.8 "
    "whose spikes fell at different drift shifts, sharing at most this much of them (None: "
    "Kilosort's merges only)",
    "min_isi_ms": "dspk: a unit's spikes closer than this (ms) are one spike, the larger kept "
    "(None: off; the EMUsort preset: 2.5)",
    "shadow_ms": "dspk: a unit whose spikes mostly lie within this (ms) of larger units' "
    "spikes, beyond chance, is removed as their shadow (None: off)",
}

#: SpikeInterface's parameters beside the settings.
_EXTRA_DEFAULTS = {"keep_good_only": False, "device": None}
_EXTRA_DESCRIPTIONS = {
    "keep_good_only": "Keep only the units labelled good (cluster_KSLabel.tsv)",
    "device": "The runtime's Nth device (None: DSPK_DEVICE, else the first); DSPK_RUNTIME picks the runtime",
}


def _preset_defaults(preset: str) -> dict:
    return json.loads(_dspk.settings_json(preset, []))


class _DspkSorter(BaseSorter):
    """A dspk preset as a SpikeInterface sorter, sorting in-process on the device."""

    #: The settings preset it starts from.
    preset = "kilosort4"
    requires_locations = True
    gpu_capability = "nvidia-optional"
    requires_binary_data = False
    # One process sorts on one device; threads of one process would share it.
    compatible_with_parallel = {"loky": True, "multiprocessing": True, "threading": False}
    handle_multi_segment = False
    installation_mesg = (
        "dspk's Python package: pip install ./python from a dspk checkout "
        "(or a dspk wheel), then import dspk.spikeinterface"
    )

    @classmethod
    def is_installed(cls) -> bool:
        return True

    @classmethod
    def get_sorter_version(cls) -> str:
        return dspk.__version__

    @classmethod
    def _check_apply_filter_in_params(cls, params) -> bool:
        # The high-pass (and EMUsort's band-pass) always runs.
        return True

    @classmethod
    def _check_params(cls, recording, output_folder, params):
        # Every setting through the command's parser now, before the folder's recording is read.
        _dspk.settings_json(cls.preset, _changed(cls, params))
        return params

    @classmethod
    def _setup_recording(cls, recording, sorter_output_folder, params, verbose):
        # Nothing to write: SpikeInterface saved the recording in the folder. Checked now, so a
        # recording dspk cannot read (its dtype, no locations) fails before the sort.
        dspk._from_spikeinterface(recording)

    @classmethod
    def _run_from_folder(cls, sorter_output_folder, params, verbose):
        sorter_output_folder = Path(sorter_output_folder)
        recording = cls.load_recording_from_folder(sorter_output_folder.parent, with_warnings=False)
        if recording is None:
            raise RuntimeError(f"no recording saved in {sorter_output_folder.parent}")
        settings = dict(_changed(cls, params))
        result = dspk.sort(
            recording,
            settings=settings,
            preset=cls.preset,
            out=sorter_output_folder,
            overwrite=True,
            device=params.get("device"),
            progress=None if verbose else False,
        )
        if verbose:
            print(result.report, end="")

    @classmethod
    def _get_result_from_folder(cls, sorter_output_folder):
        from spikeinterface.extractors.phykilosortextractors import KiloSortSortingExtractor

        sorter_output_folder = Path(sorter_output_folder)
        keep_good_only = False
        params_file = sorter_output_folder.parent / "spikeinterface_params.json"
        if params_file.is_file():
            params = json.loads(params_file.read_text(encoding="utf8"))["sorter_params"]
            keep_good_only = bool(params.get("keep_good_only", False))
        channel_ids = None
        attributes = sorter_output_folder.parent / "recording_attributes.json"
        if attributes.is_file():
            channel_ids = json.loads(attributes.read_text(encoding="utf8")).get("channel_ids")
        return KiloSortSortingExtractor(
            folder_path=sorter_output_folder, keep_good_only=keep_good_only, channel_ids=channel_ids
        )


def _changed(cls, params: dict) -> list:
    """The settings in ``params`` that differ from the preset's, as ``--set`` pairs."""
    defaults = _preset_defaults(cls.preset)
    sets = []
    for key, value in params.items():
        if key in _EXTRA_DEFAULTS:
            continue
        if key not in defaults or _normalised(value) != defaults[key]:
            sets.append((key, dspk._setting_text(key, value)))
    return sets


def _normalised(value):
    # JSON's view of a value (tuples are lists), to compare with the preset's JSON.
    try:
        return json.loads(json.dumps(value))
    except TypeError:
        return value


def _params_for(preset: str) -> tuple:
    defaults = dict(_preset_defaults(preset))
    defaults.update(_EXTRA_DEFAULTS)
    descriptions = {key: SETTING_DESCRIPTIONS.get(key, key) for key in defaults}
    descriptions.update(_EXTRA_DESCRIPTIONS)
    return defaults, descriptions


class DspkKilosort4Sorter(_DspkSorter):
    """Kilosort4 on any GPU (or the CPU) by dspk, with Kilosort4's defaults."""

    sorter_name = "dspk_kilosort4"
    preset = "kilosort4"
    sorter_description = (
        "Kilosort4's algorithm reimplemented in Rust on CubeCL by dspk: the same settings "
        "and Phy output, on any GPU (wgpu, CUDA, HIP) or the CPU."
    )
    _default_params, _params_description = _params_for("kilosort4")


class DspkEmusortSorter(_DspkSorter):
    """EMUsort (Kilosort4 for intramuscular EMG) on any GPU by dspk, with EMUsort's preset."""

    sorter_name = "dspk_emusort"
    preset = "emusort"
    sorter_description = (
        "EMUsort's preset of dspk's Kilosort4 for intramuscular EMG: band-pass and notch, no "
        "common reference or drift correction, channel delays removed, pooled thresholds."
    )
    _default_params, _params_description = _params_for("emusort")


def register() -> None:
    """Adds the sorters to SpikeInterface's ``sorter_dict`` and ``sorter_full_list`` in this
    process (done on import; call it in other processes, e.g. Dask workers)."""
    for sorter in (DspkKilosort4Sorter, DspkEmusortSorter):
        if sorter not in sorterlist.sorter_full_list:
            sorterlist.sorter_full_list.append(sorter)
        sorterlist.sorter_dict[sorter.sorter_name] = sorter


def register_on_dask(client) -> None:
    """Registers the sorters on every worker of the ``dask.distributed`` ``client``'s cluster,
    now and on workers that join later (a worker plugin), so that SpikeInterface's Dask engine
    (``run_sorter_jobs(jobs, engine="dask", engine_kwargs={"client": client})``) finds them."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class _Register(WorkerPlugin):
        name = "dspk.spikeinterface"

        def setup(self, worker):
            register()

    client.register_plugin(_Register())


register()
