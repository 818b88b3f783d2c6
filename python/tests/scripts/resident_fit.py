"""gpu_fit() on JAX of arrays in memory, the device-resident way, with what a test compares.

Run by test_resident.py as ``python resident_fit.py '<json spec>'`` (JAX backend, the
core on PYTHONPATH); prints one JSON line. The spec's keys:

- ``out``: where the final weights go (.npz).
- ``model_steps``: the model's own steps_per_execution (compiled with it; default 1).
- ``rows``, ``batch_size``, ``epochs``, ``seed``, ``steps_per_execution``,
  ``backup_dir``, ``backup_freq``, ``validation`` (the first 300 rows),
  ``dropout``: the gpu_fit() call and the model (an MLP 20-64-64-2).
- ``pause``: seconds to sleep at every dispatch's end (time for a test to kill it).
- ``count_batches``: a LambdaCallback counting the ``on_train_batch_end`` calls, as a
  user's callback that acts on each batch; the report's ``batch_calls``.
- ``memory_share``: ``resident.MEMORY_SHARE`` for this run (a tiny one makes the data
  stream); ``probe_share``: ``train.resident.PROBE_SHARE`` (a tiny one: k for "auto" is
  not timed, the report's ``step_timed`` false); ``cpu_devices``: a DataParallel over
  that many logical CPU devices; ``cpu`` (implied by ``cpu_devices``): on the CPU even
  where JAX sees a GPU.
- ``reference``: instead, Keras' own fit() on the same batch order (each epoch's
  permutation taken from ``resident``), unshuffled, one epoch per call.
  Otherwise the report's ``traces`` counts the times Keras' train and test steps were
  traced, ``compiled`` lists each compilation of the resident loop's programs, from
  JAX's compile log (``<name> on <thread name>``).
- ``gpu_dataset``: give the arrays as a gpu_dataset() (``pipeline.from_arrays``) with
  these options (``batch_size`` then None in the call); the validation rows too.
"""

import json
import logging
import os
import sys
import threading
import time

spec = json.loads(sys.argv[1])
if spec.get("cpu_devices"):
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={spec['cpu_devices']}"
if spec.get("cpu") or spec.get("cpu_devices"):
    os.environ["JAX_PLATFORMS"] = "cpu"

import numpy as np  # noqa: E402

from gpukeras import bridge  # noqa: E402
from gpukeras.core import compat  # noqa: E402
from gpukeras.core.runtime import config  # noqa: E402
from gpukeras.data.adapters import Rows, resident  # noqa: E402
from gpukeras.train import resident as resident_loop  # noqa: E402

keras = config.keras()
rng = np.random.default_rng(0)
x = rng.standard_normal((spec.get("rows", 1000), 20)).astype("float32")
y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype("int32")
validation = (x[:300], y[:300]) if spec.get("validation") else None
compat.set_random_seed(keras, 7)  # as gpu_fit() seeds: TensorFlow not imported for it
layers = [keras.Input((20,)), keras.layers.Dense(64, activation="relu")]
if spec.get("dropout"):
    layers.append(keras.layers.Dropout(0.3))
layers += [keras.layers.Dense(64, activation="relu"), keras.layers.Dense(2)]
model = keras.Sequential(layers)
model.compile(
    optimizer=keras.optimizers.Adam(0.003),
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=["accuracy"],
    steps_per_execution=spec.get("model_steps", 1),
)
if "memory_share" in spec:
    resident.MEMORY_SHARE = spec["memory_share"]
if "probe_share" in spec:
    resident_loop.PROBE_SHARE = spec["probe_share"]


compiled: list[str] = []
PROGRAMS = ("train_steps", "train_last", "test_steps", "test_last")


class Pause(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        time.sleep(spec.get("pause", 0.0))


class Compiles(logging.Handler):
    def emit(self, record):
        message = record.getMessage()
        for name in PROGRAMS:
            if message.startswith(f"Finished XLA compilation of jit({name})"):
                compiled.append(f"{name} on {threading.current_thread().name}")


report: dict[str, object] = {}
if spec.get("reference"):
    # Keras' fit() on the batches the device-resident run draws: its order, unshuffled.
    training = resident.DeviceRows(
        Rows(x, y, len(x), spec["batch_size"], spec["seed"], shuffle=spec.get("shuffle", True))
    )
    history: dict[str, list] = {}
    for epoch in range(spec["epochs"]):
        order = np.asarray(training.order(epoch))
        logs = model.fit(
            x[order], y[order], batch_size=spec["batch_size"], shuffle=False, epochs=1,
            verbose=0, validation_data=validation,
        ).history  # fmt: skip
        for name, values in logs.items():
            history.setdefault(name, []).extend(values)
    report["history"] = history
else:
    strategy = None
    if spec.get("cpu_devices"):
        made = bridge.call("strategy", {"type": "mirrored"})
        assert made["ok"], made
        strategy = made["value"]["strategy"]
    data: object = (x, y)
    batch_size = spec["batch_size"]
    if spec.get("gpu_dataset") is not None:
        from gpukeras.data import pipeline

        options = {"batch_size": batch_size, **spec["gpu_dataset"]}
        if options.get("map") == "identity":
            options["map"] = lambda features, label: (features, label)
        data = pipeline.from_arrays(x, y, **options)["dataset"]
        if validation is not None:
            validation = pipeline.from_arrays(*validation, **{**options, "shuffle": False})[
                "dataset"
            ]
        batch_size = None
    traces = {"train": 0, "test": 0}
    batch_calls: list[int] = []
    counters = (
        [keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: batch_calls.append(b))]
        if spec.get("count_batches")
        else []
    )

    def counted(kind, step):
        def traced(*args):
            traces[kind] += 1
            return step(*args)

        return traced

    import jax

    jax.config.update("jax_log_compiles", True)
    logging.getLogger("jax").addHandler(Compiles())
    logging.getLogger("jax").propagate = False  # the log is counted, not printed
    model.train_step = counted("train", model.train_step)
    model.test_step = counted("test", model.test_step)
    answer = bridge.call(
        "fit",
        {
            "model": model,
            "data": data,
            "validation_data": validation,
            "epochs": spec["epochs"],
            "batch_size": batch_size,
            "seed": spec.get("seed"),
            "steps_per_execution": spec.get("steps_per_execution", "auto"),
            "backup_dir": spec.get("backup_dir"),
            "backup_freq": spec.get("backup_freq", "epoch"),
            "callbacks": ([Pause()] if "pause" in spec else []) + counters,
            "strategy": strategy,
            "verbose": 0,
        },
    )
    assert answer["ok"], answer
    value = answer["value"]
    report = {
        "history": value["history"],
        "settings": value["settings"],
        "monitor": value["monitor"],
        "model_steps_per_execution": model.steps_per_execution,
        "traces": traces,
        "compiled": compiled,
        "batch_calls": len(batch_calls),
        "step_timed": any(p.step_seconds is not None for p in resident_loop._PROGRAMS.values()),
    }
np.savez(spec["out"], *model.get_weights())
print(json.dumps(report, default=str))
