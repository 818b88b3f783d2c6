"""backup: what a backup folder holds, and what happens to it, with real training and files.

The user's own files in backup_dir survive; a folder other users may write to
is refused before anything is written (links planted in it included); every
backup is synced before it is committed and the one before it kept, so a
newest backup emptied or cut short by a crash falls back to it; a folder that
cannot be written fails before training, and a disk that fills up during it
is a classed error that says what to free. Folders of another user and
read-only or full file systems need root (a chown, a tmpfs mount): those
tests skip without it. Resuming across processes is in test_fit.py.
"""

from __future__ import annotations

import contextlib
import grp
import json
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from conftest import child_pythonpath, other_group, run_core
from gpukeras import bridge
from gpukeras.core import errors
from gpukeras.core.runtime import config
from gpukeras.train import backup, backup_files, fit

BATCH = 16
ROWS = 8 * BATCH
USER_FILES = {
    "weights-best.weights.h5": b"the user's best model",
    "weights-000001.weights.h5": b"the user's first checkpoint",
    "notes.txt": b"not gpukeras'",
}


# Training ---------------------------------------------------------------------------
class Crash(Exception):
    """Stands in for a crash in the middle of training."""


def crash_at(epoch: int, batch: int) -> object:
    """A callback that raises Crash as batch ``batch`` of epoch ``epoch`` (0-based) begins."""
    keras = config.keras()

    class CrashAt(keras.callbacks.Callback):  # type: ignore[name-defined,misc]
        def on_epoch_begin(self, e: int, logs: dict | None = None) -> None:
            self.epoch = e

        def on_train_batch_begin(self, b: int, logs: dict | None = None) -> None:
            if (self.epoch, b) == (epoch, batch):
                raise Crash

    return CrashAt()


def model(seed: int = 1) -> object:
    keras = config.keras()
    keras.utils.set_random_seed(seed)
    built = keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dropout(0.25),
            keras.layers.Dense(1),
        ]
    )
    built.compile(optimizer="adam", loss="mse")
    return built


def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((ROWS, 8), dtype=np.float32)
    return x, (x @ rng.standard_normal((8, 1))).astype(np.float32)


# A batch at a time: crash_at() stops at a batch's beginning, and on JAX the device-resident
# loop would choose several batches per dispatch, announced to callbacks once per dispatch.
COMMON = {
    "epochs": 3,
    "batch_size": BATCH,
    "seed": 5,
    "monitor": False,
    "verbose": 0,
    "steps_per_execution": 1,
}


def train(trained: object, backup_dir: Path | None, **more: object) -> dict:
    """fit.fit in this process; its answer, or the exception it raised."""
    return fit.fit(  # type: ignore[return-value]
        trained,
        data(),
        backup_dir=None if backup_dir is None else str(backup_dir),
        **{**COMMON, **more},  # type: ignore[arg-type]
    )


def answer_of(backup_dir: Path, **more: object) -> dict:
    """fit.fit through the bridge, as R calls it: the answer, error or not."""
    return bridge.call(
        "fit",
        {"model": model(), "data": data(), "backup_dir": str(backup_dir), **COMMON, **more},
    )


def crashed(backup_dir: Path, epoch: int, batch: int, freq: int = 3) -> None:
    """Train with backups every ``freq`` batches until the crash at (epoch, batch)."""
    with pytest.raises(errors.CallbackError) as stopped:
        train(model(), backup_dir, backup_freq=freq, callbacks=[crash_at(epoch, batch)])
    assert isinstance(stopped.value.__cause__, Crash)


