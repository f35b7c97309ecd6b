#!/usr/bin/env bash
# Shared by the scripts of benches/kilosort (sourced, not run): the bench tools' Python
# packages, a ground-truth recording made once, dspk's raw sidecar for it, a timed sort.

# Installs the bench tools' wheels (BENCH/wheels-cp312; all of them, or those a requirements
# file lists) into a fresh folder and puts it on PYTHONPATH.
#   bench_site BENCH [REQUIREMENTS]
bench_site() {
  local bench=$1 requirements=${2:-}
  SITE=$(mktemp -d)
  if [ -n "$requirements" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --ignore-requires-python \
      --find-links "$bench/wheels-cp312" --target "$SITE" -r "$requirements"
  else
    python3 -m pip install -q --no-index --no-deps --target "$SITE" "$bench"/wheels-cp312/*.whl
  fi
  export PYTHONPATH="$SITE"
}

# Generates a recording with GENERATOR (a bench tools' script) into DIR unless DIR already
# holds one, then writes dspk's raw sidecar for DIR/recording.bin from DIR/recording.json.
#   ensure_recording GENERATOR DIR GENERATOR_ARGS...
ensure_recording() {
  local generator=$1 dir=$2
  shift 2
  if [ ! -f "$dir/recording.bin" ]; then
    python3 "$generator" --out "$dir" "$@" > "$dir.gen.log" 2>&1
  fi
  python3 - "$dir" <<'PY'
import json, sys, pathlib
d = pathlib.Path(sys.argv[1])
m = json.loads((d / "recording.json").read_text())
side = {
    "format": "dspk-raw", "version": 1, "data_file": "recording.bin", "dtype": "<i2",
    "order": "interleaved", "header_bytes": 0, "sample_rate": str(m["sample_rate_hz"]),
    "channels": [{"name": str(c), "gain": m["gain_uv_per_count"], "offset": m["offset_uv"],
                  "unit": "uV"} for c in range(m["n_channels"])],
}
(d / "recording.bin.json").write_text(json.dumps(side))
PY
}

# Runs a command, prints the last lines of its output without blank lines, then
# `DSPK_WALL LABEL SECONDS s`.
#   timed LABEL COMMAND...
timed() {
  local label=$1 start end
  shift
  start=$(date +%s.%N)
  "$@" 2>&1 | grep -v "^\s*$" | tail -25
  end=$(date +%s.%N)
  echo "DSPK_WALL $label $(python3 -c "print(f'{$end - $start:.2f}')") s"
}
