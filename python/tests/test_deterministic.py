"""gpu_setup(deterministic = TRUE, seed = ): the same run gives the same weights, bit for bit.

Each backend runs in a fresh Python (``run_setup``): op determinism is a setting of
the process, and on JAX XLA reads it from XLA_FLAGS once, when its backends start.
There the same fit, run again from the same starting weights and seed, must end with
weights whose bytes are equal; the backend must say determinism is on (TensorFlow: its
own reading, and its refusal of an unseeded random op; JAX: XLA_FLAGS as XLA read it,
the user's own flags kept). What determinism costs is measured in
``bench/deterministic.py``, not here.
"""

from __future__ import annotations

import pytest

from conftest import CoreRun, run_on_jax, run_setup
from gpukeras import bridge
from gpukeras.gpu import xla_env

BACKENDS = ["tensorflow", "jax"]
# A flag of the user's that XLA knows on every platform, and determinism asked off.
USER_FLAGS = "--xla_force_host_platform_device_count=1 --xla_gpu_deterministic_ops=false"


@pytest.fixture(scope="module", params=BACKENDS)
def deterministic(request: pytest.FixtureRequest) -> CoreRun:
    """gpu_setup(deterministic = TRUE, seed = 1), then the fits of
    ``scripts/deterministic_fit.py``; on JAX under the user's XLA_FLAGS."""
    env = {"XLA_FLAGS": USER_FLAGS if request.param == "jax" else None}
    return run_setup(
        request.param,
        {"deterministic": True, "seed": 1},
        "import deterministic_fit",
        env=env,
        timeout=240,  # its fits: past 120 s on JAX at load 15 on 2 cores (2026-11-29)
    )


def test_the_same_seed_gives_bitwise_equal_weights(deterministic: CoreRun) -> None:
    fits = deterministic.readback["fits"]
    assert fits["seed 1"]["weights"] == fits["seed 1 again"]["weights"]
    # Another seed is another run (data order, Dropout): the hash does see the difference.
    assert fits["seed 2"]["weights"] != fits["seed 1"]["weights"]
    assert [fit["deterministic"] for fit in fits.values()] == [True] * 4


def test_a_fit_without_a_seed_takes_the_setups(deterministic: CoreRun) -> None:
    fits = deterministic.readback["fits"]
    assert [fit["seed"] for fit in fits.values()] == [1, 1, 1, 2]
    assert fits["no seed"]["weights"] == fits["seed 1"]["weights"]


def test_the_setup_reports_determinism_and_the_seed(deterministic: CoreRun) -> None:
    settings = deterministic.value
    assert settings["deterministic"] is True
    assert settings["seed"] == 1


def test_tensorflow_op_determinism_is_on(deterministic: CoreRun) -> None:
    if deterministic.environ["KERAS_BACKEND"] != "tensorflow":
        pytest.skip("TensorFlow's op determinism")
    readback = deterministic.readback
    assert readback["tf_op_determinism"] is True
    assert "Random ops require a seed to be set when determinism is enabled" in str(
        readback["unseeded_random_op"]
    )
    assert readback["xla_flags"] is None  # TensorFlow's switch covers its XLA: no flag added


def test_jax_xla_flags_keep_the_users_and_end_with_determinism(deterministic: CoreRun) -> None:
    if deterministic.environ["KERAS_BACKEND"] != "jax":
        pytest.skip("XLA_FLAGS are JAX's")
    assert deterministic.readback["xla_flags"] == (
        "--xla_force_host_platform_device_count=1 --xla_gpu_deterministic_ops=true"
    )


def test_asked_after_jax_started_it_holds_without_a_gpu_and_is_refused_with_one() -> None:
    """XLA reads XLA_FLAGS when JAX starts: later, a GPU in use keeps what it read (a
    runtime_started error that names the flag, nothing changed); XLA:CPU is
    deterministic as it is, so without a GPU the request holds and is reported."""
    run = run_on_jax(
        "import jax\n"
        "readback['before'] = os.environ.get('XLA_FLAGS')\n"
        "readback['gpus'] = sum(d.platform == 'gpu' for d in jax.devices())\n"
        "readback['setup'] = bridge.call('setup', {'deterministic': True, 'seed': 1})\n"
        "readback['xla_flags'] = os.environ.get('XLA_FLAGS')"
    )
    answer, before = run.readback["setup"], run.readback["before"]
    if run.readback["gpus"]:
        assert answer["r_class"] == "gpukeras_error_runtime_started"
        assert (
            "deterministic (XLA_FLAGS --xla_gpu_deterministic_ops): asked 'true'"
            in answer["message"]
        )
        assert run.readback["xla_flags"] == before  # nothing changed
    else:
        assert answer["ok"], answer
        assert answer["value"]["deterministic"] is True
        assert run.readback["xla_flags"] == xla_env.with_xla_flag(
            before or "", "xla_gpu_deterministic_ops", "true"
        )


@pytest.mark.parametrize(
    ("flags", "value"),
    [
        ("", None),
        ("--xla_gpu_deterministic_ops", "true"),
        ("--xla_gpu_deterministic_ops=false --xla_gpu_deterministic_ops=true", "true"),
        ("--xla_gpu_deterministic_ops=true --xla_gpu_deterministic_ops=0", "0"),
        ("--xla_gpu_deterministic_ops_extra=true", None),
    ],
)
def test_xla_flag_reads_the_value_xla_takes(flags: str, value: str | None) -> None:
    """The last one counts, a bare flag is on, a longer name is another flag."""
    assert xla_env.xla_flag("xla_gpu_deterministic_ops", flags) == value


def test_with_xla_flag_keeps_the_other_flags_in_order() -> None:
    flags = "--a=1 --xla_gpu_deterministic_ops=false --b --xla_gpu_deterministic_ops_x=1"
    assert xla_env.with_xla_flag(flags, "xla_gpu_deterministic_ops", "true") == (
        "--a=1 --b --xla_gpu_deterministic_ops_x=1 --xla_gpu_deterministic_ops=true"
    )
    assert xla_env.with_xla_flag("", "xla_gpu_deterministic_ops", "true") == (
        "--xla_gpu_deterministic_ops=true"
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"deterministic": True}, "`deterministic = TRUE` needs a `seed`"),
    ],
)
def test_bad_arguments_are_refused_before_anything_starts(
    kwargs: dict[str, object], message: str
) -> None:
    """Checked before the backend is touched, so this process's is not started."""
    answer = bridge.call("setup", kwargs)
    assert answer["ok"] is False
    assert answer["r_class"] == "gpukeras_error_bad_argument"
    assert message in answer["message"]
