#!/usr/bin/env bash
# The long-recording cases of docs/PERFORMANCE.md "Long recordings", run with the `long` bench
# binary (`cargo bench --features cuda --bench long --no-run`; the binary cargo prints):
#
#   benches/long_cases.sh LONG_BINARY CASE...
#
# CASE: `first` (64 ch x 120 s sorted with empty kernel caches, then again with the caches it
# filled: the first-run cost), `small` (32 ch x 600 s, twice), `384` (384 ch, a 300 s block
# played for 5, 10 and 30 minutes), `384:M,M...` (the same block for the minutes listed, e.g.
# `384:30,60,120`; 120 minutes are 166 GB, past the residency budget of one H200).
# DSPK_RUNTIME picks the runtime (default cuda). Each sort prints its stages and one
# `LONG key=value` line.
set -euo pipefail
LONG=$(realpath "$1")
shift
export DSPK_RUNTIME=${DSPK_RUNTIME:-cuda}
for case in "$@"; do
  echo "=== $case"
  case $case in
    first)
      caches=$(mktemp -d)
      for run in cold warm; do
        echo "--- $run"
        DSPK_KERNEL_CACHE="$caches/dspk" CUDA_CACHE_PATH="$caches/cuda" \
          "$LONG" --channels 64 --units 16 --seconds 120 --minutes 2 --seed 42
      done
      ;;
    small)
      for run in 1 2; do
        echo "--- run $run"
        "$LONG" --channels 32 --units 10 --seconds 600 --minutes 10 --seed 42
      done
      ;;
    384) "$LONG" --minutes 5,10,30 ;;
    384:*) "$LONG" --minutes "${case#384:}" ;;
    *) echo "unknown case $case" >&2; exit 2 ;;
  esac
done
