"""What gpu_setup(deterministic = TRUE) costs: training throughput with and without it.

Op determinism is a setting of the process (on JAX, read from XLA_FLAGS once, when
its backends start), so each measurement is a fresh Python that calls gpu_setup()'s
core (``setup.apply_setup``) with ``deterministic`` on or off and the same ``seed``,
then trains a small MLP with gpu_fit()'s core (``fit.fit``, on NumPy arrays, the
monitor off): one untimed fit (tracing, compiling), then ``fits`` timed fits, each
timed from Keras' ``on_train_begin`` to its ``on_train_end`` (so TensorFlow's
occasional seconds of teardown after training, DESIGN.md, are not in it), the
median taken. Rounds alternate which of the two runs first; a round's ratio is
deterministic / not, and the result is the median of the rounds' ratios with a
bootstrap 95 % interval (these 2-core machines vary +-20 % from round to round).

Each backend Keras can use here is measured (TensorFlow, JAX); a missing one is
left out (the GPU machines have no TensorFlow). A smoke run measures JAX alone.

What a CPU run can and cannot tell: on the CPU, XLA's GPU flag changes nothing, and
TensorFlow's determinism changes its input pipeline (tf.data keeps its order and runs
a map with stateful ops serially) and the few kernels with a nondeterministic CPU
version. On a GPU, determinism also takes away atomic adds (reductions, scatters,
bias and convolution gradients) and XLA's timed autotuning, which is where it costs
most: the same command measures it there (on the GPU machines, JAX alone).
On the CPU, JAX is the control: XLA's flag acts on GPUs only, so its ratio shows
what the machine's noise alone does to a ratio of 1.

Measured (bench/results/deterministic-cpu.json; 2 cores, load 3-10 from other work,
12 rounds): TensorFlow with deterministic ops at 1.00 [0.97, 1.30] of its speed
without, JAX (the control) at 1.09 [0.99, 1.20]: no cost the noise lets through on
the CPU. An earlier run of 8 rounds under heavier load: 0.92 [0.51, 1.14] and
1.12 [0.95, 1.63]. On an NVIDIA H100 (JAX 0.11.2, bench/gpu_verify.sh determinism, 6
rounds): 0.82 [0.69, 0.86], 1.58 against 1.22 million samples/s
(deterministic-NVIDIA-H100-80GB-HBM3-2026-11-26.json).

Usage: python bench/deterministic.py [--quick | --smoke] [--rounds N] [--out FILE]
(from the repository root). Writes bench/results/deterministic-<device>.json (a smoke run: see
bench/lib/bench_modes.py).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "inst" / "python"
sys.path[:0] = [str(CORE), str(ROOT / "bench" / "lib")]

import bench_modes  # noqa: E402

from gpukeras.gpu.devices import cpu_name  # noqa: E402

SEED = 1
BACKENDS = ("tensorflow", "jax")

# One measurement, in a fresh Python (KERAS_BACKEND set by the parent).
CHILD = r"""
import json, statistics, sys, time
import numpy as np
from gpukeras.gpu import devices, setup
args = json.loads(sys.argv[1])
settings = setup.apply_setup(deterministic=args["deterministic"], seed=args["seed"])
from gpukeras.core.runtime import config
from gpukeras.train import fit
keras = config.keras()
rows, width, batch = args["rows"], args["width"], args["batch"]
rng = np.random.default_rng(0)
x = rng.standard_normal((rows, 20), dtype=np.float32)
y = (x[:, 0] * x[:, 1] + np.sin(2 * x[:, 2]) > 0).astype(np.int32)
model = keras.Sequential(
    [keras.Input((20,)), keras.layers.Dense(width, activation="relu"),
     keras.layers.Dropout(0.1), keras.layers.Dense(width, activation="relu"),
     keras.layers.Dense(2)]
)
model.compile(optimizer="adam",
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))

