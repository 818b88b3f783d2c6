"""Mixed precision and memory growth, measured on this machine's device.

Each configuration runs in a fresh Python process, because the dtype policy
and memory settings must be applied before the backend starts (as gpu_setup()
does from R). Reports:

- throughput (samples/s) of a wide MLP trained by gpu_fit()'s core under float32,
  mixed_bfloat16 and mixed_float16, and each one's ratio to float32;
- on a GPU, NVML memory used after a small model trained with memory growth
  on (JAX: preallocation off) and off.

Usage: python bench/precision.py [--quick | --smoke] [--out FILE]
Run from the repository root; KERAS_BACKEND picks the backend (jax on the GPU machines).
Writes bench/results/precision-<device>.json (a smoke run: see bench/lib/bench_modes.py).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "inst" / "python"
sys.path.insert(0, str(ROOT / "bench" / "lib"))

import bench_modes  # noqa: E402

CHILD = r"""
import json, sys, time
import numpy as np
from gpukeras.gpu import devices, nvml, setup
args = json.loads(sys.argv[1])
settings = setup.apply_setup(mixed_precision=args["precision"], memory_growth=args["growth"])
if args.get("matmul_precision"):
    import jax
    jax.config.update("jax_default_matmul_precision", args["matmul_precision"])
from gpukeras.core.runtime import config
from gpukeras.train import fit
keras = config.keras()
rows = devices.list_devices()
gpu = next((r for r in rows if r["type"] == "GPU"), None)
def used():  # GPU:0 by the UUID the CUDA driver gave it (NVML's index 0 need not be it)
    found = nvml.query().find(gpu["uuid"]) if gpu is not None else None
    return found.memory_used_mib if found is not None else None
before = used()
width, batch, steps = args["width"], args["batch"], args["steps"]
model = keras.Sequential([keras.Input((width,))] + [
    keras.layers.Dense(width, activation="relu") for _ in range(args["depth"])
] + [keras.layers.Dense(10, dtype="float32")])
model.compile(optimizer="adam",
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              jit_compile=True)
rng = np.random.default_rng(0)
x = rng.standard_normal((batch * 4, width), dtype=np.float32)
y = rng.integers(0, 10, batch * 4).astype(np.int32)
# gpu_fit()'s core keeps the arrays on the device (JAX): Keras' fit() on NumPy arrays
# copies every batch from the host, and at full size (256 MB a batch) that copy, not
# the precision, set the pace.
fit.fit(model, (x, y), batch_size=batch, epochs=1, verbose=0, monitor=False)  # warm up
epochs = max(1, steps // 4)
timings = []
for _ in range(3):  # the median of three timed runs: single runs vary by 20 % on a busy CPU
    started = time.perf_counter()
    fit.fit(model, (x, y), batch_size=batch, epochs=epochs, verbose=0, monitor=False)
    timings.append(time.perf_counter() - started)
seconds = sorted(timings)[1]
flops = 6 * batch * epochs * 4 * (args["depth"] * width * width + width * 10)
print("@@" + json.dumps({
    "precision": settings["dtype_policy"],
    "matmul_precision": args.get("matmul_precision"),
    "memory_growth": settings["memory_growth"],
    "device": gpu["name"] if gpu else "CPU",
    "samples_per_second": batch * epochs * 4 / seconds,
    "tflops": flops / seconds / 1e12,
    "memory_used_before_mib": before,
    "memory_used_after_mib": used(),
}))
"""


def run(config: dict) -> dict:
    # keep what PYTHONPATH already holds: on the GPU machines, Keras comes from there
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(CORE), os.environ.get("PYTHONPATH")])),
    }
    env.pop("XLA_PYTHON_CLIENT_PREALLOCATE", None)  # gpu_setup(memory_growth=) decides
    return bench_modes.run_child(CHILD, config, env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_modes.add_arguments(parser)
    args = parser.parse_args()
    sizes = (
        {"width": 64, "depth": 1, "batch": 64, "steps": 4}
        if args.smoke
        else {"width": 1024, "depth": 2, "batch": 512, "steps": 40}
        if args.quick
        else {"width": 8192, "depth": 4, "batch": 8192, "steps": 24}
    )
    # A smoke run tries one mixed policy: each one is a fresh process, TensorFlow's start.
    policies = ("float32", "float16") if args.smoke else ("float32", "bfloat16", "float16")
    precision = [run({**sizes, "precision": p, "growth": True}) for p in policies]
    base = precision[0]["samples_per_second"]
    for result in precision:
        result["ratio_vs_float32"] = result["samples_per_second"] / base
    # XLA runs float32 matmuls on TF32 Tensor Cores on Ampere and newer (JAX's default
    # matmul precision): bfloat16's dense peak is then only 2x float32's. On JAX with a GPU,
    # float32 with full-precision matmuls ("highest") is measured too, for the ratio to it.
    if precision[0]["device"] != "CPU" and os.environ.get("KERAS_BACKEND") == "jax":
        full = run({**sizes, "precision": "float32", "growth": True, "matmul_precision": "highest"})
        full["ratio_vs_float32"] = full["samples_per_second"] / base
        precision.append(full)
    memory = []
    if precision[0]["device"] != "CPU":
        small = {
            "width": 256,
            "depth": 2,
            "batch": 256,
            "steps": 8,
            "precision": "float32",
        }
        memory = [run({**small, "growth": growth}) for growth in (True, False)]
    result = {
        "benchmark": "precision",
        "command": bench_modes.command("bench/precision.py", args),
        "date": datetime.date.today().isoformat(),
        "backend": os.environ.get("KERAS_BACKEND", "tensorflow"),
        "device": precision[0]["device"],
        "sizes": sizes,
        "precision": precision,
        "memory_growth": memory,
    }
    device = "cpu" if result["device"] == "CPU" else result["device"].split()[1].lower()
    out = bench_modes.result_path(args, ROOT / "bench" / "results" / f"precision-{device}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    for row in precision:
        matmuls = row["matmul_precision"]
        name = row["precision"] + (f" ({matmuls} matmuls)" if matmuls else "")
        print(
            f"{name:>25}: {row['samples_per_second']:12.0f} samples/s "
            f"{row['tflops']:8.2f} TFLOP/s  x{row['ratio_vs_float32']:.2f} vs float32"
        )
    for row in memory:
        print(
            f"memory_growth={row['memory_growth']}: NVML memory used "
            f"{row['memory_used_before_mib']:.0f} -> {row['memory_used_after_mib']:.0f} MiB"
        )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
