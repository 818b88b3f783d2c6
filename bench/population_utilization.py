"""Does a population keep the GPU busy? (issue #78's goal: a 16-member population of the MLP
1024-4096-4096-4096-10, batch 1024, keeps an H100 or H200 >= 90 % busy by NVML while it
trains.)

The population trains through the core's own path on JAX, the one gpu_cv() takes
(``tools.cv_population.train``): 16 folds of 65,536 rows of synthetic float32 data, each
member's model made after its fold's seed (relu, softmax, Adam, sparse categorical
cross-entropy, accuracy) and made ready as its fit would start (``population.prepare``),
checked to be one architecture that fits the memory (``population.mismatch``,
``cv_population.fits_memory``), then trained as one (``population.Population``) on the other
folds' 61,440 rows (60 batches of 1,024), validated on its own fold after each epoch.

The first epoch compiles (XLA's compile seconds are JAX's own monitoring events; nothing is
read from a persistent compilation cache); then epochs are trained, one call each as
``Population.train`` runs them, until about ``SECONDS`` have passed (at least ``EPOCHS``),
while NVML's utilization of the GPU the population runs on is sampled at 10 Hz
(``gpu.samplers.UtilizationSampler``). Kept: the mean and p95 of the samples over those
epochs, whether the mean meets the goal, seconds an epoch, samples a second (every
member's rows), TFLOP/s by the core's FLOP count (training = 3x forward), the compile and
first-epoch seconds and the models' build. On a CPU nothing is sampled (utilization null)
and the sizes are small; --quick: about half the seconds; --smoke: tiny sizes (32-64-2, 2
members, 512 rows), one epoch after the first.

Usage: python bench/population_utilization.py [--quick | --smoke] [--out FILE]
Run from the repository root (JAX is the backend, whatever KERAS_BACKEND says; TensorFlow
is not loaded). Writes bench/results/population-utilization-<device>-<date>.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "inst" / "python"), str(ROOT / "bench" / "lib")]
# Populations train on JAX alone; the GPU machines have no TensorFlow, and here it is not
# needed. Compile seconds are XLA's: no program is taken from a persistent cache.
os.environ["KERAS_BACKEND"] = "jax"
os.environ["JAX_ENABLE_COMPILATION_CACHE"] = "false"
sys.modules["tensorflow"] = None  # type: ignore[assignment]

import bench_modes  # noqa: E402
import numpy as np  # noqa: E402
from pipeline import code_state, device_facts  # noqa: E402

from gpukeras.core.runtime import config  # noqa: E402
from gpukeras.gpu.samplers import UtilizationSampler  # noqa: E402
from gpukeras.tools import cv_population  # noqa: E402
from gpukeras.train import flops  # noqa: E402
from gpukeras.train.monitor import percentile  # noqa: E402
from gpukeras.train.population import Member, Population, mismatch, prepare  # noqa: E402
from gpukeras.train.training_run import gpus_in_use  # noqa: E402

GOAL_PERCENT = 90.0
SECONDS = 10.0
EPOCHS = 3
HZ = 10.0
# width, hidden widths, classes, members (folds), rows of the data (all folds), batch
SIZES: dict[str, dict[str, Any]] = {
    "gpu": {"width": 1024, "hidden": [4096] * 3, "classes": 10, "members": 16, "rows": 65536},
    "cpu": {"width": 64, "hidden": [128] * 3, "classes": 10, "members": 16, "rows": 16384},
    "smoke": {"width": 32, "hidden": [64], "classes": 2, "members": 2, "rows": 512},
}
BATCH = {"gpu": 1024, "cpu": 1024, "smoke": 128}


def made(keras: Any, sizes: dict[str, Any], seed: int) -> Any:
    """A member's model as gpu_cv()'s worker makes it: the fold's seed, then the model."""
    keras.utils.set_random_seed(seed)
    layers = [keras.Input((sizes["width"],))]
    layers += [keras.layers.Dense(units, activation="relu") for units in sizes["hidden"]]
    model = keras.Sequential([*layers, keras.layers.Dense(sizes["classes"], activation="softmax")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


class Compiles:
    """XLA's compile seconds and programs from now on (JAX's monitoring events)."""

    def __init__(self, jax: Any) -> None:
        self.seconds, self.programs = 0.0, 0
        jax.monitoring.register_event_duration_secs_listener(self._listen)

    def _listen(self, event: str, seconds: float, **_: Any) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            self.seconds += seconds
            self.programs += 1


def population(keras: Any, sizes: dict[str, Any], batch: int) -> tuple[Population, dict]:
    """The folds' population, made and checked as cv_population.train makes and checks it,
    and what it cost: ``build_seconds`` (data, models, ``prepare``)."""
    began = time.perf_counter()
    rng = np.random.default_rng(0)
    rows, members = sizes["rows"], sizes["members"]
    x = rng.standard_normal((rows, sizes["width"]), dtype=np.float32)
    y = np.argmax(x[:, : sizes["classes"]], axis=1).astype(np.int32)
    folds = np.array_split(rng.permutation(rows), members)
    fold_members = [
        Member(seed, np.sort(np.concatenate(folds[:i] + folds[i + 1 :])), np.sort(folds[i]))
        for i, seed in enumerate(range(1, members + 1))
    ]
    models = []
    for member in fold_members:
        model = made(keras, sizes, member.seed)
        prepare(model, member.seed, cv_population.first_batch((x, y), member.rows[:batch]))
        models.append(model)
    why = mismatch(models) or cv_population.fits_memory(models, (x, y), batch)
    if why is not None:
        raise SystemExit(f"the members cannot train as one population: {why}")
    trained = Population(models, fold_members, (x, y), batch)
    facts = {
        "build_seconds": time.perf_counter() - began,
        "rows_per_member": len(fold_members[0].rows),
        "parameters_per_member": models[0].count_params(),
        "forward_flops_per_sample": flops.model_flops(models[0])["per_sample"],
    }
    return trained, facts


def timed(trained: Population, nvml_indices: list[int], seconds: float, epochs: int) -> dict:
    """Epochs until ``seconds`` have passed (at least ``epochs``), NVML sampled meanwhile:
    their seconds and the samples' mean and p95 (None where nothing was sampled, and
    ``not_sampled`` says why)."""
    done: list[float] = []
    with UtilizationSampler(nvml_indices, hz=HZ) as sampler:
        began = time.perf_counter()
        while len(done) < epochs or sum(done) < seconds:
            started = time.perf_counter()
            trained.train(1)  # ends on the epoch's logs, read back: the epoch is done
            done.append(time.perf_counter() - started)
        ended = time.perf_counter()
    utilization = [
        s.utilization_gpu
        for s in sampler.samples
        if s.utilization_gpu is not None and began <= s.time <= ended
    ]
    return {
        "epochs": len(done),
        "epoch_seconds": statistics.fmean(done),
        "epoch_seconds_each": done,
        "utilization_samples": len(utilization),
        "gpu_utilization_mean": statistics.fmean(utilization) if utilization else None,
        "gpu_utilization_p95": percentile(utilization, 0.95) if utilization else None,
        "not_sampled": None if utilization else sampler.reason or "no sample in the epochs",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_modes.add_arguments(parser)
    args = parser.parse_args()
    device, short = device_facts()
    size = "smoke" if args.smoke else "gpu" if not device.startswith("CPU") else "cpu"
    sizes, batch = SIZES[size], BATCH[size]
    seconds = 0.0 if args.smoke else SECONDS / 2 if args.quick else SECONDS
    epochs = 1 if args.smoke else EPOCHS
    result: dict[str, Any] = {
        "benchmark": "population_utilization",
        "command": bench_modes.command("bench/population_utilization.py", args),
        "date": datetime.date.today().isoformat(),
        "device": device,
        "backend": config.backend,
        "code": code_state(),
        "goal_percent": GOAL_PERCENT,
        "sizes": {**sizes, "batch": batch, "seconds": seconds},
    }
    measured = ROOT / "bench" / "results" / f"population-utilization-{short}-{result['date']}.json"
    out = bench_modes.result_path(args, measured)
    out.parent.mkdir(parents=True, exist_ok=True)

    keras = config.keras()
    trained, facts = population(keras, sizes, batch)
    compiles = Compiles(config.backend_module())  # the first epoch's (the build's aside)
    gpus = gpus_in_use(keras, trained.models[0])
    began = time.perf_counter()
    trained.train(1)
    result.update(facts)
    result.update(
        first_epoch_seconds=time.perf_counter() - began,
        compile_seconds=compiles.seconds,
        programs_compiled=compiles.programs,
        gpu=[{"name": g["name"], "nvml_index": g["nvml_index"]} for g in gpus],
    )
    nvml_indices = [int(g["nvml_index"]) for g in gpus if g["nvml_index"] is not None]
    result.update(timed(trained, nvml_indices, seconds, epochs))
    rows = sizes["members"] * result["rows_per_member"]
    result["samples_per_second"] = rows / result["epoch_seconds"]
    forward = result["forward_flops_per_sample"]
    result["tflops"] = 3 * forward * result["samples_per_second"] / 1e12 if forward else None
    mean = result["gpu_utilization_mean"]
    result["goal_met"] = None if mean is None else mean >= GOAL_PERCENT
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")

    shape = "-".join(str(n) for n in [sizes["width"], *sizes["hidden"], sizes["classes"]])
    busy = "not measured"
    if mean is not None:
        met = "met" if result["goal_met"] else "NOT met"
        p95 = result["gpu_utilization_p95"]
        busy = f"{mean:.1f} % (p95 {p95:.0f}), goal {GOAL_PERCENT:.0f} % {met}"
    print(
        f"{sizes['members']} members of {shape} (batch {batch}) on {device}: GPU busy {busy}; "
        f"{result['epochs']} epochs of {result['epoch_seconds']:.3f} s, "
        f"{result['samples_per_second']:.0f} samples/s, {result['tflops'] or 0:.2f} TFLOP/s; "
        f"first epoch {result['first_epoch_seconds']:.1f} s (compiling "
        f"{result['compile_seconds']:.1f} s, {result['programs_compiled']} programs), "
        f"models built in {result['build_seconds']:.1f} s"
    )
    if mean is None:
        print("not sampled:", result["not_sampled"])
    print("written to", out)


if __name__ == "__main__":
    main()