def same_weights(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def listing(folder: Path) -> set[str]:
    return {path.name for path in folder.iterdir()}


def put_user_files(folder: Path) -> None:
    folder.mkdir(exist_ok=True)
    for name, content in USER_FILES.items():
        (folder / name).write_bytes(content)


def assert_user_files_intact(folder: Path) -> None:
    for name, content in USER_FILES.items():
        assert (folder / name).read_bytes() == content, name


# Item 2: only the run's own files are removed ---------------------------------------
def test_training_removes_only_the_files_it_wrote(tmp_path: Path) -> None:
    """Files named like backups (weights-*.weights.h5) that the user put there stay, through
    backups, a crash, the resume, and the end of training."""
    folder = tmp_path / "backups"
    put_user_files(folder)
    crashed(folder, epoch=1, batch=5)
    assert_user_files_intact(folder)
    resumed = train(model(2), folder, backup_freq=3)
    assert resumed["settings"]["resumed_from"] == {"epoch": 2, "batches_done": 3}
    assert listing(folder) == set(USER_FILES)
    assert_user_files_intact(folder)


def test_what_a_killed_write_left_goes_when_the_resumed_fit_completes(tmp_path: Path) -> None:
    """A fit killed while writing leaves a half-written weights file and temporaries no backup
    names; the fit that resumes and completes removes them, and the user's files stay."""
    folder = tmp_path / "backups"
    put_user_files(folder)
    crashed(folder, epoch=1, batch=5)
    leftovers = [
        f"{backup.WEIGHTS_PREFIX}000009-abc{backup.WEIGHTS_SUFFIX}",
        *(f"{prefix}x1y2" for prefix in backup_files.TEMPORARY_PREFIXES),
    ]
    for name in leftovers:
        (folder / name).write_bytes(b"cut short")
    resumed = train(model(2), folder, backup_freq=3)
    assert resumed["settings"]["resumed_from"] == {"epoch": 2, "batches_done": 3}
    assert listing(folder) == set(USER_FILES)
    assert_user_files_intact(folder)


def test_a_backup_never_takes_the_name_of_a_file_already_there(tmp_path: Path) -> None:
    folder = tmp_path / "backups"
    put_user_files(folder)
    crashed(folder, epoch=0, batch=4)
    state = backup.read_state(str(folder))
    assert state is not None and state.weights not in USER_FILES
    assert state.weights.startswith(backup.WEIGHTS_PREFIX)
    assert_user_files_intact(folder)


# Item 3: folders other users may write to, and links --------------------------------
@pytest.mark.parametrize(
    ("owner", "mode", "group", "said"),
    [
        ("nobody", 0o1777, None, r"belongs to nobody \(uid \d+\), not to you"),
        ("nobody", 0o755, None, r"belongs to nobody \(uid \d+\), not to you"),
        ("me", 0o1777, None, r"can be written by every user \(mode 1777.*chmod go-w"),
        ("me", 0o770, "other", r"can be written by the group .*chmod g-w"),
    ],
)
def test_a_folder_others_may_write_to_is_refused_and_a_planted_link_is_not_followed(
    tmp_path: Path,
    owner: str,
    mode: int,
    group: str | None,
    said: str,
    request: pytest.FixtureRequest,
) -> None:
    """The issue's case first: a folder made by another user and writable by all (as under
    /tmp), with a link planted at the name the backup's JSON was once written through."""
    shared = tmp_path / "shared"
    shared.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (shared / (backup.STATE_FILE + ".tmp")).symlink_to(victim)
    if owner == "nobody":
        other = request.getfixturevalue("nobody")
        os.chown(shared, other.pw_uid, other.pw_gid)
    if group is not None:
        if os.geteuid() != 0:
            pytest.skip("giving a folder to another group needs root")
        os.chown(shared, -1, other_group().gr_gid)
    os.chmod(shared, mode)
    answer = answer_of(shared)
    assert not answer["ok"], "trained in an unsafe folder"
    assert answer["r_class"] == "gpukeras_error_backup_dir_unsafe", answer
    assert answer["traceback"] is None
    assert f"backup_dir {shared}" in answer["message"]
    assert re.search(said, answer["message"]), answer["message"]
    assert victim.read_text() == "precious"
    assert listing(shared) == {backup.STATE_FILE + ".tmp"}


def test_folders_of_ones_own_pass_as_the_background_jobs_do(tmp_path: Path) -> None:
    """A folder check_dir makes (a background job's default) is this user's alone; one
    writable by the user's own private group (umask 002) passes too."""
    made = Path(backup_files.check_dir(tmp_path / "job" / "backup"))
    assert stat.S_IMODE(made.stat().st_mode) & 0o077 == 0
    me = pwd.getpwuid(os.geteuid())
    with contextlib.suppress(KeyError):
        own = grp.getgrnam(me.pw_name)
        if set(own.gr_mem) <= {me.pw_name}:
            shared = tmp_path / "own-group"
            shared.mkdir()
            os.chown(shared, -1, own.gr_gid)
            os.chmod(shared, 0o775)
            assert backup_files.check_dir(shared) == str(shared)
    assert listing(made) == set()  # the writability probe is gone


def test_links_planted_in_the_folder_are_never_read_through(tmp_path: Path) -> None:
    """A JSON or weights file that is a link is not opened: the backup cannot be used."""
    folder = tmp_path / "backups"
    crashed(folder, epoch=1, batch=1)
    state = backup.read_state(str(folder))
    assert state is not None and state.previous is not None
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # The weights: both generations' files become links to copies of themselves.
    for name in (state.weights, state.previous.weights):
        (elsewhere / name).write_bytes((folder / name).read_bytes())
        (folder / name).unlink()
        (folder / name).symlink_to(elsewhere / name)
    with pytest.raises(errors.BackupMismatchError, match=r"are not a plain file \(a link\?\)"):
        backup.resume_state(str(folder))
    # The JSON: a link to a copy of it.
    (elsewhere / backup.STATE_FILE).write_bytes((folder / backup.STATE_FILE).read_bytes())
    (folder / backup.STATE_FILE).unlink()
    (folder / backup.STATE_FILE).symlink_to(elsewhere / backup.STATE_FILE)
    with pytest.raises(errors.BackupMismatchError, match="Too many levels of symbolic links"):
        backup.read_state(str(folder))


def test_a_weights_name_outside_the_folder_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.weights.h5"
    outside.write_bytes(b"x" * 10)
    folder = tmp_path / "backups"
    folder.mkdir()
    state = {"epoch": 1, "batches_done": 0, "weights": "../outside.weights.h5", "generation": 1}
    (folder / backup.STATE_FILE).write_text(json.dumps(state))
    with pytest.raises(errors.BackupMismatchError, match="not a file in the folder"):
        backup.resume_state(str(folder))


# Item 4: durable backups, and the one before ---------------------------------------
def test_the_generation_before_the_newest_is_kept_until_the_next_commit(tmp_path: Path) -> None:
    folder = tmp_path / "backups"
    put_user_files(folder)
    # Backups every 3 batches of 8: after batches 3 and 6 and at the end of epoch 1, after
    # batch 3 of epoch 2.
    crashed(folder, epoch=1, batch=5)
    state = backup.read_state(str(folder))
    assert state is not None and state.previous is not None
    assert (state.epoch, state.batches_done, state.generation) == (1, 3, 4)
    assert (state.previous.epoch, state.previous.batches_done) == (1, 0)
    assert listing(folder) == {
        *USER_FILES,
        backup.STATE_FILE,
        state.weights,
        state.previous.weights,
    }
    assert (folder / state.weights).stat().st_size == state.size


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads fds' paths from /proc")
def test_a_backup_is_synced_before_its_commit_and_the_folder_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fsync(weights), fsync(JSON), fsync(folder), rename, fsync(folder); and a generation's
    weights are removed only once the one after the next is committed."""
    folder = tmp_path / "backups"
    events: list[tuple[str, str]] = []
    real_fsync, real_replace, real_unlink = os.fsync, os.replace, os.unlink

    def fsync(descriptor: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{descriptor}")))
        real_fsync(descriptor)

    def replace(source: object, target: object, **kwargs: object) -> None:
        events.append(("replace", os.fspath(target)))  # type: ignore[arg-type]
        real_replace(source, target, **kwargs)  # type: ignore[arg-type]

    def unlink(path: object, **kwargs: object) -> None:
        events.append(("unlink", os.fspath(path)))  # type: ignore[arg-type]
        real_unlink(path, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "unlink", unlink)
    crashed(folder, epoch=1, batch=5)  # four commits
    monkeypatch.undo()
    ours = [(kind, path) for kind, path in events if path.startswith(str(folder))]
    state_file = ("replace", str(folder / backup.STATE_FILE))
    commits = [i for i, event in enumerate(ours) if event == state_file]
    assert len(commits) == 4
    weights = [path for kind, path in ours if kind == "fsync" and backup.WEIGHTS_PREFIX in path]
    assert len(weights) == 4
    start = 0
    for commit, written in zip(commits, weights):
        kinds = ours[start : commit + 2]
        assert kinds.index(("fsync", written)) < len(kinds) - 2
        json_synced = [k for k in kinds if k[0] == "fsync" and k[1].endswith(".tmp")]
        assert json_synced and kinds.index(json_synced[0]) > kinds.index(("fsync", written))
        assert kinds[-3] == ("fsync", str(folder))  # the folder, before the rename
        assert kinds[-1] == ("fsync", str(folder))  # and after it
        start = commit + 2
    first_removed = ours.index(("unlink", weights[0]))
    assert first_removed > commits[2]  # kept through the second commit


@pytest.mark.parametrize("damage", ["emptied", "truncated"])
def test_a_newest_backup_a_crash_broke_falls_back_to_the_one_before(
    tmp_path: Path, damage: str
) -> None:
    """The weights file of the newest backup emptied or cut short (as a crash before the data
    reached the disk leaves it): the run resumes from the generation before and ends with the
    weights of an unbroken run."""
    reference = model()
    train(reference, None)
    folder = tmp_path / "backups"
    crashed(folder, epoch=1, batch=5)
    state = backup.read_state(str(folder))
    assert state is not None and state.size is not None
    newest = folder / state.weights
    with open(newest, "r+b") as file:
        file.truncate(0 if damage == "emptied" else state.size // 2)
    resumed_model = model(2)
    resumed = train(resumed_model, folder, backup_freq=3)
    start = resumed["settings"]["resumed_from"]
    assert (start["epoch"], start["batches_done"]) == (2, 0)  # the end of epoch 1
    assert f"the newest backup's weights ({state.weights}) are " in start["fallback"]
    assert "resumed from the one before it" in start["fallback"]
    assert resumed["history"]["epoch"] == [1, 2, 3]
    same_weights(resumed_model.get_weights(), reference.get_weights())  # type: ignore[attr-defined]
    assert not folder.exists()  # the broken file was the run's too: all removed


def test_a_backup_whose_generations_are_both_broken_names_what_to_remove(tmp_path: Path) -> None:
    folder = tmp_path / "backups"
    crashed(folder, epoch=1, batch=5)
    state = backup.read_state(str(folder))
    assert state is not None and state.previous is not None
    (folder / state.weights).write_bytes(b"")
    (folder / state.previous.weights).unlink()
    answer = answer_of(folder, backup_freq=3)
    assert answer["r_class"] == "gpukeras_error_backup_mismatch", answer
    message = answer["message"]
    assert f"({state.weights}) are empty" in message
    assert f"({state.previous.weights}) are missing" in message
    assert f"Delete {folder / backup.STATE_FILE} and {state.weights}" in message


def test_a_changed_weights_file_of_the_right_size_is_not_used(tmp_path: Path) -> None:
    folder = tmp_path / "backups"
    crashed(folder, epoch=1, batch=5)
    state = backup.read_state(str(folder))
    assert state is not None
    newest = folder / state.weights
    content = bytearray(newest.read_bytes())
    content[-1] ^= 0xFF
    newest.write_bytes(bytes(content))
    resumed = backup.resume_state(str(folder))
    assert resumed is not None and "SHA-256 differs" in str(resumed.fallback)


# Item 8: unwritable and full disks ---------------------------------------------------
@contextlib.contextmanager
def mounted(folder: Path, options: str) -> Iterator[None]:
    """A tmpfs mounted at ``folder``; skips where mounting is not allowed."""
    folder.mkdir(exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", str(folder)], check=False)


def test_an_unwritable_backup_dir_fails_before_training(tmp_path: Path) -> None:
    keras = config.keras()
    began: list[int] = []
    watch = keras.callbacks.LambdaCallback(on_train_begin=lambda logs: began.append(1))
    folder = tmp_path / "readonly"
    if os.geteuid() != 0:
        folder.mkdir()
        folder.chmod(0o500)
        context: contextlib.AbstractContextManager = contextlib.nullcontext()
        cause = "Permission denied, EACCES"
    else:
        context = mounted(folder, "ro,mode=0700")
        cause = "Read-only file system, EROFS"
    with context:
        answer = answer_of(folder, callbacks=[watch])
    assert answer["r_class"] == "gpukeras_error_bad_argument", answer
    assert answer["message"] == (
        f"backup_dir {folder} cannot be written to ({cause}): give a folder you can write to."
    )
    assert began == []


def test_a_disk_that_fills_up_is_a_classed_error_that_says_what_to_free(tmp_path: Path) -> None:
    """A small tmpfs filled by another file after the first backup: the second fails with
    ENOSPC before HDF5 writes (which could crash the process), and the first stays whole."""
    keras = config.keras()
    folder = tmp_path / "small"

    class Fill(keras.callbacks.Callback):  # type: ignore[name-defined,misc]
        def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
            if epoch == 1:
                (folder / "filler").write_bytes(b"x" * (shutil.disk_usage(folder).free - 8192))

    with mounted(folder, "size=1m,mode=0700"):
        answer = answer_of(folder, callbacks=[Fill()])
        left = listing(folder)
        state = backup.resume_state(str(folder))
    assert answer["r_class"] == "gpukeras_error_backup_write", answer
    assert answer["traceback"] is None
    message = answer["message"]
    assert f"a backup could not be written to {folder} (No space left on device, ENOSPC)" in (
        message
    )
    assert "Free space on that disk, or give a backup_dir on another one" in message
    assert f"The last good backup is in {folder} (epoch 2, 0 batches done)" in message
    assert state is not None and (state.epoch, state.fallback) == (1, None)
    assert left == {backup.STATE_FILE, state.weights, "filler"}


def test_a_write_failure_never_names_a_backup_that_is_gone(tmp_path: Path) -> None:
    """The folder emptied by someone else during training, then the disk full: the error
    says no backup is left, not where "the last good backup" was."""
    keras = config.keras()
    folder = tmp_path / "small"

    class EmptyAndFill(keras.callbacks.Callback):  # type: ignore[name-defined,misc]
        def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
            if epoch == 1:
                for path in folder.glob("gpukeras-*"):
                    if path.name != backup_files.LOCK_FILE:
                        path.unlink()
                (folder / "filler").write_bytes(b"x" * (shutil.disk_usage(folder).free - 8192))

    with mounted(folder, "size=1m,mode=0700"):
        answer = answer_of(folder, callbacks=[EmptyAndFill()])
    assert answer["r_class"] == "gpukeras_error_backup_write", answer
    assert f"No backup is left in {folder} (removed during training)" in answer["message"]
    assert "The last good backup" not in answer["message"]


def test_a_file_size_limit_is_a_classed_error_before_any_backup(tmp_path: Path) -> None:
    """RLIMIT_FSIZE below the weights' size (no root needed): EFBIG at the first backup."""
    folder = tmp_path / "limited"
    setup = (
        "import resource, signal\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
    )
    after = f"""
import numpy as np
from gpukeras.core.runtime import config
keras = config.keras()
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(64), keras.layers.Dense(1)])
model.compile(optimizer="adam", loss="mse")
x = np.ones((64, 8), "float32")
readback["answer"] = bridge.call("fit", {{
    "model": model, "data": (x, x[:, :1]), "epochs": 2, "batch_size": 16, "verbose": 0,
    "monitor": False, "backup_dir": {str(folder)!r}}})
"""
    # On the CPU: on an H100 the CUDA runtime's own start, under that limit, crashed the
    # process (SIGSEGV) before any training
    cpu = {"JAX_PLATFORMS": "cpu", "CUDA_VISIBLE_DEVICES": ""}
    run = run_core("core.runtime:configured_backend", env=cpu, setup=setup, after=after)
    answer = run.readback["answer"]
    assert answer["r_class"] == "gpukeras_error_backup_write", answer
    assert "(File too large, EFBIG)" in answer["message"]
    assert "A limit on file sizes (ulimit -f) stops the write" in answer["message"]
    assert "No backup had been committed yet" in answer["message"]
    assert listing(folder) == set()


# Reading the committed state ----------------------------------------------------------
def commit(folder: Path, weights: str, **fields: object) -> None:
    state = {"epoch": 1, "batches_done": 3, "weights": weights, "generation": 2, **fields}
    (folder / backup.STATE_FILE).write_text(json.dumps(state))


def test_no_state_file_is_a_fresh_start(tmp_path: Path) -> None:
    assert backup.read_state(str(tmp_path)) is None
    assert backup.resume_state(str(tmp_path)) is None


def test_a_format_1_state_is_read_with_its_weights(tmp_path: Path) -> None:
    (tmp_path / "weights-000002.weights.h5").write_bytes(b"some weights")
    commit(tmp_path, "weights-000002.weights.h5", history=[{"epoch": 1, "loss": 0.5}])
    state = backup.resume_state(str(tmp_path))
    assert state is not None
    assert (state.epoch, state.batches_done, state.generation) == (1, 3, 2)
    assert state.history == [{"epoch": 1, "loss": 0.5}]
    assert state.owned == ["weights-000002.weights.h5"]


def test_a_state_naming_missing_weights_says_what_to_delete(tmp_path: Path) -> None:
    commit(tmp_path, "weights-000002.weights.h5")
    with pytest.raises(
        errors.BackupMismatchError,
        match=r"its weights \(weights-000002\.weights\.h5\) are missing .* Delete ",
    ):
        backup.resume_state(str(tmp_path))


def test_an_unreadable_state_says_to_delete_it(tmp_path: Path) -> None:
    (tmp_path / backup.STATE_FILE).write_text("{not json")
    with pytest.raises(errors.BackupMismatchError, match="cannot be read"):
        backup.read_state(str(tmp_path))


# One backup folder, one fit (issue #32, item 5) ---------------------------------------
HOLD = """
import sys, time
from gpukeras.train import backup_files
with backup_files.folder_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(120)
"""


@contextlib.contextmanager
def held_by_another_process(folder: Path) -> Iterator[subprocess.Popen]:
    """A real second process holding ``folder``'s lock until the block ends (then killed)."""
    env = {**os.environ, "PYTHONPATH": child_pythonpath()}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder)], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.kill()
        holder.wait(timeout=30)


