"""The step timer on real Keras training (this process's backend) with tiny data."""

from __future__ import annotations

import time

import numpy as np
import pytest

from gpukeras.core.runtime import config
from gpukeras.train import step_summary, timing

BATCH = 16
ROWS = 8 * BATCH  # 8 full batches per epoch


def tiny_model(steps_per_execution: int = 1) -> object:
    keras = config.keras()
    model = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
    )
    model.compile(optimizer="sgd", loss="mse", steps_per_execution=steps_per_execution)
    return model


def tiny_data(rows: int = ROWS) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return (
        rng.standard_normal((rows, 8), dtype=np.float32),
        rng.standard_normal((rows, 1), dtype=np.float32),
    )


def sane(report: dict) -> None:
    assert report["seconds"] > 0
    assert report["step_time_mean_ms"] > 0
    assert report["step_time_sd_ms"] >= 0
    assert report["samples_per_second"] > 0
    for share in ("input_wait_share", "between_steps_share"):
        assert 0 <= report[share] <= 1, (share, report)
    assert report["input_wait_share"] + report["between_steps_share"] <= 1 + 1e-9


def steps_of(*rows: tuple) -> list[timing.Step]:
    """Steps from (epoch, begin, fetch_seconds, returned, samples) rows."""
    return [timing.Step(*row) for row in rows]


def test_summarize_arithmetic() -> None:
    steps = steps_of(
        (0, 0.0, 0.5, 0.9, 4),  # skipped
        (0, 1.0, 0.1, 1.8, 4),
        (0, 2.0, 0.3, 2.9, 4),
        (1, 10.0, 0.0, 10.5, 4),
    )
    record = timing.StepRecord(steps=steps, epoch_ends={0: 3.0, 1: 11.0})
    report = step_summary.summarize(record, skip=1)
    assert report["steps"] == 3
    assert report["skipped"] == 1
    assert report["seconds"] == pytest.approx(3.0)  # 1 + 1 + 1: the gap between epochs is out
    assert report["step_time_mean_ms"] == pytest.approx(1000.0)
    assert report["input_wait_share"] == pytest.approx(0.4 / 3)
    assert report["between_steps_share"] == pytest.approx((0.2 + 0.1 + 0.5) / 3)
    assert report["samples"] == 12
    assert report["samples_per_second"] == pytest.approx(12 / 3)


def test_summarize_leaves_out_the_first_step_of_each_new_batch_size() -> None:
    # Epoch 0 ends in a batch of 2 rows, which compiled the step again (5 s).
    steps = steps_of(
        (0, 0.0, 0.1, 0.5, 4),  # skipped
        (0, 1.0, 0.1, 1.5, 4),
        (0, 2.0, 0.1, 6.5, 2),
        (1, 10.0, 0.1, 10.5, 4),
        (1, 11.0, 0.1, 11.5, 2),
    )
    record = timing.StepRecord(steps=steps, epoch_ends={0: 7.0, 1: 12.0})
    report = step_summary.summarize(record, skip=1)
    assert report["new_batch_size_steps"] == 1
    assert report["steps"] == 3
    assert report["seconds"] == pytest.approx(3.0)
    assert report["samples"] == 10
    # Batches not seen (measure_input=False): nothing to tell them apart by.
    for step in steps:
        step.samples = None
    unseen = step_summary.summarize(record, skip=1, batch_size=4)
    assert unseen["new_batch_size_steps"] == 0 and unseen["seconds"] == pytest.approx(8.0)


def test_summarize_counts_only_the_wait_beyond_the_fetch_floor() -> None:
    steps = steps_of(
        (0, 0.0, 0.3, 0.9, 4),
        (0, 1.0, 0.05, 1.8, 4),
    )
    record = timing.StepRecord(steps=steps, epoch_ends={0: 2.0}, fetch_floor_seconds=0.1)
    report = step_summary.summarize(record, skip=0)
    assert report["fetch_floor_ms"] == pytest.approx(100.0)
    # 0.3 - 0.1 counts; 0.05, under the floor, counts as no wait (not as negative).
    assert report["input_wait_share"] == pytest.approx(0.2 / 2)
    assert report["input_wait_mean_ms"] == pytest.approx(100.0)
    record.steps_per_execution = 2  # each step took two batches: twice the floor
    assert step_summary.summarize(record, skip=0)["input_wait_share"] == pytest.approx(0.1 / 2)


