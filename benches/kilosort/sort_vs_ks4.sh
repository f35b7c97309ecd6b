#!/usr/bin/env bash
# Upstream Kilosort4 4.1.7 and dspk's sort on the same ground-truth recordings, on the same
# machine in the same run, both scored by the ground-truth bench tools' score.py (SpikeInterface's
# comparison) from their Phy folders. The figures of docs/ACCURACY.md and docs/PERFORMANCE.md
# come from this script's output.
#
#   benches/kilosort/sort_vs_ks4.sh BENCH_TOOLS DSPK_BINARY WORK_DIR [RUNTIME...]
#
# BENCH_TOOLS: the folder with gen_ground_truth.py, run_ks4.py, score.py and the wheels they
# need (wheels-cp312/); DSPK_BINARY: a release build of the `dspk` command (`cargo build
# --release -p dspk-cli --features cuda`) with the runtimes to measure compiled in, run as
# `dspk sort`; WORK_DIR: where recordings and outputs go; RUNTIME: the DSPK_RUNTIME values to
# run ours on (default: cuda). Cases: 64 channels, 120 s, 16 units, static, seed 42;
# 384 channels, 120 s, 96 units, zigzag drift, seed 7.
set -euo pipefail
BENCH=$(realpath "$1")
SORT=$(realpath "$2")
WORK=$3
shift 3
RUNTIMES=("${@:-cuda}")
mkdir -p "$WORK"
WORK=$(realpath "$WORK")

# shellcheck source=benches/kilosort/cases.sh
source "$(dirname "$0")/cases.sh"
bench_site "$BENCH"

# gen_ground_truth.py arguments of each case.
declare -A CASES=(
  [gt64]="--channels 64 --units 16 --duration 120 --seed 42 --drift none"
  [gt384]="--channels 384 --units 96 --duration 120 --seed 7 --drift zigzag"
)

for case in gt64 gt384; do
  dir="$WORK/$case"
  # shellcheck disable=SC2086
  ensure_recording "$BENCH/gen_ground_truth.py" "$dir" ${CASES[$case]}

  echo "=== $case: upstream Kilosort4"
  python3 "$BENCH/run_ks4.py" --gt "$dir" --out "$dir/ks4_out" --device cuda 2>&1 \
    | grep -E "WALL|SUMMARY|runtime|KS4" || true

  for runtime in "${RUNTIMES[@]}"; do
    out="$dir/dspk_$runtime"
    rm -rf "$out"
    echo "=== $case: dspk on $runtime"
    DSPK_RUNTIME=$runtime timed "$case $runtime" \
      "$SORT" sort "$dir/recording.bin" --probe "$dir/chanMap.json" --out "$out"
    python3 "$BENCH/score.py" "$out" --gt "$dir" --name "dspk-$runtime-$case" 2>&1 | tail -3
  done
done
