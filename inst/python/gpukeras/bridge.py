"""The one door R comes through: a verb by name, plain data back, or a classed error as data.

R names what it wants done by a verb (``call("fit", ...)``); ``VERBS`` says which
core function does it. So R never names a module, and moving a module changes
no R code. The function's module is imported when the verb is first called: R
asking for gpu_check() imports nothing of training.

Returning errors as data (rather than raising through reticulate) keeps the R
side independent of how each reticulate version wraps Python exceptions, and
lets R raise a condition with the right class and no Python traceback.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import traceback
import warnings
from collections.abc import Callable
from typing import Any

from gpukeras.core.errors import DataFieldsError, GpukerasError, OutOfMemoryError
from gpukeras.core.handles import HANDOVER
from gpukeras.core.masking import mask_text
from gpukeras.core.messages import framework_warning

# Each verb R calls, and the function under ``gpukeras`` that does it ("module:function").
VERBS: dict[str, str] = {
    # the runtime, masking, schedules
    "start": "core.runtime:start",
    "keras_api": "core.keras_api:keras_api",
    "remove_autograph_files": "core.runtime:remove_autograph_files",
    "mask_uri": "core.masking:mask_uri",
    "end_with_parent": "core.lifetime:end_with_parent",
    "compile_cache_choose": "core.compile_cache:choose",
    "compile_cache": "core.compile_cache:describe",
    "compile_cache_clear": "core.compile_cache:clear",
    "schedule_values": "core.schedules:values",
    "schedule_line": "core.schedules:line",
    # devices and the GPU
    "devices": "gpu.devices:list_devices",
    "setup": "gpu.setup:apply_setup",
    "device_scope": "gpu.scope:device_scope",
    "output_precision_warning": "gpu.precision:output_precision_warning",
    "precision_check": "gpu.precision:precision_check",
    # data
    "data_encoding": "data.recording:record",
    "same_encoding": "data.encoding:same_encoding",
    "check_same_encoding": "data.encoding:check_same_encoding",
    "encoding_lines": "data.encoding_words:encoding_lines",
    "check_widths": "serve.scoring:check_widths",
    "class_weight_codes": "data.weights:class_weight_codes",
    "class_codes": "data.class_rule:r_class_codes",
    "handover": "data.array_source:handover",
    "check_rows": "data.bad_rows:check_rows",
    "as_numpy": "data.bad_rows:as_numpy",
    "dataset_from_arrays": "data.pipeline:from_arrays",
    "dataset_from_source": "data.pipeline:from_source",
    "images_to_score": "data.image_source:images_to_score",
    "dataset_benchmark": "data.pipeline_facts:benchmark",
    "dataset_lines": "data.pipeline_facts:dataset_lines",
    "dataset_benchmark_line": "data.pipeline_facts:benchmark_line",
    "describe_dataset": "data.adapters:describe_dataset",
    # several devices and machines
    "strategy": "distribute.strategies:make",
    "describe_strategy": "distribute.strategies:plan_of",
    "strategy_scope": "distribute.strategies:strategy_scope",
    "leave_cluster": "distribute.jax_cluster:leave",
    # training, and training in a child process
    "fit": "tools.training:fit",
    "fit_lines": "train.fit_report:fit_lines",
    "text_classifier": "train.pretrained:text_classifier",
    "text_dataset": "train.pretrained:text_dataset",
    "causal_lm": "train.pretrained:causal_lm",
    "generate": "train.pretrained:generate",
    "image_backbone": "train.backbone:image_backbone",
    "backbone_unfreeze": "train.backbone:unfreeze",
    "job_carry": "train.job:carry",
    "job_load_carried": "train.job:load_carried",
    "job_progress_callback": "train.job:progress_callback",
    "job_save_trained": "train.job:save_trained",
    "job_load_trained": "train.job:load_trained",
    "job_save_arrays": "train.job:save_arrays",
    "job_load_array": "train.job:load_array",
    "job_progress": "train.job_report:progress",
    "job_sample_line": "train.job_report:sample_line",
    "job_status_lines": "train.job_report:status_lines",
    "job_epoch_lines": "train.job_report:epoch_lines",
    "job_exit_cause": "train.job_report:exit_cause",
    "job_disk_full": "train.job:disk_full",
    "job_failure": "train.job_report:failure",
    "job_write_cause": "train.job_report:write_cause",
    "job_attempt_ended": "train.job_report:attempt_ended",
    "job_resume_call": "train.job_report:resume_call",
    "job_cancelled": "train.job_report:cancelled",
    "job_timed_out": "train.job_report:timed_out",
    "search_job_status_lines": "train.job_report:search_status_lines",
    # tools
    "check": "tools.check:run_check",
    "check_text": "tools.check:check_text",
    "report_markdown": "tools.report:report_markdown",
    "scaling": "tools.scaling:scaling",
    "batch_size": "tools.batch_size:search",
    "memory_plan": "tools.precision_plan:memory_plan_by_precision",
    "tune": "tools.tune:tune",
    "tune_lines": "tools.result_lines:tune_lines",
    "tune_apply": "train.fit_request:apply_tuned",
    "batch_size_lines": "tools.result_lines:batch_size_lines",
    "lr_find": "tools.lr_find:find",
    "lr_find_lines": "tools.result_lines:lr_find_lines",
    "profile": "tools.profile:profile",
    "profile_lines": "tools.result_lines:profile_lines",
    "quantize": "tools.quantize:quantize",
    "audit": "tools.audit:audit",
    "audit_lines": "tools.result_lines:audit_lines",
    "model_io": "serve.model_io:describe",
    "predict": "serve.scoring:predict",
    "predict_file": "serve.predict_file:predict_file",
    "predictions_file_lines": "serve.predict_file:written_lines",
    "evaluate": "serve.scoring:evaluate",
    "score": "serve.scoring:score",
    "save_model": "serve.scoring:save_model",
    "load_model": "serve.scoring:load_model",
    "export": "serve.export:export",
    "serve_command": "serve.server:command",
    "serve_service": "serve.service:service",
    "serve_answer": "serve.service:answer",
    "serve_predict_spec": "serve.service_spec:predict_spec_json",
    # many fits: the workers' devices, the search's study
    "keras_backend": "core.backend:configured_backend",
    "workers_plan": "tools.workers:plan",
    "workers_ahead": "tools.workers:ahead",
    "workers_grow": "tools.workers:grow",
    "workers_warm": "tools.workers:warm",
    "workers_seed": "tools.workers:seed",
    "workers_reset": "tools.workers:reset",
    "cv_population_plan": "tools.cv_population:plan",
    "cv_population": "tools.cv_population:train",
    "search_open": "search.search:open_study",
    "search_param_line": "search.search_request:spec_line",
    "search_tell": "search.search:tell",
    "search_interrupt": "search.search:interrupt",
    "search_release": "search.search:release",
    "search_trials": "search.search:trials",
    "search_lines": "search.search_report:search_lines",
    "search_progress": "search.search:progress",
    "search_seed": "search.search_sampler:trial_seed",
    "search_warm": "search.study_storage:warm",
    "search_unwarm": "search.study_storage:unwarm",
    "search_folder": "search.study_storage:study_folder",
    "search_pruning_callback": "search.search_trial:pruning_callback",
    "search_pruning_outcome": "search.search_trial:pruning_outcome",
    "search_population_plan": "tools.cv_population:plan",
    "folds": "tools.folds:split",
    "cv_result": "tools.folds:result",
    "search_population_ask": "search.search_population:ask",
    "search_population": "search.search_population:train",
    "search_population_tell": "search.search_population:tell",
    "search_tell_task": "search.search_population:tell_task",
    "search_groups": "search.search_population:open_groups",
    "search_next": "search.search_population:next_task",
    "search_groups_state": "search.search_population:state",
    # tracking in MLflow
    "track_check": "track.tracked_runs:check",
    "track_open_folder": "track.tracking:open_folder",
    "track_open_run": "track.tracked_runs:open_run",
    "track_record": "track.tracked_runs:record",
    "track_new_key": "track.tracked_runs:new_key",
    "track_artifact": "track.tracked_runs:record_artifact",
    "track_sync": "track.tracked_runs:sync",
    "track_flush": "track.tracked_runs:flush",
    "track_runs": "track.tracking_read:runs",
    "track_compare": "track.tracking_read:compare",
    "track_download_model": "track.tracking_read:download_model",
    "preload": "bridge:preload",
    "preload_keras": "core.runtime:preload_keras",
}


# The verbs a worker of gpu_cv()'s and gpu_search()'s pool calls for its task: gpu_setup(),
# gpu_fit() and its memory plan, a search's pruning callback, gpu_save(), gpu_cv()'s and
# gpu_search()'s populations. The pool knows none of them: a client whose task calls
# another verb adds it here, and every worker imports its module before the task (preload()).
WORKER_VERBS: tuple[str, ...] = (
    "setup",
    "start",
    "fit",
    "memory_plan",
    "search_pruning_callback",
    "save_model",
    "cv_population",
    "search_population",
)


def preload(verbs: list[str] | None = None) -> None:
    """Import the modules of ``verbs`` (names in ``VERBS``; by default ``WORKER_VERBS``)
    without calling them.

    A worker does it in its first call, ahead of its task, so that the task imports
    nothing: gpu_fit()'s modules took 0.43 s of every trial's start. Nothing
    runs but imports: no runtime, thread or device. A module that cannot be imported is
    left to the verb's own call, which reports why."""
    for verb in WORKER_VERBS if verbs is None else verbs:
        with contextlib.suppress(Exception):
            function_at(VERBS[verb])