def test_summarize_without_fetch_times_uses_batch_size() -> None:
    steps = [timing.Step(epoch=0, begin=float(i)) for i in range(5)]
    record = timing.StepRecord(steps=steps, epoch_ends={0: 5.0}, steps_per_execution=2)
    report = step_summary.summarize(record, skip=0, batch_size=8)
    assert report["steps"] == 5
    assert report["input_wait_share"] is None
    assert report["samples_per_second"] == pytest.approx(5 * 2 * 8 / 5.0)
    assert step_summary.summarize(record, skip=0)["samples_per_second"] is None


def test_summarize_wall_rate_counts_every_step_of_finished_epochs() -> None:
    # Epoch 0: 3 steps of 4 rows from 0 s to 3 s; epoch 1 ends 5 s after its
    # last step (a stall); epoch 2 never finished.
    steps = steps_of(
        (0, 0.0, 0.1, 0.9, 4),
        (0, 1.0, 0.1, 1.9, 4),
        (0, 2.0, 0.1, 2.9, 4),
        (1, 10.0, 0.1, 10.5, 4),
        (2, 20.0, 0.1, 20.5, 4),
    )
    record = timing.StepRecord(
        steps=steps, epoch_begins={0: 0.0, 1: 10.0, 2: 20.0}, epoch_ends={0: 3.0, 1: 16.0}
    )
    report = step_summary.summarize(record, skip=1)
    assert report["epochs_wall_seconds"] == pytest.approx(3.0 + 6.0)
    assert report["wall_samples_per_second"] == pytest.approx(16 / 9.0)
    # the step-time rate leaves out the skipped step and the gap between epochs
    assert report["samples_per_second"] == pytest.approx(12 / (1.0 + 1.0 + 6.0))
    for step in steps:
        step.samples = None
    assert step_summary.summarize(record, skip=1)["wall_samples_per_second"] is None
    record.steps_per_execution = 2
    unseen = step_summary.summarize(record, skip=1, batch_size=4)
    assert unseen["wall_samples_per_second"] == pytest.approx(4 * 2 * 4 / 9.0)


def test_summarize_nothing_recorded() -> None:
    report = step_summary.summarize(timing.StepRecord(), skip=2)
    assert report["steps"] == 0
    assert report["seconds"] is None
    assert report["wall_samples_per_second"] is None


def test_counts_steps_and_restores_train_function() -> None:
    model = tiny_model()
    x, y = tiny_data()
    model.make_train_function()
    own = model.train_function
    timer = timing.step_timer(skip=2)
    model.fit(x, y, batch_size=BATCH, epochs=2, verbose=0, callbacks=[timer])
    report = timer.report()
    assert report["steps"] == 2 * 8 - 2
    assert report["skipped"] == 2
    assert report["samples"] == (2 * 8 - 2) * BATCH
    assert report["backend"] == config.keras().backend.backend()
    assert "next(iterator)" in report["method"]
    sane(report)
    # The wrapper is gone after fit(), and training without the timer still works.
    assert model.train_function is own
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)


def test_validation_time_is_not_a_step() -> None:
    model = tiny_model()
    x, y = tiny_data()
    timer = timing.step_timer(skip=0)
    validation = tiny_data(64 * BATCH)
    model.fit(
        x, y, batch_size=BATCH, epochs=2, verbose=0, callbacks=[timer], validation_data=validation
    )
    report = timer.report()
    assert report["steps"] == 2 * 8
    assert set(timer.record.epoch_begins) == set(timer.record.epoch_ends) == {0, 1}
    assert all(
        timer.record.epoch_begins[epoch] <= step.begin <= timer.record.epoch_ends[epoch]
        for step in timer.record.steps
        for epoch in [step.epoch]
    )
    # every step of both epochs, over their wall time (validation left out)
    wall = sum(timer.record.epoch_ends[e] - timer.record.epoch_begins[e] for e in (0, 1))
    assert report["wall_samples_per_second"] == pytest.approx(2 * 8 * BATCH / wall)
    sane(report)


