"""SpikeInterface's version of the preprocessing chain that `benches/preprocess.rs` times:
int16 -> float32, common average reference, 300 Hz third-order Butterworth high-pass run
forward and backward (second-order sections), local whitening (the channels within
`--radius-um`: 160 um reaches a median 32, as ours uses), on one window of `--channels` x
`--samples`, in a process with the threads it is given (`--threads`: OpenBLAS/OMP/MKL).

    python3 benches/python/si_preprocess.py [--channels 384] [--samples 60000] [--reps 5]
        [--threads 2] [--radius-um 160]

Each figure is the median of `--reps` calls of `get_traces` on one window in the middle of a
recording three windows long (so the filter's margins read real samples), after one call not
timed. The whitening matrix is fitted when the chain is built, not timed (ours is fitted once
per sort too). One `key=value` line per figure, milliseconds.

Contacts: Neuropixels 1.0's staggered columns (x = 16, 48, 0, 32 um, rows 20 um apart).
The data: seeded Gaussian noise in int16 (the work does not depend on the values).
"""

import argparse
import os
import statistics
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--channels", type=int, default=384)
    p.add_argument("--samples", type=int, default=60_000)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--radius-um", type=float, default=160.0)
    return p.parse_args()


def main():
    args = parse_args()
    # Before numpy loads: BLAS reads these once.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    import numpy as np
    import spikeinterface
    import spikeinterface.core as sc
    import spikeinterface.preprocessing as spre
    from probeinterface import Probe

    fs = 30_000.0
    n = args.samples
    total = 3 * n
    rng = np.random.default_rng(0)
    traces = (rng.standard_normal((total, args.channels)) * 30).astype(np.int16)
    rec = sc.NumpyRecording([traces], sampling_frequency=fs)
    i = np.arange(args.channels)
    positions = np.column_stack([np.array([16.0, 48.0, 0.0, 32.0])[i % 4], 20.0 * (i // 2)])
    probe = Probe(ndim=2)
    probe.set_contacts(positions=positions, shapes="square", shape_params={"width": 12})
    probe.set_device_channel_indices(i)
    rec.set_probe(probe)  # in place

    def f32(r):
        return spre.astype(r, dtype="float32")

    def car(r):
        return spre.common_reference(r, reference="global", operator="average")

    def highpass(r):
        return spre.filter(
            r,
            band=300.0,
            btype="highpass",
            filter_order=3,
            ftype="butter",
            filter_mode="sos",
            direction="forward-backward",
            margin_ms=5.0,
        )

    def whiten(r):
        return spre.whiten(r, mode="local", radius_um=args.radius_um, dtype="float32")

    start, end = n, 2 * n

    def timed(r):
        r.get_traces(start_frame=start, end_frame=end)
        runs = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            r.get_traces(start_frame=start, end_frame=end)
            runs.append(time.perf_counter() - t0)
        return 1e3 * statistics.median(runs)

    unpacked = f32(rec)
    chain = whiten(highpass(car(unpacked)))
    # Each stage alone: its chain minus the chain it reads from.
    t_unpack = timed(unpacked)
    t_car = timed(car(unpacked))
    t_filter = timed(highpass(car(unpacked)))
    t_chain = timed(chain)
    neighbours = np.count_nonzero(
        np.linalg.norm(positions[:, None] - positions[None], axis=2) <= args.radius_um, axis=1
    )
    print(
        f"spikeinterface={spikeinterface.__version__} numpy={np.__version__} "
        f"threads={args.threads} channels={args.channels} samples={n} reps={args.reps} "
        f"whitening_neighbours_median={int(np.median(neighbours))}"
    )
    print(f"si_unpack_ms={t_unpack:.1f}")
    print(f"si_car_ms={t_car - t_unpack:.1f}")
    print(f"si_highpass_filtfilt_ms={t_filter - t_car:.1f}")
    print(f"si_whitening_local_ms={t_chain - t_filter:.1f}")
    print(f"si_chain_ms={t_chain:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