# NumPy's number for its first user-defined dtype: ml_dtypes' (bfloat16, float8_*, int4)
# are numbered from here. reticulate converts none of them, nor float16 ("Conversion from
# numpy array type 256 is not supported"; its development branch has no bfloat16 path).
_NPY_USERDEF = 256
_NPY_HALF = 23


def r_safe_array(value: Any) -> Any:
    """A NumPy array as reticulate can hand it to R: float16, bfloat16 and every other
    floating type NumPy does not know become float32, ml_dtypes' small integers int32;
    anything else as it is (no copy)."""
    dtype = getattr(value, "dtype", None)
    number, name = getattr(dtype, "num", None), str(getattr(dtype, "name", ""))
    if number is None or not hasattr(value, "astype"):
        return value
    if number == _NPY_HALF or (number >= _NPY_USERDEF and "float" in name):
        return value.astype("float32")
    if number >= _NPY_USERDEF and "int" in name:
        return value.astype("int32")
    return value


# R's integers hold -2^31 + 1 to 2^31 - 1, and -2^31 is its NA_integer_ (which the core sends
# for a missing integer); reticulate (seen in 1.28 and 1.41) hands R a Python int beyond them
# as an integer wrapped around 2^32, silently (a peak of 12,968,068,352 bytes arrived as
# 83,166,464), so such an int crosses as a double, exact up to 2^53.
R_INTEGER_MAX = 2**31 - 1


