#!/usr/bin/env bash
# One lease on a lent GPU machine: every check that needs a GPU, on the JAX backend, R's too.
#
# The GPU machines have Python 3.12 with JAX but no TensorFlow and no R, and reach no
# package registry (DESIGN.md, "Verifying on a real GPU"). What they lack travels in the
# bundle bench/gpu_r_bundle.sh gathers (.gpu-r: R, reticulate, gpukeras, and the keras,
# namex and optree wheels); carry it. Run from the repository root:
#
#   bash bench/gpu_verify.sh PART...
#
#   gpu       the -m gpu tests, gpu_check(), the monitor benchmark
#   bench     the memory-growth tests, the precision and pipeline benchmarks
#   resident  device-resident training against Keras' fit(), NVML utilization (and why)
#   augment   augmentation presets on the device: what they cost
#   memory    gpu_memory_plan() against the measured peak
#   determinism  what gpu_setup(deterministic = TRUE) costs in training speed (issue #33)
#   r         R on the GPU through the bundle: bench/r_on_gpu.R (gpu_search() with one worker
#             on the GPU and with two sharing it first: issue #33's GPU goal)
#   suite     the whole core suite on JAX
#   visit     what matters most first, in one device command under 8 minutes on an H100
#             (issue #58): R's gpu_check(), a fit, predict() and a 3-fold gpu_cv() under
#             the GPU's default precision (bench/gpu_visit.R through the bundle); NVML's
#             utilization across epochs, each way of bench/utilization.py; the resident
#             loop's speed against Keras' fit() (bench/resident.py --quick)
#   populations  issue #61's GPU goals and item 3: where a fit's start goes, alone and as a
#             population of 16, with XLA's GEMM autotuning and without (bench/fit_start.py);
#             bench/r_on_gpu.R --parts 6 through the bundle (gpu_cv() against one fit, 16- and
#             16-trial population searches: trials per hour); gpu_fit()'s MLP against a
#             hand-written JAX loop (bench/fit_vs_loop.py, issue #78 item 4)
#   starting  issue #78: bench/r_on_gpu.R --parts 6 through the bundle in two fresh R
#             sessions sharing one compilation cache, empty as the first starts (its programs
#             compiled once, for good: the second loads them); NVML's utilization while a
#             16-member population of the 1024-4096-4096-4096-10 MLP trains
#             (bench/population_utilization.py)
#   shapes    issue #78 item 3 and its goals in one device command: bench/r_on_gpu.R --parts 1,6
#             through the bundle (a process per trial with one and two workers, then gpu_cv()
#             and the populations' searches, the one over units too, side by side)
#   pretrained  issue #79's GPU goal: bench/lora.R through the bundle (a LoRA fine-tune of a
#             gemma3_1b-sized causal LM from R against KerasHub's own fit(), bench/lora.py;
#             KerasHub's, Grain's and their needs' wheels in .whl/, which this script installs;
#             PRETRAINED_ROWS=N: N sequences an epoch, not 128)
#   all       every part above, in that order
#
# Each part ends within 10 minutes (one device command), all of them within 76 (the sum
# of the step limits below is 75 min 50 s; on an H100 the steps took far less). Every figure goes to $OUT (or bench/results/gpu
# when OUT is unset), named after the GPU and the date; each step has its own time limit
# so that one slow step cannot take the others' output with it.
#
# --smoke (first argument; make test runs `bash bench/gpu_verify.sh --smoke all` through
# bench/lib/smoke.sh): the same steps on this machine's CPU with JAX, the benchmarks in
# their smoke mode, the tests collected but not run (make pytest runs them), and the R part
# as bench/gpu_r_bundle.sh --prove (the bundle built, then run with the system's R hidden),
# results in a temporary folder; exits non-zero when a step failed.
set -u
smoke=false
if [ "${1:-}" = "--smoke" ]; then
  smoke=true
  shift
fi
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(gpu)
if [ "${parts[0]}" = all ]; then
  parts=(gpu bench resident augment memory determinism r suite visit populations starting shapes pretrained)
fi
python=${PYTHON:-python3}
bundle=${GPU_R_BUNDLE:-.gpu-r}
failed=0

if $smoke; then
  out=$(mktemp -d "${TMPDIR:-/tmp}/gpukeras-gpu-verify.XXXXXX")
  bundle=${GPU_R_BUNDLE:-$out/r-bundle} # built and proven here, not the one carried
  quick=--smoke
  tests=(--collect-only -q)
  probe=0.5
  suite=()
  tag="cpu-smoke-$(date +%F)"
