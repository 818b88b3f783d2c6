"""gpu_setup(): memory, visible devices, precision, threads, XLA and determinism, before the
runtime starts.

Most of these settings only take effect before TensorFlow (or JAX) has
initialised its devices. ``apply_setup`` checks every argument before it
changes anything, succeeds silently when the asked-for state already holds,
and otherwise raises ``RuntimeStartedError`` naming each setting that could not
be applied (never TensorFlow's bare "Physical devices cannot be modified after
being initialized"), leaving the dtype policy and jit_compile as they were.
A dtype policy set outside gpukeras (e.g. by keras3) is kept unless a
precision is asked for.

Determinism: TensorFlow's op determinism is a switch that can be thrown at
any time (ops made afterwards follow it); JAX's is XLA's
``--xla_gpu_deterministic_ops``, read from XLA_FLAGS once, when its backends
start, so it is added there before, after the user's own flags. Deterministic
ops repeat a run only from the same seeds, so gpu_setup() asks for a seed with
them and seeds Python, NumPy, the backend and Keras with it
(``keras.utils.set_random_seed``); gpu_fit() takes it when given none.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from gpukeras.core import compat
from gpukeras.core.errors import BadArgumentError, RuntimeStartedError, UnknownDeviceError
from gpukeras.core.r_words import r_number
from gpukeras.core.runtime import PrecisionChoice, config
from gpukeras.gpu import cuda_driver, devices, nvml, precision, xla_env
from gpukeras.gpu.devices import jax_gpus
from gpukeras.gpu.simulated import VARIABLE, simulated_gpu
from gpukeras.gpu.tensors import normalize_device

BACKEND_NAMES = {"tensorflow": "TensorFlow", "jax": "JAX"}
SETTING_OF_VARIABLE = {
    xla_env.JAX_PREALLOCATE: "memory_growth",
    **{name: "memory_limit" for name in xla_env.JAX_MEM_FRACTIONS},
    "CUDA_VISIBLE_DEVICES": "devices",
}
DETERMINISTIC_NEEDS_SEED = (
    "`deterministic = TRUE` needs a `seed` (one whole number, e.g. seed = 1): deterministic "
    "ops repeat a run only from the same seeds, and TensorFlow refuses random ops without "
    "one once its ops are deterministic."
)
POLICY_SET_OUTSIDE = (
    "set outside gpukeras (e.g. keras3's config_set_dtype_policy()); gpu_setup() keeps it "
    "unless given mixed_precision"
)


@dataclass
class SetupRequest:
    """What gpu_setup() asks for; None leaves a setting as it is."""

    memory_growth: bool = True
    memory_limit_mib: list[float] | None = None
    devices: list[str] | None = None
    mixed_precision: str | None = None
    intra_op_threads: int | None = None
    inter_op_threads: int | None = None
    jit_compile: bool | str | None = None
    cpu_devices: int | None = None
    deterministic: bool = False
    seed: int | None = None


@dataclass
class Attempts:
    """Collects the settings that could not be applied because the runtime had started."""

    failures: list[str] = field(default_factory=list)

    def attempt(
        self, name: str, asked: object, apply: Callable[[], None], read: Callable[[], object]
    ) -> None:
        try:
            apply()
            return
        except RuntimeError:
            pass
        in_force = read()
        if in_force != asked:
            self.failures.append(f"{name}: asked {asked!r}, in force {in_force!r}")


def _device_index(name: str, kind: str) -> int | None:
    match = re.fullmatch(rf"{kind}:(\d+)", name)
    return int(match.group(1)) if match else None


def _numbering(report: nvml.NvmlReport | None = None) -> str:
    """How ``devices`` numbers GPUs, and how that maps to nvidia-smi's here, for messages."""
    report = report if report is not None else nvml.query()
    mapping = f" ({devices.cuda_numbering(devices.cuda_view(report))})" if report.available else ""
    return (
        "`devices` counts the GPUs CUDA lets this process see, as TensorFlow and JAX "
        f"number them (GPU:0, GPU:1, ...), not nvidia-smi's GPUs{mapping}."
    )


