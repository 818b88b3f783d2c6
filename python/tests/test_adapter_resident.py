"""``ResidentAdapter`` and ``DeviceRows`` (JAX): rows put on the device once, each epoch's
order drawn there from (seed, epoch), and ``decide``, whether rows go there at all.

The device-resident loop that trains on them (``gpukeras.train.resident``), a
``DataParallel`` over several devices, and killed runs that resume are tested in
fresh JAX processes by test_resident.py; here the adapter alone, with JAX beside
whichever backend this process runs.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import NotingPlan
from gpukeras.core.errors import BadDataError
from gpukeras.core.runtime import config
from gpukeras.data.adapters import Decision, ResidentAdapter, Rows, resident
from scripts.trained_batches import numbered_rows

# 10 rows in batches of 4: two whole batches and a last one of 2.
ROWS, BATCH = 10, 4


@pytest.fixture(autouse=True)
def jax() -> object:
    return pytest.importorskip("jax")


def device_rows(on_host: bool | None = None, **options: object) -> resident.DeviceRows:
    x, y = numbered_rows(ROWS)
    rows = Rows(x, y, ROWS, BATCH, **{"seed": 7, **options})  # type: ignore[arg-type]
    return resident.DeviceRows(rows, on_host=on_host)


@pytest.mark.parametrize("on_host", [True, False], ids=["host", "device"])
def test_each_epoch_is_every_row_once_in_an_order_drawn_from_the_seed_and_epoch(
    on_host: bool,
) -> None:
    rows = device_rows(on_host)
    orders = [np.asarray(rows.order(epoch)) for epoch in range(3)]
    for order in orders:
        assert sorted(order.tolist()) == list(range(ROWS))
        assert order.dtype == np.int32  # the type the loop's programs are compiled for
    assert not np.array_equal(orders[0], orders[1])
    again = device_rows(on_host)  # a fresh process, as a resumed run is
    assert all(np.array_equal(np.asarray(again.order(e)), orders[e]) for e in range(3))
    assert not np.array_equal(np.asarray(device_rows(on_host, seed=8).order(0)), orders[0])


def test_the_order_is_drawn_on_the_host_on_the_cpu_backend_and_on_a_gpu_on_the_device(
    jax: object,
) -> None:
    """On the CPU, jax.random's permutation (XLA's CPU sort) held up training at every epoch's
    start (43-54 ms for 102,400 rows, issue #63); NumPy's draw and the copy take about 1 ms."""
    on_cpu = jax.default_backend() == "cpu"  # type: ignore[attr-defined]
    assert resident.draws_on_host(jax) is on_cpu
    assert device_rows().on_host is on_cpu


def test_the_last_batch_is_partial_unless_dropped_and_unshuffled_rows_keep_their_order() -> None:
    rows = device_rows()
    assert (rows.full, rows.partial, rows.steps) == (2, 2, 3)
    dropped = device_rows(drop_remainder=True)
    assert (dropped.full, dropped.partial, dropped.steps) == (2, 0, 2)
    assert np.asarray(device_rows(shuffle=False).order(1)).tolist() == list(range(ROWS))


def test_a_later_fit_in_the_session_draws_its_orders_with_the_program_compiled_before(
    jax: object, caplog: pytest.LogCaptureFixture
) -> None:
    """A session's next gpu_fit() makes new DeviceRows: on the device its order program is
    compiled once per row count in the process, not once per fit (each fit compiled it anew:
    0.24-0.6 s of its start on a 2-core CPU); on the host nothing is compiled."""
    device_rows(on_host=False).order(0)  # compiled here, or by an earlier test
    with caplog.at_level("WARNING"), jax.log_compiles():  # type: ignore[attr-defined]
        later = device_rows(on_host=False, seed=8)
        later.order(0), later.order(3)
        drawn = device_rows(on_host=True, seed=9)
        drawn.order(0), drawn.order(3)
    assert not [r.message for r in caplog.records if "Compiling" in r.message]
    with caplog.at_level("WARNING"), jax.log_compiles():  # type: ignore[attr-defined]
        x, y = numbered_rows(ROWS + 1)
        resident.DeviceRows(Rows(x, y, ROWS + 1, BATCH, seed=7), on_host=False).order(0)
    # another row count is another program (the test sees compiles when there are some)
    assert [r.message for r in caplog.records if "Compiling" in r.message]


def test_a_resumed_epoch_trains_on_the_batches_of_the_unbroken_run() -> None:
    """Resumed after k batches of epoch 1, the loop starts at batch k of the same order."""
    k = 2
    unbroken, resumed = np.asarray(device_rows().order(1)), np.asarray(device_rows().order(1))
    np.testing.assert_array_equal(resumed[k * BATCH :], unbroken[k * BATCH :])


def model() -> object:
    keras = config.keras()
    built = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    built.compile(optimizer="sgd", loss="mse")
    return built


def adapter(validation: tuple | None = None) -> ResidentAdapter:
    x, y = numbered_rows(ROWS)
    decision = Decision(True, "on the device")
    return ResidentAdapter(Rows(x, y, ROWS, BATCH, 7), validation, None, decision)


def test_keras_gets_a_token_row_per_step_and_the_rows_are_on_the_device() -> None:
    made = adapter()
    assert made.kind == "device arrays" and made.decision.resident
    assert (made.batch_size, made.steps_per_epoch, made.rows) == (BATCH, 3, ROWS)
    assert made.fit_args.keys() == {"x", "batch_size", "shuffle"}
    assert made.fit_args["x"].shape == (3, 1) and made.fit_args["batch_size"] == 1
    assert made.fit_args["shuffle"] is False
    x, _ = made.device_rows.data
    np.testing.assert_array_equal(np.asarray(x), numbered_rows(ROWS)[0])
    assert made.gpu_dataset() == {
        "source": "arrays",
        "cache": False,
        "user_map": False,
        "on_device": True,
    }


def test_validation_rows_go_on_the_device_and_keras_gets_a_token_per_step() -> None:
    assert adapter().validation == {}
    made = adapter(validation=numbered_rows(6))
    rows = made.device_rows
    assert (rows.val_full, rows.val_partial, rows.val_steps) == (1, 2, 2)
    args = made.validation
    assert args["validation_batch_size"] == 1
    assert [part.shape for part in args["validation_data"]] == [(2, 1)]


def test_a_plan_checks_the_batches_and_the_rows_stay_as_they_are() -> None:
    plan = NotingPlan(workers=2)
    made = adapter()
    made.follow(plan)
    assert plan.checked == [(BATCH, ROWS)] and plan.sharded == []


def test_the_model_is_built_from_the_rows_and_rows_it_refuses_are_bad_data() -> None:
    built = model()
    adapter().build(built)
    assert built.built and built.optimizer.built
    rows = Rows(np.zeros((ROWS, 3), "float32"), np.zeros(ROWS), ROWS, BATCH, 7)
    refused = ResidentAdapter(rows, None, None, Decision(True, "on the device"))
    with pytest.raises(BadDataError, match="The model cannot train on this data"):
        refused.build(model())


class Device:
    """A JAX device with this much free memory."""

    def __init__(self, free: int) -> None:
        self.free = free

    def memory_stats(self) -> dict[str, int]:
        return {"bytes_limit": self.free, "bytes_in_use": 0}


@pytest.mark.parametrize(
    ("backend", "jit_compile", "several", "free", "resident_", "why"),
    [
        ("tensorflow", True, False, 2**30, False, "data streams from host memory on tensorflow"),
        ("jax", True, True, 2**30, False, "with several processes"),
        ("jax", False, False, 2**30, False, "runs without XLA"),
        ("jax", True, False, 100, False, "more than 50% of the device's free memory"),
        ("jax", True, False, 2**30, True, "is on the device"),
    ],
)
def test_rows_go_on_the_device_only_on_jax_compiled_alone_and_where_they_fit(
    backend: str, jit_compile: bool, several: bool, free: int, resident_: bool, why: str
) -> None:
    x, y = numbered_rows(ROWS)
    decision = resident.decide(
        backend, jit_compile, Rows(x, y, ROWS, BATCH, 7), None, [Device(free)], several
    )
    assert decision.resident is resident_
    assert why in decision.why
    if backend == "jax" and jit_compile and not several:
        assert decision.data_bytes == x.nbytes + y.nbytes and decision.free_bytes == free