else
  out=${OUT:-bench/results/gpu}
  quick=
  tests=(-ra -q)
  probe=3
  # -vv (against -q above): each test named as it ends, so that a suite stopped by its
  # limit still says which failed (2026-11-26: 97 % done at 215 s, its failures unnamed)
  suite=(-n 8 --timeout 300 -vv)
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1 | tr ' ' '-')
  tag="$gpu-$(date +%F)"
fi
mkdir -p "$out"
export PYTHONPATH=$PWD/inst/python${PYTHONPATH:+:$PYTHONPATH} KERAS_BACKEND=jax PYTHONUNBUFFERED=1
echo "== $tag"
$smoke || nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv
# The stack, said; Keras (and optuna, for gpu_search()) from the bundle's wheels (or .whl/)
# where the machine's Python has none. One Python for the check and the versions: each
# start imports Keras and JAX, 2.5 s of CPU (every smoke part paid it twice).
stack='import jax, keras, namex, optree, optuna, numpy
print("jax", jax.__version__, jax.devices(), "keras", keras.__version__, "numpy", numpy.__version__)'
if ! "$python" -c "$stack" 2> /dev/null; then
  wheels=$(ls "$bundle"/wheels/*.whl .whl/*.whl 2> /dev/null)
  # shellcheck disable=SC2086
  "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site $wheels || exit 1
  export PYTHONPATH=/tmp/site:$PYTHONPATH
  "$python" -c "$stack"
fi

step() { # step NAME SECONDS COMMAND...: run with a limit, keep its log
  local name=$1 limit=$2 status
  shift 2
  echo "== $name (limit ${limit}s)"
  local start=$SECONDS
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  status=$?
  echo "rc=$status after $((SECONDS - start))s"
  [ "$status" -eq 0 ] || failed=1
  tail -n 25 "$out/$name.log"
}
# the core's tests, from python/ (followed by what to run)
pytest="cd python && '$python' -m pytest -p no:cacheprovider ${tests[*]}"

for part in "${parts[@]}"; do
  case $part in
    gpu)
      # (in the smoke run the suite part collects the same tests/: 10 s of CPU each time)
      $smoke || step gpu-tests 150 bash -c "$pytest tests -m gpu"
      step check 60 "$python" -c "import json, gpukeras.bridge as b; print(json.dumps(b.call('check', {'probe_seconds': $probe}), indent=1, default=str))"
      step monitor 80 "$python" bench/monitor.py $quick --out "$out/monitor-python-jax-$tag.json"
      ;;
    bench)
      step setup-memory 60 bash -c "$pytest tests/test_setup.py -m gpu"
      step precision 160 "$python" bench/precision.py $quick --out "$out/precision-$tag.json"
      step pipeline 240 "$python" bench/pipeline.py $quick --out "$out/pipeline-python-$tag.json"
      ;;
    resident)
      step resident-tests 180 bash -c "$pytest tests/test_resident.py"
      step resident 240 "$python" bench/resident.py $quick --out "$out/resident-python-$tag.json"
      step utilization 100 "$python" bench/utilization.py ${quick:---quick} --out "$out/utilization-$tag.json"
      ;;
    augment)
      step augment 240 "$python" bench/augment.py ${quick:---quick} --out "$out/augment-$tag.json"
      ;;
    memory)
      step memory-plan 200 "$python" bench/memory_plan.py $quick --out "$out/memory_plan-$tag.json"
      ;;
    determinism)
      # each round two fresh processes, one with XLA's deterministic GPU ops (TensorFlow
      # too where the machine has it)
      step deterministic 240 "$python" bench/deterministic.py ${quick:---rounds 6} \
        --out "$out/deterministic-$tag.json"
      ;;
    r)
      if $smoke; then
        # building the bundle and running r_on_gpu.R through it: 152 s in CI on an ordinary
        # hour, over 270 s on a slow one (every smoke part took 1.7-1.9x as long). R's tree
        # compressed with xz -0: 7 s of CPU against 35 s for the default -6 (2026-11-27; 77 MiB
        # of tar), the same format for the runner, 4 MiB larger, so its size check is stricter
        step r-bundle 420 env XZ_OPT="-0 -T0" bash bench/gpu_r_bundle.sh --prove "$bundle"
      else
        step r-on-gpu 600 env PYTHON="$(command -v "$python")" GPUKERAS_DEVICE_NAME="${gpu//-/ }" \
          "$bundle/Rscript" bench/r_on_gpu.R --out "$out/r-on-gpu-$tag.md"
      fi
      ;;
    suite)
      # Eight test processes share the GPU: none may take JAX's default 75 % of it, and the
      # -m gpu tests, some of which preallocate on purpose, run after them one at a time
      # (2026-11-26, all at once: 39 failed, most for memory another process held).
      # float32 matmuls at full precision there: those tests compare outputs across batch
      # sizes and batchings to 1e-5, and XLA's default on a GPU is TF32 (~1e-3 apart).
      step suite 250 env XLA_PYTHON_CLIENT_PREALLOCATE=false JAX_DEFAULT_MATMUL_PRECISION=highest \
        bash -c "$pytest tests -m 'not gpu' ${suite[*]}"
      # (in the smoke run the same collection again would prove nothing more)
      $smoke || step suite-gpu 170 bash -c "$pytest tests -m gpu -vv"
      ;;
    visit)
      if $smoke; then
        # the bundle is proven by the r part, the Python benchmarks by the resident part
        step visit-r 240 Rscript --no-save --no-restore bench/gpu_visit.R --smoke --out "$out/gpu-visit-r-$tag.md"
      else
        step visit-r 200 env PYTHON="$(command -v "$python")" "$bundle/Rscript" bench/gpu_visit.R \
          --out "$out/gpu-visit-r-$tag.md"
        step utilization 200 "$python" bench/utilization.py --quick --out "$out/utilization-$tag.json"
        step resident 120 "$python" bench/resident.py --quick --out "$out/resident-python-$tag.json"
      fi
      ;;
    populations)
      # (in the smoke run the r part runs bench/r_on_gpu.R whole, part 6 included)
      $smoke || step r-populations 330 env PYTHON="$(command -v "$python")" GPUKERAS_DEVICE_NAME="${gpu//-/ }" \
        "$bundle/Rscript" bench/r_on_gpu.R --parts 6 --out "$out/r-on-gpu-populations-$tag.md"
      step fit-start 170 "$python" bench/fit_start.py ${quick:---quick} --out "$out/fit-start-$tag.json"
      # 5 rounds took 38 s on an H200 (2026-11-28), starting included; --quick 2. Its smoke
      # run compiles five ways on the CPU: 12 s on 2 idle cores, 61 s on busy ones.
      step fit-vs-loop "$($smoke && echo 150 || echo 80)" "$python" bench/fit_vs_loop.py ${quick:---quick} \
        --out "$out/fit-vs-loop-$tag.json"
      ;;
    starting)
      # Issue #78, in one device command (the limits add up to 8 min: each can be lowered,
      # STARTING_*_LIMIT, to fit what is left of a lease); then a wide MLP's population.
      # The populations from R in two fresh sessions sharing one compilation cache, empty as
      # the first starts (gpu_compile_cache()): the first compiles, the second finds what the
      # first compiled (in the smoke run the r part runs bench/r_on_gpu.R whole).
      # STARTING_SEARCHES (say learning_rate,learning_rate_again): only those searches.
      if ! $smoke; then
        cache=$(mktemp -d "${TMPDIR:-/tmp}/gpukeras-compiled.XXXXXX")
        for run in first-run:${STARTING_FIRST_LIMIT:-230} second-run:${STARTING_SECOND_LIMIT:-150}; do
          step "r-populations-${run%:*}" "${run#*:}" env PYTHON="$(command -v "$python")" GPUKERAS_DEVICE_NAME="${gpu//-/ }" \
            GPUKERAS_COMPILE_CACHE="$cache" "$bundle/Rscript" bench/r_on_gpu.R --parts 6 \
            ${STARTING_SEARCHES:+--searches "$STARTING_SEARCHES"} --out "$out/r-on-gpu-populations-$tag-${run%:*}.md"
        done
      fi
      step population-utilization ${STARTING_UTILIZATION_LIMIT:-100} "$python" bench/population_utilization.py \
        ${quick:---quick} --out "$out/population-utilization-$tag.json"
      ;;
    shapes)
      # (in the smoke run the r part runs bench/r_on_gpu.R whole)
      $smoke || step r-shapes ${SHAPES_LIMIT:-420} env PYTHON="$(command -v "$python")" GPUKERAS_DEVICE_NAME="${gpu//-/ }" \
        "$bundle/Rscript" bench/r_on_gpu.R --parts 1,6 --out "$out/r-on-gpu-shapes-$tag.md"
      ;;
    pretrained)
      if $smoke; then
        step lora 300 env PYTHON="$python" Rscript --no-save --no-restore bench/lora.R --smoke --out "$out/lora-$tag.md"
      else
        step lora ${PRETRAINED_LIMIT:-300} env PYTHON="$(command -v "$python")" "$bundle/Rscript" bench/lora.R \
          --out "$out/lora-$tag${PRETRAINED_ROWS:+-rows-$PRETRAINED_ROWS}.md" ${PRETRAINED_ROWS:+--rows "$PRETRAINED_ROWS"}
      fi
      ;;
    *)
      echo "unknown part: $part (gpu, bench, resident, augment, memory, determinism, r, suite, visit," \
        "populations, starting, shapes, pretrained or all)" >&2
      exit 2
      ;;
  esac
done
ls -la "$out"
exit "$failed"