def test_one_timer_over_several_fits() -> None:
    model = tiny_model()
    x, y = tiny_data()
    timer = timing.step_timer(skip=1)
    for _ in range(2):
        model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, callbacks=[timer])
    assert timer.report()["steps"] == 2 * 8 - 1
    timer.reset()
    assert timer.report()["steps"] == 0


def test_steps_per_execution_counts_executions() -> None:
    model = tiny_model(steps_per_execution=2)
    x, y = tiny_data()
    timer = timing.step_timer(skip=1)
    model.fit(x, y, batch_size=BATCH, epochs=2, verbose=0, callbacks=[timer])
    report = timer.report()
    assert report["steps_per_execution"] == 2
    assert report["steps"] == 2 * 4 - 1
    assert report["samples"] == (2 * 4 - 1) * 2 * BATCH
    sane(report)


def test_measure_input_false_leaves_train_function_alone() -> None:
    model = tiny_model()
    x, y = tiny_data()
    model.make_train_function()
    before = model.train_function
    timer = timing.step_timer(batch_size=BATCH, skip=0, measure_input=False)

    class Spy(config.keras().callbacks.Callback):
        def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
            self.seen = self.model.train_function

    spy = Spy()
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, callbacks=[timer, spy])
    assert spy.seen is before
    report = timer.report()
    assert report["steps"] == 8
    assert report["input_wait_share"] is None
    assert report["samples_per_second"] > 0


def sleepy_batches(x: np.ndarray, y: np.ndarray, seconds: float) -> object:
    def generate() -> object:
        for start in range(0, len(x), BATCH):
            time.sleep(seconds)
            yield x[start : start + BATCH], y[start : start + BATCH]

    return generate()


@pytest.mark.filterwarnings("ignore:Your input ran out of data")
def test_a_generator_slow_to_end_counts_that_search_as_wait_not_also_between_steps() -> None:
    # Keras begins a step after the last batch; the time the generator takes to say it has
    # no more is the step before's input wait (the empty step is dropped), and only that.
    x, y = tiny_data()

    def slow_to_end() -> object:
        for start in range(0, len(x), BATCH):
            yield x[start : start + BATCH], y[start : start + BATCH]
        time.sleep(0.5)

    timer = timing.step_timer(skip=1)
    tiny_model().fit(slow_to_end(), epochs=1, shuffle=False, verbose=0, callbacks=[timer])
    report = timer.report()
    sane(report)
    assert report["input_wait_share"] > 0.5  # the half second, in some 0.6 s of steps
    assert report["between_steps_share"] < 0.5


@pytest.mark.filterwarnings("ignore:Your input ran out of data")
def test_slow_generator_is_input_bound() -> None:
    # A Python generator works on every backend. Keras reads one batch ahead,
    # so a step's own work hides part of each sleep: 100 ms a batch leaves the
    # tiny model (a few ms a step, tens on a busy machine) waiting most of it.
    x, y = tiny_data()
    slow, fast = timing.step_timer(skip=1), timing.step_timer(skip=1)
    tiny_model().fit(
        sleepy_batches(x, y, 0.1), epochs=1, shuffle=False, verbose=0, callbacks=[slow]
    )
    tiny_model().fit(x, y, batch_size=BATCH, epochs=1, verbose=0, callbacks=[fast])
    slow_report, fast_report = slow.report(), fast.report()
    assert slow_report["steps"] == 8 - 1  # the step Keras began after the end is dropped
    sane(slow_report)
    sane(fast_report)
    # The wait measured is most of the sleep: what the code controls, not a
    # ratio of two timed runs, which a busy machine moves.
    assert slow_report["input_wait_mean_ms"] >= 50


