"""JAX's persistent compilation cache, kept per user (core.compile_cache): shared by
fresh processes (a session, its workers, a later session), private, bounded, off when
asked, the user's own cache left theirs, and cleared of JAX's files alone. Its children run
without the suite's own cache (conftest.SUITE_CACHE), as a user's without one of theirs."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest

from conftest import NO_SUITE_CACHE, CoreRun, requires, run_core

# A fresh process on JAX (TensorFlow blocked, as on the GPU machines: 3 s less) that
# chooses the cache as R does when the core starts, then fits a small model.
NO_TF = "sys.modules['tensorflow'] = None"
FIT = """
bridge.call("start", {})  # as gpu_keras() and gpu_fit() start Keras
import keras
import numpy as np
keras.utils.set_random_seed(1)
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8), keras.layers.Dense(1)])
model.compile(optimizer="adam", loss="mse")
x = np.ones((32, 4), "float32")
model.fit(x, x[:, :1], batch_size=8, epochs=1, verbose=0)
model.predict(x, verbose=0)
readback["cache"] = bridge.call("compile_cache", {})["value"]
import jax
readback["jax_dir"] = jax.config.jax_compilation_cache_dir
"""


def fit_with_cache(folder: str | None, max_bytes: int = -1, env: dict | None = None) -> dict:
    run = run_core(
        "compile_cache_choose",
        {"folder": folder, "max_bytes": max_bytes},
        env={"KERAS_BACKEND": "jax", **NO_SUITE_CACHE, **(env or {})},
        setup=NO_TF,
        after=FIT,
    )
    return run.readback


@pytest.fixture(scope="module")
def first_fit(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A first fresh process's fit with an unbounded cache in a folder it makes, and what it
    read back, which tests check, fill again or copy (none changes the folder's programs)."""
    requires("jax")
    folder = tmp_path_factory.mktemp("first") / "cache" / "compiled"
    return folder, fit_with_cache(str(folder))


def test_a_second_fresh_process_compiles_nothing_and_the_folder_is_private(
    first_fit: tuple[Path, dict],
) -> None:
    folder, first = first_fit
    second = fit_with_cache(str(folder))
    assert first["jax_dir"] == str(folder)
    assert first["cache"]["whose"] == "gpukeras" and first["cache"]["folder"] == str(folder)
    assert first["cache"]["misses"] > 0 and first["cache"]["hits"] == 0
    assert second["cache"]["misses"] == 0
    assert second["cache"]["hits"] == first["cache"]["misses"]
    assert second["cache"]["programs"] == first["cache"]["misses"]
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_a_folder_open_to_others_is_made_private_as_jax_starts(tmp_path: Path) -> None:
    requires("jax")
    folder = tmp_path / "open"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    said = run_core(
        "compile_cache_choose", {"folder": str(folder), "max_bytes": -1}, env=NO_SUITE_CACHE
    ).value
    assert said["whose"] == "gpukeras" and said["jax_started"] is False
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755
    fit_with_cache(str(folder))
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_the_cache_keeps_within_its_bound(tmp_path: Path, first_fit: tuple[Path, dict]) -> None:
    requires("filelock")
    folder, first = first_fit
    unbounded = first["cache"]
    sizes = sorted(p.stat().st_size for p in folder.glob("*-cache"))
    assert unbounded["max_bytes"] == -1 and len(sizes) >= 2
    bound = sizes[-1] + sizes[-2]  # the two largest programs fit, not all of them
    bounded = fit_with_cache(str(tmp_path / "bounded"), bound)["cache"]
    kept = sum(p.stat().st_size for p in (tmp_path / "bounded").glob("*-cache"))
    assert bounded["max_bytes"] == bound
    assert 0 < kept <= bound and bounded["programs"] < unbounded["programs"]


def test_off_leaves_jax_without_a_cache(tmp_path: Path) -> None:
    requires("jax")
    said = fit_with_cache(None)
    assert said["jax_dir"] is None
    assert said["cache"]["whose"] == "off" and "turned off" in said["cache"]["why"]
    # every program compiled, none found
    assert said["cache"]["misses"] > 0 and said["cache"]["hits"] == 0
    assert said["cache"]["folder"] is None


def test_a_users_own_jax_cache_is_theirs(tmp_path: Path) -> None:
    requires("jax")
    own, ours = tmp_path / "mine", tmp_path / "ours"
    said = fit_with_cache(str(ours), env={"JAX_COMPILATION_CACHE_DIR": str(own)})
    assert said["jax_dir"] == str(own)
    assert said["cache"]["whose"] == "user" and said["cache"]["folder"] == str(own)
    assert said["cache"]["max_bytes"] == -1
    assert not ours.exists()


@pytest.fixture(scope="module")
def tensorflow_worker(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CoreRun]:
    """One fresh process on TensorFlow that chooses the cache in a folder, as R does when the
    core starts, starts Keras, reads the cache, then warms its compiler as a waiting worker
    does (``warm``: that call's answer)."""
    requires("tensorflow")
    folder = tmp_path_factory.mktemp("tensorflow") / "c"
    run = run_core(
        "compile_cache_choose",
        {"folder": str(folder), "max_bytes": -1},
        env={"KERAS_BACKEND": "tensorflow", **NO_SUITE_CACHE},
        after="bridge.call('start', {})\n"
        "readback['cache'] = bridge.call('compile_cache', {})['value']\n"
        "readback['warm'] = bridge.call('workers_warm', {})",
    )
    return folder, run


def test_on_tensorflow_nothing_is_cached(tensorflow_worker: tuple[Path, CoreRun]) -> None:
    folder, run = tensorflow_worker
    assert run.readback["cache"]["jax_started"] is False
    assert run.readback["cache"]["requests"] == 0 and not folder.exists()


def test_clearing_removes_what_jax_wrote_and_nothing_else(
    tmp_path: Path, first_fit: tuple[Path, dict]
) -> None:
    folder = tmp_path / "c"
    shutil.copytree(first_fit[0], folder)  # what a fit wrote, in a folder of this test's
    programs = first_fit[1]["cache"]["programs"]
    (folder / "notes.txt").write_text("mine")
    (folder / "xla_gpu_per_fusion_autotune_cache_dir").mkdir()
    (folder / "xla_gpu_per_fusion_autotune_cache_dir" / "a").write_text("tuned")
    cleared = run_core("compile_cache_clear", {"folder": str(folder)}).value
    # each program's entry (unbounded: no access times, no lock) and XLA's file
    assert cleared["files"] == programs + 1 and cleared["bytes"] > 0
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]
    assert run_core("compile_cache_clear", {"folder": str(tmp_path / "none")}).value["files"] == 0


def test_a_waiting_worker_warms_its_compiler_on_both_backends(
    request: pytest.FixtureRequest,
) -> None:
    requires("jax")
    listen = """sys.modules['tensorflow'] = None
import jax.monitoring
events = []
jax.monitoring.register_event_duration_secs_listener(lambda name, secs, **kw: events.append(name))
"""
    after = 'readback["compiles"] = events.count("/jax/core/compile/backend_compile_duration")'
    run = run_core(
        "workers_warm", env={"KERAS_BACKEND": "jax", **NO_SUITE_CACHE}, setup=listen, after=after
    )
    assert run.value["backend"] == "jax" and run.value["seconds"] > 0
    assert run.readback["compiles"] >= 1
    _, run = request.getfixturevalue("tensorflow_worker")  # skips without TensorFlow
    warm = run.readback["warm"]
    assert warm["ok"], warm
    assert warm["value"]["backend"] == "tensorflow" and warm["value"]["seconds"] > 0
