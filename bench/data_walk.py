"""The data's walk through the core: which files a training call passes the data through, in order.

Issue #34 (item 1) measures how scattered the handling of gpu_fit()'s data is
by following it through the core's own calls, from ``train/fit.py:fit`` until
Keras' training loop starts. This script makes that walk reproducible: each
scenario runs one small real training call in a fresh Python (its backend
chosen there) with a profile hook (``sys.setprofile``) that records the calls
the data takes, then stops when Keras' loop begins.

What is recorded. A *call* is a Python call event of a function whose code is
in the ``gpukeras`` package (``inst/python/gpukeras``), made between entering
the entry point (``train/fit.py:fit``; ``tools/tune.py:tune`` for the tune
scenario) and the first call of Keras' ``fit`` in a backend trainer
(``keras/src/backend/*/trainer.py``) or of ``CallbackList.on_train_begin``
(where the multi-worker loop starts its epochs), one of whose arguments holds
*the data*. The data is the ``data`` and ``validation_data`` objects given,
and everything derived from them, followed by identity (``id``, the objects
kept alive meanwhile):

- an object *holds* the data when it is a tracked object, or (up to two
  levels down for a gpukeras function's arguments, one for any other
  function's) a tuple, list or dict with one among its items, or an instance
  of a gpukeras class with one among its attributes;
- what a call one of whose arguments held the data returns becomes tracked
  (the call of a gpukeras function, or of a framework's Python function made by
  gpukeras code: a TensorFlow property such as ``element_spec`` too), and so
  does ``self`` after such an ``__init__``; a tracked object's items and
  attributes (three levels down, as above) are tracked with it. The training
  layer (``gpukeras/train/``) is where the data is consumed: what its
  functions make (a callback, a monitor, a loop) is not the data, but a call
  that gets it holding the data (two levels down) is the data's;
- never tracked: None, numbers, strings, tuples, lists and dicts of those alone
  (settings such as class weights), classes, modules, functions, and the
  model, the strategy and the Keras module given to the call (a call that takes
  only those is not the data's);
- a call of another core verb (a function ``bridge.VERBS`` names, such as
  gpu_dataset()'s ``data/pipeline.py:from_arrays``) is one call: what it calls
  inside is that verb's own walk, not this one's (the entry point itself aside);
- only the code's own calls count: a gpukeras function called by a framework
  (JAX or TensorFlow tracing it, Keras calling it back) is left out with all it
  calls; one called by gpukeras code, or by the standard library on its behalf
  (``contextlib`` running a ``with``), counts.

From the sequence of recorded calls, each named by its file relative to the
package (``train/fit.py``):

- a *stay* is a maximal run of consecutive calls in one file;
- *files*: the distinct files with a stay;
- *returns*: stays in a file that had a stay before (``stays - files``);
- *entered*: for each file, its number of stays (``max_entered``: the largest).

The goal of issue #34 is ``stays <= 20``, ``files <= 10`` and
``max_entered <= 2`` on the fit scenarios (the worst of them is the headline).

Scenarios (tiny data, one epoch: the walk does not depend on sizes):

- ``fit_tensorflow_arrays``: arrays with validation arrays, a seed and a
  backup folder, on TensorFlow (a seeded tf.data pipeline);
- ``fit_tensorflow_dataset``: a gpu_dataset() with a validation gpu_dataset()
  and class weights, on TensorFlow;
- ``fit_tensorflow_mirrored``: arrays under a MirroredStrategy over 2 logical CPUs;
- ``fit_jax_arrays``: arrays with validation arrays, a seed and a backup folder,
  on JAX (the rows go on the device);
- ``fit_jax_dataset``: a gpu_dataset() of rows in memory with class weights, on
  JAX (on the device);
- ``fit_jax_streamed``: arrays on JAX for a model compiled without XLA (Keras'
  own batches);
- ``fit_jax_mirrored``: arrays under a DataParallel over 2 CPU devices on JAX;
- ``tune_jax_arrays``: gpu_tune() on JAX with its batch sizes given (no
  batch-size search), up to its first trial's ``fit()``;
- ``multiworker_tensorflow``: a one-worker multi-worker cluster on TensorFlow,
  in a private network namespace (``unshare``; left out where there is none),
  up to the loop's ``on_train_begin``.

Usage: python bench/data_walk.py [--smoke] [--out FILE] [--calls] (from the
repository root). Writes bench/results/data-walk.json (a smoke run: the two
array scenarios, its result in a temporary folder, see bench/lib/bench_modes.py);
``--calls`` prints every recorded call.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "inst" / "python" / "gpukeras"
sys.path[:0] = [str(ROOT / "inst" / "python"), str(ROOT / "bench" / "lib")]

import bench_modes  # noqa: E402

from gpukeras.bridge import VERBS  # noqa: E402  (imports no framework)

GOAL = {"stays": 20, "files": 10, "max_entered": 2}
SCENARIOS = {
    "fit_tensorflow_arrays": "tensorflow",
    "fit_tensorflow_dataset": "tensorflow",
    "fit_tensorflow_mirrored": "tensorflow",
    "fit_jax_arrays": "jax",
    "fit_jax_dataset": "jax",
    "fit_jax_streamed": "jax",
    "fit_jax_mirrored": "jax",
    "tune_jax_arrays": "jax",
    "multiworker_tensorflow": "tensorflow",
}
SMOKE = ("fit_tensorflow_arrays", "fit_jax_arrays")
STDLIB = sysconfig.get_paths()["stdlib"]
SCALARS = (bool, int, float, complex, str, bytes, type(None))
# what is never the data: classes, modules, functions
UNTRACKED = (
    type,
    types.ModuleType,
    types.FunctionType,
    types.MethodType,
    types.BuiltinFunctionType,
)
ROWS, FEATURES, BATCH = 256, 8, 32


# The walk -----------------------------------------------------------------------
class Walk:
    """The profile hook that records the data's calls (see the module's notes)."""

    def __init__(self, data: tuple[object, ...], never: tuple[object, ...]) -> None:
        self.package = str(PACKAGE) + os.sep
        self.never = {id(thing) for thing in never if thing is not None}
        self.tracked: set[int] = set()
        self.kept: list[object] = []  # tracked objects stay alive: their ids stay theirs
        self.pending: set[int] = set()  # frames whose return value is tracked
        self.calls: list[dict[str, object]] = []
        self.ended = False
        self.errors: list[str] = []
        self.inside: Any = None  # the frame of another verb's call (see the notes)
        self.verbs = {
            (module.replace(".", "/") + ".py", function)
            for module, function in (verb.split(":") for verb in VERBS.values())
        }
        for thing in data:
            self.mark(thing, 3)

    def mark(self, thing: object, depth: int) -> None:
        if isinstance(thing, SCALARS) or id(thing) in self.never or id(thing) in self.tracked:
            return
        if isinstance(thing, UNTRACKED) or self._settings(thing):
            return
        self.tracked.add(id(thing))
        self.kept.append(thing)
        if depth > 0:
            for part in self.parts(thing):
                self.mark(part, depth - 1)

    def holds(self, thing: object, depth: int) -> bool:
        if id(thing) in self.tracked:
            return True
        return depth > 0 and any(self.holds(part, depth - 1) for part in self.parts(thing))

    @staticmethod
    def _settings(thing: object) -> bool:
        """Whether ``thing`` is a tuple, list or dict of numbers and strings alone: a setting
        (class weights, a shape), not data."""
        if isinstance(thing, dict):
            return all(isinstance(v, SCALARS) for v in (*thing.keys(), *thing.values()))
        return isinstance(thing, (tuple, list)) and all(isinstance(v, SCALARS) for v in thing)

    @staticmethod
    def _parts(thing: object) -> list[object]:
        if isinstance(thing, (tuple, list)):
            return list(thing[:64])
        if isinstance(thing, dict):
            return list(thing.values())[:64]
        if type(thing).__module__.startswith("gpukeras") and hasattr(thing, "__dict__"):
            return list(vars(thing).values())
        return []

    def parts(self, thing: object) -> list[object]:
        try:
            return self._parts(thing)
        except Exception:  # an object in the middle of its making (TensorFlow's wrappers)
            return []

    @staticmethod
    def _arguments(frame: Any) -> list[object]:
        code = frame.f_code
        count = code.co_argcount + code.co_kwonlyargcount
        count += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)  # *args, **kwargs
        local = frame.f_locals
        return [local[name] for name in code.co_varnames[:count] if name in local]

    def _called_by_us(self, frame: Any, stdlib: bool = True) -> bool:
        """Whether gpukeras made this call: its caller is in the package, or (``stdlib``) in
        the standard library (a ``with`` statement's context manager, a decorator)."""
        caller = frame.f_back.f_code.co_filename if frame.f_back is not None else ""
        return caller.startswith(self.package) or (
            stdlib and caller.startswith(STDLIB) and "-packages" not in caller
        )

    @staticmethod
    def _is_end(code: Any) -> bool:
        name, where = code.co_name, code.co_filename.replace(os.sep, "/")
        if "/keras/src/" not in where:
            return False
        return (name == "fit" and where.endswith("trainer.py")) or (
            name == "on_train_begin" and where.endswith("callback_list.py")
        )

    def profile(self, frame: Any, event: str, arg: object) -> None:
        try:
            self._event(frame, event, arg)
        except Exception as error:  # a hook that raises is switched off: say so instead
            self.errors.append(f"{type(error).__name__}: {error}")

    def _event(self, frame: Any, event: str, arg: object) -> None:
        if self.inside is not None:  # in another verb's call: its own walk
            if event == "return" and frame is self.inside:
                self.inside = None
                if id(frame) in self.pending:
                    self.pending.discard(id(frame))
                    self.mark(arg, 3)
            return
        if event == "call":
            code = frame.f_code
            if self._is_end(code):
                self.ended = True
                sys.setprofile(None)
                return
            ours = code.co_filename.startswith(self.package)
            if ours and self.calls and not self._called_by_us(frame):
                self.inside = frame  # a framework's call (tracing, a callback): its own work
                return
            if not ours and not self._called_by_us(frame, stdlib=False):
                return  # inside a framework: its own work, not the data's walk
            arguments = self._arguments(frame)
            if any(self.holds(a, 2 if ours else 1) for a in arguments):
                where = code.co_filename[len(self.package) :].replace(os.sep, "/")
                if not where.startswith("train/"):  # it derives from the data
                    self.pending.add(id(frame))
                if ours:
                    if self.calls and (where, code.co_qualname) in self.verbs:
                        self.inside = frame
                    self.calls.append({"file": where, "function": code.co_qualname})
        elif event == "return" and id(frame) in self.pending:
            self.pending.discard(id(frame))
            self.mark(arg, 3)
            if frame.f_code.co_name == "__init__":
                self.mark(frame.f_locals.get("self"), 3)

    def run(self, call: Callable[[], object]) -> object:
        sys.setprofile(self.profile)
        try:
            return call()
        finally:
            sys.setprofile(None)


def measure(calls: list[dict[str, object]]) -> dict[str, object]:
    """Stays, files, returns and how often each file is entered (see the module's notes)."""
    stays: list[list[object]] = []
    for call in calls:
        if stays and stays[-1][0] == call["file"]:
            stays[-1][1] += 1  # type: ignore[operator]
        else:
            stays.append([call["file"], 1])
    entered: dict[str, int] = {}
    for file, _ in stays:
        entered[str(file)] = entered.get(str(file), 0) + 1
    return {
        "calls": len(calls),
        "stays": len(stays),
        "files": len(entered),
        "returns": len(stays) - len(entered),
        "max_entered": max(entered.values(), default=0),
        "entered": dict(sorted(entered.items(), key=lambda item: (-item[1], item[0]))),
        "walk": [f"{file} x{count}" for file, count in stays],
    }


# One scenario, in a fresh Python ----------------------------------------------------
def _model(keras: Any, jit_compile: object = "auto") -> Any:
    keras.utils.set_random_seed(3)
    model = keras.Sequential(
        [keras.Input((FEATURES,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(2)]
    )
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit_compile,
    )
    return model


def child(name: str, folder: str) -> dict[str, object]:
    """Run scenario ``name`` here and return its recorded calls."""
    import numpy as np

    from gpukeras import bridge
    from gpukeras.core.runtime import config

    strategy = None
    if name.endswith("mirrored"):
        assert bridge.call("setup", {"cpu_devices": 2})["ok"]
    if name.startswith("multiworker"):  # before TensorFlow starts
        from gpukeras.distribute import cluster

        strategy = cluster.make_strategy(["127.0.0.1:" + os.environ["DATA_WALK_PORT"]], 0)
    keras = config.keras()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((ROWS, FEATURES)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    validation: object = (x[:64], y[:64])
    data: object = (x, y)
    fields: dict[str, object] = {"epochs": 1, "verbose": 0, "monitor": False, "seed": 1}
    model = _model(keras, False if name == "fit_jax_streamed" else "auto")
    if name.endswith("dataset"):
        from gpukeras.data import pipeline

        made = pipeline.from_arrays(x, y, batch_size=BATCH, shuffle=True, seed=1)
        data, validation = made["dataset"], None
        if name.startswith("fit_tensorflow"):
            validation = pipeline.from_arrays(x[:64], y[:64], batch_size=BATCH)["dataset"]
        fields["class_weight"] = {0: 1.0, 1: 2.0}
    else:
        fields["batch_size"] = BATCH
    if name == "fit_jax_streamed":
        fields["jit_compile"] = False
    if name.endswith("arrays") and name.startswith("fit"):
        fields["backup_dir"] = str(Path(folder) / "backup")
    if name.endswith("mirrored"):
        strategy = bridge.call("strategy", {"type": "mirrored"})["value"]["strategy"]
    walk = Walk((data, validation), (model, strategy, keras))
    if name.startswith("tune"):
        from gpukeras.tools import tune

        walk.run(lambda: tune.tune(model, data, time_budget=5, batch_sizes=[BATCH], seed=1))
    else:
        from gpukeras.train import fit

        walk.run(lambda: fit.fit(model, data, validation, strategy, request=fields))
    return {
        "calls": walk.calls,
        "ended": walk.ended,
        "errors": walk.errors,
        "backend": keras.backend.backend(),
    }


def _private_prefix() -> list[str] | None:
    """A prefix that runs a command in a network namespace of its own (loopback alone)."""
    if not shutil.which("unshare"):
        return None
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    prefix = ["unshare", *user, "--net", "--"]
    tried = subprocess.run([*prefix, "true"], capture_output=True, check=False)
    return prefix if tried.returncode == 0 else None


def run_scenario(name: str) -> dict[str, object]:
    """Scenario ``name`` in a fresh Python on its backend; its calls and their measure."""
    env = {
        **os.environ,
        "KERAS_BACKEND": SCENARIOS[name],
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "inst" / "python"), str(ROOT / "bench")]),
    }
    if name == "fit_jax_mirrored":
        env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    command = [sys.executable, __file__, "--child", name]
    if name.startswith("multiworker"):
        prefix = _private_prefix()
        if prefix is None:
            return {"skipped": "no private network namespace (unshare) here"}
        env["DATA_WALK_PORT"] = "23456"  # alone in its namespace: any port is free
        command = [*prefix, "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *command]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="data-walk-") as folder:
        env["DATA_WALK_FOLDER"] = folder
        done = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=600, check=False
        )
    lines = [line for line in done.stdout.splitlines() if line.startswith("@@")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"scenario {name} failed:\n{done.stderr[-4000:]}")
    recorded = json.loads(lines[-1][2:])
    return {
        "backend": recorded["backend"],
        "reached_keras": recorded["ended"],
        "hook_errors": recorded["errors"],
        "seconds": round(time.perf_counter() - started, 1),
        **measure(recorded["calls"]),
        "call_list": [f"{c['file']}:{c['function']}" for c in recorded["calls"]],
    }