def _check_devices(
    request: SetupRequest, gpu_count: int, cpu_count: int, numbering: Callable[[], str]
) -> list[int]:
    """Validate ``request.devices`` against what exists; return the chosen GPU indices.

    GPU indices are CUDA's in this process (the framework's GPU:n), after
    CUDA_VISIBLE_DEVICES; ``numbering`` says so, with nvidia-smi's numbers,
    when a GPU is refused.
    """
    existing = [f"GPU:{i}" for i in range(gpu_count)] + [f"CPU:{i}" for i in range(cpu_count)]
    unknown = [name for name in request.devices or [] if name not in existing]
    if unknown:
        gpus = [name for name in unknown if name.startswith("GPU:")]
        why = f"{numbering()} " if gpus else ""
        raise UnknownDeviceError(
            f"No such device: {', '.join(unknown)}. Devices here: {', '.join(existing)}. {why}"
            "Name GPUs by index (0, 1, ...) or as 'GPU:0'; gpu_devices() lists them."
        )
    return [i for i in (_device_index(n, "GPU") for n in request.devices or []) if i is not None]


def _limits_for(request: SetupRequest, count: int) -> list[float]:
    limits = request.memory_limit_mib or []
    if len(limits) not in (0, 1, count):
        raise BadArgumentError(
            f"memory_limit has {len(limits)} values for {count} GPU(s): give one value for "
            "all GPUs or one per GPU in use."
        )
    return limits * count if len(limits) == 1 else limits