def test_a_folder_another_fit_holds_is_refused_naming_it_and_freed_when_it_dies(
    tmp_path: Path,
) -> None:
    put_user_files(tmp_path)
    with held_by_another_process(tmp_path) as holder:
        answer = answer_of(tmp_path)
        assert not answer["ok"] and answer["r_class"] == "gpukeras_error_backup_in_use", answer
        assert f"process {holder.pid}" in answer["message"]
        assert "another backup_dir" in answer["message"]
        assert backup.STATE_FILE not in listing(tmp_path)  # nothing read, nothing written
    # SIGKILL: the kernel dropped the lock; its file, left behind, is taken over
    assert backup_files.LOCK_FILE in listing(tmp_path)
    assert answer_of(tmp_path)["ok"]
    assert listing(tmp_path) == set(USER_FILES)  # the lock file too is gone after the fit
    assert_user_files_intact(tmp_path)


def test_the_lock_is_held_for_the_fit_and_released_when_it_fails(tmp_path: Path) -> None:
    seen = []
    keras = config.keras()

    class Probe(keras.callbacks.Callback):  # type: ignore[name-defined,misc]
        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            refused = pytest.raises(errors.BackupInUseError, match=f"process {os.getpid()}")
            with refused, backup_files.folder_lock(str(tmp_path)):
                pass
            seen.append(epoch)

    train(model(), tmp_path, callbacks=[Probe()])
    assert seen == [0, 1, 2]
    crashed(tmp_path, 1, 2)  # the fit failed: the lock went with it
    with backup_files.folder_lock(str(tmp_path)):
        assert json.loads((tmp_path / backup_files.LOCK_FILE).read_text())["pid"] == os.getpid()


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"learning_rate": 0.5}, "learning_rate"),
        ({"clipnorm": 1.0}, "clipnorm"),
        ({"accumulate": 2}, "accumulate"),
    ],
    ids=["learning rate", "clipnorm", "accumulate"],
)
def test_a_backup_of_another_request_is_never_resumed(
    tmp_path: Path, change: dict, named: str
) -> None:
    crashed(tmp_path, 1, 2)
    with pytest.raises(errors.BackupMismatchError, match=rf"different training run \(.*{named}:"):
        train(model(), tmp_path, backup_freq=3, **change)
    assert backup.read_state(str(tmp_path)) is not None  # left as it was, for the right call


def test_a_backup_of_another_model_is_never_resumed(tmp_path: Path) -> None:
    crashed(tmp_path, 1, 2)
    keras = config.keras()
    other = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(16), keras.layers.Dense(16), keras.layers.Dense(1)]
    )
    other.compile(optimizer="sgd", loss="mae")
    with pytest.raises(errors.BackupMismatchError, match=r"different training run") as refused:
        train(other, tmp_path, backup_freq=3)
    for differs in ("layers:", "loss:", "optimizer:"):
        assert differs in str(refused.value)