def _commit() -> str | None:
    done = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--", "inst/python"],
        capture_output=True,
        text=True,
        check=False,
    )
    commit = done.stdout.strip() or None
    return f"{commit} (with uncommitted changes)" if commit and dirty.stdout.strip() else commit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_modes.add_arguments(parser)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--calls", action="store_true", help="print every recorded call")
    parser.add_argument("--only", nargs="*", choices=list(SCENARIOS), help="these scenarios")
    args = parser.parse_args()
    if args.child:
        print("@@" + json.dumps(child(args.child, os.environ["DATA_WALK_FOLDER"])), flush=True)
        return
    names = args.only or (list(SMOKE) if args.smoke else list(SCENARIOS))
    results: dict[str, dict[str, object]] = {}
    for name in names:
        results[name] = run_scenario(name)
        got = results[name]
        if "skipped" in got:
            print(f"{name}: skipped ({got['skipped']})", flush=True)
            continue
        print(
            f"{name}: {got['stays']} stays in {got['files']} files, {got['returns']} returns, "
            f"most entered {got['max_entered']} ({got['calls']} calls, {got['seconds']} s)",
            flush=True,
        )
        print("    " + " -> ".join(got["walk"]), flush=True)  # type: ignore[arg-type]
        if args.calls:
            for call in got["call_list"]:  # type: ignore[attr-defined]
                print(f"      {call}")
        assert not got["hook_errors"], f"{name}: the hook failed: {got['hook_errors'][:3]}"
        assert got["reached_keras"], f"{name} never reached Keras' training loop"
        assert got["calls"], f"{name} recorded no call"
    fits = {n: r for n, r in results.items() if n.startswith("fit") and "skipped" not in r}
    worst = {key: max(int(r[key]) for r in fits.values()) for key in GOAL}  # type: ignore[call-overload]
    headline = {
        "worst_fit": worst,
        "goal": GOAL,
        "meets_goal": all(worst[key] <= limit for key, limit in GOAL.items()),
    }
    print(f"worst over the fit scenarios: {worst} (goal: at most {GOAL})")
    result = {
        "benchmark": "data_walk",
        "command": bench_modes.command("bench/data_walk.py", args),
        "date": datetime.date.today().isoformat(),
        "commit": _commit(),
        "smoke": args.smoke,
        **headline,
        "scenarios": results,
        "notes": [
            "A call: a gpukeras function called with the data (or what is derived from it) "
            "between entering the entry point and Keras' training loop starting; a stay: a "
            "maximal run of consecutive calls in one file; returns = stays - files; "
            "entered: stays per file. See the script's docstring for the exact rules.",
        ],
    }
    path = bench_modes.result_path(args, ROOT / "bench" / "results" / "data-walk.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"written to {path}")


if __name__ == "__main__":
    main()