class TensorflowSetup:
    """Applies and reads settings through tf.config."""

    def __init__(self) -> None:
        self.tf: ModuleType = config.backend_module()
        self.cpu = self.tf.config.list_physical_devices("CPU")[0]
        self.all_gpus = self.tf.config.list_physical_devices("GPU")

    def _cpu_count(self) -> int:
        return len(self.tf.config.get_logical_device_configuration(self.cpu) or [None])

    def _visible_names(self) -> list[str]:
        visible = self.tf.config.get_visible_devices("GPU")
        return [f"GPU:{self.all_gpus.index(gpu)}" for gpu in visible]

    def apply(self, request: SetupRequest, notes: list[str]) -> list[str]:
        tf, attempts = self.tf, Attempts()
        if request.memory_growth and request.memory_limit_mib:
            raise BadArgumentError(
                "memory_growth = TRUE and memory_limit cannot be combined in TensorFlow: a GPU "
                "either grows its memory on demand or gets a fixed cap. Pass memory_growth = "
                "FALSE with memory_limit."
            )
        cpu_count = request.cpu_devices or self._cpu_count()
        chosen = _check_devices(request, len(self.all_gpus), cpu_count, _numbering)
        # Checked against the GPUs that will be in use, before anything changes.
        choosing = request.devices is not None and self.all_gpus
        in_use = (
            [self.all_gpus[i] for i in chosen] if choosing else tf.config.get_visible_devices("GPU")
        )
        limits = _limits_for(request, len(in_use))
        capped = [gpu.name for gpu in in_use if self._limit(gpu) is not None]
        if request.memory_growth and not limits and capped:
            raise BadArgumentError(
                f"memory_growth = TRUE: {', '.join(capped)} got a memory_limit earlier in this "
                "session, and TensorFlow cannot grow memory on a capped GPU. Pass memory_growth "
                "= FALSE to keep the cap, or restart R and call gpu_setup() with the settings "
                "you want first."
            )
        if request.cpu_devices is not None:
            logical = [tf.config.LogicalDeviceConfiguration()] * request.cpu_devices
            attempts.attempt(
                "cpu_devices",
                request.cpu_devices,
                lambda: tf.config.set_logical_device_configuration(self.cpu, logical),
                self._cpu_count,
            )
        if request.devices is not None and self.all_gpus:
            attempts.attempt(
                "devices",
                [f"GPU:{i}" for i in chosen],
                lambda: tf.config.set_visible_devices([self.all_gpus[i] for i in chosen], "GPU"),
                self._visible_names,
            )
        visible = tf.config.get_visible_devices("GPU")
        for gpu, limit in zip(visible, limits):
            attempts.attempt(
                f"memory_limit ({gpu.name})",
                limit,
                functools.partial(
                    tf.config.set_logical_device_configuration,
                    gpu,
                    [tf.config.LogicalDeviceConfiguration(memory_limit=int(limit))],
                ),
                functools.partial(self._limit, gpu),
            )
        if not limits:
            # A capped GPU never grows (TensorFlow refuses to be asked): growth off holds.
            for gpu in [gpu for gpu in visible if self._limit(gpu) is None]:
                attempts.attempt(
                    f"memory_growth ({gpu.name})",
                    request.memory_growth,
                    functools.partial(
                        tf.config.experimental.set_memory_growth, gpu, request.memory_growth
                    ),
                    functools.partial(self._growth, gpu),
                )
        threading = tf.config.threading
        if request.intra_op_threads is not None:
            attempts.attempt(
                "threads (intra-op)",
                request.intra_op_threads,
                lambda: threading.set_intra_op_parallelism_threads(request.intra_op_threads),
                threading.get_intra_op_parallelism_threads,
            )
        if request.inter_op_threads is not None:
            attempts.attempt(
                "threads (inter-op)",
                request.inter_op_threads,
                lambda: threading.set_inter_op_parallelism_threads(request.inter_op_threads),
                threading.get_inter_op_parallelism_threads,
            )
        if request.deterministic and not attempts.failures:
            # A switch TensorFlow reads as it makes each op, at any time: thrown only once
            # the settings that need a fresh runtime have applied, so that a refused call
            # changes nothing.
            tf.config.experimental.enable_op_determinism()
        return attempts.failures

    def _growth(self, gpu: object) -> bool:
        """Memory growth on ``gpu``: TensorFlow says None until it is set, and then
        does not grow, as with False."""
        return bool(self.tf.config.experimental.get_memory_growth(gpu))

    def _limit(self, gpu: object) -> float | None:
        logical = self.tf.config.get_logical_device_configuration(gpu)
        return logical[0].memory_limit if logical else None

    def capability(self) -> str | None:
        """Compute capability of the first GPU in use, or None without one."""
        visible = self.tf.config.get_visible_devices("GPU")
        if not visible:
            return None
        found = self.tf.config.experimental.get_device_details(visible[0]).get("compute_capability")
        return ".".join(map(str, found)) if found else None

    def current(self) -> dict[str, object]:
        tf = self.tf
        visible = tf.config.get_visible_devices("GPU")
        growth = [self._growth(gpu) for gpu in visible]
        return {
            "gpus": self._visible_names(),
            "memory_growth": growth[0] if growth else None,
            "memory_limit_mib": [self._limit(gpu) for gpu in visible],
            "cpu_devices": self._cpu_count(),
            "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
            "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
            "deterministic": deterministic_in_force(),
        }


