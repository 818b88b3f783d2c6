"""setup: gpu_setup()'s settings, each read back from TensorFlow or JAX afterwards.

Settings only apply before the runtime starts, so each child here is a fresh
Python (``run_setup``) whose ``after`` code asks the backend what is in force:
tf.config's threads and devices, JAX's devices and XLA variables, a built
model's compute dtypes and its compiled optimizer. One child serves several
tests (module-scoped fixtures), since a fresh TensorFlow costs seconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import CoreRun, first_gpu, requires, run_core, run_setup
from gpukeras.core import compat
from gpukeras.gpu import xla_env
from nvml_double import fake_mig

BACKENDS = ["tensorflow", "jax"]
NAMES = {"tensorflow": "TensorFlow", "jax": "JAX"}
JAX_THREADS_NOTE = "threads: JAX has no per-process op-thread settings; not applied"
NO_GPU_LIMIT_NOTE = "memory_limit: no GPU in use, so there is nothing to cap"


def _backend(run: CoreRun) -> str:
    return str(run.environ["KERAS_BACKEND"])


def _tensorflow_only(run: CoreRun) -> None:
    if _backend(run) != "tensorflow":
        pytest.skip(f"{_backend(run)} has no such setting")


@pytest.fixture(scope="module", params=BACKENDS)
def defaults(request: pytest.FixtureRequest) -> CoreRun:
    """gpu_setup() with its defaults, XLA_PYTHON_CLIENT_PREALLOCATE unset beforehand (and
    the variables that turn determinism on)."""
    return run_setup(
        request.param,
        {},
        "readback['backend'] = backend_report()\nreadback['model'] = model_facts()",
        env={
            "XLA_PYTHON_CLIENT_PREALLOCATE": None,
            "XLA_FLAGS": None,
            "TF_DETERMINISTIC_OPS": None,
        },
    )


CONFIGURED = {
    "memory_growth": False,
    "devices": ["cpu:1"],
    "mixed_precision": "float16",
    "intra_op_threads": 1,
    "inter_op_threads": 2,
    "jit_compile": False,
    "cpu_devices": 2,
}


@pytest.fixture(scope="module", params=BACKENDS)
def configured(request: pytest.FixtureRequest) -> CoreRun:
    """Every setting changed from its default, then read back; the same request again."""
    return run_setup(
        request.param,
        CONFIGURED,
        f"""
