"""Advice for gpu_fit()'s report: each item chosen by a number in the monitor's report.

``advice`` reads the report ``monitor.training_report`` builds and the facts
of the run (``TrainingContext``): an input-bound verdict gives pipeline advice
that fits what the data is (``data_form``: for arrays in memory, batch size,
batches per call and, on JAX, the device; for a gpu_dataset(), its own options,
images only for an image folder; for other datasets, the steps they lack; none
for data on the device), worded as timed or as estimated
from the pipeline alone, as it was measured; a GPU that idles while the input keeps up
gives step-overhead advice (more batches per call only while
``steps_per_execution`` is below ``MANY_STEPS_PER_EXECUTION``); GPUs of one
run that are unevenly busy are named with their figures; a busy GPU in
float32 with Tensor Cores gives mixed-precision advice; no GPU says so.

An input-bound verdict on a fit shorter than ``SHORT_FIT_SECONDS``, or on the CPU,
is a note (``notes``), not advice: in a few seconds of training, compiling, the
first batches and Keras' teardown weigh heavily, too much to change the batch or
the pipeline for; on the CPU the host both prepares the batches and runs the model, so
the wait is not a GPU left idle, and a GPU run will wait differently.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from gpukeras.core.handles import Record

# Mean utilizations this many percentage points apart make GPUs "unevenly busy".
UNEVEN_POINTS = 20.0
# Batches per call from which raising steps_per_execution is no longer advised.
MANY_STEPS_PER_EXECUTION = 8
# The kinds of gpu_fit() data (DataAdapter.kind) that are arrays in memory, not a dataset.
IN_MEMORY_DATA = ("arrays", "keras arrays")
# What the training data is, as the advice tells kinds apart (``data_form``).
ON_DEVICE = "on the device"
IN_MEMORY = "arrays in memory"
DATASET_ROWS = "gpu_dataset() of rows in memory"
IMAGE_FOLDER = "gpu_dataset() of an image folder"
FILES = "gpu_dataset() of files"
USER_DATASET = "tf.data dataset"
OTHER = "other data"
# A fit that trained for less than this many seconds gets its input verdict as a note.
SHORT_FIT_SECONDS = 5.0


@dataclass
class TrainingContext:
    """Facts about the run that advice depends on (all plain values).

    Attributes:
        backend: Keras backend.
        gpus: names of the GPUs in use (empty on the CPU).
        compute_capability: of the first GPU in use, e.g. "9.0".
        memory_total_mib: of the first GPU in use.
        dtype_policy: Keras' dtype policy name of the model.
        jit_compile: XLA compilation in force.
        layers_without_jit: the model's layers Keras cannot compile with XLA,
            as 'name (Class)'; any one of them turns XLA off for the whole model.
        steps_per_execution: in force.
        batch_size: rows per batch, where known.
        nvml_reason: why GPUs were not sampled (None when they were).
        pipeline_steps: the tf.data transformations of the training dataset,
            outermost first ('Prefetch', 'ParallelMap', 'Cache', ...); None
            when not known (data that is not a tf.data dataset).
        gpu_dataset: for a dataset gpu_dataset() made, its source ('arrays' or
            a kind of files), whether it caches and whether it runs a user map;
            None for other data.
        data: the kind of data gpu_fit() was given (``DataAdapter.kind``:
            'arrays' and 'keras arrays' for data in memory, 'device arrays',
            'dataset', 'other'); None when not known.
        images: the model takes images (an input of rank 4 or more, batch
            included), so advice on decoding them applies.
        seconds: how long the fit trained (wall clock, compiling included); None
            when not known.
        tuned: what gpu_tune() chose for this fit (gpu_fit(tuned = )): precision,
            batch_size (None where the data makes its own batches), steps_per_execution,
            jit_compile; None for a fit without. Advice leaves those settings alone
            (``tuned_notes`` says so).
        simulated: for a run on no GPU under ``GPUKERAS_SIMULATE_GPU``, the simulated GPU's
            label (``gpus`` and the GPU's facts are then its own): the advice decides as on
            that GPU and a note says so; None otherwise.
    """

    backend: str
    gpus: list[str] = field(default_factory=list)
    compute_capability: str | None = None
    memory_total_mib: float | None = None
    dtype_policy: str = "float32"
    jit_compile: bool = False
    layers_without_jit: list[str] = field(default_factory=list)
    steps_per_execution: int = 1
    batch_size: int | None = None
    nvml_reason: str | None = None
    pipeline_steps: list[str] | None = None
    gpu_dataset: Record | None = None
    data: str | None = None
    images: bool = False
    seconds: float | None = None
    tuned: Record | None = None
    simulated: str | None = None


def _percent(share: float) -> str:
    return f"{100 * share:.0f} %"


def _tuned(context: TrainingContext, setting: str) -> bool:
    """Whether gpu_tune() chose ``setting`` for this fit: it measured its value the fastest
    sound one, so advice to change it would contradict the tune."""
    return context.tuned is not None and context.tuned.get(setting) is not None


def data_form(context: TrainingContext) -> str:
    """What the training data is, as the advice tells kinds apart: ``ON_DEVICE``,
    ``IN_MEMORY`` (arrays handed to gpu_fit(): R data or NumPy), ``DATASET_ROWS`` (a
    gpu_dataset() of rows in memory), ``IMAGE_FOLDER``, ``FILES`` (a gpu_dataset() of
    other files), ``USER_DATASET`` (a tf.data dataset gpu_dataset() did not make) or
    ``OTHER`` (a generator, a PyDataset)."""
    made = context.gpu_dataset or {}
    if context.data == "device arrays" or made.get("on_device"):
        return ON_DEVICE
    if context.data in IN_MEMORY_DATA:
        return IN_MEMORY
    if made:
        source = made.get("source")
        return (
            DATASET_ROWS
            if source == "arrays"
            else IMAGE_FOLDER
            if source == "image_folder"
            else FILES
        )
    return USER_DATASET if context.data in (None, "dataset") else OTHER


def _in_memory_advice(context: TrainingContext) -> list[str]:
    """What shortens the wait for rows already in memory: nothing is read or decoded, so
    what is left is the host's work per batch, which fewer, larger batches (and
    fewer calls) cut, and on JAX the path that puts the rows on the device."""
    wait = (
        "The data is in memory, so nothing is read or decoded: the wait is the host's work "
        "per batch (taking its rows and copying them)."
    )
    if not _tuned(context, "batch_size"):
        wait += " Raise batch_size: fewer, larger batches cost less per row."
    items = [wait]
    if context.steps_per_execution < MANY_STEPS_PER_EXECUTION and not _tuned(
        context, "steps_per_execution"
    ):
        items.append("Raise steps_per_execution (e.g. 8-32) to run several batches per call.")
    if context.backend == "jax":
        items.append(
            "On JAX, rows that fit in half the device's free memory train on the device and "
            "wait for nothing: the Data line says why these streamed from host memory."
        )
    return items


def _gpu_dataset_advice(made: Record, form: str, context: TrainingContext) -> list[str]:
    """What to change in a gpu_dataset() pipeline that keeps training waiting.

    It already gathers batches in parallel and prefetches, so what is left is
    the source's own work: decoding files not cached (smaller images, for an
    image folder), or the user's map; for rows in memory without a map, what
    ``_in_memory_advice`` says.
    """
    items = []
    if form != DATASET_ROWS and made.get("cache") is False:
        # cache = TRUE asked and not applied: advise what would work, never what it has
        declined = made.get("cache_declined")
        items.append(
            f"Cache the decoded files in a file on a local disk ({declined}), so later "
            "epochs skip reading and decoding them."
            if declined
            else "Cache the decoded files: gpu_dataset(cache = TRUE), or a cache file for "
            "data larger than memory, so later epochs skip reading and decoding them."
        )
    if made.get("user_map"):
        items.append(
            "Make the map function cheaper: it runs for every batch of every epoch; move "
            "augmentation into the model (it then runs on the GPU) or precompute what does "
            "not change between epochs."
        )
    if form == IMAGE_FOLDER:
        items.append(
            "Decode smaller images where the model allows: gpu_dataset(image_size = ) resizes "
            "them as they are read."
        )
    if items:
        return items
    if form == DATASET_ROWS:
        return [
            "gpu_dataset() already gathers batches in parallel and prefetches them.",
            *_in_memory_advice(context),
        ]
    return [
        "gpu_dataset() already reads the files in parallel and prefetches: the host is too "
        "slow or too busy to feed the model. Give it more cores, or fewer other jobs."
    ]


def _pipeline_advice(context: TrainingContext) -> list[str]:
    """What to change in an input that keeps training waiting, by what the data is
    (``data_form``): rows in memory (``_in_memory_advice``), a gpu_dataset() on its own
    options (``_gpu_dataset_advice``), another tf.data dataset on the steps it lacks (all
    of them when its steps are not known, each in gpu_dataset()'s and tfdatasets'
    words), a generator on being one."""
    form = data_form(context)
    if form == ON_DEVICE:
        return []
    if form == IN_MEMORY:
        return _in_memory_advice(context)
    if context.gpu_dataset is not None:
        return _gpu_dataset_advice(context.gpu_dataset, form, context)
    if form == OTHER:
        return [
            "Keras reads this data one batch at a time from Python: make it a gpu_dataset() "
            "(from arrays or files), whose batches are prepared in parallel and prefetched."
        ]
    steps = context.pipeline_steps
    has = set(steps or [])
    items = []
    if steps is None or "Cache" not in has:
        items.append(
            "Cache the data after decoding and any expensive map (gpu_dataset(cache = TRUE); "
            "dataset_cache() with tfdatasets; a cache file for data larger than memory), "
            "so later epochs skip that work."
        )
    if steps is None or "Map" in has:
        items.append(
            "Run per-element maps in parallel (num_parallel_calls = AUTOTUNE, as gpu_dataset() "
            "does; dataset_map(num_parallel_calls = tf$data$AUTOTUNE) with tfdatasets) and "
            "batch before light per-batch maps."
        )
    if steps is None or "Prefetch" not in has:
        items.append(
            "Prefetch batches (gpu_dataset(prefetch = 'auto'); dataset_prefetch() with "
            "tfdatasets) so the next batch is ready while the current step computes."
        )
    if not items:
        less = (
            "decode smaller images, move augmentation into the model, where it runs on the GPU"
            if context.images
            else "precompute what does not change between epochs"
        )
        items.append(
            "The pipeline already caches, maps in parallel and prefetches, so the work per "
            f"batch is the limit: do less of it on the host ({less}) or give it more cores."
        )
    return items


def advice(report: Record, context: TrainingContext) -> list[str]:
    """Concrete advice, each item chosen by a number in the report (see the rules below).

    Rules: an input-bound verdict gives advice on the input that fits what the
    data is (``_pipeline_advice``; and more CPU when the host is saturated), except on
    a short or CPU run, where it is a note (``notes``); a GPU that idles while
    the input keeps up gives step-overhead advice (steps_per_execution, batch
    size); a busy GPU in float32 with Tensor Cores gives mixed-precision
    advice; no GPU says so.
    """
    items: list[str] = []
    verdict = report.get("input_verdict")
    # A short or CPU run's input verdict is a note (``notes``), not advice to act on.
    noted = input_as_note(context)
    step_ms = report.get("batch_time_mean_ms") or report.get("step_time_mean_ms")
    host_cpu = report.get("host_cpu_percent_mean")
    utilization = report.get("gpu_utilization_mean")
    if verdict == "highly input-bound" and not noted:
        items.append(
            _input_finding(report, "highly") + ": speed up the input pipeline before anything else."
        )
        items += _pipeline_advice(context)
    elif verdict == "moderately input-bound" and not noted:
        items.append(
            _input_finding(report, "moderately") + ": " + " ".join(_pipeline_advice(context))
        )
    input_bound = verdict in ("highly input-bound", "moderately input-bound")
    # Without a GPU (noted) the model computes on the host too: a busy host says nothing of
    # the input.
    if input_bound and not noted and (host_cpu or 0) >= 85:
        items.append(_busy_host_advice(host_cpu, context))  # type: ignore[arg-type]
    input_ok = verdict in (None, "not input-bound")
    if context.layers_without_jit and not context.jit_compile:
        items.append(_layers_without_jit_advice(context))
    if not context.gpus:
        items.append(
            "No GPU was used: training ran on the CPU. gpu_check() tells why no GPU is visible."
        )
        few_per_call = context.steps_per_execution < MANY_STEPS_PER_EXECUTION and not _tuned(
            context, "steps_per_execution"
        )
        if input_ok and step_ms is not None and step_ms < 5 and few_per_call:
            items.append(
                f"Steps are short ({step_ms:.1f} ms): steps_per_execution = 8 or more runs "
                "several batches per call and cuts Keras' per-step overhead."
            )
        return items
    if utilization is None:
        return items
    if input_ok and utilization < 60:
        few_per_call = context.steps_per_execution < MANY_STEPS_PER_EXECUTION and not _tuned(
            context, "steps_per_execution"
        )
        larger = "" if _tuned(context, "batch_size") else ", or raise the batch size"
        if step_ms is not None and step_ms < 10 and few_per_call:
            items.append(
                f"The GPU is busy only {utilization:.0f} % of the time with short steps "
                f"({step_ms:.1f} ms): raise steps_per_execution (e.g. 8-32) to run several "
                f"batches per call{larger}."
            )
        elif not _tuned(context, "batch_size"):
            items.append(
                f"The GPU is busy only {utilization:.0f} % of the time although the input "
                "keeps up: raise the batch size so each step gives the GPU more work."
            )
    items += _imbalance_advice(report)
    memory = report.get("gpu_memory_used_max_mib")
    if (
        input_ok
        and not _tuned(context, "batch_size")
        and utilization < 90
        and memory is not None
        and context.memory_total_mib
        and memory < 0.5 * context.memory_total_mib
    ):
        items.append(
            f"Only {memory:.0f} of {context.memory_total_mib:.0f} MiB of GPU memory is used: "
            "there is room for a larger batch size (scale the learning rate with it)."
        )
    capability = _capability(context.compute_capability)
    if (
        context.dtype_policy == "float32"
        and capability is not None
        and capability >= 7.0
        and not _tuned(context, "precision")
    ):
        items.append(
            f"The model computes in float32 on a GPU with Tensor Cores (compute capability "
            f"{context.compute_capability}): mixed precision "
            f"(gpu_setup(mixed_precision = '{'bfloat16' if capability >= 8.0 else 'float16'}')) "
            "usually trains faster and halves activation memory."
        )
    if (
        not context.jit_compile
        and not context.layers_without_jit
        and input_ok
        and not _tuned(context, "jit_compile")
    ):
        items.append(
            "XLA compilation is off: jit_compile = TRUE fuses small ops into fewer GPU kernels."
        )
    if not items and input_ok and utilization >= 90:
        items.append(
            f"The GPU is busy {utilization:.0f} % of the time and the input keeps up: "
            "further speed has to come from the model itself."
        )
    return items


def input_as_note(context: TrainingContext) -> bool:
    """Whether the run's input verdict is a note rather than advice: no GPU was used, or
    the fit trained for less than ``SHORT_FIT_SECONDS``."""
    short = context.seconds is not None and context.seconds < SHORT_FIT_SECONDS
    return short or not context.gpus


def notes(report: Record, context: TrainingContext) -> list[str]:
    """Findings to know but not to act on: an input-bound verdict that ``input_as_note``
    keeps out of the advice, with the reason, and what to do to get one that counts."""
    simulated = (
        [f"Advice for a {context.simulated}; the figures are the CPU's."]
        if context.simulated
        else []
    )
    verdict = report.get("input_verdict")
    if verdict not in ("highly input-bound", "moderately input-bound"):
        return simulated
    if not input_as_note(context):
        return simulated
    degree = verdict.split()[0]
    finding = _input_finding(report, degree)
    if not context.gpus:
        return [
            *simulated,
            f"{finding} on the CPU: the host both prepares the batches and runs the model, "
            "so this wait is CPU time shared between them, not a GPU left idle. Not advice "
            "to change the batch size or the pipeline; judge the input on a GPU run.",
        ]
    return [
        *simulated,
        f"{finding}, but training took only {context.seconds:.1f} s, in which compiling, "
        "the first batches and Keras' teardown weigh heavily. Not advice to change the "
        "batch size or the pipeline; judge the input on a longer fit (more epochs).",
    ]


def tuned_notes(report: Record, context: TrainingContext) -> list[str]:
    """What ``advice`` held back because gpu_tune() chose the settings it is about (a fit
    with ``settings = ``): said once, with the settings, where it held anything back."""
    if not context.tuned:
        return []
    given = advice(report, context)
    held = [item for item in advice(report, replace(context, tuned=None)) if item not in given]
    if not held:
        return []
    chosen = ", ".join(
        f"{name} = {_r_value(context.tuned[name])}"
        for name in ("batch_size", "steps_per_execution", "jit_compile", "precision")
        if context.tuned.get(name) is not None
    )
    return [
        f"No advice to change {chosen}: gpu_tune() chose them, the fastest numerically sound "
        "settings it measured. To look further, give gpu_tune() other candidates "
        "(batch_sizes, steps_per_execution, max_batch)."
    ]


def _r_value(value: object) -> str:
    """A setting as R writes it (TRUE, 16, "float32")."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    return f'"{value}"' if isinstance(value, str) else str(value)