def test_slow_tf_data_pipeline_is_input_bound() -> None:
    tf = pytest.importorskip("tensorflow")
    x, y = tiny_data()

    # A wait far longer than a step of this model, even on a busy machine.
    def sleep(features: object, labels: object) -> tuple[object, object]:
        time.sleep(0.15)
        return features, labels

    def slow_map(features: object, labels: object) -> tuple[object, object]:
        features, labels = tf.py_function(sleep, [features, labels], [tf.float32, tf.float32])
        return tf.ensure_shape(features, [None, 8]), tf.ensure_shape(labels, [None, 1])

    batches = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH)
    slow_data = batches.map(slow_map).prefetch(2)
    cached_data = batches.cache().prefetch(2)
    slow, cached = timing.step_timer(skip=2), timing.step_timer(skip=2)
    tiny_model().fit(slow_data, epochs=2, shuffle=False, verbose=0, callbacks=[slow])
    tiny_model().fit(cached_data, epochs=2, shuffle=False, verbose=0, callbacks=[cached])
    slow_report, cached_report = slow.report(), cached.report()
    assert slow_report["steps"] == cached_report["steps"] == 2 * 8 - 2
    sane(slow_report)
    sane(cached_report)
    assert slow_report["input_wait_share"] > 0.6
    # Most of the 150 ms sleep is measured as the wait, and a cached batch waits for far
    # less: what the sleep controls, not two shares of timed runs (on JAX a cached batch's
    # conversion is most of a tiny step: its share was 0.75 on a busy machine).
    assert slow_report["input_wait_mean_ms"] >= 100
    assert cached_report["input_wait_mean_ms"] < 50
    # Sleeping in the pipeline makes steps longer, not the gap between them.
    assert slow_report["between_steps_share"] < 0.3


def test_tensorflow_fetch_floor_is_measured_and_not_counted_as_wait() -> None:
    pytest.importorskip("tensorflow")
    if config.keras().backend.backend() != "tensorflow":
        pytest.skip("the floor is measured for tf.data iterators (TensorFlow backend)")
    import tensorflow as tf

    x, y = tiny_data()
    ready = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH).cache().prefetch(2)
    timer = timing.step_timer(skip=2)
    tiny_model().fit(ready, epochs=2, shuffle=False, verbose=0, callbacks=[timer])
    report = timer.report()
    floor = timer.record.fetch_floor_seconds
    assert floor is not None and 0 < floor < 0.05
    assert report["fetch_floor_ms"] == pytest.approx(floor * 1e3)
    sane(report)
    timer.record.fetch_floor_seconds = None  # what Python's next() took, floor and all
    gross = step_summary.summarize(timer.record, skip=2)
    assert gross["fetch_floor_ms"] is None
    assert report["input_wait_share"] < gross["input_wait_share"]


def test_ready_fetch_seconds_times_an_always_ready_batch() -> None:
    pytest.importorskip("tensorflow")
    x, y = tiny_data()
    seconds = timing.ready_fetch_seconds((x[:BATCH], y[:BATCH]), fetches=5)
    assert seconds is not None and 0 < seconds < 0.05
    assert timing.ready_fetch_seconds(object()) is None


def test_a_last_smaller_batch_is_left_out_the_first_time() -> None:
    x, y = tiny_data(ROWS + 3)  # every epoch ends in a batch of 3 rows
    timer = timing.step_timer(skip=1)
    tiny_model().fit(x, y, batch_size=BATCH, epochs=2, verbose=0, callbacks=[timer])
    report = timer.report()
    assert report["new_batch_size_steps"] == 1
    assert report["steps"] == 2 * 9 - 2
    assert report["samples"] == 2 * (ROWS + 3) - BATCH - 3
    sane(report)


# Every path: throughput and time per training step; input as it can be known ------------
def test_batches_of_each_call_come_from_keras_batch_indices() -> None:
    # 12 batches an epoch, 8 a call: calls of 8 and 4; an epoch of unknown length
    # counts its last call whole.
    steps = steps_of(
        (0, 0.0, None, None, None, 0),
        (0, 1.0, None, None, None, 8),
        (1, 2.0, None, None, None, 0),
        (1, 3.0, None, None, None, 8),
    )
    record = timing.StepRecord(steps=steps, steps_per_execution=8, steps_per_epoch=12)
    assert step_summary.step_batches(record) == [8, 4, 8, 4]
    record.steps_per_epoch = None
    assert step_summary.step_batches(record) == [8, 8, 8, 8]
    # steps without indices (a loop of its own) are whole calls
    own_loop = timing.StepRecord(steps=steps_of((0, 0.0)), steps_per_execution=3)
    assert step_summary.step_batches(own_loop) == [3]