readback["backend"] = backend_report()
readback["model"] = model_facts()
readback["weights"] = {{name: weights_device(name) for name in ("CPU:0", "CPU:1", "cpu:1")}}
readback["again"] = bridge.call("setup", {CONFIGURED!r})
check = bridge.call("check", {{"probe_training": False, "matmul_size": 32}})
readback["check_setup"] = check["value"]["setup"]
""",
    )


def test_defaults_match_what_the_backend_reports(defaults: CoreRun) -> None:
    settings, backend = defaults.value, defaults.readback["backend"]
    assert settings["backend"] == _backend(defaults)
    assert settings["cpu_devices"] == len(backend["cpus"]) == 1
    assert settings["devices"] is None
    assert settings["jit_compile"] == "auto"
    assert settings["memory_limit_mib"] == []
    assert settings["memory_growth"] is (True if settings["gpus"] else None)
    assert settings["deterministic"] is False  # asked for nothing: the frameworks' default
    assert settings["seed"] is None
    if settings["backend"] == "jax":
        # memory growth on JAX is preallocation off, set before JAX started
        assert backend["environ"]["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
        assert backend["environ"]["XLA_PYTHON_CLIENT_MEM_FRACTION"] is None
        assert backend["environ"]["XLA_CLIENT_MEM_FRACTION"] is None
        assert settings["intra_op_threads"] is None
    else:
        assert backend["memory_growth"] == [True] * backend["gpus"]
        assert settings["intra_op_threads"] == backend["intra_op_threads"] == 0
        assert settings["inter_op_threads"] == backend["inter_op_threads"] == 0
    model = defaults.readback["model"]
    assert settings["dtype_policy"] == model["policy"]
    assert settings["loss_scaling"] is (model["optimizer"] == "LossScaleOptimizer")


def test_auto_precision_on_the_cpu_is_float32(defaults: CoreRun, no_gpu: None) -> None:
    settings, model = defaults.value, defaults.readback["model"]
    assert settings["gpus"] == []
    assert settings["dtype_policy"] == "float32"
    assert settings["precision_reason"] == "no GPU: mixed precision does not speed up the CPU"
    assert settings["precision_suits_device"] is True
    assert settings["loss_scaling"] is False
    assert model["compute_dtypes"] == ["float32", "float32"]
    assert model["optimizer"] == "Adam"
    assert settings["notes"] == []


def test_threads_are_read_back_from_tensorflow(configured: CoreRun) -> None:
    _tensorflow_only(configured)
    backend = configured.readback["backend"]
    assert (backend["intra_op_threads"], backend["inter_op_threads"]) == (1, 2)
    assert (configured.value["intra_op_threads"], configured.value["inter_op_threads"]) == (1, 2)
    assert configured.value["notes"] == []


def test_threads_on_jax_are_a_note(configured: CoreRun) -> None:
    if _backend(configured) != "jax":
        pytest.skip("TensorFlow applies threads")
    assert configured.value["notes"] == [JAX_THREADS_NOTE]
    assert configured.value["intra_op_threads"] is None
    assert configured.value["inter_op_threads"] is None


def test_logical_cpu_devices_and_device_choice(configured: CoreRun) -> None:
    settings, readback = configured.value, configured.readback
    assert readback["backend"]["cpus"] == ["CPU:0", "CPU:1"]
    assert settings["cpu_devices"] == 2
    assert settings["devices"] == ["CPU:1"]
    # choosing only a CPU device hides every GPU
    assert settings["gpus"] == []
    assert readback["weights"] == {"CPU:0": "CPU:0", "CPU:1": "CPU:1", "cpu:1": "CPU:1"}


def test_memory_growth_off_is_read_back(configured: CoreRun) -> None:
    backend = configured.readback["backend"]
    if _backend(configured) == "jax":
        assert backend["environ"]["XLA_PYTHON_CLIENT_PREALLOCATE"] == "true"
        # devices = CPU:1 leaves CUDA no GPU
        assert backend["environ"]["CUDA_VISIBLE_DEVICES"] == "-1"
    else:
        assert backend["memory_growth"] == [False] * backend["gpus"]
    assert configured.value["memory_growth"] is None  # no GPU in use


def test_float16_is_in_the_built_model_with_loss_scaling(configured: CoreRun) -> None:
    settings, model = configured.value, configured.readback["model"]
    assert settings["dtype_policy"] == model["policy"] == "mixed_float16"
    assert model["compute_dtypes"] == ["float16", "float16"]
    assert model["kernel_dtypes"] == ["float32", "float32"]
    assert model["optimizer"] == "LossScaleOptimizer"
    assert settings["loss_scaling"] is True
    # asked for on the CPU: applied, but flagged as no gain
    assert settings["precision_suits_device"] is False
    assert settings["precision_reason"].startswith("asked for mixed_float16; on the CPU")


def test_jit_compile_is_stored(configured: CoreRun) -> None:
    assert configured.value["jit_compile"] is False


def test_same_request_after_start_is_silent(configured: CoreRun) -> None:
    again = configured.readback["again"]
    assert again["ok"], again
    assert again["value"] == configured.value


def test_check_report_shows_the_setup(configured: CoreRun) -> None:
    applied = {k: v for k, v in configured.value.items() if k != "seed_chosen"}
    assert configured.readback["check_setup"] == applied


# ---- a dtype policy set outside gpukeras ----


@pytest.fixture(scope="module", params=BACKENDS)
def outside_policy(request: pytest.FixtureRequest) -> CoreRun:
    """A policy set through Keras first, as keras3's config_set_dtype_policy() does.

    No GPU is visible: on one, "auto" would choose mixed_bfloat16 itself, and a
    policy set outside that equals gpukeras' own cannot be told from it.
    """
    return run_setup(
        request.param,
        target="start",
        env={"CUDA_VISIBLE_DEVICES": ""},
        after="""
