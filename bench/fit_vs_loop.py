"""One model at the device's speed (issue #78, item 4): gpu_fit() against a hand-written JAX
training loop on the same MLP and data.

The MLP 20-128-128-2 (relu, softmax, Adam at 1e-3, sparse categorical cross-entropy) on
bench/pipeline.py's synthetic rows (102,400 x 20, two classes), batch 256, float32, on
JAX. Ways, each with the same initial weights, after one untimed warm-up epoch (XLA's
compiling), then ``epochs`` timed epochs per round:

- ``loop``: a hand-written loop: the rows on the device, each epoch one compiled call of
  ``jax.lax.scan`` over its batches (a permutation of the rows drawn on the device each
  epoch, each batch gathered by index), Adam written out in jax.numpy (optax's ``adam``
  update, Keras' defaults: the GPU machines may lack optax);
- ``keras_step_scan``: Keras' own ``train_step`` (its loss and accuracy bookkeeping
  included) in that same ``lax.scan``: what Keras' step costs beyond the hand-written one,
  with no host work between steps;
- ``gpukeras``: gpukeras' fit through the core's bridge as R's gpu_fit() calls it: the
  ``data_encoding`` verb first, then ``fit`` with the data handed over as R hands a double
  matrix and integer labels, the request's defaults (``FitRequest``: monitor on, k
  "auto"), ``verbose = 0``, ``seed = 1``. Its epochs' time is the core's own report
  (``monitor$epochs_wall_seconds``); ``call_seconds`` is the whole verb (the data's copy,
  putting it on the device and the monitor included);
- ``gpukeras_no_monitor``: the same with ``monitor = FALSE`` (its epochs' time: the core's
  ``settings$seconds``, Keras' fit() call's);
- ``keras_fit``: Keras' own ``model.fit()`` on the NumPy arrays (steps_per_execution 1).

Where the difference goes: each way's time per step (``step_us``); for gpukeras the
core's figures (steps per dispatch, a dispatch's mean time, the share of host time
between dispatches, ``between_steps_share``). Ratios (samples/s of gpukeras over the
loop's; goal on an H100/H200: >= 0.8) are taken within each round, then their median.

Usage: KERAS_BACKEND=jax python bench/fit_vs_loop.py [--quick | --smoke] [--out FILE]
(--quick: two rounds; --smoke: 2,048 rows, one epoch, one round). Run from the repository
root. Writes bench/results/fit-vs-loop-<device>-<date>.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

os.environ["KERAS_BACKEND"] = "jax"
ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "inst" / "python"), str(ROOT / "bench" / "lib")]

import bench_modes  # noqa: E402
from pipeline import code_state, device_facts, mlp_data  # noqa: E402

from gpukeras import bridge  # noqa: E402
from gpukeras.core.handles import HANDOVER  # noqa: E402
from gpukeras.core.runtime import config  # noqa: E402
from gpukeras.train.fit_request import FitRequest  # noqa: E402
from gpukeras.train.resident import training_state  # noqa: E402

GOAL = {"gpukeras_over_loop_on_a_gpu": 0.8}
BATCH = 256
LEARNING_RATE = 1e-3
# Keras' Adam defaults (optax's adam takes eps 1e-8; Keras' 1e-7)
BETA_1, BETA_2, EPSILON = 0.9, 0.999, 1e-7


def keras_mlp(keras: Any) -> Any:
    """The MLP, compiled as a gpu_fit() user compiles it, seeded (the same initial weights
    each time)."""
    keras.utils.set_random_seed(1)
    model = keras.Sequential(
        [
            keras.Input((20,)),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(2, activation="softmax"),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(LEARNING_RATE),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    return model


# The hand-written loop -------------------------------------------------------------------
def hand_loop(jax: Any, weights: list[np.ndarray], rows: int) -> tuple[Callable, Any]:
    """The loop's epoch, ``epoch(state, x, y, key) -> (state, mean loss)`` (jitted, the state
    donated), and its first state: the Keras model's initial ``weights`` (kernel, bias per
    layer), Adam's moments at zero and its step count."""
    jnp = jax.numpy
    steps = rows // BATCH

    def forward(params: list, x: Any) -> Any:
        (w1, b1, w2, b2, w3, b3) = params
        hidden = jax.nn.relu(jax.nn.relu(x @ w1 + b1) @ w2 + b2)
        return hidden @ w3 + b3

    def loss_of(params: list, x: Any, y: Any) -> Any:
        # softmax then cross-entropy, as log-softmax (the same function, stable)
        logp = jax.nn.log_softmax(forward(params, x))
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    def adam(params: list, grads: list, m: list, v: list, t: Any) -> tuple:
        t = t + 1
        m = [BETA_1 * a + (1 - BETA_1) * g for a, g in zip(m, grads)]
        v = [BETA_2 * a + (1 - BETA_2) * g * g for a, g in zip(v, grads)]
        rate = LEARNING_RATE * jnp.sqrt(1 - BETA_2**t) / (1 - BETA_1**t)
        params = [p - rate * a / (jnp.sqrt(b) + EPSILON) for p, a, b in zip(params, m, v)]
        return params, m, v, t

    def epoch(state: tuple, x: Any, y: Any, key: Any) -> tuple:
        order = jax.random.permutation(key, x.shape[0])[: steps * BATCH].reshape(steps, BATCH)

        def step(state: tuple, rows: Any) -> tuple:
            params, m, v, t = state
            loss, grads = jax.value_and_grad(loss_of)(params, x[rows], y[rows])
            return adam(params, grads, m, v, t), loss

        state, losses = jax.lax.scan(step, state, order)
        return state, jnp.mean(losses)

    params = [jnp.asarray(w, jnp.float32) for w in weights]
    zeros = [jnp.zeros_like(p) for p in params]
    state = (params, zeros, [jnp.zeros_like(p) for p in params], jnp.zeros((), jnp.float32))
    return jax.jit(epoch, donate_argnums=0), state