def _busy_host_advice(host_cpu: float, context: TrainingContext) -> str:
    """A saturated host while a GPU waits for input: what to change, by what the data is."""
    busy = f"The host CPU is {host_cpu:.0f} % busy"
    form = data_form(context)
    if (context.gpu_dataset or {}).get("user_map"):
        return (
            f"{busy}: the map function takes it; make it cheaper (augmentation in the "
            "model runs on the GPU), run fewer other jobs, or use more cores."
        )
    if form in (IN_MEMORY, DATASET_ROWS):
        return (
            f"{busy}: it cannot prepare batches of data in memory fast enough; run fewer "
            "other jobs, "
            + (
                "or use more cores."
                if _tuned(context, "batch_size")
                else "use more cores, or raise batch_size."
            )
        )
    smaller = ", decode smaller images" if form == IMAGE_FOLDER or context.images else ""
    return (
        f"{busy}: the input pipeline is CPU-bound; cache after decoding{smaller}, or use "
        "more cores."
    )


def _input_finding(report: Record, degree: str) -> str:
    """The input finding an input-bound verdict rests on, as it was measured: the wait
    timed, or the share of a step the pipeline needs when timed alone."""
    share = report.get("input_wait_share")
    if share is not None:
        margin = report.get("input_wait_margin")
        within = f" (+/- {100 * margin:.0f} points)" if margin else ""
        return (
            f"Training waits for input {_percent(share)}{within} of the step time "
            f"({degree} input-bound)"
        )
    alone = report.get("input_share_alone") or 0.0
    return (
        f"The input pipeline alone needs {_percent(alone)} of a training step's time per "
        f"batch ({degree} input-bound, estimated: prefetching hides it only where the host "
        "has cores to spare)"
    )