class JaxSetup:
    """Applies settings through XLA's environment variables and jax.config, before JAX starts."""

    def __init__(self) -> None:
        self.jax: ModuleType = config.backend_module()
        self.report = nvml.query()
        # NVML's device for each CUDA ordinal: before JAX starts, what CUDA will see.
        self.cuda = devices.cuda_view(self.report).devices
        # Something else started CUDA (gpu_dataset()'s TensorFlow): its GPUs are fixed.
        self.cuda_started = cuda_driver.started()

    def started(self) -> bool:
        return compat.jax_backends_started()

    def _gpu_count(self) -> int:
        if self.started():
            return len(jax_gpus())
        return len(self.cuda)

    def _cpu_count(self) -> int:
        if self.started():
            return len(self.jax.devices("cpu"))
        return max(1, self.jax.config.jax_num_cpu_devices)

    def _memory_fraction(self, limits: list[float]) -> str | None:
        if not limits:
            return None
        if len(set(limits)) > 1:
            raise BadArgumentError(
                "JAX has one memory fraction for all GPUs: give memory_limit one value."
            )
        if not self.cuda:
            return None  # no GPU: apply_setup notes there is nothing to cap
        # A MIG instance's own memory: XLA's fraction is of the device JAX sees.
        total = self.cuda[0].memory_total_mib if self.cuda[0] else None
        if not total:
            raise BadArgumentError(
                "memory_limit on JAX is set as a fraction of the GPU's memory, which needs NVML "
                "to know the total."
            )
        return f"{min(1.0, limits[0] / total):.4f}"

    def apply(self, request: SetupRequest, notes: list[str]) -> list[str]:
        if request.intra_op_threads is not None or request.inter_op_threads is not None:
            notes.append("threads: JAX has no per-process op-thread settings; not applied")
        cpu_count = request.cpu_devices or self._cpu_count()
        chosen = _check_devices(
            request, self._gpu_count(), cpu_count, lambda: _numbering(self.report)
        )
        wanted: dict[str, str | None] = {
            xla_env.JAX_PREALLOCATE: "false" if request.memory_growth else "true",
        }
        fraction = self._memory_fraction(_limits_for(request, max(1, len(chosen or self.cuda))))
        if fraction is not None:
            wanted[compat.jax_memory_fraction_variable()] = fraction
        if request.devices is not None:
            # UUIDs ('MIG-...' for a MIG instance) name a device whatever the order.
            uuids = [self._uuid(i) for i in chosen]
            wanted["CUDA_VISIBLE_DEVICES"] = ",".join(uuids) if uuids else "-1"
        # The user's own XLA_FLAGS stay; the flag goes after them, so it is the one XLA reads.
        flags = (
            xla_env.with_xla_flag(
                os.environ.get(xla_env.XLA_FLAGS, ""), xla_env.DETERMINISTIC_FLAG, "true"
            )
            if request.deterministic
            else None
        )
        if self.started():
            # The variables only act on GPUs: with none in use, any value holds.
            in_use = bool(jax_gpus())
            failures = [
                f"{SETTING_OF_VARIABLE[name]} ({name}): asked {value!r}, "
                f"in force {xla_env.variable_in_force(name)!r}"
                for name, value in wanted.items()
                if in_use and not self._holds(name, value)
            ]
            if request.cpu_devices is not None and request.cpu_devices != self._cpu_count():
                failures.append(
                    f"cpu_devices: asked {request.cpu_devices}, in force {self._cpu_count()}"
                )
            if flags is not None and not deterministic_in_force():
                if in_use:
                    failures.append(
                        f"deterministic (XLA_FLAGS --{xla_env.DETERMINISTIC_FLAG}): asked "
                        f"'true', in force {xla_env.xla_flag(xla_env.DETERMINISTIC_FLAG)!r}"
                    )
                elif not failures:
                    # XLA:CPU is deterministic as it is: written for the read-back, and
                    # for processes started from this one.
                    os.environ[xla_env.XLA_FLAGS] = flags
            return failures
        if request.devices is not None and self.cuda_started:
            _refuse_devices_cuda_fixed(request.devices, chosen, len(self.cuda))
        if any(name in xla_env.JAX_MEM_FRACTIONS for name in wanted):
            for name in xla_env.JAX_MEM_FRACTIONS:  # jaxlib refuses both names at once
                os.environ.pop(name, None)
        os.environ.update({name: value for name, value in wanted.items() if value is not None})
        if flags is not None:
            os.environ[xla_env.XLA_FLAGS] = flags
        if request.devices is not None:
            self.cuda = list(nvml.cuda_devices(self.report.devices))
        if request.cpu_devices is not None:
            self.jax.config.update("jax_num_cpu_devices", request.cpu_devices)
        return []

    def _uuid(self, ordinal: int) -> str:
        """The UUID of CUDA's GPU ``ordinal``; the ordinal itself where NVML has no match."""
        device = self.cuda[ordinal] if ordinal < len(self.cuda) else None
        return device.uuid if device is not None else str(ordinal)

    def _holds(self, name: str, value: str | None) -> bool:
        """Whether the variable in force has the effect that ``value`` asks for."""
        if name == "CUDA_VISIBLE_DEVICES":
            gpus = self.report.devices
            in_force = [d.uuid for d in nvml.cuda_devices(gpus)]
            return in_force == [d.uuid for d in nvml.cuda_devices(gpus, value)]
        return xla_env.variable_in_force(name) == value

    def capability(self) -> str | None:
        if self.started():
            gpus = jax_gpus()
            return getattr(gpus[0], "compute_capability", None) if gpus else None
        first = self.cuda[0] if self.cuda else None
        return first.compute_capability if first else None

    def current(self) -> dict[str, object]:
        fraction = xla_env.variable_in_force(xla_env.JAX_MEM_FRACTIONS[0])
        totals = [d.memory_total_mib for d in self.cuda if d and d.memory_total_mib is not None]
        return {
            "gpus": [f"GPU:{i}" for i in range(self._gpu_count())],
            "memory_growth": xla_env.variable_in_force(xla_env.JAX_PREALLOCATE) == "false"
            if totals
            else None,
            "memory_limit_mib": [float(fraction) * total for total in totals] if fraction else [],
            "cpu_devices": self._cpu_count(),
            "intra_op_threads": None,
            "inter_op_threads": None,
            "deterministic": deterministic_in_force(),
        }