keras.config.set_dtype_policy("mixed_bfloat16")
readback["default"] = bridge.call("setup", {})
readback["model"] = model_facts()
readback["asked"] = bridge.call("setup", {"mixed_precision": "float32"})
readback["again"] = bridge.call("setup", {})
keras.config.set_dtype_policy("mixed_bfloat16")
readback["refused"] = bridge.call(
    "setup", {"devices": ["CPU:7"], "mixed_precision": "float16", "jit_compile": True}
)
readback["after_refused"] = bridge.answer(bridge.function_at("gpu.setup:current_settings"))["value"]
""",
    )


def test_a_policy_set_outside_is_kept_and_named(outside_policy: CoreRun) -> None:
    default = outside_policy.readback["default"]
    assert default["ok"], default
    assert default["value"]["dtype_policy"] == "mixed_bfloat16"
    assert default["value"]["precision_reason"].startswith("set outside gpukeras")
    assert outside_policy.readback["model"]["compute_dtypes"] == ["bfloat16", "bfloat16"]


def test_mixed_precision_asked_replaces_a_policy_set_outside(outside_policy: CoreRun) -> None:
    asked = outside_policy.readback["asked"]["value"]
    assert (asked["dtype_policy"], asked["precision_reason"]) == ("float32", "asked for float32")
    # the policy is gpu_setup()'s own now, so its default ("auto") may choose again
    again = outside_policy.readback["again"]["value"]
    assert again["dtype_policy"] == "float32"
    assert again["precision_reason"] == "no GPU: mixed precision does not speed up the CPU"


def test_a_refused_setup_changes_no_policy(outside_policy: CoreRun) -> None:
    assert outside_policy.readback["refused"]["r_class"] == "gpukeras_error_unknown_device"
    after = outside_policy.readback["after_refused"]
    assert after["dtype_policy"] == "mixed_bfloat16"
    assert after["precision_reason"].startswith("set outside gpukeras")
    assert after["jit_compile"] == "auto"


# ---- too late: the runtime started before gpu_setup() ----

# Per backend: the first request, a later one that differs, a later one that holds.
TOO_LATE = {
    "jax": (
        {"cpu_devices": 2, "mixed_precision": "float32"},
        {"cpu_devices": 3, "mixed_precision": "bfloat16", "jit_compile": True},
        {"cpu_devices": 2, "mixed_precision": "float16"},
    ),
    "tensorflow": (
        {"cpu_devices": 2, "intra_op_threads": 1, "mixed_precision": "float32"},
        {
            "cpu_devices": 3,
            "intra_op_threads": 2,
            "mixed_precision": "bfloat16",
            "jit_compile": True,
        },
        {"cpu_devices": 2, "intra_op_threads": 1, "mixed_precision": "float16"},
    ),
}


@pytest.fixture(scope="module", params=BACKENDS)
def too_late(request: pytest.FixtureRequest) -> CoreRun:
    """Set up, start the runtime with a model, then ask for other settings."""
    first, late, same = TOO_LATE[request.param]
    return run_setup(
        request.param,
        first,
        f"""
readback["first_model"] = model_facts()
readback["late"] = bridge.call("setup", {late!r})
readback["late_policy"] = keras.config.dtype_policy().name
readback["late_model"] = model_facts()
readback["late_settings"] = bridge.answer(bridge.function_at("gpu.setup:current_settings"))["value"]
readback["same"] = bridge.call("setup", {same!r})
readback["same_model"] = model_facts()
readback["backend"] = backend_report()
""",
    )


def test_too_late_is_a_classed_error_naming_the_setting(too_late: CoreRun) -> None:
    backend = _backend(too_late)
    late = too_late.readback["late"]
    assert late["ok"] is False
    assert late["r_class"] == "gpukeras_error_runtime_started"
    assert late["traceback"] is None
    message = late["message"]
    assert message.startswith(f"{NAMES[backend]} has already started in this session")
    assert "cpu_devices: asked 3, in force 2" in message
    if backend == "tensorflow":
        assert "threads (intra-op): asked 2, in force 1" in message
    assert "Restart R and call gpu_setup() first" in message
    # what could not be applied was not: the backend still has 2 CPU devices
    assert too_late.readback["backend"]["cpus"] == ["CPU:0", "CPU:1"]


def test_too_late_changes_nothing(too_late: CoreRun) -> None:
    assert "Nothing was changed." in too_late.readback["late"]["message"]
    assert too_late.readback["first_model"]["compute_dtypes"] == ["float32", "float32"]
    assert too_late.readback["late_policy"] == "float32"
    assert too_late.readback["late_model"]["compute_dtypes"] == ["float32", "float32"]
    late_settings = too_late.readback["late_settings"]
    assert late_settings["jit_compile"] == "auto"
    assert late_settings["dtype_policy"] == "float32"
    assert late_settings["precision_reason"] == "asked for float32"


def test_too_late_request_that_holds_succeeds(too_late: CoreRun) -> None:
    same = too_late.readback["same"]
    assert same["ok"], same
    assert same["value"]["cpu_devices"] == 2
    assert same["value"]["dtype_policy"] == "mixed_float16"
    assert too_late.readback["same_model"]["compute_dtypes"] == ["float16", "float16"]
    assert too_late.readback["same_model"]["optimizer"] == "LossScaleOptimizer"
    if _backend(too_late) == "tensorflow":
        assert same["value"]["intra_op_threads"] == 1
        assert too_late.readback["backend"]["intra_op_threads"] == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_setup_after_the_runtime_started_without_gpu(backend: str, no_gpu: None) -> None:
    """gpu_check() first, gpu_setup() after: without a GPU, no GPU setting can conflict."""
    run = run_setup(
        backend,
        target="start",
        after="""
