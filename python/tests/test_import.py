"""The package imports, and says what it is, without a device."""

import os
import subprocess
import sys


def test_import_needs_no_device():
    # A runtime that does not exist: importing must not open one; asking for it names it.
    code = (
        "import dspk\n"
        "print(dspk.__version__)\n"
        "try:\n"
        "    dspk.runtime()\n"
        "except dspk.DspkError as e:\n"
        "    print('refused:', e)\n"
        "import dspk.spikeinterface\n"
        "from spikeinterface.sorters import sorter_dict, sorter_full_list\n"
        "print(sorted(n for n in sorter_dict if n.startswith('dspk')))\n"
        "print(dspk.spikeinterface.DspkKilosort4Sorter in sorter_full_list)\n"
    )
    env = dict(os.environ, DSPK_RUNTIME="no-such-runtime")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].count(".") == 2
    assert lines[1].startswith("refused:") and "no-such-runtime" in lines[1], lines[1]
    assert lines[2] == "['dspk_emusort', 'dspk_kilosort4']"
    assert lines[3] == "True"


def test_sorter_parameters_are_kilosorts_settings():
    import spikeinterface.full as si
    import dspk
    import dspk.spikeinterface as dsi

    params = si.get_default_sorter_params("dspk_kilosort4")
    settings = dict(dspk.KilosortSettings())
    assert {k: params[k] for k in settings} == settings
    assert params["keep_good_only"] is False and params["device"] is None
    described = si.get_sorter_params_description("dspk_kilosort4")
    assert set(described) == set(params)
    # Every setting has its own description (none falls back to its name).
    assert set(dsi.SETTING_DESCRIPTIONS) == set(settings)
    emu = si.get_default_sorter_params("dspk_emusort")
    assert emu["bandpass"] == [250.0, 5000.0] and emu["nblocks"] == 0
    assert dsi.DspkKilosort4Sorter.gpu_capability == "nvidia-optional"
    assert dsi.DspkKilosort4Sorter.requires_locations is True
    assert dsi.DspkKilosort4Sorter.is_installed()


def test_settings_go_through_the_commands_parser():
    import pytest
    import dspk

    s = dspk.KilosortSettings(Th_learned=7, drift_smoothing=(1, 1, 1), dmin=None)
    assert s.Th_learned == 7.0 and s["drift_smoothing"] == [1.0, 1.0, 1.0]
    assert s.changed == {"Th_learned": 7, "drift_smoothing": (1, 1, 1), "dmin": None}
    emu = dspk.KilosortSettings("emusort", notch_hz=50)
    assert (emu.nskip, emu.notch_hz) == (2, 50.0)
    with pytest.raises(ValueError) as error:
        s["Th_learnd"] = 7
    # The command's message, word for word (dspk sort --set Th_learnd=7).
    assert str(error.value).startswith("--set Th_learnd=7: setting settings: unknown setting")
    assert "Th_learned" in str(error.value)
    assert "Th_learnd" not in s.changed
    with pytest.raises(ValueError, match="--set nblocks=-1"):
        dspk.KilosortSettings(nblocks=-1)
    with pytest.raises(ValueError, match="--preset emu: "):
        dspk.KilosortSettings("emu")
    with pytest.raises(TypeError, match="not a setting value"):
        dspk.KilosortSettings(Th_learned=object())
