"""gpu_batch_size(): the largest batch that fits and the fastest, measured on a model's copy.

``search`` trains a copy of the user's compiled model on one batch of their
data, at batch sizes doubling from ``min_batch`` up to ``max_batch``. At the
first size that does not fit it bisects between the last size that fit and
that one, until the gap is within ``tolerance`` (10 %) of the size that fits.
Every size that fits is timed (a few ``train_on_batch`` steps after warm-up
steps, which hold the tracing and compiling for the new shape), and the
fastest in samples per second is recommended.

What "fits" means:

- On a GPU, the real thing: the trial runs, and an out-of-memory error from
  the backend (TensorFlow's ResourceExhaustedError, XLA's RESOURCE_EXHAUSTED
  on JAX, at compile or run time) marks the size as not fitting; so do the
  allocation failures of the libraries under them, which do not say "out of
  memory" (cuBLAS's and cuDNN's ALLOC_FAILED, TensorFlow's "Failed to get
  convolution algorithm" when cuDNN has no memory for its workspace). Memory is
  freed by dropping the trial's tensors and ``gc.collect()``; the backend's
  session is left alone (``clear_session`` would reset Keras' global state
  under the user's other models).
- On the CPU there is no out-of-memory error to catch: the operating system
  kills the process instead. So sizes are judged against a host memory
  budget (``memory_budget_mib``, by default half of the memory Linux reports
  available when the search starts) with the estimate below, and sizes over
  it are not run. A budget given on a GPU is applied there as well.

The memory estimate (``estimate_memory``), per batch of n samples:
weights + gradients (one per trainable weight) + the optimizer's variables
(its slots, e.g. Adam's two moments) + n x (2 x the layers' output sizes in
their compute dtype + the batch itself). The factor 2 stands for the forward
activations kept for the backward pass plus the gradients flowing back
through them. It is an order-of-magnitude figure, not a measurement: XLA
fuses away some intermediates, while framework workspaces (cuDNN), temporary
copies and the runtime itself add memory it does not count. That is why the
default host budget is only half of the available memory. Layers whose
output shape Keras does not know (a subclassed model's) are listed as not
counted; a layer called several times counts each call's output.

The copy, and what it costs. The user's model is never trained or changed:
``keras.models.clone_model`` builds new layers from the model's config and
compiles them from its compile config (a fresh optimizer with the same
settings; the same loss and metrics). Weights are not copied: speed and
memory do not depend on their values, and copying a large model through host
memory costs time and RAM. Custom losses, metrics or layers must therefore be
registered with Keras (``keras.saving.register_keras_serializable()``), and a
subclassed model needs ``get_config()``. The user's model stays in memory
while the copy trains, so on a GPU the largest size found leaves room for one
more copy of the weights (and its optimizer state, if it has trained).

Steps per epoch. The size recommended is the fastest that still makes at least
``batch_rules.MIN_STEPS_PER_EPOCH`` (8) steps per epoch over the training rows
(``ceil(rows / batch_size) >= 8``): larger sizes are measured, for what fits,
but not recommended. Where the rows are not known (a dataset gpu_dataset() did
not make, or one read as it streams) the rule cannot be applied, and the result
says so. With fewer rows than that, the smallest size that fits is recommended.

Timing. ``train_on_batch`` returns the step's loss as numbers, so every step
waits for its result: the time per step includes one host-device round trip,
as training with per-batch logs does. The batch is made once per size (the
first n rows of the data, repeated when it has fewer) and put on the device
before the timing, so copying it in is not timed. A tf.data dataset gives
one batch through a new iterator (which, for a dataset shuffled each
iteration, moves its order on by one iteration).
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType

import numpy as np

from gpukeras.core import arguments, compat, messages
from gpukeras.core.errors import BadArgumentError, BadDataError, OutOfMemoryError
from gpukeras.core.handles import Model, Record
from gpukeras.core.runtime import config
from gpukeras.data import adapters, batch_rules, failures, pipeline
from gpukeras.gpu import devices, peak_memory
from gpukeras.gpu.nvml import MIB
from gpukeras.tools import memory_plan
from gpukeras.train import fit_request, flops, model_copies, training_run

DEFAULT_HOST_SHARE = 0.5  # of MemAvailable: the estimate leaves out real overheads
BACKWARD_FACTOR = 2  # activations kept for the backward pass + their gradients


# The search ---------------------------------------------------------------------
def midpoint(fits: int, fails: int) -> int:
    """A size between one that fits and one that does not: a multiple of 8 where one
    lies strictly between them (Tensor Cores work in multiples of 8), else the middle."""
    middle = (fits + fails) // 2
    rounded = middle - middle % 8
    return rounded if rounded > fits else middle


def search_sizes(
    fits: Callable[[int, str], bool], min_batch: int, max_batch: int, tolerance: float
) -> tuple[int | None, int | None]:
    """Double from ``min_batch`` to ``max_batch``, then bisect after the first failure.

    Args:
        fits: tries one size (with its phase, "double" or "bisect"); True when it fits.
        min_batch, max_batch: the sizes to search between (both tried, if reached).
        tolerance: bisection stops once the gap is at most this share of the
            size that fits (and always at a gap of 1).

    Returns:
        The largest size found to fit (None if ``min_batch`` does not) and the
        smallest found not to (None if ``max_batch`` fits).
    """
    largest: int | None = None
    size = min_batch
    while True:
        if not fits(size, "double"):
            smallest_failing = size
            break
        largest = size
        if size >= max_batch:
            return largest, None
        size = min(2 * size, max_batch)
    if largest is None:
        return None, smallest_failing
    while smallest_failing - largest > max(1, largest * tolerance):
        size = midpoint(largest, smallest_failing)
        if fits(size, "bisect"):
            largest = size
        else:
            smallest_failing = size
    return largest, smallest_failing


# Memory -------------------------------------------------------------------------
@dataclass
class MemoryEstimate:
    """Bytes a training step needs: ``fixed_bytes + n * per_sample_bytes`` (see the module)."""

    weights_bytes: int
    gradient_bytes: int
    optimizer_bytes: int
    activation_bytes_per_sample: int
    batch_bytes_per_sample: float
    uncounted_layers: list[str] = field(default_factory=list)

    @property
    def fixed_bytes(self) -> int:
        return self.weights_bytes + self.gradient_bytes + self.optimizer_bytes

    @property
    def per_sample_bytes(self) -> float:
        return BACKWARD_FACTOR * self.activation_bytes_per_sample + self.batch_bytes_per_sample

    def mib(self, batch_size: int) -> float:
        return (self.fixed_bytes + batch_size * self.per_sample_bytes) / MIB

    def describe(self) -> Record:
        return {
            "fixed_mib": self.fixed_bytes / MIB,
            "per_sample_mib": self.per_sample_bytes / MIB,
            "weights_mib": self.weights_bytes / MIB,
            "gradients_mib": self.gradient_bytes / MIB,
            "optimizer_mib": self.optimizer_bytes / MIB,
            "activations_per_sample_mib": self.activation_bytes_per_sample / MIB,
            "batch_per_sample_mib": self.batch_bytes_per_sample / MIB,
            "uncounted_layers": self.uncounted_layers,
            "method": (
                "weights + gradients + optimizer variables + batch size x "
                f"({BACKWARD_FACTOR} x layer outputs + the batch's own rows)"
            ),
        }


def estimate_memory(model: Model, parts: tuple[object, ...]) -> MemoryEstimate:
    """The memory estimate of a built, compiled model training on rows like ``parts``."""
    keras = config.keras()
    activations, uncounted = 0, []
    for layer in flops.leaves(model):
        if isinstance(layer, keras.layers.InputLayer):  # its output is the batch, counted below
            continue
        elements = memory_plan.output_elements(keras, layer)
        if elements is None:
            uncounted.append(type(layer).__name__)
        else:
            activations += elements * memory_plan.itemsize(layer.compute_dtype)
    arrays = keras.tree.flatten(parts)
    return MemoryEstimate(
        weights_bytes=memory_plan.variable_bytes(model.weights),
        gradient_bytes=memory_plan.variable_bytes(model.trainable_weights),
        optimizer_bytes=memory_plan.variable_bytes(model.optimizer.variables),
        activation_bytes_per_sample=activations,
        batch_bytes_per_sample=sum(a.nbytes / len(a) for a in arrays),
        uncounted_layers=sorted(set(uncounted)),
    )


# The data -----------------------------------------------------------------------
def sample_batch(data: object) -> tuple[object, ...]:
    """Rows of the data as a tuple (x, y[, sample_weight]) of NumPy arrays (or dicts of them).

    Arrays are taken as they are; a tf.data dataset gives its first batch.
    """
    if adapters.is_tf_dataset(data):
        try:
            element = next(iter(data))
        except StopIteration:
            raise BadDataError("The dataset is empty: it gives no batch to train on.") from None
        keras = config.keras()
        element = keras.tree.map_structure(np.asarray, element)
        parts = tuple(element) if isinstance(element, (tuple, list)) else (element,)
    elif isinstance(data, (tuple, list)) and len(data) in (1, 2, 3):
        parts = tuple(adapters.as_arrays(part) for part in data if part is not None)
    else:
        raise BadDataError(
            f"data cannot be {type(data).__name__}: give a tf.data dataset (gpu_dataset()) "
            "or arrays as (x, y)."
        )
    if not parts or adapters.row_count(parts[0]) == 0:
        raise BadDataError("The data has no rows to make a batch from.")
    return parts


def training_rows(data: object, parts: tuple[object, ...]) -> int | None:
    """The rows one epoch trains on: all the arrays' rows, or a gpu_dataset()'s (its
    training part) where known; None for other datasets."""
    if adapters.is_tf_dataset(data):
        return pipeline.rows_in(data)
    return adapters.row_count(parts[0])


def steps_rule(rows: int | None, fitting: list[int]) -> Record:
    """The sizes the rule of ``MIN_STEPS_PER_EPOCH`` steps per epoch lets be recommended,
    among ``fitting`` (see the module): ``min_steps``, ``rows``, ``largest_batch`` (None
    where the rows are not known) and ``allowed``."""
    if rows is None:
        return {
            "min_steps": batch_rules.MIN_STEPS_PER_EPOCH,
            "rows": None,
            "largest_batch": None,
            "allowed": fitting,
        }
    largest = batch_rules.largest_batch_for_steps(rows)
    allowed = [size for size in fitting if size <= largest] or [min(fitting)]
    return {
        "min_steps": batch_rules.MIN_STEPS_PER_EPOCH,
        "rows": rows,
        "largest_batch": largest,
        "allowed": allowed,
    }


def rows_of(parts: tuple[object, ...], n: int) -> tuple[object, ...]:
    """The first ``n`` rows of every array in ``parts``, repeated when there are fewer."""
    keras = config.keras()

    def take(array: np.ndarray) -> np.ndarray:
        if n <= len(array):
            return array[:n]
        return np.take(array, np.arange(n) % len(array), axis=0)

    return keras.tree.map_structure(take, parts)


# The copy of the model ----------------------------------------------------------
def training_copy(keras: ModuleType, model: Model, parts: tuple[object, ...]) -> Model:
    """A compiled copy of ``model`` with new weights, built for rows like ``parts``."""
    copy = model_copies.clone(keras, model, "gpu_batch_size()", weights=False)
    # The XLA choice gpu_fit() would make (gpu_setup()'s default, else Keras').
    compat.set_jit_compile(copy, fit_request.resolve_jit(copy, "auto"))
    with refused_as_bad_data():
        compat.symbolic_build(copy, rows_of(parts, 1))
    return copy


@contextlib.contextmanager
def refused_as_bad_data(batch_size: int | None = None, active: bool = True) -> Iterator[None]:
    """Turn the model refusing the data (wrong shapes or dtypes) into BadDataError.

    Only where the data meets the model first (``active``): later, the same
    errors would not be about the data.
    """
    try:
        yield
    except Exception as error:
        at = f" (at batch size {batch_size})" if batch_size else ""
        refused = failures.refused_data(error, f"train on this data{at}")
        if not active or refused is None or messages.is_out_of_memory(error):
            raise
        raise refused from error


def time_steps(model: Model, parts: tuple[object, ...], warmup: int, steps: int) -> float:
    """Seconds for ``steps`` train steps on ``parts`` (put on the device first), after
    ``warmup`` untimed ones."""
    keras = config.keras()
    tensors = keras.tree.map_structure(keras.ops.convert_to_tensor, parts)
    for _ in range(warmup):
        model.train_on_batch(*tensors)
    started = time.perf_counter()
    for _ in range(steps):
        model.train_on_batch(*tensors)
    return time.perf_counter() - started


# The call from R ----------------------------------------------------------------
def _budget(given: float | None, on_gpu: bool) -> Record:
    if given is not None:
        return {"mib": given, "source": "memory_budget_mib"}
    if on_gpu:
        return {"mib": None, "source": "none: out-of-memory errors on the GPU decide"}
    total, available = devices.host_memory_mib()
    base, name = (available, "available") if available is not None else (total, "total")
    if base is None:
        raise BadArgumentError(
            "The host's memory is not known here: give memory_budget_mib, the MiB of "
            "memory the search may use."
        )
    return {
        "mib": DEFAULT_HOST_SHARE * base,
        "source": f"{DEFAULT_HOST_SHARE:.0%} of the host's {name} memory, {base:.0f} MiB",
    }


@dataclass
class Trial:
    """One batch size tried.

    Attributes:
        batch_size: the size.
        phase: "double" or "bisect".
        fits: whether it trained (and, with a budget, its estimate was within it).
        samples_per_second, step_ms: measured where it fits.
        estimated_mib: the memory estimate for this size.
        peak_mib: the GPU's measured peak where known (see ``gpukeras.gpu.peak_memory``).
        reason: why it does not fit.
        steps_per_epoch: batches of this size in one pass over the training rows (None
            where the rows are not known).
    """

    batch_size: int
    phase: str
    fits: bool = False
    samples_per_second: float | None = None
    step_ms: float | None = None
    estimated_mib: float | None = None
    peak_mib: float | None = None
    reason: str | None = None
    steps_per_epoch: int | None = None


class TrialRunner:
    """Tries batch sizes on the model's copy and records every try (``fits`` for
    ``search_sizes``).

    A size whose estimate is over ``budget_mib`` is not run. The data meets the
    model for the first time in the first size run: only there does an error
    about shapes or dtypes become BadDataError.
    """

    def __init__(
        self,
        copy: Model,
        parts: tuple[object, ...],
        meter: Callable[[], Callable[[], float | None]],
        warmup: int,
        steps: int,
        budget_mib: float | None,
        budget_name: str,
    ) -> None:
        self.copy: Model | None = copy
        self.parts = parts
        self.meter = meter
        self.warmup = warmup
        self.steps = steps
        self.budget_mib = budget_mib
        self.budget_name = budget_name
        self.rows: int | None = None  # the training rows, for each size's steps per epoch
        self.estimate = estimate_memory(copy, parts)
        self.trials: list[Trial] = []
        self.runs = 0

    def __call__(self, size: int, phase: str) -> bool:
        estimated = self.estimate.mib(size)
        trial = Trial(size, phase, estimated_mib=estimated)
        if self.rows is not None:
            trial.steps_per_epoch = batch_rules.steps_per_epoch(self.rows, size)
        self.trials.append(trial)
        if self.budget_mib is not None and estimated > self.budget_mib:
            trial.reason = (
                f"over the {self.budget_name}: {estimated:.3g} MiB estimated > "
                f"{self.budget_mib:.3g} MiB"
            )
            return False
        self.runs += 1
        try:
            with refused_as_bad_data(size, active=self.runs == 1):
                read_peak = self.meter()
                seconds = time_steps(self.copy, rows_of(self.parts, size), self.warmup, self.steps)
                trial.peak_mib = read_peak()
        except Exception as error:
            if not messages.is_out_of_memory(error):
                raise
            trial.reason = f"out of memory: {messages.error_message(error)[:300]}"
        if trial.reason is not None:
            gc.collect()  # the failed step's buffers, held by the error's frames until now
            return False
        trial.fits = True
        trial.samples_per_second = size * self.steps / seconds
        trial.step_ms = 1000 * seconds / self.steps
        return True

    def release(self) -> None:
        """Drop the copy and free its memory (weights, optimizer state, compiled steps)."""
        self.copy = None
        gc.collect()


def search(
    model: Model,
    data: object,
    max_batch: int = 4096,
    min_batch: int = 1,
    steps: int = 5,
    warmup: int = 1,
    memory_budget_mib: float | None = None,
    tolerance: float = 0.1,
) -> Record:
    """Find the largest batch size that fits and the fastest one, on a copy of ``model``.

    Args:
        model: a compiled Keras 3 model; it is not changed.
        data: arrays as ``(x, y)`` (``x`` may be a dict of arrays; ``y`` may be
            None), or a batched tf.data dataset (gpu_dataset()).
        max_batch, min_batch: the sizes searched between.
        steps: timed train steps per size.
        warmup: untimed steps before them (tracing and compiling happen there).
        memory_budget_mib: MiB the estimate of a size may reach; default on
            the CPU half of the available host memory, none on a GPU.
        tolerance: how close the bisection gets (a share of the size that fits).

    Returns:
        ``trials`` (``Trial`` rows in the order tried), ``recommended`` (the
        fastest size that fits and makes 8 or more steps per epoch, see the module),
        ``fastest`` (the fastest that fits), ``steps_rule`` (``steps_rule``'s
        ``min_steps``, ``rows``, ``largest_batch``), ``largest`` (the largest that fits),
        ``smallest_failing`` (None when ``max_batch`` fits), ``device``,
        ``device_name``, ``backend``, ``budget`` (``mib``, ``source``),
        ``estimate`` (``MemoryEstimate.describe``) and ``settings``.

    Raises:
        BadModelError, ModelNotCompiledError, BadArgumentError, BadDataError;
        OutOfMemoryError when ``min_batch`` does not fit.
    """
    keras = config.keras()
    arguments.check_compiled_model(keras, model)
    low, high, given = min_batch, max_batch, memory_budget_mib
    parts = sample_batch(data)
    copy = training_copy(keras, model, parts)
    # Where the copy trains (Keras' first GPU, or a distribution's), which may not be
    # where the user's model was built (a strategy's scope).
    gpus = training_run.gpus_in_use(keras, copy)
    on_gpu = bool(gpus)
    device = str(gpus[0]["device"]) if on_gpu else "CPU:0"
    device_name = str(gpus[0]["name"]) if on_gpu else devices.cpu_name()
    backend = keras.backend.backend()
    budget = _budget(given, on_gpu)

    runner = TrialRunner(
        copy,
        parts,
        peak_memory.meter(backend, device),
        warmup,
        steps,
        budget_mib=budget["mib"],
        budget_name="GPU memory budget" if on_gpu else "host memory budget",
    )
    runner.rows = training_rows(data, parts)
    jit_compile = bool(copy.jit_compile)
    estimate = runner.estimate
    try:
        largest, smallest_failing = search_sizes(runner, low, high, tolerance)
    finally:
        runner.release()
    trials = runner.trials
    if largest is None:
        reason = str(trials[0].reason)
        raise OutOfMemoryError(
            f"Even a batch of {low} does not fit on {device} ({device_name}): {reason}. "
            + (
                "Free GPU memory (other processes, other models in this session), train in "
                'mixed precision (gpu_setup(mixed_precision = "bfloat16")) or use a smaller model.'
                if reason.startswith("out of memory")
                else "Give a larger memory_budget_mib if the machine has the memory, use a "
                "smaller model, or train on a GPU."
            ),
            model=model if reason.startswith("out of memory") else None,
            batch_size=low,
        )
    fitting_trials = [t for t in trials if t.fits]
    rule = steps_rule(runner.rows, sorted({t.batch_size for t in fitting_trials}))
    allowed = rule.pop("allowed")

    def speed(t: Trial) -> float:
        return t.samples_per_second or 0.0

    fastest = max(fitting_trials, key=speed)
    recommended = max((t for t in fitting_trials if t.batch_size in allowed), key=speed)
    return {
        "trials": trials,
        "recommended": recommended.batch_size,
        "fastest": fastest.batch_size,
        "steps_rule": rule,
        "largest": largest,
        "smallest_failing": smallest_failing,
        "device": device,
        "device_name": device_name,
        "backend": backend,
        "budget": budget,
        "estimate": estimate.describe(),
        "settings": {
            "min_batch": low,
            "max_batch": high,
            "steps": steps,
            "warmup": warmup,
            "tolerance": tolerance,
            "jit_compile": jit_compile,
        },
    }