def test_rows_not_seen_are_keras_count_shared_by_batches_else_the_batch_size() -> None:
    steps = steps_of(
        (0, 0.0, None, None, None, 0),
        (0, 1.0, None, None, None, 8),
        (1, 10.0, None, None, None, 0),
        (1, 11.0, None, None, None, 8),
    )
    record = timing.StepRecord(
        steps=steps,
        epoch_begins={0: 0.0, 1: 10.0},
        epoch_ends={0: 2.0, 1: 12.0},
        steps_per_execution=8,
        steps_per_epoch=12,
        epoch_rows={0: 1438},  # 11 batches of 128 and one of 30
    )
    batches = step_summary.step_batches(record)
    rows = step_summary.step_rows(record, batches, batch_size=128)
    assert rows[:2] == pytest.approx([1438 * 8 / 12, 1438 * 4 / 12])
    assert rows[2:] == [128 * 8, 128 * 4]  # epoch 1: Keras counted nothing
    report = step_summary.summarize(record, skip=0, batch_size=128)
    assert report["steps"] == 4 and report["batches"] == 24
    assert report["batch_time_mean_ms"] == pytest.approx(4.0 / 24 * 1e3)
    assert report["step_time_mean_ms"] == pytest.approx(1e3)
    assert report["samples"] == 1438 + 12 * 128
    assert report["wall_samples_per_second"] == pytest.approx((1438 + 12 * 128) / 4.0)
    assert report["input_wait_share"] is None and report["input_share_alone"] is None
    assert step_summary.summarize(record, skip=0)["samples"] is None  # epoch 1 has no count


def test_input_on_the_device_waits_for_nothing_by_construction() -> None:
    record = timing.StepRecord(
        steps=steps_of((0, 0.0, None, None, None, 0), (0, 1.0, None, None, None, 4)),
        epoch_ends={0: 2.0},
        steps_per_execution=4,
        steps_per_epoch=8,
        input_on_device=True,
        method=timing.ON_DEVICE_METHOD,
    )
    report = step_summary.summarize(record, skip=0, batch_size=32)
    assert report["input_on_device"] is True
    assert report["input_wait_share"] == 0.0 and report["input_wait_mean_ms"] == 0.0
    assert report["samples_per_second"] == pytest.approx(8 * 32 / 2.0)
    assert report["method"] == "input on the device (no wait by construction)"


def test_the_pipeline_timed_alone_is_a_share_of_the_time_per_training_step() -> None:
    record = timing.StepRecord(
        steps=steps_of((0, 0.0, None, None, None, 0), (0, 1.0, None, None, None, 8)),
        epoch_ends={0: 2.0},
        steps_per_execution=8,
        steps_per_epoch=16,
        pipeline={"batch_seconds": 0.025, "batches": 16, "start_seconds": 0.1, "floor_seconds": 0},
    )
    report = step_summary.summarize(record, skip=0, batch_size=8)
    assert report["batch_time_mean_ms"] == pytest.approx(2.0 / 16 * 1e3)
    assert report["pipeline_batch_ms"] == pytest.approx(25.0)
    assert report["pipeline_batches"] == 16
    assert report["input_share_alone"] == pytest.approx(0.025 / (2.0 / 16))
    assert report["input_wait_share"] is None  # not timed: an estimate, kept apart


def test_pipeline_seconds_reads_a_fresh_iterator_and_says_why_when_it_cannot() -> None:
    tf = pytest.importorskip("tensorflow")
    x, y = tiny_data()
    batches = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH)
    probe = timing.pipeline_seconds(batches, batches_per_epoch=8)
    assert probe["batches"] == 8  # the whole epoch: fewer batches than a probe takes
    assert probe["batch_seconds"] >= 0 and probe["start_seconds"] >= 0
    few = timing.pipeline_seconds(batches.repeat(), batches_per_epoch=None, batches=3)
    assert few["batches"] == 4  # the first, then three
    assert timing.pipeline_seconds(batches.take(0), 8) == {"reason": "the pipeline gave no batch"}

    def fail(features: object, labels: object) -> tuple[object, object]:
        with tf.control_dependencies([tf.debugging.assert_less(features, -100.0)]):
            return tf.identity(features), labels

    broken = timing.pipeline_seconds(batches.map(fail), 8)
    assert broken["reason"].startswith("the pipeline failed when read again")


