#!/usr/bin/env bash
# The GPU checks of a session, in one call on the device machine (Python 3.12 with torch, Triton,
# cuda-bindings and llvmlite; no network). Usage, from the repository root:
#
#   bash bench/device_checks.sh STEP...     STEP: tests | lang[=I/N] | triton[=N] | realworld | bench | gpubench
#
# Wheels the machine lacks (filecheck, pyelftools, msgpack, liger-kernel) travel in .gpu/whl and
# Triton's test files in .gpu/triton-tests (both ignored by git; see bench/README.md). Every step
# writes its log to $OUT (default ./out) and a one-line summary to $OUT/summary.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt

if [ -d .gpu/whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu/whl/*.whl >/dev/null 2>&1
fi
python3 -m pip install -q --no-deps --no-build-isolation --no-index \
  -e . -e backends/nvidia -e backends/interpreter -e backends/amd >/dev/null 2>&1 || echo "install failed" >>"$SUMMARY"
export PYTHONPATH=$PWD/core:$PWD/backends/nvidia:$PWD/backends/interpreter:$PWD/backends/amd:/tmp/site
export TILEJIT_CACHE_DIR=/tmp/tilejit-cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >>"$SUMMARY"

summarize() {  # name log: the last pytest-style line of the log
  echo "$1: $(grep -E '(passed|failed|error)' "$2" | tail -1)" >>"$SUMMARY"
}

for step in "$@"; do
  case $step in
    tests)  # everything but the language suite; one pytest per folder (each has its own conftest)
      : >"$OUT/tests.log"
      for dir in tests/nvidia tests/runtime tests/interpreter tests/gpu; do
        timeout 300 python3 -m pytest -q -p no:cacheprovider "$dir" \
          --deselect tests/gpu/test_language_suite_compiles.py >>"$OUT/tests.log" 2>&1
        summarize "tests $dir" "$OUT/tests.log"
      done ;;
    lang*)  # the shared language suite on the cuda backend; lang=I/N runs every N-th file from the
            # I-th (1-based), so that the suite (about 10 min on an H100) fits the per-call limit in parts
      part=${step#lang}; part=${part#=}; i=${part%/*}; n=${part#*/}
      files=$(ls tests/language/test_*.py | awk -v i="${i:-1}" -v n="${n:-1}" '(NR - i) % n == 0')
      timeout 540 python3 -m pytest -q -p no:cacheprovider $files -k cuda >"$OUT/lang.log" 2>&1
      summarize "lang ${part:-all}" "$OUT/lang.log" ;;
    triton*)  # Triton's own language tests: tilejit's CUDA backend against the installed Triton
      n=${step#triton}; n=${n#=}
      timeout 540 python3 tools/triton_tests.py .gpu/triton-tests --device cuda --reference python3 \
        ${n:+--sample $n --seed 0} --timeout 60 --json "$OUT/triton_tests.json" >"$OUT/triton_tests.log" 2>&1
      echo "triton: $(grep -iE 'total|passed' "$OUT/triton_tests.log" | tail -3 | tr '\n' ' ')" >>"$SUMMARY" ;;
    realworld)
      timeout 420 python3 bench/realworld.py --device cuda --wheels .gpu/whl >"$OUT/realworld.log" 2>&1
      echo "realworld: rc=$?" >>"$SUMMARY" ;;
    gpubench)
      timeout 480 python3 bench/gpu.py >"$OUT/gpubench.log" 2>&1
      echo "gpubench: rc=$?" >>"$SUMMARY" ;;
    *) echo "unknown step $step" >>"$SUMMARY" ;;
  esac
done
cat "$SUMMARY"