def _refuse_devices_cuda_fixed(asked: list[str], chosen: list[int], cuda_count: int) -> None:
    """Refuse a GPU choice that CUDA, already started before JAX, can no longer make.

    CUDA reads CUDA_VISIBLE_DEVICES once, at ``cuInit``; on JAX, gpu_dataset()
    starts CUDA through TensorFlow (listing its GPUs to hide them), so a later
    choice would silently leave JAX every GPU CUDA saw then.
    """
    if chosen == list(range(cuda_count)):
        return  # the GPUs CUDA shows already, in its order
    seen = ", ".join(f"GPU:{i}" for i in range(cuda_count)) or "none"
    raise RuntimeStartedError(
        f"devices = {', '.join(asked)} can no longer apply: CUDA has already started in "
        "this process and reads CUDA_VISIBLE_DEVICES only when it starts, so JAX would "
        f"still see the GPUs CUDA saw then ({seen}). Nothing was changed. On the JAX "
        "backend gpu_dataset() starts CUDA (through TensorFlow, which builds its tf.data "
        "pipelines): restart R and call gpu_setup() before gpu_dataset()."
    )


def deterministic_in_force() -> bool:
    """Whether the backend's ops are deterministic now, as the backend reads it.

    TensorFlow: its op determinism, however it was turned on (gpu_setup(),
    ``enable_op_determinism()`` or TF_DETERMINISTIC_OPS). JAX: XLA's
    ``--xla_gpu_deterministic_ops`` in XLA_FLAGS, gpu_setup()'s or the user's.
    """
    if config.backend == "jax":
        return xla_env.flag_true(xla_env.xla_flag(xla_env.DETERMINISTIC_FLAG))
    config.keras()
    return compat.tf_op_determinism_enabled()


def _backend_setup() -> TensorflowSetup | JaxSetup:
    config.keras()  # checks the stack; importing Keras does not initialise devices
    return JaxSetup() if config.backend == "jax" else TensorflowSetup()


def _policy_set_outside() -> bool:
    """Whether Keras' global dtype policy was set by someone other than gpu_setup()."""
    if not compat.global_dtype_policy_set():
        return False
    ours = config.setup.precision
    return ours is None or ours.policy != config.keras().config.dtype_policy().name


def _precision_choice(requested: str | None, capability: str | None) -> PrecisionChoice | None:
    """The dtype policy to set; None keeps a policy set outside gpukeras when none was asked.
    Without a GPU, under ``GPUKERAS_SIMULATE_GPU`` the simulated GPU's, its reason saying so."""
    if requested is None and _policy_set_outside():
        return None
    simulated = simulated_gpu() if capability is None else None
    if simulated is None:
        return precision.choose_policy(requested or "auto", capability)
    choice = precision.choose_policy(requested or "auto", simulated.compute_capability)
    return dataclasses.replace(choice, reason=f"{choice.reason}; a simulated GPU ({VARIABLE})")