keras.ops.convert_to_numpy(keras.ops.ones(2))
readback["defaults"] = bridge.call("setup", {})
readback["no_growth"] = bridge.call("setup", {"memory_growth": False})
readback["cpu0"] = bridge.call("setup", {"devices": ["CPU:0"]})
readback["cpus"] = bridge.call("setup", {"cpu_devices": 2})
""",
        env={"XLA_PYTHON_CLIENT_PREALLOCATE": None},
    )
    for name in ("defaults", "no_growth", "cpu0"):
        assert run.readback[name]["ok"], run.readback[name]
    assert run.readback["cpu0"]["value"]["devices"] == ["CPU:0"]
    assert run.readback["cpus"]["r_class"] == "gpukeras_error_runtime_started"
    assert "cpu_devices: asked 2, in force 1" in run.readback["cpus"]["message"]


# ---- arguments that cannot be applied ----


@pytest.fixture(scope="module", params=BACKENDS)
def refused(request: pytest.FixtureRequest) -> CoreRun:
    """Requests refused before anything is applied, then a memory limit without a GPU."""
    return run_setup(
        request.param,
        {"devices": ["GPU:0"]},
        """
readback["cpu5"] = bridge.call("setup", {"cpu_devices": 2, "devices": ["CPU:5"]})
readback["growth_and_limit"] = bridge.call(
    "setup", {"memory_growth": True, "memory_limit_mib": [1024]}
)
readback["limit"] = bridge.call(
    "setup", {"memory_growth": False, "memory_limit_mib": [1024]}
)
readback["precision"] = bridge.call("setup", {"mixed_precision": "float8"})
readback["backend"] = backend_report()
""",
    )


def test_unknown_gpu_lists_the_devices_there_are(refused: CoreRun, no_gpu: None) -> None:
    assert refused.result["ok"] is False
    assert refused.result["r_class"] == "gpukeras_error_unknown_device"
    assert refused.result["message"].startswith("No such device: GPU:0. Devices here: CPU:0. ")
    assert "gpu_devices() lists them" in refused.result["message"]


def test_unknown_cpu_lists_the_devices_there_are(refused: CoreRun) -> None:
    cpu5 = refused.readback["cpu5"]
    assert cpu5["r_class"] == "gpukeras_error_unknown_device"
    assert cpu5["message"].startswith("No such device: CPU:5. Devices here: ")
    assert "CPU:0, CPU:1." in cpu5["message"]
    # refused before anything was applied: still one CPU device
    assert refused.readback["backend"]["cpus"] == ["CPU:0"]


def test_tensorflow_refuses_memory_growth_with_a_limit(refused: CoreRun) -> None:
    _tensorflow_only(refused)
    answer = refused.readback["growth_and_limit"]
    assert answer["r_class"] == "gpukeras_error_bad_argument"
    assert answer["message"].startswith(
        "memory_growth = TRUE and memory_limit cannot be combined in TensorFlow"
    )
    assert "Pass memory_growth = FALSE with memory_limit." in answer["message"]


def test_memory_limit_without_gpu_is_a_note(refused: CoreRun, no_gpu: None) -> None:
    limit = refused.readback["limit"]
    assert limit["ok"], limit
    assert limit["value"]["notes"] == [NO_GPU_LIMIT_NOTE]
    assert limit["value"]["memory_limit_mib"] == []
    if _backend(refused) == "jax":  # growth and a limit combine: a fraction, with a GPU
        assert refused.readback["growth_and_limit"]["value"]["notes"] == [NO_GPU_LIMIT_NOTE]


def test_unknown_precision_is_a_bad_argument(refused: CoreRun) -> None:
    answer = refused.readback["precision"]
    assert answer["r_class"] == "gpukeras_error_bad_argument"
    assert "not 'float8'" in answer["message"]
    assert "'auto', 'float16', 'bfloat16' or 'float32'" in answer["message"]


# ---- on a GPU, JAX backend (the verification machines have no TensorFlow) ----


def _rise(run: CoreRun) -> float:
    return run.readback["after"] - run.readback["before"]


def _free(run: CoreRun) -> float:
    return run.readback["total"] - run.readback["before"]


@pytest.mark.gpu
def test_jax_memory_growth_keeps_gpu_memory_low() -> None:
    growing = run_setup(
        "jax",
        {"memory_growth": True},
        "import gpu_memory_readback",
        env={"XLA_PYTHON_CLIENT_PREALLOCATE": None},
    )
    # the variable set to "false" beforehand: memory_growth = FALSE must override it
    preallocating = run_setup(
        "jax",
        {"memory_growth": False},
        "import gpu_memory_readback",
        env={"XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
    )
    assert growing.value["memory_growth"] is True
    assert growing.readback["backend"]["environ"]["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert preallocating.value["memory_growth"] is False
    assert preallocating.readback["backend"]["environ"]["XLA_PYTHON_CLIENT_PREALLOCATE"] == "true"
    # Against the memory free when each child started: an earlier in-process test
    # may have started JAX in pytest's own process, which preallocated its share.
    assert _rise(growing) < 0.2 * _free(growing), (_rise(growing), _free(growing))
    assert _rise(preallocating) > 0.5 * _free(preallocating), (
        _rise(preallocating),
        _free(preallocating),
    )


@pytest.mark.gpu
def test_jax_memory_limit_sets_the_memory_fraction() -> None:
    run = run_setup(
        "jax", {"memory_growth": False, "memory_limit_mib": [4096]}, "import gpu_memory_readback"
    )
    total = run.readback["total"]
    environ = run.readback["backend"]["environ"]
    written = compat.jax_memory_fraction_variable()
    assert environ[written] == f"{4096 / total:.4f}"
    # jaxlib refuses to start with both names set
    other = [name for name in xla_env.JAX_MEM_FRACTIONS if name != written]
    assert all(environ[name] is None for name in other)
    assert run.value["memory_limit_mib"][0] == pytest.approx(4096, abs=total * 1e-4)
    # JAX preallocates that fraction, plus its CUDA context
    assert 0.9 * 4096 < _rise(run) < 4096 + 2048, _rise(run)


@pytest.mark.gpu
def test_auto_precision_picks_bfloat16_from_compute_capability() -> None:
    gpu = first_gpu()
    capability = gpu.compute_capability or ""
    if tuple(map(int, capability.split("."))) < (8, 0):
        pytest.skip(f"{gpu.name} has compute capability {capability}, below 8.0")
    run = run_setup("jax", {}, "readback['model'] = model_facts()")
    assert run.value["dtype_policy"] == "mixed_bfloat16"
    assert f"compute capability {capability} >= 8.0" in run.value["precision_reason"]
    assert run.value["loss_scaling"] is False
    assert run.value["precision_suits_device"] is True
    assert run.readback["model"]["compute_dtypes"] == ["bfloat16", "bfloat16"]
    if "H100" in gpu.name or "H200" in gpu.name:
        assert capability == "9.0"


@pytest.mark.gpu
def test_jax_gpu_devices_are_chosen_and_checked() -> None:
    gpu = first_gpu()
    run = run_setup(
        "jax",
        {"devices": ["GPU:0"]},
        """
