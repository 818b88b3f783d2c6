"""What the session says about a background job: where it is, its print, why it ended.

gpu_fit(background = TRUE)'s child writes its progress to the job's folder
(``train.job``: ``progress.dcf``, ``epochs.tsv``); this module reads them back for the
session and makes the lines it prints: a job's status and its print, gpu_job_wait()'s
progress, the cause of a crash from the process's exit status, the message of a job
that failed, and a search job's status. R keeps the job's state; the wording is here.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from gpukeras.core.r_words import whole
from gpukeras.train.job import EPOCHS_FILE, PROGRESS_FILE, disk_full
from gpukeras.train.live import as_keras_shows

FINAL_STATES = ("done", "failed", "cancelled")
SIGNALS = {
    6: "SIGABRT, an abort",
    9: "SIGKILL, e.g. the out-of-memory killer",
    11: "SIGSEGV, a segmentation fault",
    15: "SIGTERM",
}
SAMPLE_FIELDS = (
    "batches_per_second",
    "samples_per_second",
    "gpu_utilization",
    "gpu_memory_used_mib",
)


def progress(job_dir: str) -> dict[str, Any] | None:
    """Where the child's training is, from ``progress.dcf`` in ``job_dir``: its numbers
    (``attempt``, ``epoch``, ``epochs``, ``batch``, ``steps``) and its ``sample`` (the
    rates, the GPU's readings and the latest ``logs``, by metric); None before the
    child wrote it, or where it cannot be read."""
    try:
        text = Path(job_dir, PROGRESS_FILE).read_text()
    except OSError:
        return None
    fields: dict[str, float | None] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(": ")
        if sep:
            try:
                fields[key] = float(value)
            except ValueError:
                fields[key] = None
    if not fields:
        return None
    logs = {key[len("log_") :]: value for key, value in fields.items() if key.startswith("log_")}
    sample = {key: fields.get(key) for key in SAMPLE_FIELDS}
    numbers = {key: value for key, value in fields.items() if not key.startswith("log_")}
    return {**numbers, "sample": {**sample, "logs": logs}}


def _strings(value: object) -> list[str]:
    """A character vector from R as a list (reticulate gives one of length 1 as a str)."""
    if value is None:
        return []
    return [value] if isinstance(value, str) else [str(item) for item in value]  # type: ignore[attr-defined]


def sample_line(status: dict[str, Any]) -> str:
    """A status's progress as one line: the epoch and batch, the rate, the GPU's
    utilization and memory, the latest logs (as Keras' progress display shows them)."""
    sample = status.get("sample") or {}
    parts = []
    if status.get("epoch") is not None:
        steps = f"/{int(status['steps'])}" if status.get("steps") is not None else ""
        batch = int(status.get("batch") or 0)
        parts.append(f"epoch {int(status['epoch'])}/{int(status['epochs'])}, batch {batch}{steps}")
    if sample.get("samples_per_second") is not None:
        parts.append(f"{whole(sample['samples_per_second'])} samples/s")
    elif sample.get("batches_per_second") is not None:
        parts.append(f"{sample['batches_per_second']:.1f} batches/s")
    if sample.get("gpu_memory_used_mib") is not None:
        utilization = sample.get("gpu_utilization")
        used = f"{utilization:.0f} %, " if utilization is not None else ""
        parts.append(f"GPU {used}{whole(sample['gpu_memory_used_mib'])} MiB")
    logs = sample.get("logs") or {}
    if logs:
        parts.append(", ".join(f"{name} {as_keras_shows(value)}" for name, value in logs.items()))
    return "; ".join(parts)


def _in_folder(path: str, folder: str) -> bool:
    return os.path.realpath(path).startswith(os.path.realpath(folder) + os.sep)


def _backup_lines(status: dict[str, Any], temp_dir: str) -> list[str]:
    """Where a stopped job's work is: its backup and the call that resumes from it."""
    state = status["state"]
    if state not in ("cancelled", "failed"):
        return []
    epoch = status.get("epoch")
    stopped = "  {} {}".format(
        "Cancelled" if state == "cancelled" else "Failed",
        f"in epoch {int(epoch)}" if epoch is not None else "before training started",
    )
    if status.get("resume") is None:
        if state != "cancelled":
            return []
        return [stopped + (", before its first backup" if epoch is not None else "") + "."]
    backup = status["backup_dir"]
    lines = [f"{stopped}; its backup is in {backup}:", f"  {status['resume']} resumes from it."]
    if _in_folder(backup, temp_dir):
        lines.append(
            "  It is in the session's temporary folder and is removed when R ends: copy it, "
            "or give backup = gpu_backup() a folder of your own."
        )
    return lines


def status_lines(
    status: dict[str, Any], temp_dir: str, job: dict[str, Any] | None = None
) -> list[str]:
    """A background fit's status as printed (``temp_dir``: the session's, where a backup
    goes with the session); with ``job`` (its ``backup_dir`` and ``max_restarts``), the
    job's own print, which says how to follow it while it runs."""
    restarts = int(status.get("restarts") or 0)
    final = status["state"] in FINAL_STATES
    lines = [
        "<gpukeras {}> {} after {:.1f} s{}".format(
            "job status" if job is None else "job",
            status["state"],
            status["elapsed"],
            f", {restarts} restart(s)" if restarts else "",
        )
    ]
    if status.get("pid") is not None and not final:
        lines.append(f"  Process:  {int(status['pid'])}")
    if status.get("sample") is not None:
        lines.append(f"  Progress: {sample_line(status)}")
    lines += [f"  Crashed:  {cause}" for cause in _strings(status.get("causes"))]
    lines += _backup_lines(status, temp_dir)
    if job is not None and not final:
        lines += [
            f"  Backups:  {job['backup_dir']} "
            f"(up to {int(job['max_restarts'])} restart(s) after a crash)",
            "  gpu_job_wait(job) waits for the fit, gpu_job_status(job) says where it is, "
            "gpu_job_cancel(job) stops it.",
        ]
    return lines


def epoch_lines(job_dir: str, shown: int, epochs: int) -> list[str]:
    """The lines of the epochs finished after the first ``shown`` (``epochs.tsv``), as
    gpu_job_wait(verbose = 2) prints them."""
    try:
        rows = Path(job_dir, EPOCHS_FILE).read_text().splitlines()
    except OSError:
        return []
    lines = []
    for row in rows[int(shown) :]:
        fields = row.split("\t")
        values = ", ".join(field.replace("=", " ", 1) for field in fields[1:])
        lines.append(f"Epoch {fields[0]}/{int(epochs)}: {values}")
    return lines


def exit_cause(status: int | None, process: str = "the training process") -> str:
    """What ended ``process`` from its exit status (processx gives minus the signal's
    number for a signal; None where it is not known)."""
    if status is None:
        return f"{process} ended for an unknown reason"
    if status < 0:
        name = SIGNALS.get(-status)
        return f"{process} was killed by signal {-status}" + (f" ({name})" if name else "")
    return f"{process} exited with status {status}"


def failure(
    status: dict[str, Any], stderr: list[str] | str | None, no_space: bool, fix: str
) -> dict[str, Any]:
    """The error of a job that crashed past its restarts, or stopped on a full disk
    (``no_space``, told with ``fix``): its message (lines, with each line's bullet in
    ``bullets``) and its classes, from the job's ``status`` and the last lines of its
    process's ``stderr``."""
    causes, stderr = _strings(status.get("causes")), _strings(stderr)
    cause = causes[-1] if causes else "unknown"
    restarts = int(status.get("restarts") or 0)
    if no_space:
        attempts = restarts + 1
        message = [
            f"Training in the background stopped after {attempts} "
            f"attempt{'' if attempts == 1 else 's'}: {cause}.",
            fix,
        ]
    else:
        message = [f"Training in the background failed after {restarts} restart(s): {cause}."]
    bullets = [""] * len(message)
    if stderr:
        message += ["The last lines of its stderr:", *stderr]
        bullets += ["", *[" "] * len(stderr)]
    if status.get("sample") is not None:
        message.append(f"Last progress: {sample_line(status)}.")
        bullets.append("")
    if status.get("resume") is not None:
        backup, resume = status["backup_dir"], status["resume"]
        message.append(f"The backup is in {backup}: {resume} resumes from it.")
    else:
        message.append("No backup was written.")
    bullets.append("")
    classes = (["gpukeras_error_job_write"] if no_space else []) + ["gpukeras_error_job_failed"]
    return {"message": message, "bullets": bullets, "class": classes, "cause": cause}


def search_status_lines(status: dict[str, Any]) -> list[str]:
    """A background search's status as printed: the trials done (and running, or
    interrupted where it stopped), the best so far, where a cancelled study is kept."""
    running = int(status.get("running") or 0)
    state = status["state"]
    if not running:
        doing = ""
    elif state == "running":
        doing = f", {running} running"
    else:  # the trials a stopped search was running stay "running" in the study until it resumes
        doing = f", {running} interrupted (run again when the search resumes)"
    best = status.get("best")
    lines = [
        f"Search {state}: {int(status['done'])} of {int(status['trials'])} trials done{doing}",
        "Best so far: "
        + (
            "none yet"
            if best is None
            else f"trial {int(best['number'])}, {status['objective']} = {best['value']:.5g}"
        ),
    ]
    if state == "cancelled":
        where = status.get("storage") or "its storage"
        lines.append(f"The study is kept in {where}: the same gpu_search() call resumes it.")
    if status.get("error") is not None:
        lines.append(f"Error: {status['error']['message']}")
    return lines


def timed_out(status: dict[str, Any], timeout: float) -> list[str]:
    """The message of gpu_job_wait()'s error when ``timeout`` seconds passed (the job keeps
    running): for a search's job (its ``status`` counts ``trials``), how many are done;
    for a fit's, its ``state``; and how to wait again or stop it."""
    waited = f"did not end within {timeout:g} seconds"
    if "trials" in status:
        return [
            f"The search {waited}; {status['done']} of {status['trials']} trials are done.",
            "Wait again with gpu_job_wait(job), or stop it with gpu_job_cancel(job) (the study "
            "keeps its trials).",
        ]
    return [
        f"The job {waited}; it is still {status['state']}.",
        "Wait again with gpu_job_wait(job), or stop it with gpu_job_cancel(job).",
    ]


def write_cause(folder: str) -> str:
    """Why a write into ``folder`` failed. R gives no errno: a write cut short on a disk
    with (almost) nothing left is the common case, told by the free space left."""
    if disk_full(folder):
        return "no space left on device"
    return "the write was cut short (a full disk or a quota?)"


def attempt_ended(
    job_dir: str,
    error: list[str] | str | None,
    exit_status: int | None,
    attempt: int,
    max_restarts: int,
) -> dict[str, Any]:
    """How a job's attempt that gave back no fit ends the job. With the child's error
    (``error``: its classes), ``state`` "failed": it would only repeat; unless it is a
    write the child could not make, or the disk is full, which stop the job too, told
    apart (``no_space``, with the ``cause``). Otherwise the child crashed (``exit_status``,
    the ``cause``): "restarting" while ``attempt`` is within ``max_restarts``, else "failed"."""
    classes = _strings(error)
    full = bool(disk_full(job_dir))
    if classes and "gpukeras_error_job_write" not in classes and not full:
        return {"state": "failed", "cause": None, "no_space": False}
    if classes or full:
        cause = (
            f"the training process could not write to the job's folder {job_dir}: "
            f"{write_cause(job_dir)}"
        )
        return {"state": "failed", "cause": cause, "no_space": True}
    state = "restarting" if attempt <= max_restarts else "failed"
    return {"state": state, "cause": exit_cause(exit_status), "no_space": False}


def _has_backup(folder: str) -> bool:
    return Path(folder, "gpukeras-backup.json").is_file()


def resume_call(backup_dir: str, seed: int | None = None) -> str | None:
    """The call that resumes a stopped job from its backup in ``backup_dir`` (with the
    ``seed`` gpukeras chose for it: a resumed run must see the batches in the same
    order), or None where no backup was committed."""
    if not _has_backup(backup_dir):
        return None
    seeded = f", seed = {int(seed)}" if seed is not None else ""
    folder = json.dumps(backup_dir, ensure_ascii=False)
    return f"gpu_fit(<same arguments>{seeded}, backup = gpu_backup({folder}))"


def keep_backup(job_dir: str, backup_dir: str) -> str | None:
    """The work of a cancelled job: the job's folder keeps only its own backup folder,
    when that holds a backup (the carried data, logs and the child's temporary folder
    go), or goes entirely; a ``backup_dir`` the user gave is theirs, left as it is. The
    kept folder, or None when none is left."""
    own = Path(job_dir, "backup")
    if Path(backup_dir) == own and _has_backup(backup_dir):
        for path in Path(job_dir).iterdir():
            if path != own:
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    else:
        shutil.rmtree(job_dir, ignore_errors=True)
    return backup_dir if os.path.isdir(backup_dir) else None


def cancelled(job_dir: str, backup_dir: str, seed: int | None = None) -> dict[str, Any]:
    """A cancelled job's status, its process ended: where it stopped (``epoch``,
    ``batch``, ``sample``, read again: the child may have gone on since its status was
    read; none where it wrote no progress), the call that resumes it (``resume``,
    resume_call) and the backup kept (``backup_dir``, keep_backup: the rest of the job's
    folder goes)."""
    read = progress(job_dir) or {}
    stopped = {key: read[key] for key in ("epoch", "batch", "sample") if read}
    resume = resume_call(backup_dir, seed)
    kept = keep_backup(job_dir, backup_dir)
    return {**stopped, "state": "cancelled", "resume": resume, "backup_dir": kept}