def keras_step_scan(jax: Any, model: Any, rows: int) -> tuple[Callable, Any]:
    """Keras' own ``train_step`` in the loop's ``lax.scan`` (same order of rows): ``epoch(
    state, x, y, key) -> (state, loss)`` and the model's training state."""
    steps = rows // BATCH

    def epoch(state: tuple, x: Any, y: Any, key: Any) -> tuple:
        order = jax.random.permutation(key, x.shape[0])[: steps * BATCH].reshape(steps, BATCH)

        def step(state: tuple, rows: Any) -> tuple:
            logs, state = model.train_step(state, (x[rows], y[rows]))
            return state, logs["loss"]

        state, losses = jax.lax.scan(step, state, order)
        return state, losses[-1]

    return jax.jit(epoch, donate_argnums=0), training_state(model)


def scanned_way(
    jax: Any, made: tuple[Callable, Any], x: Any, y: Any, epochs: int
) -> Callable[[], dict]:
    """A way that runs ``epochs`` epochs of a scanned epoch (``made``: the epoch and its
    state) on the device arrays ``x``, ``y``, after an untimed warm-up epoch."""
    epoch, first = made
    box = {"state": first, "epoch": 0}

    def run_epoch() -> Any:
        key = jax.random.key(box["epoch"])
        box["epoch"] += 1
        box["state"], loss = epoch(box["state"], x, y, key)
        return loss

    started = time.perf_counter()
    jax.block_until_ready(run_epoch())
    warm_up = time.perf_counter() - started

    def run() -> dict:
        seconds = []
        for _ in range(epochs):
            began = time.perf_counter()
            loss = jax.block_until_ready(run_epoch())
            seconds.append(time.perf_counter() - began)
        return {"epoch_seconds": seconds, "seconds": sum(seconds), "loss": float(loss)}

    run.warm_up_seconds = warm_up  # type: ignore[attr-defined]
    return run


