#!/usr/bin/env bash
# Upstream EMUsort 1.1.0 (Kilosort 4.0.18) and dspk's EMUsort preset on the same EMG-like
# ground-truth recordings, on the same machine in the same run, both scored by the bench tools'
# score.py from their Phy folders: strictly (spikes within 0.4 ms of the truth) and with one
# constant lag per sorted unit within +-3 ms (`--max-lag-ms 3`, as upstream's figures are
# scored). The figures of docs/ACCURACY.md and docs/PERFORMANCE.md for EMUsort come from this
# script's output.
#
#   benches/kilosort/emusort_vs_upstream.sh BENCH_TOOLS DSPK_BINARY WORK_DIR [CASE...]
#
# BENCH_TOOLS: the folder with gen_emg_ground_truth.py, run_emusort.py, score.py and the wheels
# requirements-offline-emusort.txt lists (wheels-cp312/); DSPK_BINARY: a release build of the
# `dspk` command with the cuda runtime (`cargo build --release -p dspk-cli --features cuda`),
# run as `dspk sort --preset emusort`; WORK_DIR: where recordings and outputs go. Cases
# (default all): emg16 (16 channels, 60 s, 8 units, seed 1: upstream's published case),
# emg16s (the same with one shared delay profile), emg32 (32 channels, 180 s, 16 units, seed 2,
# the drive ramping to full: longer and denser).
set -euo pipefail
BENCH=$(realpath "$1")
SORT=$(realpath "$2")
WORK=$3
shift 3
CASES_RUN=("${@:-emg16 emg16s emg32}")
mkdir -p "$WORK"
WORK=$(realpath "$WORK")

# shellcheck source=benches/kilosort/cases.sh
source "$(dirname "$0")/cases.sh"
bench_site "$BENCH" "$BENCH/requirements-offline-emusort.txt"

declare -A CASES=(
  [emg16]="--channels 16 --units 8 --duration 60 --seed 1"
  [emg16s]="--channels 16 --units 8 --duration 60 --seed 1 --delay-mode shared"
  [emg32]="--channels 32 --units 16 --duration 180 --seed 2"
)

# shellcheck disable=SC2068
for case in ${CASES_RUN[@]}; do
  dir="$WORK/$case"
  # No probe: the EMUsort preset sorts the channels on its line.
  # shellcheck disable=SC2086
  ensure_recording "$BENCH/gen_emg_ground_truth.py" "$dir" ${CASES[$case]}

  echo "=== $case: upstream EMUsort"
  python3 "$BENCH/run_emusort.py" --gt "$dir" --device cuda > "$dir.emusort.log" 2>&1 || true
  tail -30 "$dir.emusort.log"
  # The wall line again: a long per-unit table can push it out of the tail.
  grep -h "EMUSORT WALL" "$dir.emusort.log" || true

  # Twice: first with empty kernel caches of its own (dspk's and the CUDA driver's, as on a
  # machine that never ran dspk), then again with both filled by the first run.
  caches="$dir/kernel_caches"
  rm -rf "$caches"
  for run in cold warm; do
    out="$dir/dspk_cuda_$run"
    rm -rf "$out"
    echo "=== $case: dspk EMUsort preset on cuda, kernel caches $run"
    DSPK_RUNTIME=cuda DSPK_KERNEL_CACHE="$caches/dspk" CUDA_CACHE_PATH="$caches/cuda" \
      timed "$case cuda $run" "$SORT" sort "$dir/recording.bin" --preset emusort --out "$out"
  done
  # Both runs sort alike (the caches hold compiled kernels only); the warm one is scored.
  cmp -s "$dir/dspk_cuda_cold/spike_times.npy" "$out/spike_times.npy" \
    && echo "cold and warm runs: the same spike times" || echo "cold and warm runs DIFFER"
  python3 "$BENCH/score.py" "$out" --gt "$dir" --name "dspk-$case" 2>&1 | tail -3
  python3 "$BENCH/score.py" "$out" --gt "$dir" --name "dspk-$case-lag3" --max-lag-ms 3 2>&1 | tail -3
done
