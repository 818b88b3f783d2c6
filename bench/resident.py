"""Device-resident training, the Python side: gpu_fit() against Keras' own fit() on arrays.

For the GPU machines, which run Keras on JAX without TensorFlow or R (bench/resident.R
is the same question from R). Two workloads:

- mlp: bench/pipeline.py's MLP 20-128-128-2 on its synthetic rows (102,400), batch 256;
- wide: bench/monitor.py's MLP (4096 wide on a GPU), whose steps the device is busy with.
  Its timed fits last a tenth of a second on an H100, shorter than NVML's utilization
  window (1/6 to 1 s), so on a GPU one more device-resident fit of it runs for about
  ``UTILIZATION_SECONDS``, and the utilization gpu_fit()'s own monitor saw then is kept
  (goal: >= 90 %).

Ways, each with a fresh model (same seed), one untimed warm-up epoch, then the timed
epochs, in an order that rotates from round to round: Keras' fit() on the NumPy arrays
at steps_per_execution 1, 8, 32 and 128, and ``gpukeras.train.fit.fit`` on the same arrays
(on the device, k = "auto"). Ratios are taken within each round, then their median with
a bootstrap 95% interval: Keras' default over gpu_fit() (goal on a GPU: >= 10 for the
MLP) and Keras' best steps_per_execution of the round over gpu_fit().

Usage: KERAS_BACKEND=jax python bench/resident.py [--quick | --smoke] [--out FILE]
Run from the repository root. Writes bench/results/resident-python-<device>-<date>.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "inst" / "python"), str(ROOT / "bench" / "lib")]

import bench_modes  # noqa: E402
from monitor import workload as wide_workload  # noqa: E402
from pipeline import code_state, device_facts, mlp_data, mlp_model  # noqa: E402

from gpukeras.core.runtime import config  # noqa: E402
from gpukeras.train import fit  # noqa: E402

KERAS_STEPS = (1, 8, 32, 128)
GOAL = {"mlp_vs_keras_default_on_a_gpu": 10.0, "wide_gpu_utilization_percent": 90.0}
UTILIZATION_SECONDS = 15.0


def bootstrap(ratios: list[float], draws: int = 4000) -> list[float]:
    """A bootstrap 95% interval of the median of ``ratios`` (seeded)."""
    rng = np.random.default_rng(1)
    medians = [np.median(rng.choice(ratios, len(ratios))) for _ in range(draws)]
    return [float(np.quantile(medians, 0.025)), float(np.quantile(medians, 0.975))]


def ways_for(
    keras: object, make: Callable[[], object], data: tuple, batch: int, epochs: int
) -> dict[str, Callable[[], dict[str, object]]]:
    """The ways to train one workload: each returns its seconds (and what else it saw)."""
    x, y = data

    def keras_way(spe: int) -> Callable[[], dict[str, object]]:
        def run() -> dict[str, object]:
            model = make()
            model.steps_per_execution = spe  # type: ignore[attr-defined]
            model.fit(x, y, batch_size=batch, epochs=1, verbose=0)  # type: ignore[attr-defined]
            started = time.perf_counter()
            model.fit(x, y, batch_size=batch, epochs=epochs, verbose=0)  # type: ignore[attr-defined]
            return {"seconds": time.perf_counter() - started}

        return run

    def gpukeras() -> dict[str, object]:
        model = make()
        fit.fit(model, (x, y), batch_size=batch, epochs=1, verbose=0)
        started = time.perf_counter()
        result = fit.fit(model, (x, y), batch_size=batch, epochs=epochs, verbose=0)
        seconds = time.perf_counter() - started
        report = result["monitor"] or {}
        return {
            "seconds": seconds,
            "steps_per_dispatch": result["settings"]["steps_per_execution"],
            "data": result["settings"]["data"],
            "gpu_utilization_percent": report.get("gpu_utilization_mean"),
        }

    ways = {f"keras_fit_spe{spe}": keras_way(spe) for spe in KERAS_STEPS}
    ways["gpukeras_fit"] = gpukeras
    return ways


def measure(ways: dict[str, Callable[[], dict[str, object]]], rounds: int, smoke: bool) -> dict:
    """Rounds of every way in a rotating order; medians, ratios and their intervals."""
    if not smoke:
        for run in ways.values():
            run()  # warm-up: the process's first compilations
    seen: dict[str, list[dict[str, object]]] = {name: [] for name in ways}
    names = list(ways)
    for round_index in range(rounds):
        for name in names[round_index % len(names) :] + names[: round_index % len(names)]:
            seen[name].append(ways[name]())
    seconds = {name: [float(r["seconds"]) for r in runs] for name, runs in seen.items()}  # type: ignore[arg-type]
    keras_names = [f"keras_fit_spe{spe}" for spe in KERAS_STEPS]
    best = [min(seconds[name][i] for name in keras_names) for i in range(rounds)]
    ours = seconds["gpukeras_fit"]
    default = [k / g for k, g in zip(seconds["keras_fit_spe1"], ours)]
    against_best = [k / g for k, g in zip(best, ours)]
    return {
        "seconds": {name: statistics.median(values) for name, values in seconds.items()},
        "seconds_rounds": seconds,
        "keras_best_steps_per_execution": [
            KERAS_STEPS[int(np.argmin([seconds[n][i] for n in keras_names]))] for i in range(rounds)
        ],
        "gpukeras": seen["gpukeras_fit"],
        "vs_keras_default": {
            "median": statistics.median(default),
            "ci95": bootstrap(default),
            "rounds": default,
        },
        "vs_keras_best": {
            "median": statistics.median(against_best),
            "ci95": bootstrap(against_best),
            "rounds": against_best,
        },
    }


def utilization(
    make: Callable[[], object], data: tuple, batch: int, epoch_seconds: float, target: float
) -> dict:
    """NVML's utilization during one device-resident fit of about ``target`` seconds."""
    epochs = max(2, math.ceil(target / max(epoch_seconds, 1e-3)))
    started = time.perf_counter()
    result = fit.fit(make(), data, batch_size=batch, epochs=epochs, verbose=0)
    seconds = time.perf_counter() - started
    report = result["monitor"] or {}
    samples = [u for u in result["timeline"]["gpu"]["utilization"] if u is not None]
    return {
        "epochs": epochs,
        "seconds": seconds,
        "steps_per_dispatch": result["settings"]["steps_per_execution"],
        "data": result["settings"]["data"],
        "gpu_utilization_mean": report.get("gpu_utilization_mean"),
        "gpu_utilization_p95": report.get("gpu_utilization_p95"),
        "gpu_samples": len(samples),
        "gpu_utilization_median_all_samples": statistics.median(samples) if samples else None,
        "samples_per_second": report.get("samples_per_second"),
        "achieved_tflops": report.get("achieved_tflops"),
        "mfu": report.get("mfu"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_modes.add_arguments(parser)
    args = parser.parse_args()
    started = time.perf_counter()
    load_before = Path("/proc/loadavg").read_text().strip()
    keras = config.keras()
    device, short = device_facts()
    gpu = not device.startswith("CPU")
    rounds = 1 if args.smoke else 3 if args.quick else 5
    rows, epochs = (2048, 1) if args.smoke else (102400, 2)
    mlp = measure(
        ways_for(keras, lambda: mlp_model(keras), mlp_data(rows), 256, epochs), rounds, args.smoke
    )
    mlp["description"] = f"MLP 20-128-128-2 on {rows:,} synthetic rows x 20 features, batch 256"
    result: dict[str, object] = {
        "benchmark": "resident-python",
        "command": bench_modes.command("bench/resident.py", args),
        "date": datetime.date.today().isoformat(),
        "quick": args.quick,
        "smoke": args.smoke,
        "device": device,
        "backend": config.backend,
        "versions": {
            "python": platform.python_version(),
            "keras": keras.__version__,  # type: ignore[attr-defined]
            "jax": sys.modules["jax"].__version__ if "jax" in sys.modules else None,
            "numpy": np.__version__,
        },
        "machine": {"load_before": load_before, "load_after": None},
        "code": code_state(),
        "rounds": rounds,
        "epochs_timed": epochs,
        "goal": GOAL,
        "mlp": mlp,
    }
    if gpu or args.smoke:
        # On the CPU the wide MLP only says what the MLP says, more slowly: smoke alone.
        model, data, batch = wide_workload(keras, gpu, args.smoke)
        weights = model.get_weights()  # type: ignore[attr-defined]

        def fresh() -> object:
            copy = keras.models.clone_model(model)  # type: ignore[attr-defined]
            copy.set_weights(weights)
            copy.compile(optimizer="adam", loss=model.loss)  # type: ignore[attr-defined]
            return copy

        wide = measure(ways_for(keras, fresh, data, batch, epochs), rounds, args.smoke)
        wide["description"] = "bench/monitor.py's MLP (4096 wide on a GPU), its batch"
        epoch_seconds = wide["seconds"]["gpukeras_fit"] / epochs
        target = 0.2 if args.smoke else UTILIZATION_SECONDS
        wide["utilization"] = utilization(fresh, data, batch, epoch_seconds, target)
        result["wide"] = wide
    result["machine"]["load_after"] = Path("/proc/loadavg").read_text().strip()  # type: ignore[index]
    result["wall_seconds"] = round(time.perf_counter() - started, 1)
    measured = ROOT / "bench" / "results" / f"resident-python-{short}-{result['date']}.json"
    out = bench_modes.result_path(args, measured)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    for name in ("mlp", "wide"):
        part = result.get(name)
        if isinstance(part, dict):
            print(
                f"{name}: gpu_fit() {part['vs_keras_default']['median']:.2f}x Keras' default, "
                f"{part['vs_keras_best']['median']:.2f}x its best steps_per_execution"
            )
            if "utilization" in part:
                used = part["utilization"]
                print(
                    f"{name}: NVML utilization {used['gpu_utilization_mean']} % (mean) over "
                    f"{used['seconds']:.1f} s, {used['epochs']} epochs, "
                    f"{used['gpu_samples']} samples"
                )
    print("written to", out)


if __name__ == "__main__":
    main()