readback["gpu7"] = bridge.call("setup", {"devices": ["GPU:7"]})
readback["weights"] = weights_device("GPU:0")
readback["again"] = bridge.call("setup", {"devices": ["GPU:0"]})
readback["backend"] = backend_report()
""",
    )
    assert run.value["gpus"] == ["GPU:0"]
    assert run.value["devices"] == ["GPU:0"]
    assert run.readback["backend"]["environ"]["CUDA_VISIBLE_DEVICES"] == gpu.uuid
    assert run.readback["weights"] == "GPU:0"
    assert run.readback["again"]["ok"], run.readback["again"]
    gpu7 = run.readback["gpu7"]
    assert gpu7["r_class"] == "gpukeras_error_unknown_device"
    assert gpu7["message"].startswith("No such device: GPU:7. Devices here: GPU:0, CPU:0")


@pytest.mark.gpu
def test_jax_memory_growth_after_start_compares_with_what_jax_did() -> None:
    """Unset XLA_PYTHON_CLIENT_PREALLOCATE means JAX preallocated: memory_growth = FALSE holds."""
    run = run_setup(
        "jax",
        target="start",
        after="""
keras.ops.convert_to_numpy(keras.ops.ones(2))
readback["no_growth"] = bridge.call("setup", {"memory_growth": False})
readback["growth"] = bridge.call("setup", {"memory_growth": True})
""",
        env={"XLA_PYTHON_CLIENT_PREALLOCATE": None},
    )
    assert run.readback["no_growth"]["ok"], run.readback["no_growth"]
    growth = run.readback["growth"]
    assert growth["r_class"] == "gpukeras_error_runtime_started"
    assert (
        "memory_growth (XLA_PYTHON_CLIENT_PREALLOCATE): asked 'false', in force 'true'"
        in growth["message"]
    )


# ---- findings of a careful reading (issue #14) ----


def test_jax_memory_fraction_is_written_under_the_name_jaxlib_reads() -> None:
    requires("jaxlib")
    import jaxlib

    name = compat.jax_memory_fraction_variable()
    assert name in xla_env.JAX_MEM_FRACTIONS
    version = tuple(int(part) for part in jaxlib.__version__.split(".")[:2])
    if version >= (0, 7):  # jaxlib 0.7 reads the new name and refuses both at once
        assert name == "XLA_CLIENT_MEM_FRACTION"


@pytest.mark.parametrize(
    ("environ", "in_force"),
    [
        ({"XLA_CLIENT_MEM_FRACTION": "0.25"}, "0.25"),
        ({"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.5"}, "0.5"),
        ({}, None),
    ],
)
def test_the_memory_fraction_in_force_is_read_under_either_name(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], in_force: str | None
) -> None:
    for name in xla_env.JAX_MEM_FRACTIONS:
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    for name in xla_env.JAX_MEM_FRACTIONS:
        assert xla_env.variable_in_force(name) == in_force


@pytest.mark.gpu
def test_tensorflow_growth_off_after_start_holds_as_tensorflows_default() -> None:
    """TensorFlow reads memory growth as None until it is set: that is no growth."""
    requires("tensorflow")
    run = run_setup("tensorflow", target="start", after="import tf_growth_after_start")
    no_growth = run.readback["no_growth"]
    assert no_growth["ok"], no_growth
    assert no_growth["value"]["memory_growth"] is False


@pytest.mark.gpu
def test_tensorflow_growth_on_a_capped_gpu_is_a_classed_error() -> None:
    requires("tensorflow")
    run = run_setup(
        "tensorflow",
        {"memory_growth": False, "memory_limit_mib": [1024]},
        """