def _capability(backend: TensorflowSetup | JaxSetup) -> str | None:
    """The compute capability the precision rules judge by: the first GPU's in use, else a
    simulated GPU's (``GPUKERAS_SIMULATE_GPU``), else None (the CPU)."""
    found = backend.capability()
    simulated = simulated_gpu() if found is None else None
    return simulated.compute_capability if simulated is not None else found


def _precision_reason(policy: str) -> str:
    ours = config.setup.precision
    if ours is not None and ours.policy == policy:
        return ours.reason
    if policy == config.keras().config.floatx():
        return "Keras default"
    return POLICY_SET_OUTSIDE


def current_settings(seed_chosen: bool = False) -> dict[str, object]:
    """The settings in force now, read back from the backend, plain data, with their
    ``lines`` (``setup_lines``; ``seed_chosen``: the seed was chosen for gpu_setup())."""
    backend = _backend_setup()
    policy = config.keras().config.dtype_policy().name
    suits = (
        policy == "float32" or precision.choose_policy(policy, _capability(backend)).suits_device
    )
    settings = {
        "backend": config.backend,
        **backend.current(),
        "devices": config.setup.devices,
        "dtype_policy": policy,
        "precision_reason": _precision_reason(policy),
        "loss_scaling": policy == "mixed_float16",
        "precision_suits_device": suits,
        "jit_compile": config.setup.jit_compile,
        "seed": config.setup.seed,
        "notes": list(config.setup.notes),
    }
    return {**settings, "lines": setup_lines(settings, seed_chosen)}


def setup_lines(s: dict[str, Any], seed_chosen: bool = False) -> list[str]:
    """A ``current_settings()`` record in words, as print(gpu_setup()) shows it: a header,
    one line per setting ("not set", "none" where nothing is), then the notes. With
    ``seed_chosen``, the deterministic line gives the call that repeats the seed."""

    def shown(value: object, none: str = "not set") -> str:
        values = [v for v in (value if isinstance(value, list) else [value]) if v is not None]
        return ", ".join(r_number(v) for v in values) if values else none

    def mib(value: float) -> str:
        return f"{value / 1024:.1f} GiB" if value >= 1024 else f"{value:.0f} MiB"

    if s["intra_op_threads"] is None:
        threads = "not settable on JAX"
    else:
        threads = (
            f"intra-op {s['intra_op_threads']}, inter-op {s['inter_op_threads']} "
            "(0 = TensorFlow chooses)"
        )
    limits = [mib(v) for v in s["memory_limit_mib"] or [] if v is not None]
    seed = s["seed"]
    deterministic = "yes" if s["deterministic"] else "no"
    if seed is not None:
        deterministic += f", seed {int(seed)}"
        if seed_chosen:
            repeat = f"gpu_setup(deterministic = TRUE, seed = {int(seed)})"
            deterministic += f" (chosen: {repeat} repeats it)"
    return [
        f"<gpukeras setup> {s['backend']} backend",
        f"  GPUs in use:     {shown(s['gpus'], 'none')}",
        f"  memory growth:   {shown(s['memory_growth'], 'n/a (no GPU)')}",
        f"  memory limit:    {shown(limits, 'none')}",
        f"  devices chosen:  {shown(s['devices'], 'all visible')}",
        f"  CPU devices:     {int(s['cpu_devices'])} logical",
        f"  precision:       {s['dtype_policy']}{', loss scaling' if s['loss_scaling'] else ''} "
        f"({s['precision_reason']})"
        f"{' [no speed-up on this device]' if s['precision_suits_device'] is False else ''}",
        f"  threads:         {threads}",
        f"  jit_compile:     {shown(s['jit_compile'])}",
        f"  deterministic:   {deterministic}",
        *(f"  note: {note}" for note in s["notes"]),
    ]


