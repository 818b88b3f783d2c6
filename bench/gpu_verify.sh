#!/usr/bin/env bash
# One lease on a lent GPU machine: the checks that need a GPU, on the JAX backend.
#
# The GPU machines have Python 3.12 with JAX but no TensorFlow, keras or R, and
# reach no package registry (DESIGN.md, "Verifying on a real GPU"), so keras,
# namex and optree travel as wheels in .whl/. Run from the repository root:
#
#   bash bench/gpu_verify.sh gpu    # -m gpu tests, gpu_check(), the monitor benchmark
#   bash bench/gpu_verify.sh bench  # the memory test alone, the precision and pipeline benchmarks
#   bash bench/gpu_verify.sh suite  # the whole core suite on JAX
#   bash bench/gpu_verify.sh resident  # device-resident training against Keras' fit()
#   bash bench/gpu_verify.sh memory    # gpu_memory_plan() against the measured peak
#   bash bench/gpu_verify.sh augment   # augmentation presets on the device: what they cost
#
# Every figure goes to $OUT (or bench/results/gpu when OUT is unset), named after
# the GPU and the date; each step has its own time limit so one slow step
# cannot take the others' output with it.
set -u
part=${1:-gpu}
out=${OUT:-bench/results/gpu}
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/inst/python KERAS_BACKEND=jax PYTHONUNBUFFERED=1
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '-')
tag="$gpu-$(date +%F)"
echo "== $tag"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv
python3 -c 'import jax, keras, numpy; print("jax", jax.__version__, jax.devices(), "keras", keras.__version__, "numpy", numpy.__version__)'

step() {  # step NAME SECONDS COMMAND...: run with a limit, keep its log
  local name=$1 limit=$2
  shift 2
  echo "== $name (limit ${limit}s)"
  local start=$SECONDS
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  echo "rc=$? after $((SECONDS - start))s"
  tail -n 25 "$out/$name.log"
}

case $part in
  gpu)
    step gpu-tests 170 bash -c 'cd python && python3 -m pytest tests -m gpu -ra -q -p no:cacheprovider'
    step check 80 python3 -c "import json, gpukeras.bridge as b; print(json.dumps(b.call('check'), indent=1, default=str))"
    step monitor 90 python3 bench/monitor.py --out "$out/monitor-python-jax-$tag.json"
    ;;
  bench)
    step setup-memory 60 bash -c 'cd python && python3 -m pytest tests/test_setup.py -m gpu -ra -q -p no:cacheprovider'
    step precision 110 python3 bench/precision.py --out "$out/precision-$tag.json"
    step pipeline 280 python3 bench/pipeline.py --out "$out/pipeline-python-$tag.json"
    ;;
  resident)
    step resident-tests 200 bash -c 'cd python && python3 -m pytest tests/test_resident.py -ra -q -p no:cacheprovider'
    step resident 280 python3 bench/resident.py --out "$out/resident-python-$tag.json"
    ;;
  augment)
    step augment 280 python3 bench/augment.py --quick --out "$out/augment-$tag.json"
    ;;
  memory)
    step memory-plan 240 python3 bench/memory_plan.py --out "$out/memory_plan-$tag.json"
    ;;
  suite)
    # eight test processes share the GPU: none may take JAX's default 75 % of it
    step suite 390 env XLA_PYTHON_CLIENT_PREALLOCATE=false bash -c 'cd python && python3 -m pytest tests -ra -q -p no:cacheprovider -n 8 --timeout 300'
    ;;
esac
ls -la "$out"
