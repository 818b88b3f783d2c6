"""gpu_profile(): a profiler trace of a range of train steps, TensorBoard logs, and what they say.

``profile`` trains the given compiled model through gpu_fit()'s core
(``gpukeras.train.fit.fit``, so the steps are the ones gpu_fit() runs, with the same
data handling, speed options and classed errors) for ``stop`` steps, takes a
profiler trace of steps ``start`` to ``stop`` (1-based, both included), logs
every step's loss and metrics for TensorBoard, and reads back what it can.

Why not Keras' own ``keras.callbacks.TensorBoard(profile_batch=...)``, read
from keras/src/callbacks/tensorboard.py (Keras 3.15) and measured here:

- its scalars go through ``tf.summary.scalar``, which TensorFlow 2.21 only
  implements when the ``tensorboard`` package is installed, and TensorFlow
  2.21 no longer depends on it: without it training fails at the first batch
  (``TBNotInstalledError``). Without TensorFlow (the JAX-only GPU machines)
  the callback cannot log at all;
- on JAX it turns profiling off below Python 3.12 (a segfault report,
  keras-team/keras#20450). Measured here (Python 3.11, JAX 0.7.1), a JAX
  trace of Keras training works, but where TensorFlow is installed too it
  breaks every later TensorFlow op, which ``compat.mend_tensorflow_trace`` undoes;
- a profiler that fails to start (another trace running) is only logged, so
  the trace is silently missing;
- it logs from ``on_train_batch_end``, which makes Keras call batch-end
  callbacks synchronously, so the host waits for every step's loss and the
  trace shows gaps between steps that gpu_fit() does not have.

So the profiler is driven here, with the backend's own public API
(``tf.profiler.experimental`` / ``jax.profiler``), the same way the callback
drives it: a warm-up start and stop before training (it also makes a busy
profiler an error before any step runs), the trace started at step
``start``'s begin, each step marked for the profiler's step view
(``tf.profiler.experimental.Trace(step_num=, _r=1)`` /
``jax.profiler.StepTraceAnnotation``), and the trace stopped at the end of
training, after Keras has waited for the last step's results, so device work
still queued is in it. Training stops itself after step ``stop``. Checked
with tensorboard-plugin-profile 2.24.2 on a TensorFlow CPU trace: its
overview page lists the marked steps ("train 2", "train 3", ...) and gives its
input-pipeline verdict for them.

Files and what is read back from them: see ``gpukeras.tools.profile_logs``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from gpukeras.core import arguments, compat
from gpukeras.core.errors import BadArgumentError, BadDataError, ProfilerError
from gpukeras.core.handles import Callback, Model, Record
from gpukeras.core.runtime import config
from gpukeras.data import adapters, batch_rules, sources
from gpukeras.tools import profile_logs
from gpukeras.train import fit, monitor, timing

SETTINGS = ("batch_size", "steps_per_execution", "jit_compile", "dtype_policy", "device", "data")


# Checking arguments -----------------------------------------------------------
def check_logdir(logdir: object) -> str:
    """``logdir`` as an absolute path, created, and shown to be writable before training."""
    if logdir is None:
        return tempfile.mkdtemp(prefix="gpukeras-profile-")
    if not isinstance(logdir, (str, os.PathLike)) or not str(logdir):
        raise BadArgumentError(f"logdir must be a folder path, not {logdir!r}.")
    path = Path(logdir).expanduser().resolve()
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as error:
        raise BadArgumentError(
            f"logdir {path} cannot be written to ({error.strerror or error}): give a folder "
            "you can write to, e.g. tempfile()."
        ) from error
    return str(path)


# Driving the profiler ---------------------------------------------------------
class Profiler:
    """The backend's profiler: start, stop, and a marker per step.

    A trace is written to a scratch folder and then moved into place under a
    name no other trace has: the profilers name a trace's folder by the
    second it was written, so two traces in one logdir within a second (a
    failed run and its retry) would otherwise overwrite each other.

    Args:
        backend: "tensorflow" or "jax" (Keras' backends with a profiler).
    """

    def __init__(self, backend: str) -> None:
        if backend not in ("tensorflow", "jax"):
            raise ProfilerError(
                f"gpu_profile() traces the tensorflow and jax backends, not {backend}: "
                'set KERAS_BACKEND to "tensorflow" or "jax" before gpukeras starts Python.'
            )
        self.backend = backend
        self.running = False
        self._scratch = ""  # set by start()
        self._module: ModuleType
        if backend == "jax":
            import jax.profiler

            self._module = jax.profiler
        else:
            self._module = sources.tensorflow()

    def start(self) -> None:
        """Start a trace; ProfilerError when one is running already."""
        self._scratch = tempfile.mkdtemp(prefix="gpukeras-trace-")
        try:
            if self.backend == "jax":
                self._module.start_trace(self._scratch)
                compat.mend_tensorflow_trace()
            else:
                self._module.profiler.experimental.start(self._scratch)
        except Exception as error:
            shutil.rmtree(self._scratch, ignore_errors=True)
            raise ProfilerError(
                "The profiler could not start: a trace is already running in this Python "
                "session (one started by tf.profiler.experimental.start() or "
                "jax.profiler.start_trace() and not stopped). Stop it, or restart R, and "
                f"call gpu_profile() again. ({type(error).__name__}: {error})"
            ) from error
        self.running = True

    def stop(self, run_dir: str | None) -> Path | None:
        """Stop the running trace and move it to ``run_dir/plugins/profile/<session>``;
        return that folder. With ``run_dir`` None the trace is thrown away."""
        if not self.running:
            return None
        self.running = False
        try:
            if self.backend == "jax":
                self._module.stop_trace()
                compat.mend_tensorflow_trace()
            else:
                self._module.profiler.experimental.stop(save=run_dir is not None)
            if run_dir is None:
                return None
            written = Path(self._scratch, "plugins", "profile")
            sessions = list(written.iterdir()) if written.is_dir() else []
            if not sessions:  # profile_logs.read_trace says so
                return None
            session = sessions[0]  # the one trace written there
            root = Path(run_dir, "plugins", "profile")
            root.mkdir(parents=True, exist_ok=True)
            target, n = root / session.name, 1
            while target.exists():
                n += 1
                target = root / f"{session.name}_{n}"
            shutil.move(str(session), str(target))
            return target
        finally:
            shutil.rmtree(self._scratch, ignore_errors=True)

    def warm_up(self) -> None:
        """Start and stop once before training, as Keras' callback does: the first start
        loads the tracers (CUPTI on a GPU), and a busy profiler fails here, not mid-run."""
        self.start()
        self.stop(None)

    def step(self, number: int) -> contextlib.AbstractContextManager:
        """A marker for step ``number`` (the profiler's step view counts these)."""
        if self.backend == "jax":
            return self._module.StepTraceAnnotation(profile_logs.STEP_NAME, step_num=number)
        return self._module.profiler.experimental.Trace(
            profile_logs.STEP_NAME, step_num=number, _r=1
        )


def range_callback(profiler: Profiler, run_dir: str, start: int, stop: int) -> Callback:
    """A Keras callback tracing steps ``start``..``stop``, ending training after ``stop``,
    and collecting every step's logs (see the module's notes)."""
    keras = config.keras()

    callback_base: Any = keras.callbacks.Callback  # Keras has no types

    class ProfileRange(callback_base):
        # Only the batch-end hook may run on Keras' worker thread; it just
        # stores the logs, so Keras keeps dispatching batch ends asynchronously.
        async_safe = True
        gpukeras_per_dispatch = True  # a profile of the fit as it runs (fit's _every_batch)

        def __init__(self) -> None:
            super().__init__()
            self.step = 0
            self.logs: list[dict[str, float]] = []  # one per step, in order
            self._epoch_logs: dict[int, dict[str, float]] = {}
            self._lock = threading.Lock()
            self._marker: contextlib.AbstractContextManager | None = None
            self.trace_dir: Path | None = None  # where the trace was moved

        def _close_marker(self) -> None:
            if self._marker is not None:
                marker, self._marker = self._marker, None
                marker.__exit__(None, None, None)

        def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
            self._epoch_logs = {}

        def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
            # A step runs from its begin to the next one's (or the epoch's end),
            # as gpukeras' step timer counts it.
            self._close_marker()
            self.step += 1
            if self.step == start:
                profiler.start()
            if profiler.running:
                self._marker = profiler.step(self.step)
                self._marker.__enter__()
            if self.step >= stop:
                self.model.stop_training = True  # Keras stops after this step

        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            values = {}
            for name, value in (logs or {}).items():
                with contextlib.suppress(TypeError, ValueError):
                    values[str(name)] = float(value)
            with self._lock:
                self._epoch_logs[batch] = values

        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            # Keras has waited for every batch end of the epoch by now.
            self._close_marker()
            with self._lock:
                self.logs += [self._epoch_logs[batch] for batch in sorted(self._epoch_logs)]
                self._epoch_logs = {}

        def on_train_end(self, logs: dict | None = None) -> None:
            self._close_marker()
            self.trace_dir = profiler.stop(run_dir)

        def abort(self) -> None:
            """After a failed fit: close the marker and stop the trace, throwing it away,
            so the next profile in this process can start one."""
            with contextlib.suppress(Exception):
                self._close_marker()
            with contextlib.suppress(Exception):
                profiler.stop(None)

    return ProfileRange()


# The run ----------------------------------------------------------------------
def profile(
    model: Model,
    data: object,
    steps: tuple[int, int] = (10, 20),
    logdir: str | None = None,
    batch_size: int | None = None,
    verbose: int | str = 0,
) -> Record:
    """Train ``model`` for ``stop`` steps, tracing steps ``start``..``stop``; return what was
    written and read back.

    Args:
        model: a compiled Keras 3 model; it trains for ``stop`` steps, so its
            weights (and optimizer state) move.
        data: as for ``gpukeras.train.fit.fit``; repeated (more epochs) when it has
            fewer than ``stop`` batches.
        steps: ``(start, stop)``, the first and last step traced, 1-based. A
            step is one call of the train function (``steps_per_execution``
            batches).
        logdir: the TensorBoard log folder (created); None for a new temporary one.
        batch_size: rows per batch for arrays (default 32).
        verbose: Keras' verbose: "auto", 0, 1 or 2.

    Returns:
        ``logdir``, ``run_dir`` (``logdir/train``), ``trace_dir``,
        ``trace_files`` and ``event_files`` (rows of ``path``, ``bytes``),
        ``tensorboard`` (``command``, ``note``), ``steps`` (``start``,
        ``stop``, ``trained``), ``numbers`` (the step timer's numbers for the
        traced steps: ``step_time_mean_ms``, ``step_time_sd_ms``,
        ``samples_per_second``, ``input_wait_share``, ``input_verdict``,
        ``steps_timed``, ``input_wait_method``), ``trace`` (``profile_logs.read_trace``),
        ``scalars`` (columns ``step`` and one per metric), ``scalars_source``,
        ``backend`` and ``settings`` (what gpu_fit()'s core had in force).

    Raises:
        BadArgumentError (steps, logdir, batch_size, verbose), BadModelError,
        ModelNotCompiledError, BadDataError, ProfilerError (a trace already
        running, a backend without a profiler).
    """
    batch_rules.check_batch_size_for(batch_size, data)
    keras = config.keras()
    arguments.check_compiled_model(keras, model)
    start, stop = steps
    logdir = check_logdir(logdir)
    run_dir = os.path.join(logdir, "train")
    backend = keras.backend.backend()
    profiler = Profiler(backend)
    profiler.warm_up()

    spe = int(getattr(model, "steps_per_execution", 1) or 1)
    timer: Any = timing.step_timer(
        batch_size=batch_size,
        skip=start - 1,  # times exactly the traced steps
        # as gpu_fit() measures: on TensorFlow, timing the input of several
        # batches per call would turn Keras' graph loop into a Python loop
        measure_input=not (backend == "tensorflow" and spe > 1),
    )
    tracer = range_callback(profiler, run_dir, start, stop)
    try:
        result: Record = fit.fit(
            model,
            data,
            epochs=stop,  # at least one batch per epoch: enough for `stop` steps
            batch_size=batch_size,
            monitor=False,
            callbacks=[tracer, timer],
            verbose=verbose,
        )
    except BaseException:
        tracer.abort()
        raise
    trained = tracer.step
    if trained < start:  # a dataset of unknown length that gave nothing
        raise BadDataError(
            f"The data gave only {trained} steps, fewer than the first traced step ({start}): "
            "give data that makes batches, or trace earlier steps."
        )

    trace_dir = tracer.trace_dir
    traces = sorted(trace_dir.iterdir()) if trace_dir is not None else []
    numbers = timer.report()
    share = numbers["input_wait_share"]
    if adapters.tensorflow_available():
        earlier = set(Path(run_dir).glob("events.out.tfevents.*"))
        profile_logs.write_scalars(run_dir, tracer.logs)
        events = sorted(set(Path(run_dir).glob("events.out.tfevents.*")) - earlier)
        scalars, source = profile_logs.read_scalars(events), "event files"
    else:
        events = []
        scalars = profile_logs.logs_to_columns(tracer.logs)
        source = "memory (no TensorFlow to write event files)"
    return {
        "logdir": logdir,
        "run_dir": run_dir,
        "trace_dir": str(trace_dir) if trace_dir is not None else None,
        "trace_files": profile_logs.files(traces),
        "event_files": profile_logs.files(events),
        "tensorboard": profile_logs.tensorboard_command(logdir),
        "steps": {"start": start, "stop": stop, "trained": trained},
        "numbers": {
            "step_time_mean_ms": numbers["step_time_mean_ms"],
            "step_time_sd_ms": numbers["step_time_sd_ms"],
            "samples_per_second": numbers["samples_per_second"],
            "input_wait_share": share,
            "input_verdict": monitor.timed_input_verdict(numbers),
            "steps_timed": numbers["steps"],
            "input_wait_method": numbers["method"],
        },
        "trace": profile_logs.read_trace(traces, backend),
        "scalars": scalars,
        "scalars_source": source,
        "backend": backend,
        "settings": {name: result["settings"].get(name) for name in SETTINGS},
    }
