#!/usr/bin/env bash
# Decision 0005's departures from Kilosort 4.1.7 measured one at a time: dspk's sort of the
# ground-truth bench's recordings with its defaults, with Kilosort's group rule
# (min_cluster_group=1000: groups under 1 000 spikes are one cluster), with Kilosort 4.1.7's
# merge tree (tree_cross_refractory=false), with both, without the drift-split merges
# (drift_split_overlap=null), without shadow removal (shadow_ms=null) and with Kilosort's
# detection thresholds (Th_universal=9, Th_learned=8); each scored by the
# bench tools' score.py. docs/ACCURACY.md's ablation tables come from this script's output.
#
#   [VARIANTS="ours noshadow"] [RUNTIME=cpu] benches/kilosort/ablations.sh BENCH_TOOLS DSPK_BINARY WORK_DIR [CASE...]
#
# BENCH_TOOLS: the folder with gen_ground_truth.py, score.py and wheels-cp312/; DSPK_BINARY: a
# release build of the `dspk` command with the cuda runtime (`cargo build --release -p
# dspk-cli --features cuda`), or of another runtime that RUNTIME names (DSPK_RUNTIME, default
# cuda); WORK_DIR: where recordings and outputs go (recordings already
# there are reused). Cases (default all): gt64 (64 channels, 120 s, 16 units, static, seed 42),
# gt384 (384 channels, 120 s, 96 units, zigzag, seed 7), gt384l (384 channels, 300 s, 120
# units, zigzag, seed 11), and gt384s8, gt384s9 (gt384 with seeds 8 and 9). VARIANTS (default
# all): which of ours, group1000, tree41, ks41, nodriftsplit, noshadow, ksthresholds run.
set -euo pipefail
BENCH=$(realpath "$1")
SORT=$(realpath "$2")
WORK=$3
shift 3
CASES_RUN=("${@:-gt64 gt384 gt384l}")
mkdir -p "$WORK"
WORK=$(realpath "$WORK")

# shellcheck source=benches/kilosort/cases.sh
source "$(dirname "$0")/cases.sh"
bench_site "$BENCH"

declare -A CASES=(
  [gt64]="--channels 64 --units 16 --duration 120 --seed 42 --drift none"
  [gt384]="--channels 384 --units 96 --duration 120 --seed 7 --drift zigzag"
  [gt384l]="--channels 384 --units 120 --duration 300 --seed 11 --drift zigzag"
  [gt384s8]="--channels 384 --units 96 --duration 120 --seed 8 --drift zigzag"
  [gt384s9]="--channels 384 --units 96 --duration 120 --seed 9 --drift zigzag"
)
declare -A VARIANTS=(
  [ours]=""
  [group1000]="--set min_cluster_group=1000"
  [tree41]="--set tree_cross_refractory=false"
  [ks41]="--set min_cluster_group=1000 --set tree_cross_refractory=false"
  [nodriftsplit]="--set drift_split_overlap=null"
  [noshadow]="--set shadow_ms=null"
  [ksthresholds]="--set Th_universal=9 --set Th_learned=8"
)
VARIANTS_RUN=${VARIANTS:-ours group1000 tree41 ks41 nodriftsplit noshadow ksthresholds}
RUNTIME=${RUNTIME:-cuda}

# shellcheck disable=SC2068
for case in ${CASES_RUN[@]}; do
  dir="$WORK/$case"
  # shellcheck disable=SC2086
  ensure_recording "$BENCH/gen_ground_truth.py" "$dir" ${CASES[$case]}
  # shellcheck disable=SC2068
  for variant in ${VARIANTS_RUN[@]}; do
    out="$dir/dspk_$variant"
    rm -rf "$out"
    echo "=== $case: dspk, $variant (${VARIANTS[$variant]:-the defaults})"
    # shellcheck disable=SC2086
    DSPK_RUNTIME=$RUNTIME timed "$case $variant" \
      "$SORT" sort "$dir/recording.bin" --probe "$dir/chanMap.json" --out "$out" ${VARIANTS[$variant]}
    python3 "$BENCH/score.py" "$out" --gt "$dir" --name "$case-$variant" 2>&1 | grep SUMMARY
  done
done