readback["growth"] = bridge.call("setup", {"memory_growth": True})
readback["kept"] = bridge.call("setup", {"memory_growth": False})
""",
    )
    growth = run.readback["growth"]
    assert growth["r_class"] == "gpukeras_error_bad_argument"
    assert "TensorFlow cannot grow memory on a capped GPU" in growth["message"]
    assert run.readback["kept"]["ok"], run.readback["kept"]


# `devices` counts the GPUs CUDA lets this process see, not nvidia-smi's (issue #14, item 6) ---
def _on_a_four_gpu_node(
    kwargs: dict, env: dict[str, str | None], first: str = "NVIDIA H100 80GB HBM3", cc=(9, 0)
) -> CoreRun:
    """apply_setup on JAX, before JAX starts, on a node NVML shows with 4 GPUs (a double)."""
    requires("jax")
    return run_core(
        "setup",
        kwargs,
        env={"KERAS_BACKEND": "jax", **env},
        setup=f"import four_gpus\nfour_gpus.install({first!r}, {cc!r})",
        after="import os; readback['visible'] = os.environ.get('CUDA_VISIBLE_DEVICES')",
    )


def test_devices_counts_the_gpus_cuda_lets_this_process_see() -> None:
    """Under SLURM's CUDA_VISIBLE_DEVICES=2,3, devices = 1 is nvidia-smi's GPU 3."""
    run = _on_a_four_gpu_node({"devices": ["GPU:1"]}, {"CUDA_VISIBLE_DEVICES": "2,3"})
    assert run.result["ok"], run.result
    assert run.readback["visible"] == "GPU-dddd0000-0000-0000-0000-000000000000"


def test_a_gpu_cuda_does_not_show_is_refused_saying_how_gpus_are_counted() -> None:
    run = _on_a_four_gpu_node({"devices": ["GPU:2"]}, {"CUDA_VISIBLE_DEVICES": "2,3"})
    assert run.result["r_class"] == "gpukeras_error_unknown_device"
    assert run.result["message"] == (
        "No such device: GPU:2. Devices here: GPU:0, GPU:1, CPU:0. `devices` counts the GPUs "
        "CUDA lets this process see, as TensorFlow and JAX number them (GPU:0, GPU:1, ...), "
        "not nvidia-smi's GPUs (CUDA_VISIBLE_DEVICES=2,3: GPUs 0 and 1 here are nvidia-smi's "
        "2 and 3). Name GPUs by index (0, 1, ...) or as 'GPU:0'; gpu_devices() lists them."
    )
    assert run.readback["visible"] == "2,3"  # nothing changed


def test_the_device_order_the_user_set_is_respected() -> None:
    """CUDA_DEVICE_ORDER=FASTEST_FIRST (CUDA's default) puts the H100s before NVML's T4."""
    env = {"CUDA_VISIBLE_DEVICES": None, "CUDA_DEVICE_ORDER": "FASTEST_FIRST"}
    run = _on_a_four_gpu_node({"devices": ["GPU:0"]}, env, first="Tesla T4", cc=(7, 5))
    assert run.result["ok"], run.result
    assert run.readback["visible"] == "GPU-bbbb0000-0000-0000-0000-000000000000"
    in_pci_order = _on_a_four_gpu_node(
        {"devices": ["GPU:0"]}, {**env, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, "Tesla T4", (7, 5)
    )
    assert in_pci_order.readback["visible"] == "GPU-aaaa0000-0000-0000-0000-000000000000"


def test_a_mig_instance_is_a_gpu_of_its_own_size_on_jax() -> None:
    """CUDA_VISIBLE_DEVICES names a MIG instance: devices = 0 is that instance, the memory
    fraction is of its 40 GB, and "auto" precision follows its H100 (issue #14, item 2)."""
    requires("jax")
    tests = str(Path(__file__).parent)
    run = run_core(
        "setup",
        {"devices": ["GPU:0"], "memory_growth": False, "memory_limit_mib": [4096]},
        env={"KERAS_BACKEND": "jax"},
        setup=f"""
import os, sys
sys.path.insert(0, {tests!r})
from nvml_double import FakeGpu, fake_mig, fake_pynvml
parent = "GPU-0e0e0e0e-0000-0000-0000-000000000001"
migs = [fake_mig(parent, "3g.40gb", 40192.0), fake_mig(parent, "4g.40gb", 40192.0)]
sys.modules["pynvml"] = fake_pynvml([FakeGpu(uuid=parent, migs=migs)])
os.environ["CUDA_VISIBLE_DEVICES"] = migs[1].uuid
""",
        after="""
import os
readback["visible"] = os.environ.get("CUDA_VISIBLE_DEVICES")
readback["fraction"] = os.environ.get("XLA_CLIENT_MEM_FRACTION") or os.environ.get(
    "XLA_PYTHON_CLIENT_MEM_FRACTION"
)
""",
    )
    assert run.result["ok"], run.result
    assert run.value["gpus"] == ["GPU:0"]
    parent = "GPU-0e0e0e0e-0000-0000-0000-000000000001"
    assert run.readback["visible"] == fake_mig(parent, "4g.40gb").uuid
    assert run.readback["fraction"] == f"{4096 / 40192.0:.4f}"
    assert run.value["memory_limit_mib"][0] == pytest.approx(4096, abs=40192 * 1e-4)
    assert run.value["dtype_policy"] == "mixed_bfloat16"


# On JAX, CUDA started before gpu_setup() fixes the GPUs (issue #14, item 5) -----------
def _after_cuda_started(devices: list[str]) -> CoreRun:
    requires("jax")
    return run_core(
        "setup",
        {"devices": devices},
        env={"KERAS_BACKEND": "jax", "CUDA_VISIBLE_DEVICES": None},
        setup="import cuda_started, four_gpus\nfour_gpus.install()\ncuda_started.install()",
        after="""
import os
from gpukeras.core import compat
readback["visible"] = os.environ.get("CUDA_VISIBLE_DEVICES")
readback["jax_started"] = compat.jax_backends_started()
""",
    )


def test_devices_after_cuda_started_is_refused_saying_to_set_up_first() -> None:
    """gpu_dataset() on JAX starts CUDA through TensorFlow; CUDA_VISIBLE_DEVICES written
    afterwards would change nothing, so devices = 1 is a classed error, not silence."""
    run = _after_cuda_started(["GPU:1"])
    assert run.result["r_class"] == "gpukeras_error_runtime_started", run.result
    message = run.result["message"]
    assert "devices = GPU:1 can no longer apply" in message
    assert "(GPU:0, GPU:1, GPU:2, GPU:3)" in message
    assert "call gpu_setup() before gpu_dataset()" in message
    assert run.readback == {"visible": None, "jax_started": False}  # nothing changed


def test_devices_after_cuda_started_that_already_hold_succeed() -> None:
    run = _after_cuda_started(["GPU:0", "GPU:1", "GPU:2", "GPU:3"])
    assert run.result["ok"], run.result
    assert run.value["gpus"] == ["GPU:0", "GPU:1", "GPU:2", "GPU:3"]


def test_setup_lines_show_limits_loss_scaling_jax_threads_the_chosen_seed_and_notes() -> None:
    """print(gpu_setup())'s lines: sizes in MiB or GiB, loss scaling, a device that gains
    nothing from the precision, JAX's threads, the seed (and the call that repeats a chosen
    one) and the notes; "none", "not set" and "n/a" where nothing is."""
    from gpukeras.gpu.setup import setup_lines

    settings = {
        "backend": "jax",
        "gpus": ["GPU:0", "GPU:1"],
        "memory_growth": False,
        "memory_limit_mib": [512, 2048],
        "cpu_devices": 1,
        "intra_op_threads": None,
        "inter_op_threads": None,
        "devices": ["GPU:0", "GPU:1"],
        "dtype_policy": "mixed_float16",
        "precision_reason": "asked for mixed_float16",
        "loss_scaling": True,
        "precision_suits_device": False,
        "jit_compile": True,
        "deterministic": True,
        "seed": 7,
        "notes": [JAX_THREADS_NOTE],
    }
    assert setup_lines(settings) == [
        "<gpukeras setup> jax backend",
        "  GPUs in use:     GPU:0, GPU:1",
        "  memory growth:   FALSE",
        "  memory limit:    512 MiB, 2.0 GiB",
        "  devices chosen:  GPU:0, GPU:1",
        "  CPU devices:     1 logical",
        "  precision:       mixed_float16, loss scaling (asked for mixed_float16) "
        "[no speed-up on this device]",
        "  threads:         not settable on JAX",
        "  jit_compile:     TRUE",
        "  deterministic:   yes, seed 7",
        f"  note: {JAX_THREADS_NOTE}",
    ]
    cpu = {
        **settings,
        "backend": "tensorflow",
        "gpus": [],
        "memory_growth": None,
        "memory_limit_mib": [],
        "devices": None,
        "intra_op_threads": 0,
        "inter_op_threads": 2,
        "dtype_policy": "float32",
        "loss_scaling": False,
        "precision_suits_device": True,
        "jit_compile": None,
        "notes": [],
    }
    assert setup_lines(cpu, seed_chosen=True)[1:] == [
        "  GPUs in use:     none",
        "  memory growth:   n/a (no GPU)",
        "  memory limit:    none",
        "  devices chosen:  all visible",
        "  CPU devices:     1 logical",
        "  precision:       float32 (asked for mixed_float16)",
        "  threads:         intra-op 0, inter-op 2 (0 = TensorFlow chooses)",
        "  jit_compile:     not set",
        "  deterministic:   yes, seed 7 "
        "(chosen: gpu_setup(deterministic = TRUE, seed = 7) repeats it)",
    ]
    assert setup_lines({**cpu, "deterministic": False, "seed": None})[-1] == "  deterministic:   no"