# gpukeras, as R calls it -----------------------------------------------------------------
def answered(verb: str, kwargs: dict) -> Any:
    """The value of the core's ``verb``, as R's core_call() takes it; its error raised."""
    answer = bridge.call(verb, kwargs)
    if not answer["ok"]:
        raise RuntimeError(f"{verb}: {answer['message']}\n{answer.get('traceback') or ''}")
    return answer["value"]


def handed_over(x: np.ndarray, y: np.ndarray) -> dict:
    """The data as R's gpu_fit() sends a double matrix and integer labels (handover_arg()):
    the core checks the doubles for NA (R's own check, na = "error", leaves them to it)."""
    fields = {"x": x.astype(np.float64), "y": y, "y_dtype": "int32", "check_missing": True}
    return {HANDOVER: fields}


def gpukeras_way(model: Any, x: np.ndarray, y: np.ndarray, epochs: int, monitor: bool) -> Callable:
    """gpu_fit() of ``model`` through the bridge (see the notes), after a warm-up fit of one
    epoch: each run one ``fit`` call of ``epochs`` epochs."""
    # gpu_fit() asks for the encoding first (R/encoding.R made_encoding()), once per fit
    encoding = {
        "inputs": {"x": {"type": "array", "shape": [20], "names": None}},
        "y": {"type": "numeric"},
        "several": False,
        "na": "error",
        "factors": "one_hot",
    }
    defaults = {f.name: getattr(FitRequest(), f.name) for f in dataclasses.fields(FitRequest)}

    def fit(epochs: int) -> tuple[dict, float]:
        began = time.perf_counter()
        answered("data_encoding", encoding)
        request = {**defaults, "epochs": epochs, "batch_size": BATCH, "verbose": 0}
        request.update(seed=1, monitor=monitor)
        value = answered(
            "fit",
            {
                "model": model,
                "data": handed_over(x, y),
                "validation_data": None,
                "strategy": None,
                "request": request,
                "track": None,
            },
        )
        return value, time.perf_counter() - began

    _, warm_up = fit(1)

    def run() -> dict:
        value, seconds = fit(epochs)
        report = value["monitor"] or {}
        settings = value["settings"]
        found = {
            "call_seconds": seconds,
            "seconds": report.get("epochs_wall_seconds") or settings["seconds"],
            "loss": float(value["history"]["loss"][-1]),
            "steps_per_dispatch": settings["steps_per_execution"],
            "data": settings["data"],
        }
        for name in (
            "samples_per_second",
            "step_time_mean_ms",
            "batch_time_mean_ms",
            "between_steps_share",
            "steps_timed",
        ):
            found[name] = report.get(name)
        return found

    run.warm_up_seconds = warm_up  # type: ignore[attr-defined]
    return run


def keras_fit_way(model: Any, x: np.ndarray, y: np.ndarray, epochs: int) -> Callable:
    """Keras' own ``model.fit()`` on the arrays, after a warm-up epoch."""
    started = time.perf_counter()
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
    warm_up = time.perf_counter() - started

    def run() -> dict:
        began = time.perf_counter()
        history = model.fit(x, y, batch_size=BATCH, epochs=epochs, verbose=0)
        seconds = time.perf_counter() - began
        return {"seconds": seconds, "loss": float(history.history["loss"][-1])}

    run.warm_up_seconds = warm_up  # type: ignore[attr-defined]
    return run


def made_ways(keras: Any, rows: int, epochs: int) -> dict[str, Callable[[], dict]]:
    """Every way, each warmed up (its first epoch compiled), on the same rows."""
    import jax

    x, y = mlp_data(rows)
    on_device = jax.device_put(x), jax.device_put(y)
    weights = keras_mlp(keras).get_weights()
    stepped = keras_mlp(keras)
    stepped.fit(x[:BATCH], y[:BATCH], batch_size=BATCH, epochs=1, verbose=0)  # builds its state
    stepped.set_weights(weights)
    scanned = keras_step_scan(jax, stepped, rows)
    return {
        "loop": scanned_way(jax, hand_loop(jax, weights, rows), *on_device, epochs),
        "keras_step_scan": scanned_way(jax, scanned, *on_device, epochs),
        "gpukeras": gpukeras_way(keras_mlp(keras), x, y, epochs, monitor=True),
        "gpukeras_no_monitor": gpukeras_way(keras_mlp(keras), x, y, epochs, monitor=False),
        "keras_fit": keras_fit_way(keras_mlp(keras), x, y, epochs),
    }


