"""Where a trial's start goes (issue #61, item 3): the fixed cost of a fit of bench/r_on_gpu.R's
MLP (20-128-128-2, softmax, Adam; 16,000 rows, batch 256, 20 epochs), alone and as a
population of 16 members, each in a fresh process as a search's worker starts it.

Phases, in seconds, each measured in the child:
- ``import``: Python importing gpukeras' runtime, Keras and JAX;
- ``runtime``: the backend's start (JAX's first array on the device: CUDA's too on a GPU);
- ``build``: the population made: one model made and compiled, built as a fit builds it,
  and each member's starting state drawn from its seed (``population.starts``); of it
  ``members``, the build and the members' states (the model made, the rest);
- ``first_epoch``: the first epoch, XLA's compiling included; of it ``compile`` (XLA's
  backend compile, JAX's own monitoring events: GEMM autotuning is part of it on a GPU),
  ``trace`` (tracing and lowering to XLA);
- ``epoch``: a later epoch's mean (the steps' speed, compiled).

Ways (XLA flags added): ``default``; on a GPU only ``autotune 0``
(``--xla_gpu_autotune_level=0``: heuristics instead of timing each GEMM's candidates), ``no
Triton GEMM`` (``--xla_gpu_enable_triton_gemm=false``: cuBLAS for every GEMM) and ``both``. A
way pays off where it cuts ``compile`` without making ``epoch`` slower.

Each child sets its way's flags as XLA_FLAGS. gpukeras gives a small model's population the
``both`` options itself (``population.compile_options``); the children turn that off
(``SMALL_MODEL_PARAMETERS`` = 0), so that each way measures its flags alone.

Nothing is read from or written to JAX's persistent compilation cache (each process
compiles, as a first trial does). --quick: the 16-member population only, one round.

Usage: KERAS_BACKEND=jax python bench/fit_start.py [--quick | --smoke] [--out FILE]
Run from the repository root. Writes bench/results/fit-start-<device>-<date>.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "inst" / "python"), str(ROOT / "bench" / "lib")]

import bench_modes  # noqa: E402
from pipeline import code_state, device_facts  # noqa: E402

# The children start as a search's worker would; this one only names the device.
CHILD_ENV = {**os.environ, "KERAS_BACKEND": "jax", "JAX_ENABLE_COMPILATION_CACHE": "false"}
os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
# name: (XLA flags added, on a GPU only)
WAYS: dict[str, tuple[str, bool]] = {
    "default": ("", False),
    "autotune 0": ("--xla_gpu_autotune_level=0", True),
    "no Triton GEMM": ("--xla_gpu_enable_triton_gemm=false", True),
    "both": ("--xla_gpu_autotune_level=0 --xla_gpu_enable_triton_gemm=false", True),
}

CHILD = r"""
import json, sys, time
began = time.perf_counter()
config = json.loads(sys.argv[1])
import numpy as np
import jax
spent = {"compile": 0.0, "trace": 0.0}
programs = {}
def listen(event, seconds, fun_name="?", **_):
    if event == "/jax/core/compile/backend_compile_duration":
        spent["compile"] += seconds
        programs[fun_name] = programs.get(fun_name, 0.0) + seconds
    elif event in ("/jax/core/compile/jaxpr_trace_duration",
                   "/jax/core/compile/jaxpr_to_mlir_module_duration"):
        spent["trace"] += seconds
jax.monitoring.register_event_duration_secs_listener(listen)
from gpukeras.core import compat
from gpukeras.core.runtime import config as runtime
from gpukeras.train import population as rules
from gpukeras.train.population import Member, Population, starts
rules.SMALL_MODEL_PARAMETERS = 0  # XLA_FLAGS alone decide
keras = runtime.keras()
phases = {"import": time.perf_counter() - began}
began = time.perf_counter()
jax.block_until_ready(jax.numpy.ones(8) + 1)
phases["runtime"] = time.perf_counter() - began
rows, batch, units = config["rows"], config["batch"], config["units"]
rng = np.random.default_rng(0)
x = rng.standard_normal((rows, 20), dtype=np.float32)
y = (x[:, 0] - x[:, 2] > 0).astype(np.int32)
def made(units, members):
    compat.set_random_seed(keras, 1)  # as the first member's worker seeds (TensorFlow not loaded)
    model = keras.Sequential([keras.Input((20,)), keras.layers.Dense(units, activation="relu"),
                              keras.layers.Dense(units, activation="relu"),
                              keras.layers.Dense(2, activation="softmax")])
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    seeds = [member + 1 for member in range(members)]
    rates = [1e-3 * (1 + member) for member in range(members)]
    made_at = time.perf_counter()
    drawn = starts(model, seeds, (x[:batch], y[:batch]), rates)
    phases["members"] = time.perf_counter() - made_at
    return Population([model] * members, [Member(seed, np.arange(rows)) for seed in seeds],
                      (x, y), batch, starts=drawn)
began = time.perf_counter()
population = made(units, config["members"])
phases["build"] = time.perf_counter() - began
spent.update(compile=0.0, trace=0.0)
programs.clear()
began = time.perf_counter()
population.train(1)
phases["first_epoch"] = time.perf_counter() - began
phases.update(spent)
phases["compiled"] = len(programs)
compiled = dict(sorted(programs.items(), key=lambda item: -item[1]))
began = time.perf_counter()
population.train(config["epochs"] - 1)
phases["epoch"] = (time.perf_counter() - began) / (config["epochs"] - 1)
print("@@" + json.dumps({**phases, "programs": compiled}))
"""


def measure(way: str, child: dict) -> dict:
    return bench_modes.run_way(CHILD, child, CHILD_ENV, WAYS[way][0], way)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_modes.add_arguments(parser)
    args = parser.parse_args()
    device, short = device_facts()
    gpu = not device.startswith("CPU")
    sizes = {"rows": 16000, "batch": 256, "units": 128, "epochs": 20}
    populations = [1, 16]
    if args.smoke:
        sizes.update(rows=512, units=16, epochs=2)
        populations = [1, 2]
    if args.quick:  # the population's ways only
        populations = populations[-1:]
    rounds = 1 if args.smoke or args.quick else 3
    ways = [way for way, (_, gpu_only) in WAYS.items() if gpu or not gpu_only]
    # (run's name, way, the child's config)
    runs = [(f"{n} member(s)", way, {**sizes, "members": n}) for n in populations for way in ways]
    found: dict[str, dict[str, list[dict]]] = {}
    result = {
        "benchmark": "fit_start",
        "command": bench_modes.command("bench/fit_start.py", args),
        "date": datetime.date.today().isoformat(),
        "device": device,
        "code": code_state(),
        "sizes": sizes,
        "rounds": rounds,
        "runs": found,
    }
    measured = ROOT / "bench" / "results" / f"fit-start-{short}-{result['date']}.json"
    out = bench_modes.result_path(args, measured)
    out.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(rounds):  # written after each run: a run stopped by a limit keeps the others
        for name, way, child in runs:
            found.setdefault(name, {}).setdefault(way, []).append(measure(way, child))
            out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    failed = False
    for name, by_way in found.items():
        for way, measured_runs in by_way.items():
            good = [run for run in measured_runs if "failed" not in run]
            if not good:
                failed = True
                print(f"{name:>12} | {way:<10}: failed\n{measured_runs[-1]['failed']}")
                continue
            median = {
                k: statistics.median(run[k] for run in good) for k in good[0] if k != "programs"
            }
            print(
                f"{name:>12} | {way:<10}: " + ", ".join(f"{k} {v:.3f}" for k, v in median.items())
            )
    print("written to", out)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