class Clock(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.began = time.perf_counter()
    def on_train_end(self, logs=None):
        self.ended = time.perf_counter()

def timed(epochs):
    clock = Clock()
    fit.fit(model, (x, y), batch_size=batch, epochs=epochs, verbose=0, monitor=False,
            callbacks=[clock])
    return clock.ended - clock.began

timed(1)  # tracing, compiling, the pipeline's first start
seconds = [timed(args["epochs"]) for _ in range(args["fits"])]
gpus = [row["name"] for row in devices.list_devices() if row["type"] == "GPU"]
print("@@" + json.dumps({
    "versions": {"keras": keras.__version__,
                 settings["backend"]: config.backend_module().__version__},
    "deterministic": settings["deterministic"],
    "seed": settings["seed"],
    "backend": settings["backend"],
    "device": gpus[0] if gpus else "CPU",
    "fit_seconds": seconds,
    "samples_per_second": rows * args["epochs"] / statistics.median(seconds),
}))
"""


def run(backend: str, config: dict) -> dict:
    """One fresh Python on ``backend`` measuring ``config``; its report."""
    env = {
        **os.environ,
        "KERAS_BACKEND": backend,
        "TF_CPP_MIN_LOG_LEVEL": "2",
        # keep what PYTHONPATH already holds: on the GPU machines, Keras comes from there
        "PYTHONPATH": os.pathsep.join(filter(None, [str(CORE), os.environ.get("PYTHONPATH")])),
    }
    # Determinism is this benchmark's variable alone: none turned on from outside.
    env.pop("TF_DETERMINISTIC_OPS", None)
    report = bench_modes.run_child(CHILD, config, env, f" ({backend})")
    if report["deterministic"] is not config["deterministic"]:
        raise RuntimeError(f"asked deterministic={config['deterministic']}, got {report}")
    return report


def interval(values: list[float], draws: int = 4000) -> list[float]:
    """A bootstrap 95 % interval of the median of ``values`` (seeded)."""
    rng = np.random.default_rng(1)
    medians = np.median(rng.choice(values, size=(draws, len(values))), axis=1)
    return [float(np.quantile(medians, 0.025)), float(np.quantile(medians, 0.975))]


def measure(backend: str, sizes: dict, rounds: int) -> dict:
    """``rounds`` alternating rounds of both ways on ``backend``: rates and ratios."""
    rates: dict[str, list[float]] = {"off": [], "on": []}
    device, versions = "CPU", {}
    for round_ in range(rounds):
        order = ("off", "on") if round_ % 2 == 0 else ("on", "off")
        for way in order:
            report = run(backend, {**sizes, "deterministic": way == "on", "seed": SEED})
            rates[way].append(report["samples_per_second"])
            device, versions = report["device"], report["versions"]
        print(
            f"{backend} round {round_ + 1}: off {rates['off'][-1]:.0f}, "
            f"on {rates['on'][-1]:.0f} samples/s",
            flush=True,
        )
    ratios = [on / off for on, off in zip(rates["on"], rates["off"])]
    return {
        "device": device,
        "versions": versions,
        "samples_per_second": {way: statistics.median(values) for way, values in rates.items()},
        "samples_per_second_rounds": rates,
        "deterministic_vs_not": statistics.median(ratios),
        "deterministic_vs_not_ci95": interval(ratios),
        "ratio_rounds": ratios,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_modes.add_arguments(parser)
    parser.add_argument("--rounds", type=int, default=None, help="rounds (default 8, quick 4)")
    args = parser.parse_args()
    started = time.perf_counter()
    load_before = Path("/proc/loadavg").read_text().strip()
    sizes, rounds = (
        ({"rows": 2048, "width": 32, "batch": 128, "epochs": 1, "fits": 1}, 1)
        if args.smoke
        else ({"rows": 8192, "width": 256, "batch": 128, "epochs": 1, "fits": 3}, 4)
        if args.quick
        else ({"rows": 16384, "width": 256, "batch": 128, "epochs": 2, "fits": 3}, 8)
    )
    if args.rounds is not None and not args.smoke:
        rounds = args.rounds
    backends = [name for name in BACKENDS if importlib.util.find_spec(name) is not None]
    if args.smoke:  # one backend (JAX where found, as on a GPU): the other child runs this code
        backends = backends[-1:]
    results = {backend: measure(backend, sizes, rounds) for backend in backends}
    device = next(iter(results.values()))["device"] if results else "CPU"
    result = {
        "benchmark": "deterministic",
        "command": bench_modes.command("bench/deterministic.py", args)
        + (f" --rounds {rounds}" if args.rounds is not None and not args.smoke else ""),
        "date": datetime.date.today().isoformat(),
        "quick": args.quick,
        "smoke": args.smoke,
        "machine": {
            "cores": os.cpu_count(),
            "cpu": cpu_name(),
            "device": device if device != "CPU" else f"CPU ({cpu_name()})",
            "loadavg_before": load_before,
            "loadavg_after": Path("/proc/loadavg").read_text().strip(),
        },
        "versions": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            **{k: v for numbers in results.values() for k, v in numbers["versions"].items()},
        },
        "workload": {
            "model": f"MLP 20-{sizes['width']}-{sizes['width']}-2 (relu, dropout 0.1), adam",
            "rows": sizes["rows"],
            "batch_size": sizes["batch"],
            "epochs_per_timed_fit": sizes["epochs"],
            "timed_fits_per_process": sizes["fits"],
            "seed": SEED,
        },
        "rounds": rounds,
        "results": results,
        "notes": [
            "Each way in a fresh Python: gpu_setup()'s core with deterministic on or off "
            "and seed 1, then gpu_fit()'s core on NumPy arrays (monitor off, jit_compile "
            "'auto'); one untimed fit, then the median of the timed fits, each from Keras' "
            "on_train_begin to on_train_end. Rounds alternate which way runs first.",
            "deterministic_vs_not: the median of the rounds' ratios of samples/s "
            "(deterministic / not), with a bootstrap 95% interval; below 1 is slower.",
            "On a CPU-only machine XLA's --xla_gpu_deterministic_ops acts on nothing (JAX), "
            "and TensorFlow's op determinism changes tf.data (order kept, stateful maps "
            "serial) and the few ops with a nondeterministic CPU kernel; on a GPU it also "
            "takes away atomic adds and timed autotuning, which is where it costs most.",
        ],
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    short = "cpu" if device == "CPU" else device.replace("NVIDIA ", "").replace(" ", "-")
    out = bench_modes.result_path(
        args,
        ROOT / "bench" / "results" / f"deterministic-{short}{'-quick' if args.quick else ''}.json",
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    for backend, numbers in results.items():
        low, high = numbers["deterministic_vs_not_ci95"]
        rate = numbers["samples_per_second"]
        print(
            f"{backend:10} off {rate['off']:9.0f} samples/s, on {rate['on']:9.0f}: "
            f"deterministic / not {numbers['deterministic_vs_not']:.3f} [{low:.3f}, {high:.3f}] "
            f"(median of {rounds} round(s))"
        )
    print(f"wrote {out} ({result['wall_seconds']:.0f} s)")


if __name__ == "__main__":
    main()