def _layers_without_jit_advice(context: TrainingContext) -> str:
    # Keras turns XLA off for the whole model and refuses jit_compile = TRUE; on JAX the
    # train step then runs op by op (measured: 4.5x slower per epoch on a CPU).
    cost = (
        ": on JAX every op of the train step then runs on its own, several times slower"
        if context.backend == "jax"
        else ""
    )
    return (
        f"XLA compilation is off because Keras cannot compile "
        f"{', '.join(context.layers_without_jit)}{cost}. For augmentation, leave the layer "
        "out of the model and augment in the input pipeline instead, e.g. "
        "gpu_dataset(augment = list(rotation = list(factor = 0.1)))."
    )


def _imbalance_advice(report: Record) -> list[str]:
    """Advice when the GPUs of one run are unevenly busy (``UNEVEN_POINTS`` or more apart).

    Replicas synchronise at every step, so the others wait for the busiest:
    another process on it, or a replica given more rows, slows all of them.
    """
    spread = report.get("gpu_utilization_imbalance")
    if spread is None or spread < UNEVEN_POINTS:
        return []
    rows = [row for row in report.get("gpus") or [] if row["utilization_mean"] is not None]
    each = ", ".join(f"{row['device']} {row['utilization_mean']:.0f} %" for row in rows)
    return [
        f"The GPUs are unevenly busy ({each}; {spread:.0f} points apart): every step waits "
        "for the slowest replica. Check that no other process uses the busier GPU "
        "(gpu_check(), nvidia-smi), and give every replica the same rows (a global batch "
        "size that is a multiple of the number of GPUs)."
    ]


def _capability(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None
