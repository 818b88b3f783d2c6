#!/usr/bin/env bash
# Every benchmark in its smoke mode (make bench-smoke), so that a change that
# breaks one fails here and not on the day it is next run for its numbers.
#
# A benchmark is any bench/*.R or bench/*.py script; each takes --smoke (tiny
# sizes, one round; GPUKERAS_BENCH_SMOKE=1 says the same) and writes its result
# to GPUKERAS_BENCH_OUT, a temporary folder, never over bench/results/. What the
# benchmarks share lives in bench/lib/. bench/gpu_verify.sh, whose numbers come
# from a GPU machine, runs here in its own smoke mode (every step on this CPU with
# JAX, and R's through the bundle of bench/gpu_r_bundle.sh with the system's R
# hidden), one job per part so that the two slots share its parts. The benchmarks
# it runs (the .py ones on JAX, as on the GPU; bench/r_on_gpu.R through the bundle)
# do not run a second time beside it.
#
# Run from the repository root. PYTHON: the Python for the .py scripts (default
# python3; the R scripts find gpukeras' own). BENCH_SMOKE_JOBS: scripts run at
# once (default 2: most of a script's time is starting R, Python and TensorFlow
# and compiling small models, on one core). BENCH_SMOKE_LIMIT: seconds one script
# may take (default 300; a part of gpu_verify.sh: GPU_VERIFY_SMOKE_LIMIT, default 600). Exits
# non-zero when any benchmark failed.
set -u
python=${PYTHON:-python3}
jobs=${BENCH_SMOKE_JOBS:-2}
limit=${BENCH_SMOKE_LIMIT:-300}
out=$(mktemp -d "${TMPDIR:-/tmp}/gpukeras-bench-smoke.XXXXXX")
export GPUKERAS_BENCH_SMOKE=1 GPUKERAS_BENCH_OUT=$out
# what the smoke runs compile (JAX) is kept in their folder, not the user's cache
export GPUKERAS_COMPILE_CACHE=${GPUKERAS_COMPILE_CACHE:-$out/compiled}
started=$SECONDS

# One benchmark: its output in $out/<script>.log, a line saying how it went in
# $out/<script>.status, and its exit status.
# gpu_verify.sh:PART is one part of it.
smoke() {
  local script=$1 name began status
  name=$(basename "$script")
  case $script in
    *.R) set -- Rscript --no-save --no-restore "$script" --smoke ;;
    *.sh:*) set -- env PYTHON="$python" bash "${script%:*}" --smoke "${script##*:}" ;;
    *) set -- "$python" "$script" --smoke ;;
  esac
  began=$SECONDS
  # a part of gpu_verify.sh runs several steps of a GPU visit (r: the R bundle's build)
  timeout "$(case $name in gpu_verify.sh:*) echo "${GPU_VERIFY_SMOKE_LIMIT:-600}" ;; *) echo "$limit" ;; esac)" \
    "$@" > "$out/$name.log" 2>&1
  status=$?
  if [ "$status" -eq 0 ]; then
    echo "ok   $script ($((SECONDS - began)) s)" > "$out/$name.status"
  else
    echo "FAIL $script (exit status $status after $((SECONDS - began)) s)" > "$out/$name.status"
  fi
  cat "$out/$name.status"
  return "$status"
}

failed=0
running=0
# gpu_verify.sh's parts (its `all`), the longest first (measured: r, then augment), so that
# no slot is left with a long one at the end.
verify_parts=(r augment)
for part in $(sed -n 's/^  parts=(\(.*\))$/\1/p' bench/gpu_verify.sh); do
  [[ " ${verify_parts[*]} " == *" $part "* ]] || verify_parts+=("$part")
done
in_verify=$(grep -o 'bench/[a-z_]*\.\(py\|R\)' bench/gpu_verify.sh | sort -u)
scripts=("${verify_parts[@]/#/bench/gpu_verify.sh:}")
for script in bench/*.R bench/*.py; do
  grep -qx "$script" <<< "$in_verify" || scripts+=("$script")
done
for script in "${scripts[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
  smoke "$script" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
for status in "$out"/*.status; do
  if grep -q "^FAIL" "$status"; then
    log=${status%.status}.log
    echo "---- $(cat "$status"); the end of its output:"
    tail -n 40 "$log" | sed 's/^/     /'
  fi
done
echo "bench smoke run: $((SECONDS - started)) s; logs and results in $out"
exit "$failed"
