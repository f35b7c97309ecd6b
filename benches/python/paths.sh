#!/usr/bin/env bash
# dspk's ways in timed on the same recording on one machine: the `dspk` command, `dspk.sort`
# from Python and `si.run_sorter("dspk_kilosort4", ...)` from SpikeInterface (each a fresh
# process, kernel caches warm), each sort scored by the bench tools' score.py; then
# SpikeInterface's `run_sorter_jobs` on a Dask LocalCluster over four recordings sharing the
# one device. docs/PERFORMANCE.md's Python figures come from this script's output.
#
#   benches/python/paths.sh BENCH_TOOLS DSPK_BINARY DSPK_SITE WORK_DIR [REPEATS]
#
# BENCH_TOOLS: the folder with gen_ground_truth.py, score.py and wheels-cp312/ (SpikeInterface
# 0.105.3 and what it needs, dask and distributed 2026.8.0 and theirs); DSPK_BINARY: a release
# build of the `dspk` command (`cargo build --release -p dspk-cli --features cuda`); DSPK_SITE:
# a folder holding the `dspk` package, e.g. the unpacked wheel of `maturin build --release
# --features cuda` (python/); WORK_DIR: where recordings and outputs go (recordings already
# there are reused); REPEATS: timed runs of each way (default 2). Recordings: 384 channels,
# 120 s, 96 units, zigzag drift, seed 7 (the public case); for the jobs four of 64 channels,
# 120 s, 16 units, static, seeds 42-45.
set -euo pipefail
BENCH=$(realpath "$1")
SORT=$(realpath "$2")
DSPK_SITE=$(realpath "$3")
WORK=$4
REPEATS=${5:-2}
mkdir -p "$WORK"
WORK=$(realpath "$WORK")
HERE=$(dirname "$(realpath "$0")")

# shellcheck source=benches/kilosort/cases.sh
source "$HERE/../kilosort/cases.sh"
bench_site "$BENCH"
export PYTHONPATH="$DSPK_SITE:$PYTHONPATH"
python3 -c "import dspk, spikeinterface; print('dspk', dspk.__version__, dspk.runtime(), 'spikeinterface', spikeinterface.__version__)"

gt="$WORK/gt384"
ensure_recording "$BENCH/gen_ground_truth.py" "$gt" --channels 384 --units 96 --duration 120 --seed 7 --drift zigzag
# Kernel caches warm for every way: one sort first, not timed.
"$SORT" sort "$gt/recording.bin" --probe "$gt/chanMap.json" --out "$WORK/warmup" >/dev/null 2>&1
for rep in $(seq 1 "$REPEATS"); do
  rm -rf "$WORK/cli" "$WORK/python" "$WORK/si"
  timed "command $rep" "$SORT" sort "$gt/recording.bin" --probe "$gt/chanMap.json" --out "$WORK/cli" | grep -E "sorted:|DSPK_WALL"
  timed "python $rep" python3 "$HERE/paths.py" python "$gt" "$WORK/python" | grep -E "dspk.sort:|PATH_|DSPK_WALL"
  timed "si $rep" python3 "$HERE/paths.py" si "$gt" "$WORK/si" | grep -E "run_sorter:|PATH_|Error|DSPK_WALL"
done
for way in cli python si/sorter_output; do
  python3 "$BENCH/score.py" "$WORK/$way" --gt "$gt" --name "$way" 2>&1 | grep SUMMARY
done

seeds=(42 43 44 45)
folders=()
for seed in "${seeds[@]}"; do
  ensure_recording "$BENCH/gen_ground_truth.py" "$WORK/gt64_$seed" --channels 64 --units 16 --duration 120 --seed "$seed" --drift none
  folders+=("$WORK/gt64_$seed")
done
rm -rf "$WORK/jobs"
timed jobs python3 "$HERE/paths.py" jobs 2 "$WORK/jobs" "${folders[@]}" | grep -E "JOB|PATH_WALL|Error|DSPK_WALL"
for seed in "${seeds[@]}"; do
  python3 "$BENCH/score.py" "$WORK/jobs/gt64_$seed/sorter_output" --gt "$WORK/gt64_$seed" --name "job-gt64-$seed" 2>&1 | grep SUMMARY
done