def plain(value: object) -> object:
    """Dataclasses to dicts, tuples to lists, NumPy scalars to Python numbers, integers
    beyond R's (``R_INTEGER_MAX``) to floats, arrays R cannot take in low precision to
    float32 (``r_safe_array``): every value R gets crosses here."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if hasattr(value, "item") and getattr(value, "shape", None) == ():
        value = value.item()
    if isinstance(value, int) and not -R_INTEGER_MAX - 1 <= value <= R_INTEGER_MAX:
        return float(value)
    return r_safe_array(value)


def function_at(path: str) -> Callable[..., object]:
    """The function a path names: "module:function", the module under ``gpukeras``."""
    module_name, function_name = path.split(":")
    function: Callable[..., object] = getattr(
        importlib.import_module(f"gpukeras.{module_name}"), function_name
    )
    return function


# The verbs that take a data.frame's one-hot factors as their codes (``array_source.received``
# with ``codes``): their indicator columns are made where the rows are trained.
CODED_VERBS = ("fit",)


def _received(kwargs: dict[str, object], codes: bool = False) -> dict[str, object]:
    """``kwargs`` with R data sent to be handed over as arrays (``array_source.received``;
    ``codes``: a data.frame's one-hot factors kept as codes); that module, and NumPy, are
    imported only then: the bridge itself starts without them, so a missing stack is a
    classed error."""
    if not any(isinstance(value, dict) and HANDOVER in value for value in kwargs.values()):
        return kwargs
    received = function_at("data.array_source:received")
    return {name: received(value, codes) for name, value in kwargs.items()}


def answer(
    function: Callable[..., object],
    kwargs: dict[str, object] | None = None,
    codes: bool = False,
    python: bool = False,
) -> dict:
    """Call ``function`` with ``kwargs`` and return its value as plain data, or its error as data.

    R data sent to be handed over (``array_source.received``) becomes arrays first, in
    this same call (``codes``: a data.frame's one-hot factors as codes, ``CODED_VERBS``).
    With ``python``, the value is left as it is, for R to keep in Python (R's
    core_call_python()): not made plain data, a float16 array not made float32.

    Returns:
        ``{"ok": True, "value": ...}`` on success; otherwise ``{"ok": False,
        "r_class", "message", "traceback"}``, the traceback only for errors that
        are not the user's (a bug, or a failure inside the stack). Either way
        ``"warnings"``, when Python warned during the call: each
        ``{"class", "message"}`` (``messages.framework_warning``), for R to raise.
        Every message and traceback is masked of credentials (``masking.mask_text``).
    """
    with warnings.catch_warnings(record=True) as caught:
        answer = _answer(function, kwargs, codes, python)
    if caught:  # the user's filters decided which were recorded
        answer["warnings"] = [
            framework_warning(w.category.__name__, mask_text(str(w.message)), w.filename)
            for w in caught
        ]
    return answer


def _answer(
    function: Callable[..., object], kwargs: dict[str, object] | None, codes: bool, python: bool
) -> dict:
    try:
        value = function(**_received(kwargs or {}, codes))
        return {"ok": True, "value": value if python else plain(value)}
    except GpukerasError as error:
        message = mask_text(str(error))
        answer = {"ok": False, "r_class": error.r_class, "message": message, "traceback": None}
        if isinstance(error, DataFieldsError):
            fields = {"r_classes": error.r_classes, "fields": error.fields}
            return {**answer, "details": error.details, **fields}
        return {**answer, **_memory_plan_of(error)}
    except Exception as error:  # anything else is reported, never allowed to crash R
        return {
            "ok": False,
            "r_class": "gpukeras_error_python",
            "message": mask_text(f"{type(error).__name__}: {error}"),
            "traceback": mask_text(traceback.format_exc()),
        }


def _memory_plan_of(error: GpukerasError) -> dict[str, object]:
    """For an out-of-memory error with a model: ``details`` (what took the memory, the changes
    that would fit) and the ``plan`` itself (``memory_plan.explain_out_of_memory``), which R
    attaches to the condition; nothing where there is no plan to make."""
    model, size = getattr(error, "model", None), getattr(error, "batch_size", None)
    if not isinstance(error, OutOfMemoryError) or model is None or not size:
        return {}
    try:
        explained: Any = function_at("tools.memory_plan:explain_out_of_memory")(model, size)
    except Exception:  # no plan (a model not built, a layer it cannot size): the error alone
        return {}
    return {"details": explained[0], "plan": plain(explained[1])}


# What a failure that is not the user's (``gpukeras_error_python``: a bug) asks of them.
REPORT_IT = "This is not something you did wrong: please report it with the output of gpu_check()."


def call(verb: str, kwargs: dict[str, object] | None = None, python: bool = False) -> dict:
    """Do ``verb`` (one of ``VERBS``) with ``kwargs``: ``answer`` of its function (its value
    left in Python with ``python``). A failure that is not the user's says in which verb it
    happened, and ``REPORT_IT``."""
    answered = _call(verb, kwargs, python)
    if answered.get("r_class") == "gpukeras_error_python":
        answered["message"] = f"The Python core failed in {verb}: {answered['message']}"
        answered["details"] = [*answered.get("details", []), REPORT_IT]
    return answered


def _call(verb: str, kwargs: dict[str, object] | None, python: bool) -> dict:
    """``answer`` of the function ``verb`` names, or the error of a verb there is not."""
    path = VERBS.get(verb)
    if path is None:
        return {
            "ok": False,
            "r_class": "gpukeras_error_python",
            "message": f"gpukeras' core has no verb {verb!r}.",
            "traceback": None,
        }
    try:
        function = function_at(path)
    except Exception:  # a verb whose module cannot be imported is a bug, reported as one
        return {
            "ok": False,
            "r_class": "gpukeras_error_python",
            "message": f"the core cannot load {verb!r} ({path})",
            "traceback": traceback.format_exc(),
        }
    return answer(function, kwargs, verb in CODED_VERBS, python)