def measure(ways: dict[str, Callable[[], dict]], rounds: int, rows: int, epochs: int) -> dict:
    """Rounds of every way in a rotating order; per way its runs and median samples/s and
    time per step; the ratios of each way to the loop, within each round."""
    names = list(ways)
    runs: dict[str, list[dict]] = {name: [] for name in names}
    for index in range(rounds):
        for name in names[index % len(names) :] + names[: index % len(names)]:
            runs[name].append(ways[name]())
    steps = epochs * (rows // BATCH)
    found: dict[str, Any] = {}
    for name, seen in runs.items():
        rates = [epochs * rows / run["seconds"] for run in seen]
        found[name] = {
            "samples_per_second": statistics.median(rates),
            "step_us": statistics.median(run["seconds"] / steps * 1e6 for run in seen),
            "warm_up_seconds": ways[name].warm_up_seconds,  # type: ignore[attr-defined]
            "runs": seen,
        }
    loop = [epochs * rows / run["seconds"] for run in runs["loop"]]
    ratios = {}
    for name in names[1:]:
        each = [epochs * rows / run["seconds"] / base for run, base in zip(runs[name], loop)]
        ratios[f"{name}_over_loop"] = {"median": statistics.median(each), "rounds": each}
    return {"ways": found, "ratios": ratios}


def load_average() -> float | None:
    """The host's 1-minute load average (None where /proc has none)."""
    path = Path("/proc/loadavg")
    return float(path.read_text().split()[0]) if path.exists() else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_modes.add_arguments(parser)
    args = parser.parse_args()
    sizes = {"rows": 102400, "batch": BATCH, "epochs": 5, "rounds": 5}
    if args.quick:
        sizes.update(rounds=2)
    if args.smoke:
        sizes.update(rows=2048, epochs=1, rounds=1)
    keras = config.keras()
    if keras.backend.backend() != "jax":
        sys.exit(f"fit_vs_loop.py measures the JAX backend, not {keras.backend.backend()}")
    import jax

    device, short = device_facts()
    date = datetime.date.today().isoformat()
    out = bench_modes.result_path(
        args, ROOT / "bench" / "results" / f"fit-vs-loop-{short}-{date}.json"
    )
    load_before = load_average()
    began = time.perf_counter()
    measured = measure(
        made_ways(keras, sizes["rows"], sizes["epochs"]),
        sizes["rounds"],
        sizes["rows"],
        sizes["epochs"],
    )
    result = {
        "benchmark": "fit_vs_loop",
        "command": bench_modes.command("bench/fit_vs_loop.py", args),
        "date": date,
        "device": device,
        "jax": jax.__version__,
        "keras": keras.__version__,
        "jax_devices": [str(d) for d in jax.devices()],
        "code": code_state(),
        "sizes": sizes,
        "seconds": time.perf_counter() - began,
        # the 1-minute load average before and after: a busy host slows every way
        "load_average": [load_before, load_average()],
        "goal": GOAL,
        **measured,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    for name, way in measured["ways"].items():
        print(
            f"{name:>20}: {way['samples_per_second']:>12,.0f} samples/s, "
            f"{way['step_us']:8.1f} us a step, warm-up {way['warm_up_seconds']:.2f} s"
        )
    for name, ratio in measured["ratios"].items():
        print(f"{name:>32}: {ratio['median']:.3f}")
    print("written to", out)


if __name__ == "__main__":
    main()