def apply_setup(
    memory_growth: bool = True,
    memory_limit_mib: list[float] | None = None,
    devices: list[str] | None = None,
    mixed_precision: str | None = None,
    intra_op_threads: int | None = None,
    inter_op_threads: int | None = None,
    jit_compile: bool | str | None = None,
    cpu_devices: int | None = None,
    deterministic: bool = False,
    seed: int | None = None,
    seed_chosen: bool = False,
) -> dict[str, object]:
    """Apply gpu_setup()'s settings and return those in force (see ``current_settings``),
    with ``seed_chosen``.

    Args:
        memory_growth: grow GPU memory on demand instead of taking it all at start.
        memory_limit_mib: a hard cap in MiB, one value for all GPUs or one per GPU.
        devices: devices to use, as 'GPU:0', 'CPU:1'; other GPUs are hidden.
        mixed_precision: 'auto', 'float16', 'bfloat16' or 'float32'; None is 'auto'
            unless a policy was set outside gpukeras, which is then kept.
        intra_op_threads: threads inside one op (TensorFlow; 0 lets it choose).
        inter_op_threads: ops run in parallel (TensorFlow; 0 lets it choose).
        jit_compile: default for XLA compilation in later gpukeras training calls.
        cpu_devices: split the CPU into this many logical devices (multi-device tests).
        deterministic: make the backend's ops deterministic (TensorFlow's op
            determinism; on JAX, XLA's deterministic GPU ops); needs ``seed``.
            False asks for nothing: determinism already on stays on.
        seed: seed Python, NumPy, the backend and Keras now
            (``keras.utils.set_random_seed``); gpu_fit() takes it when given none.
        seed_chosen: gpu_setup() chose ``seed`` (given none, with ``deterministic``):
            the lines say so.

    Raises:
        BadArgumentError, UnknownDeviceError: before anything is changed.
        RuntimeStartedError: a setting that needs a fresh runtime differs from
            what is in force; the dtype policy and jit_compile stay as they were.
    """
    if mixed_precision is not None:
        precision.check_choice(mixed_precision)
    if deterministic and seed is None:
        raise BadArgumentError(DETERMINISTIC_NEEDS_SEED)
    request = SetupRequest(
        memory_growth=bool(memory_growth),
        memory_limit_mib=[float(v) for v in memory_limit_mib] if memory_limit_mib else None,
        devices=[normalize_device(str(d)) for d in devices] if devices is not None else None,
        mixed_precision=mixed_precision,
        intra_op_threads=intra_op_threads,
        inter_op_threads=inter_op_threads,
        jit_compile=jit_compile,
        cpu_devices=cpu_devices,
        deterministic=deterministic,
        seed=seed,
    )
    backend = _backend_setup()
    notes: list[str] = []
    failures = backend.apply(request, notes)
    # Kept also when it could not apply (after bad arguments, which raise, it is not):
    # gpu_check(fix = TRUE) repairs that.
    config.setup.memory_growth_asked = request.memory_growth
    if failures:
        raise RuntimeStartedError(
            f"{BACKEND_NAMES[config.backend]} has already started in this session, so these "
            f"settings could not be applied: {'; '.join(failures)}. Nothing was changed. "
            "Restart R and call gpu_setup() first, before anything else that uses Python "
            "(gpu_check(), gpu_devices(), models)."
        )
    choice = _precision_choice(request.mixed_precision, backend.capability())
    if choice is not None:
        config.keras().config.set_dtype_policy(choice.policy)
        config.setup.precision = choice
    if request.jit_compile is not None:
        config.setup.jit_compile = request.jit_compile
    if request.devices is not None:
        config.setup.devices = request.devices
    if request.seed is not None:
        # After the settings: on JAX, seeding must not start the backends before XLA_FLAGS
        # and the memory variables are written (it starts none, but order costs nothing).
        # Keras' own, TensorFlow included wherever installed (not compat.set_random_seed):
        # the session's seed reaches a tf.data pipeline the user builds next too.
        config.keras().utils.set_random_seed(request.seed)
        config.setup.seed = request.seed
    if request.memory_limit_mib and not backend.current()["gpus"]:
        notes.append("memory_limit: no GPU in use, so there is nothing to cap")
    config.setup.notes = notes
    return {**current_settings(seed_chosen), "seed_chosen": seed_chosen}