def tensorflow_backend_only() -> None:
    pytest.importorskip("tensorflow")
    if config.keras().backend.backend() != "tensorflow":
        pytest.skip("Keras takes batches inside a graph loop on the TensorFlow backend only")


def test_several_batches_a_call_on_tensorflow_keep_keras_graph_loop_and_count_every_row() -> None:
    tensorflow_backend_only()
    import tensorflow as tf

    x, y = tiny_data(ROWS + 3)  # 9 batches an epoch, the last of 3 rows: calls of 4, 4 and 1
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH).prefetch(2)
    model = tiny_model(steps_per_execution=4)
    model.make_train_function()
    own = model.train_function
    timer = timing.step_timer(skip=0, measure_input="auto", dataset=dataset)

    class Spy(config.keras().callbacks.Callback):
        def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
            self.seen = self.model.train_function

    spy = Spy()
    model.fit(dataset, epochs=2, shuffle=False, verbose=0, callbacks=[timer, spy])
    assert spy.seen is own  # Keras' own graph loop ran
    report = timer.report()
    assert report["steps"] == 2 * 3 and report["batches"] == 2 * 9
    assert report["samples"] == 2 * (ROWS + 3)  # Keras' count: the last, smaller batch too
    assert timer.record.epoch_rows == {0: ROWS + 3, 1: ROWS + 3}
    assert report["batch_time_mean_ms"] == pytest.approx(report["seconds"] / 18 * 1e3)
    assert report["input_wait_share"] is None
    assert report["pipeline_batches"] == 9 and report["input_share_alone"] >= 0
    assert "graph loop" in report["method"] and "timed alone" in report["method"]

    # No dataset to read again (as for a generator): throughput all the same, no input figure.
    bare = timing.step_timer(skip=0, measure_input="auto")
    tiny_model(steps_per_execution=4).fit(
        dataset, epochs=1, shuffle=False, verbose=0, callbacks=[bare]
    )
    alone = bare.report()
    assert alone["samples"] == ROWS + 3 and alone["pipeline_batch_ms"] is None
    assert "cannot be read again" in alone["method"]


def test_trained_rows_is_none_before_training() -> None:
    model = tiny_model()
    x, y = tiny_data()
    model.evaluate(x[:BATCH], y[:BATCH], verbose=0)  # builds the metrics
    model.reset_metrics()
    assert timing.trained_rows(config.keras(), model) is None
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
    # fit() ends after Keras read its metrics; evaluate() has not reset them since
    assert timing.trained_rows(config.keras(), model) == ROWS


def test_the_pipeline_is_read_again_only_after_an_epoch_that_ran_to_its_end() -> None:
    steps = steps_of((0, 0.0, None, None, None, 0), (0, 1.0, None, None, None, 4))
    record = timing.StepRecord(
        steps=steps, epoch_ends={0: 2.0}, steps_per_execution=4, steps_per_epoch=9
    )
    assert not step_summary.ran_an_epoch(record)  # 8 of 9 batches: stopped early
    record.steps_per_epoch = 8
    assert step_summary.ran_an_epoch(record)
    record.steps_per_epoch = None  # not known: an epoch that ended counts
    assert step_summary.ran_an_epoch(record)
    assert not step_summary.ran_an_epoch(timing.StepRecord(steps=steps))


def test_a_fit_stopped_in_its_first_epoch_leaves_the_pipeline_alone() -> None:
    tensorflow_backend_only()
    import tensorflow as tf

    x, y = tiny_data(2 * ROWS)  # 16 batches an epoch; training stops after 8
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH)

    class Stop(config.keras().callbacks.Callback):
        def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
            self.model.stop_training = batch >= 4

    timer = timing.step_timer(skip=0, measure_input="auto", dataset=dataset)
    model = tiny_model(steps_per_execution=4)
    model.fit(dataset, epochs=2, shuffle=False, verbose=0, callbacks=[timer, Stop()])
    report = timer.report()
    assert report["pipeline_batch_ms"] is None
    assert "no epoch ran to its end" in report["method"]
    assert report["samples"] == 8 * BATCH and report["batches"] == 8
