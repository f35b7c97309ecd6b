"""Bad input gives Python exceptions with the reason, and the interpreter carries on."""

import numpy as np
import pytest

import dspk


def numpy_recording(traces, fs=30000.0, locations=True):
    import spikeinterface.full as si
    from probeinterface import generate_linear_probe

    recording = si.NumpyRecording([traces], sampling_frequency=fs)
    if locations:
        probe = generate_linear_probe(num_elec=traces.shape[1], ypitch=20)
        probe.set_device_channel_indices(np.arange(traces.shape[1]))
        recording.set_probe(probe)  # in place (SpikeInterface 0.105)
    return recording


def test_a_path_that_does_not_exist():
    with pytest.raises(FileNotFoundError, match="no-such.bin"):
        dspk.open("/no/such/folder/no-such.bin")
    with pytest.raises(FileNotFoundError, match="no-such.bin"):
        dspk.sort("/no/such/folder/no-such.bin", progress=False)


def test_a_plain_file_described_wrongly(tmp_path):
    path = tmp_path / "data.bin"
    np.zeros((100, 3), dtype=np.int16).tofile(path)
    with pytest.raises(ValueError, match="needs both --n-chan-bin and --fs"):
        dspk.open(path, n_chan_bin=3)
    with pytest.raises(ValueError, match="int16, uint16, int32 and float32"):
        dspk.open(path, n_chan_bin=3, fs=30000, data_dtype="float64")
    with pytest.raises(dspk.DspkError, match="not a whole number of samples"):
        dspk.open(path, n_chan_bin=7, fs=30000)
    rec = dspk.open(path, n_chan_bin=3, fs=30000)
    assert (rec.num_channels, rec.num_samples, rec.dtype) == (3, 100, "int16")
    assert rec.get_traces(10, 20).shape == (10, 3)
    with pytest.raises(ValueError, match="not inside the recording"):
        rec.get_traces(50, 200)
    # A plain file has no probe: the command's message.
    with pytest.raises(ValueError, match="carries no probe"):
        dspk.sort(rec, progress=False)


def test_a_recording_of_a_type_dspk_does_not_read():
    recording = numpy_recording(np.zeros((3000, 4), dtype=np.float64))
    with pytest.raises(TypeError, match="float64.*int16, uint16, int32 and float32"):
        dspk.sort(recording, progress=False)
    with pytest.raises(TypeError, match="a SpikeInterface recording, not int"):
        dspk.sort(42, progress=False)


def test_a_recording_without_locations():
    recording = numpy_recording(np.zeros((3000, 4), dtype=np.int16), locations=False)
    with pytest.raises(ValueError, match="no channel locations"):
        dspk.sort(recording, progress=False)


def test_an_unknown_setting_and_a_bad_value():
    recording = numpy_recording(np.zeros((3000, 4), dtype=np.int16))
    with pytest.raises(ValueError, match=r"--set Th_learnd=7: setting settings: unknown setting `Th_learnd`"):
        dspk.sort(recording, settings={"Th_learnd": 7}, progress=False)
    with pytest.raises(ValueError, match=r"--set nt=bad"):
        dspk.sort(recording, settings={"nt": "bad"}, progress=False)
    with pytest.raises(ValueError, match="--preset nope"):
        dspk.sort(recording, preset="nope", progress=False)
    with pytest.raises(TypeError, match="device"):
        dspk.sort(recording, device=-1, progress=False)


def test_a_recording_shorter_than_a_template():
    recording = numpy_recording(np.zeros((30, 4), dtype=np.int16))
    with pytest.raises(ValueError, match="shorter than one template"):
        dspk.sort(recording, progress=False)


def test_stored_integers_cross_as_they_are():
    traces = (np.arange(4000 * 4, dtype=np.int64).reshape(4000, 4) % 3000 - 1500).astype(np.int16)
    recording = numpy_recording(traces)
    recording.set_channel_gains([0.195, 0.2, 0.25, 1.0])
    recording.set_channel_offsets([0.0, 1.0, -2.0, 0.5])
    rec = dspk._from_spikeinterface(recording)
    assert rec.dtype == "int16" and rec.format == "python"
    stored = rec.get_traces(100, 1100)
    assert stored.dtype == np.int16
    np.testing.assert_array_equal(stored, traces[100:1100])
    scaled = rec.get_traces(100, 1100, return_scaled=True)
    expected = recording.get_traces(start_frame=100, end_frame=1100, return_in_uV=True)
    np.testing.assert_allclose(scaled, expected, rtol=1e-6, atol=1e-4)
    np.testing.assert_allclose(rec.get_channel_locations(), recording.get_channel_locations())


def test_a_binary_recording_is_read_from_its_file(tmp_path):
    import spikeinterface.full as si

    traces = (np.arange(3001 * 5, dtype=np.int64).reshape(3001, 5) % 2000 - 1000).astype(np.int16)
    path = tmp_path / "with_header.bin"
    path.write_bytes(b"\x07" * 64 + traces.tobytes())
    recording = si.read_binary(path, sampling_frequency=30000.0, dtype="int16", num_channels=5,
                               file_offset=64, gain_to_uV=0.5, offset_to_uV=-3.0)
    recording.set_probe(numpy_recording(traces).get_probe())  # in place (SpikeInterface 0.105)
    rec = dspk._from_spikeinterface(recording)
    assert rec.format == "python-binary" and rec.path == path
    np.testing.assert_array_equal(rec.get_traces(0, 3001), traces)
    np.testing.assert_allclose(rec.get_traces(7, 2999, return_scaled=True),
                               recording.get_traces(start_frame=7, end_frame=2999, return_in_uV=True),
                               rtol=1e-6)
    # Sliced or preprocessed, it is no longer the file's samples: read through get_traces.
    sliced = recording.select_channels(recording.channel_ids[:3])
    assert dspk._from_spikeinterface(sliced).format == "python"
    # A file shorter than the recording says it is: the reader's error.
    path.write_bytes(b"\x07" * 64 + traces[:100].tobytes())
    with pytest.raises(dspk.DspkError, match="with_header.bin"):
        dspk._from_spikeinterface(recording)


def test_a_failing_get_traces_is_the_cause():
    recording = numpy_recording(np.zeros((90000, 4), dtype=np.int16))

    def broken(*args, **kwargs):
        raise OSError("the disk went away")

    recording.get_traces = broken
    with pytest.raises(dspk.DspkError) as error:
        dspk.sort(recording, progress=False)
    assert "get_traces" in str(error.value) and "the disk went away" in str(error.value)
    assert isinstance(error.value.__cause__, OSError)
    assert isinstance(error.value, RuntimeError)
    # The interpreter is alive and dspk still works.
    assert dspk.KilosortSettings().nt == 61
