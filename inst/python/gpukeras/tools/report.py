"""Facts for gpu_report() beyond gpu_check(): what R's Python sees beside what a ``python -c``
of the same Python sees, the CUDA libraries this process loaded, the environment variables
that decide where Keras runs.

The commonest GPU bug report from R is "the GPU is visible in Python but not in R": the two
differ in their environment (a variable set in a shell but not in RStudio, a library path),
or in the Python they run. So ``python_sees`` runs one snippet (``SEES``) both here, reading
only the frameworks this process already imported (importing another would start it, and
take GPU memory, in the user's session), and in a fresh ``python -c`` of the same executable
with this process's environment, importing what is installed.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import sys
import tempfile

from gpukeras.core import masking
from gpukeras.core.handles import Record
from gpukeras.tools.check import VERDICT_TEXT, mib_text, or_na

# The libraries whose loading decides whether a framework can use the GPU.
CUDA_LIBRARIES = (
    "cudart",
    "cudnn",
    "cublas",
    "cublasLt",
    "nccl",
    "cufft",
    "cusparse",
    "cusolver",
    "nvrtc",
    "nvJitLink",
    "cuda",
)
_LIBRARY = re.compile(r"^lib(" + "|".join(CUDA_LIBRARIES) + r")\.so(?:\.([0-9][0-9.]*))?$")

# The variables that change what the frameworks do: which devices they use, where they find
# CUDA and Python, how they take memory. An allow-list: prefixes such as TF_ or NVIDIA_ also
# hold other programs' secrets (Terraform's TF_TOKEN_* and TF_VAR_*, NVIDIA_API_KEY).
ENVIRONMENT_NAMES = frozenset(
    {
        "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_HOME", "CUDA_PATH",
        "CUDA_MODULE_LOADING", "CUDA_LAUNCH_BLOCKING", "CUDA_CACHE_PATH",
        "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_TF32_OVERRIDE",
        "KERAS_BACKEND", "KERAS_HOME", "LD_LIBRARY_PATH", "LD_PRELOAD", "PATH",
        "PYTHONHOME", "PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX",
        "XLA_FLAGS", "TF_XLA_FLAGS", "TF_CPP_MIN_LOG_LEVEL", "TF_CPP_MAX_VLOG_LEVEL",
        "TF_FORCE_GPU_ALLOW_GROWTH", "TF_GPU_ALLOCATOR", "TF_GPU_THREAD_MODE",
        "TF_GPU_THREAD_COUNT", "TF_ENABLE_ONEDNN_OPTS", "TF_ENABLE_XLA",
        "TF_DETERMINISTIC_OPS", "TF_CUDNN_DETERMINISTIC", "TF_NUM_INTEROP_THREADS",
        "TF_NUM_INTRAOP_THREADS", "TF_CONFIG", "OMP_NUM_THREADS",
        "JAX_PLATFORMS", "JAX_PLATFORM_NAME", "JAX_ENABLE_X64", "JAX_DEFAULT_MATMUL_PRECISION",
        "JAX_COMPILATION_CACHE_DIR", "JAX_TRACEBACK_FILTERING", "JAX_DISABLE_JIT",
        "RETICULATE_PYTHON", "RETICULATE_PYTHON_ENV", "RETICULATE_PYTHON_FALLBACK",
        "RETICULATE_USE_MANAGED_VENV", "RETICULATE_UV",
    }
)  # fmt: skip
# Prefixes owned by one framework's memory settings, or by gpukeras itself.
ENVIRONMENT_PREFIXES = ("XLA_PYTHON_CLIENT_", "GPUKERAS_")
# Even an allowed variable's value is masked whole when its name says it is a secret.
MASKED = "<masked>"

# What a Python sees, as JSON on its last line; ``fresh`` imports what is installed, else
# only what is imported already. Self-contained: it runs in ``python -c`` too.
SEES = r"""
import importlib.util, json, os, sys
def sees(fresh):
    seen = {"executable": sys.executable, "python": sys.version.split()[0], "prefix": sys.prefix,
            "keras_backend_variable": os.environ.get("KERAS_BACKEND"),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    def use(name):
        if name in sys.modules:
            return sys.modules[name]
        if fresh and importlib.util.find_spec(name) is not None:
            return __import__(name)
        return None
    for name, read in (
        ("keras", lambda m: {"keras": m.__version__, "keras_backend": m.backend.backend()}),
        ("tensorflow", lambda m: {
            "tensorflow": m.__version__,
            "tensorflow_cuda_build": m.test.is_built_with_cuda(),
            "tensorflow_gpus": [d.name for d in m.config.list_physical_devices("GPU")]}),
        ("jax", lambda m: {"jax": m.__version__, "jax_devices": [str(d) for d in m.devices()]}),
    ):
        try:
            module = use(name)
            if module is not None:
                seen.update(read(module))
        except Exception as error:
            seen[name + "_error"] = (type(error).__name__ + ": " + str(error))[:400]
    return seen
"""


def loaded_cuda_libraries(maps: str | None = None) -> list[Record]:
    """The CUDA libraries mapped into this process (``/proc/self/maps``, or ``maps`` given
    as its text): one row per file, ``library`` (e.g. "cudnn"), ``version`` (from the file
    name or the file it links to; None when neither has one) and ``path``."""
    if maps is None:
        try:
            with open("/proc/self/maps") as file:
                maps = file.read()
        except OSError:
            return []
    found: dict[str, Record] = {}
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or not fields[5].startswith("/"):
            continue
        path = fields[5].strip()
        match = _LIBRARY.match(os.path.basename(path))
        if match is None or path in found:
            continue
        version = match.group(2)
        if version is None or "." not in version:
            target = _LIBRARY.match(os.path.basename(os.path.realpath(path)))
            version = (target.group(2) if target else None) or version
        found[path] = {"library": match.group(1), "version": version, "path": path}
    return sorted(found.values(), key=lambda row: (str(row["library"]), str(row["path"])))


def environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The variables of this process (or ``environ``) that change what the frameworks do
    (``ENVIRONMENT_NAMES``, and any starting with ``ENVIRONMENT_PREFIXES``), by name; the
    value of any whose name says it is a secret (``masking.is_secret_name``) is ``MASKED``,
    and any other's is masked of credentials (``masking.mask_text``: a URI's user)."""
    found = os.environ if environ is None else environ
    return {
        name: MASKED if masking.is_secret_name(name) else masking.mask_text(value)
        for name, value in sorted(found.items())
        if name in ENVIRONMENT_NAMES or name.startswith(ENVIRONMENT_PREFIXES)
    }


def python_sees(timeout: float = 120.0, compare: bool = True) -> Record:
    """What this process's Python sees (``here``: only frameworks already imported) and what
    ``python -c`` of the same executable with the same environment sees (``fresh``; its
    ``error`` when it failed or took more than ``timeout`` seconds; None without
    ``compare``: it imports Keras and its framework, seconds)."""
    namespace: dict[str, object] = {}
    exec(SEES, namespace)
    here = namespace["sees"](False)  # type: ignore[operator]
    if not compare:
        return {"here": here, "fresh": None}
    # The same environment, but no preallocation: a fresh JAX would take 75 % of a GPU the
    # session may be using.
    env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false", "TF_CPP_MIN_LOG_LEVEL": "2"}
    code = SEES + "\nprint(json.dumps(sees(True)))"
    try:
        # From an empty folder: ``python -c`` puts its working folder first on sys.path, where
        # a keras.py or a tensorflow/ folder of the user's would be imported instead.
        with tempfile.TemporaryDirectory(prefix="gpukeras-report-") as empty:
            done = subprocess.run(
                [sys.executable, "-c", code],
                env=env,
                cwd=empty,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        lines = done.stdout.strip().splitlines()
        fresh: Record = (
            json.loads(lines[-1])
            if done.returncode == 0 and lines
            else {"error": f"exit status {done.returncode}: {done.stderr.strip()[-400:]}"}
        )
    except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError) as error:
        fresh = {"error": f"{type(error).__name__}: {error}"[:400]}
    return {"here": here, "fresh": fresh}


# The rows of the table of what R's Python and ``python -c`` see, in order, by label.
SEES_FIELDS = {
    "executable": "Python executable",
    "python": "Python version",
    "keras": "Keras",
    "keras_backend": "Keras backend",
    "keras_backend_variable": "KERAS_BACKEND",
    "cuda_visible_devices": "CUDA_VISIBLE_DEVICES",
    "tensorflow": "TensorFlow",
    "tensorflow_cuda_build": "TensorFlow built with CUDA",
    "tensorflow_gpus": "GPUs TensorFlow sees",
    "tensorflow_error": "TensorFlow error",
    "jax": "JAX",
    "jax_devices": "JAX devices",
    "jax_error": "JAX error",
    "keras_error": "Keras error",
}
_ANOTHER = "PYTHONPATH, or a folder added to sys.path in this session, puts another copy first."
# What commonly causes each difference the table marks.
DIFFERENCE_CAUSES = {
    "python": (
        "The same executable reports another Python version: it loads another libpython. "
        "LD_LIBRARY_PATH decides where the dynamic loader looks first (in R too: RStudio and "
        "Rscript may start with different values), and PYTHONHOME where Python looks for its "
        "library."
    ),
    "keras": f"Another Keras: {_ANOTHER}",
    "keras_backend": (
        "Keras chose its backend when this session imported it (KERAS_BACKEND, else "
        "~/.keras/keras.json); `python -c` reads them now. Set KERAS_BACKEND before the first "
        "call that starts Python, then restart R."
    ),
    "keras_backend_variable": (
        "KERAS_BACKEND changed in this session after Python started (Sys.setenv()): Keras read "
        "it once, at import."
    ),
    "cuda_visible_devices": (
        "CUDA_VISIBLE_DEVICES changed in this session after Python started (Sys.setenv()): the "
        "frameworks read it once, when they start. Set it before the first call, or use "
        "gpu_setup(devices = ) before it."
    ),
    "tensorflow": f"Another TensorFlow: {_ANOTHER}",
    "tensorflow_cuda_build": (
        "Another TensorFlow build: a CPU-only and a CUDA build installed side by side, found in "
        "another order."
    ),
    "tensorflow_gpus": (
        "TensorFlow fixed its GPUs when it started in this session: CUDA_VISIBLE_DEVICES, "
        "gpu_setup(devices = ), or the CUDA libraries it found then (LD_LIBRARY_PATH) differ "
        "from what a new process finds now."
    ),
    "jax": f"Another JAX: {_ANOTHER}",
    "jax_devices": (
        "JAX fixed its devices when it started in this session: CUDA_VISIBLE_DEVICES, "
        "JAX_PLATFORMS, gpu_setup(devices = ) or the CUDA libraries it found then "
        "(LD_LIBRARY_PATH) differ from a new process's."
    ),
}


def _seen(value: object, imported: bool = True) -> str:
    """A value of ``sees`` as a table cell."""
    if not imported:
        return "not imported"
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "none"
    return str(value)


def sees_table(sees: Record) -> Record:
    """``python_sees``' result as gpu_report()'s table: ``header``, ``rows`` (cells; a row
    whose two sides differ has its label marked "**label** (differs)"), ``lead`` (None, or the
    line before the table: why there is no ``python -c`` column) and ``notes`` (what commonly
    causes the differences marked). A framework R's Python has not imported is "not
    imported" there, never a difference."""
    here, fresh = sees["here"], sees["fresh"]
    if fresh is None or "error" in fresh:
        lead = (
            "`python -c` not run (`compare = FALSE`)."
            if fresh is None
            else f"`python -c` failed: {fresh['error']}"
        )
        rows = [[SEES_FIELDS.get(name, name), _seen(value)] for name, value in here.items()]
        return {"header": ["", "R"], "rows": rows, "lead": lead, "notes": []}
    rows, notes = [], []
    for name, label in SEES_FIELDS.items():
        if name not in here and name not in fresh:
            continue
        imported = name in here or not name.startswith(("tensorflow", "jax", "keras"))
        mine, theirs = _seen(here.get(name), imported), _seen(fresh.get(name))
        differs = mine != theirs and not mine.startswith("not imported")
        rows.append([f"**{label}** (differs)" if differs else label, mine, theirs])
        if differs and name in DIFFERENCE_CAUSES:
            notes.append(DIFFERENCE_CAUSES[name])
    header = ["", "R (this session)", "`python -c`"]
    return {"header": header, "rows": rows, "lead": None, "notes": notes}


def report_facts(timeout: float = 120.0, compare: bool = True) -> Record:
    """gpu_report()'s facts: ``python`` (``python_sees``, with ``compare``) and
    ``python_table`` (its ``sees_table``), ``cuda_libraries``
    (``loaded_cuda_libraries``) and ``environment``."""
    sees = python_sees(timeout, compare)
    return {
        "python": sees,
        "python_table": sees_table(sees),
        "cuda_libraries": loaded_cuda_libraries(),
        "environment": environment(),
    }


def markdown_cell(text: object) -> str:
    """``text`` as one table cell or list item: line breaks as spaces, column bars escaped."""
    return re.sub(r"[\r\n]+", " ", str(text)).replace("|", "\\|")


def markdown_table(header: list[str], rows: list[list[object]]) -> list[str]:
    """A GitHub table: the ``header`` row, its separator, then ``rows`` (cells)."""

    def line(cells: list[object]) -> str:
        return "| " + " | ".join(markdown_cell(cell) for cell in cells) + " |"

    return [line(list(header)), line(["---"] * len(header)), *(line(list(row)) for row in rows)]


def markdown_items(items: list[str]) -> list[str]:
    """A Markdown list of ``items`` ("- (none)" for none)."""
    return [f"- {markdown_cell(item)}" for item in items] or ["- (none)"]


def _fence(lines: list[str]) -> list[str]:
    return ["```text", *lines, "```"]


def mask_private(lines: list[str], homes: list[str], users: list[str]) -> list[str]:
    """``lines`` with each of the ``homes`` folders as ``~`` where a path component ends
    there (so that /home/al leaves /home/alice alone), and each of the ``users`` names as
    ``<user>`` where it is a whole word."""
    for home in dict.fromkeys(path.rstrip("/") for path in homes):
        if home:
            folder = re.compile(rf"(?<![A-Za-z0-9_.~-]){re.escape(home)}(?![^/\s\"'`:;,)\]|])")
            lines = [folder.sub("~", line) for line in lines]
    for user in dict.fromkeys(name for name in users if name):
        word = re.compile(rf"(?<![A-Za-z0-9_.-]){re.escape(user)}(?![A-Za-z0-9_-])")
        lines = [word.sub("<user>", line) for line in lines]
    return lines


def report_markdown(
    check: Record, homes: list[str], users: list[str], compare: bool = True, timeout: float = 120.0
) -> list[str]:
    """gpu_report()'s Markdown lines, from gpu_check()'s ``check`` as R gives it
    (``gpukeras``, ``verdict`` (in words: ``check.VERDICT_TEXT``), ``reasons``, ``advice``,
    ``stack``: the check's, ``nvml``: the check's NVML report with its ``devices`` as columns, and
    ``full``: the check's print) and this process's ``report_facts`` (with ``compare``); the
    ``homes`` and ``users`` R knows masked (``mask_private``)."""
    return mask_private(_markdown(check, compare, timeout), homes, users)


def _versions(s: Record) -> list[list[object]]:
    """The versions table's rows from a check's ``stack`` (``check.builds`` in words)."""
    return [
        ["R", or_na(s.get("r"))],
        ["reticulate", or_na(s.get("reticulate"))],
        ["Python", or_na(s.get("python"))],
        ["NumPy", or_na(s.get("numpy"))],
        ["Keras", f"{or_na(s.get('keras'))} (backend {or_na(s.get('keras_backend'))})"],
        ["TensorFlow", or_na(s.get("tensorflow_build"))],
        ["JAX", or_na(s.get("jax_build"), "not installed")],
        *([["KerasHub", s.get("keras_hub_build")]] if s.get("keras_hub") else []),
        ["OS", f"{s.get('os')} {s.get('os_release')} {s.get('machine')}"],
    ]


def _nvml_lines(nvml: Record) -> list[str]:
    """NVML's table of GPUs (``devices``: columns), or why there is none."""
    d = nvml.get("devices") or {}
    rows = [dict(zip(d, row, strict=True)) for row in zip(*d.values(), strict=True)]
    if not nvml.get("available") or not rows:
        return [f"NVML: {or_na(nvml.get('reason'), 'no GPU')}"]
    header = ["NVML index", "Name", "Memory", "Visible to this process", "Used by the backend"]
    return markdown_table(
        header,
        [
            [
                str(row["index"]),
                str(row["name"]),
                mib_text(row["memory_total_mib"]),
                "yes" if row["visible"] else "no",
                "yes" if row["in_use"] is True else "no",
            ]
            for row in rows
        ],
    )


def _markdown(check: Record, compare: bool, timeout: float) -> list[str]:
    facts = report_facts(timeout, compare)
    table = facts["python_table"]
    stamp = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    sees = [markdown_cell(table["lead"]), ""] if table["lead"] is not None else []
    sees += markdown_table(table["header"], table["rows"])
    if table["notes"]:
        sees += ["", "What commonly causes the differences marked:", ""]
        sees += markdown_items(table["notes"])
    libraries = facts["cuda_libraries"]
    cuda = (
        markdown_table(
            ["Library", "Version", "File"],
            [
                [row["library"], row["version"] or "not in the file name", f"`{row['path']}`"]
                for row in libraries
            ],
        )
        if libraries
        else [
            "None: no CUDA library is mapped into this process (a CPU-only build, or the GPU "
            "not used yet)."
        ]
    )
    stack = check["stack"]
    driver = stack.get("nvidia_driver")
    nvml = [
        "No NVIDIA driver found."
        if driver is None
        else f"Driver {driver} (CUDA {stack.get('cuda_driver_version') or 'none'}).",
        "",
        *_nvml_lines(check["nvml"]),
    ]
    environ = facts["environment"]
    advice = list(check.get("advice") or [])
    return [
        "## gpukeras report",
        "",
        f"gpukeras {check['gpukeras']}, {stamp}. The home folder is shown as `~`, the user "
        "name as `<user>`.",
        "",
        f"### Verdict: `{check['verdict']}` ({VERDICT_TEXT[str(check['verdict'])]})",
        "",
        *markdown_items(list(check.get("reasons") or [])),
        *(["", "**Advice**", "", *markdown_items(advice)] if advice else []),
        "",
        "### Versions",
        "",
        *markdown_table(["Software", "Version"], _versions(stack)),
        "",
        "### Which Python R uses",
        "",
        f"`{stack.get('python_executable')}`, chosen by "
        f"{stack.get('python_chosen_by') or 'an unknown rule'} (see `?gpukeras_python`).",
        "",
        "### What R sees, and what `python -c` sees",
        "",
        "The same Python executable and this R session's environment variables; R's side "
        "lists only the frameworks its Python has imported.",
        "",
        *sees,
        "",
        "### CUDA libraries loaded by this process",
        "",
        *cuda,
        "",
        "### NVIDIA driver and GPUs (NVML)",
        "",
        *nvml,
        "",
        "### Environment variables",
        "",
        *(
            _fence([f"{name}={value}" for name, value in environ.items()])
            if environ
            else ["None of them is set."]
        ),
        "",
        "<details><summary>gpu_check() in full</summary>",
        "",
        *_fence(list(check["full"])),
        "",
        "</details>",
    ]
