"""pipeline: tf.data from arrays and files; the order of steps, splits, maps, augmentation."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from gpukeras import bridge
from gpukeras.core import errors
from gpukeras.data import array_source, pipeline, pipeline_facts, sources

tf = pytest.importorskip("tensorflow")


def rows_of(dataset: object, part: int = 1) -> np.ndarray:
    """Every value of element part ``part`` over one pass, in the order read."""
    return np.concatenate([batch[part].numpy() for batch in dataset])


@pytest.fixture
def ids() -> tuple[np.ndarray, np.ndarray]:
    x = np.arange(200, dtype=np.float32).reshape(100, 2)
    return x, np.arange(100, dtype=np.int32)


def test_arrays_become_gathered_batches_reshuffled_every_epoch(ids: tuple) -> None:
    x, y = ids
    built = pipeline.from_arrays(x, y, batch_size=16, seed=1)
    assert built["validation"] is None
    assert built["info"]["steps"] == [
        "shuffle rows each epoch",
        "gather batches (16, parallel)",
        "prefetch (autotune)",
    ]
    assert built["info"]["batches"] == 7
    assert sorted(rows_of(built["dataset"])) == list(range(100))
    first = next(iter(built["dataset"]))
    np.testing.assert_array_equal(first[0].numpy(), x[first[1].numpy()])
    fresh = [pipeline.from_arrays(x, y, batch_size=16, seed=1)["dataset"] for _ in range(2)]
    epochs = [rows_of(fresh[0]) for _ in range(2)]
    assert not np.array_equal(*epochs)  # a new order every epoch ...
    np.testing.assert_array_equal(epochs[0], rows_of(fresh[1]))  # ... the same for the same seed
    in_order = pipeline.from_arrays(x, y, batch_size=16, shuffle=False, drop_remainder=True)
    assert in_order["info"]["batches"] == 6
    np.testing.assert_array_equal(rows_of(in_order["dataset"]), np.arange(96))


def test_batches_gathered_several_at_a_time_are_the_same_batches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Chunks of 3 batches over 10 full batches and a remainder (chunks 3, 3, 3, 1 and
    the short batch) give exactly the batches gathered one at a time; a dict of
    inputs is sliced apart like a single array; big rows gather one batch at a time."""
    x = {"a": np.arange(83, dtype=np.float32), "b": np.arange(166, dtype=np.float32).reshape(83, 2)}
    y = np.arange(83, dtype=np.int32)

    def batches(**options: object) -> list:
        dataset = pipeline.from_arrays(x, y, batch_size=8, seed=4, **options)["dataset"]
        return [(b[0]["a"].numpy(), b[0]["b"].numpy(), b[1].numpy()) for b in dataset]

    monkeypatch.setattr(array_source, "GATHER_CHUNK_BATCHES", 1)
    one_by_one = batches()
    monkeypatch.setattr(array_source, "GATHER_CHUNK_BATCHES", 3)
    chunked = batches()
    assert [len(b[2]) for b in chunked] == [8] * 10 + [3]
    for single, several in zip(one_by_one, chunked, strict=True):
        for a, b in zip(single, several):
            np.testing.assert_array_equal(a, b)
    for a, b2, labels in chunked:
        np.testing.assert_array_equal(a, labels)  # rows stay together
        np.testing.assert_array_equal(b2[:, 0], 2 * labels)
    assert [len(b[2]) for b in batches(drop_remainder=True)] == [8] * 10
    tensors = [tf.zeros((100, 1000)), tf.zeros((100,))]
    assert array_source.gather_chunk(tensors, rows=100, batch_size=10) == 3  # the cap, set above
    monkeypatch.setattr(array_source, "GATHER_CHUNK_BYTES", 10_000)
    assert array_source.gather_chunk(tensors, rows=100, batch_size=10) == 1  # 40 KB a batch


@pytest.mark.parametrize("threads", [1, 3])
def test_host_array_is_one_aligned_row_major_copy_in_the_asked_dtype(
    monkeypatch: pytest.MonkeyPatch, threads: int
) -> None:
    """What R hands over: a column-major float64 view becomes a C-contiguous float32
    copy, aligned for TensorFlow, block by block (on several threads for a large
    array); chosen rows are taken block by block too."""
    monkeypatch.setattr(array_source, "COPY_BLOCK_BYTES", 4 * 5 * 4)  # 4 rows, the last short
    monkeypatch.setattr(array_source, "COPY_THREADS", threads)
    monkeypatch.setattr(array_source, "PARALLEL_COPY_BYTES", 0)
    source = np.asfortranarray(np.arange(33 * 5, dtype=np.float64).reshape(33, 5) / 7)
    source.flags.writeable = False  # as reticulate's view of R memory is
    copy = array_source.host_array(source, "float32")
    assert copy.dtype == np.float32 and copy.shape == (33, 5)
    assert copy.flags.c_contiguous and copy.flags.writeable
    assert copy.ctypes.data % array_source.TENSOR_ALIGNMENT == 0
    assert not np.shares_memory(copy, source)
    np.testing.assert_array_equal(copy, source.astype(np.float32))
    rows = np.array([0, 3, 4, 9, 17, 30, 32])
    np.testing.assert_array_equal(array_source.host_array(source, "float32", rows), copy[rows])
    labels = array_source.host_array(np.arange(10, dtype=np.int32))
    assert labels.dtype == np.int32 and labels.ctypes.data % array_source.TENSOR_ALIGNMENT == 0


def test_a_checked_copy_with_nan_names_its_first_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """check_missing: NaN (R's NA) in any block of a floating-point copy is BadDataError
    naming the rows from 1, as R counts; integers and unchecked copies pass."""
    monkeypatch.setattr(array_source, "COPY_BLOCK_BYTES", 3 * 2 * 4)
    source = np.asfortranarray(np.ones((20, 2)))
    source[[4, 17], 1] = np.nan
    with pytest.raises(errors.BadDataError, match=r"NA/NaN in 2 row\(s\) .*: 5, 18\)"):
        array_source.host_array(source, "float32", check_missing=True)
    with pytest.raises(errors.BadDataError, match=r"1 row\(s\) .*: 2\)"):
        array_source.host_array(source, "float32", np.array([0, 17]), check_missing=True)
    assert np.isnan(array_source.host_array(source, "float32")).sum() == 2
    array_source.host_array(np.arange(6, dtype=np.int32), check_missing=True)


def test_data_with_nan_is_refused_before_tensorflow_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """from_arrays(check_missing=True) checks the data, copied or used as it is (a split
    copies its parts later), before it imports TensorFlow: bad data must leave the
    runtime unstarted, so that gpu_setup() can still apply."""
    source = np.asfortranarray(np.ones((20, 2)))
    source[7, 0] = np.nan

    def no_tensorflow() -> None:
        raise AssertionError("TensorFlow imported before the data was checked")

    monkeypatch.setattr(sources, "tensorflow", no_tensorflow)
    for options in ({"x_dtype": "float32"}, {"validation_split": 0.5, "seed": 1}):
        with pytest.raises(errors.BadDataError, match=r"1 row\(s\) .*: 8\)"):
            pipeline.from_arrays(source, np.arange(20), check_missing=True, **options)
    array_source.check_values(np.arange(4.0), check_missing=True)  # nothing missing: no error


@pytest.mark.parametrize(
    ("value", "dtype"),
    [(np.inf, "float32"), (-np.inf, "float32"), (1e300, "float32"), (-1e39, "float32"),
     (np.inf, "float64")],
    ids=["Inf", "-Inf", "1e300", "-1e39", "Inf float64"],
)  # fmt: skip
def test_infinite_values_are_refused_in_a_copy_and_as_they_are(value: float, dtype: str) -> None:
    """Inf, -Inf and doubles beyond float32's range (infinite once cast) train to a NaN loss:
    refused whatever ``check_missing`` says, in a copy (R's column-major data, large ones on
    several threads) and in an array used as it is; the rows are named from 1."""
    for rows in (20, 300_000):
        source = np.asfortranarray(np.ones((rows, 8)))
        source[[3, rows - 1], 5] = value
        for check_missing in (True, False):
            with pytest.raises(errors.BadDataError, match=rf"2 row\(s\) .*: 4, {rows}\)"):
                array_source.host_array(source, dtype, check_missing=check_missing)
    same = np.ones((10, 2), dtype=dtype)
    with np.errstate(over="ignore"):  # 1e300 as float32: infinite, as the copy makes it
        same[2, 1] = value
    with pytest.raises(errors.BadDataError, match=r"Inf, -Inf or values beyond"):
        pipeline.from_arrays(same, np.arange(10), x_dtype=dtype, copy=False)
    with pytest.raises(errors.BadDataError, match=r"Inf, -Inf"):
        array_source.handover(np.ones((4, 2)), np.array([0.0, np.inf, 1.0, 2.0]), "float32")
    weights = np.ones(4)
    weights[0] = -np.inf
    with pytest.raises(errors.DataFieldsError, match=r"\(first: 1\), in sample_weight\.") as named:
        array_source.handover(np.ones((4, 2)), np.arange(4), "int32", sample_weight=weights)
    assert named.value.r_classes == ["gpukeras_error_not_finite", "gpukeras_error_bad_data"]
    assert named.value.fields == {"column": ["sample_weight"], "rows": [1], "n_rows": 1}


def test_the_largest_float32_is_kept_and_nan_left_to_the_caller_without_check_missing() -> None:
    edge = np.array([[np.finfo(np.float32).max, -np.finfo(np.float32).max], [1.0, np.nan]])
    copy = array_source.host_array(edge, "float32", check_missing=False)
    assert np.isfinite(copy[0]).all() and np.isnan(copy[1, 1])


def test_handover_gives_r_float32_features_and_labels_as_python_objects() -> None:
    """handover(): what R keeps (through the bridge, which would turn a NumPy array
    into an R array): float32 features, a dict for several inputs, labels as asked."""
    x = np.asfortranarray(np.arange(12, dtype=np.float64).reshape(6, 2))
    held = array_source.handover({"a": x, "b": x[:, :1]}, np.arange(6, dtype=np.int32), "int32")
    assert held.inputs == ["a", "b"] and held.y.dtype == np.int32
    assert all(part.dtype == np.float32 and part.flags.c_contiguous for part in held.x.values())
    answer = bridge.call("handover", {"x": x})
    assert answer["ok"] and answer["value"].inputs is None and answer["value"].y is None
    np.testing.assert_array_equal(answer["value"].x, x)


def test_tensors_share_the_pipelines_own_arrays_and_copy_the_callers() -> None:
    """A tensor shares an array fit to be shared; rows, and anything that cannot be
    shared, are copied once. from_arrays copies the caller's arrays unless copy=False."""
    own = array_source.host_array(np.random.default_rng(0).random((40, 3)), "float32")
    shared = array_source.tensor_of(tf, own)
    assert np.shares_memory(np.asarray(shared), own)
    read_only = own.copy()
    read_only.flags.writeable = False
    buffer = np.empty(own.nbytes + array_source.TENSOR_ALIGNMENT, np.uint8)
    start = (4 - buffer.ctypes.data) % array_source.TENSOR_ALIGNMENT
    unaligned = buffer[start : start + own.nbytes].view(np.float32).reshape(own.shape)
    unaligned[:] = own
    for array in (read_only, np.asfortranarray(own), unaligned):
        tensor = array_source.tensor_of(tf, array)
        assert not np.shares_memory(np.asarray(tensor), array)
        np.testing.assert_array_equal(tensor.numpy(), array)
    rows = np.array([3, 1])
    np.testing.assert_array_equal(array_source.tensor_of(tf, own, rows).numpy(), own[rows])
    words = array_source.tensor_of(tf, np.array(["a", "b", "c"]), rows=np.array([2, 0]))
    assert words.dtype == tf.string and list(words.numpy()) == [b"c", b"a"]

    x = np.arange(40, dtype=np.float32).reshape(20, 2)
    built = pipeline.from_arrays(x, batch_size=20, shuffle=False)
    x[:] = -1  # the caller's array changes after the pipeline was built
    np.testing.assert_array_equal(next(iter(built["dataset"])).numpy()[:, 0], np.arange(0, 40, 2))
    assert not np.shares_memory(built["arrays"].x, x)
    kept = pipeline.from_arrays(own, copy=False, batch_size=8)["arrays"].x
    assert kept is own  # shared, not copied


def test_r_data_is_cast_once_and_the_whole_data_comes_back_for_r() -> None:
    """From R: float64 column-major features and int32 labels become float32 tensors
    in one copy each; ``arrays`` holds the whole data in those dtypes, split or not."""
    x = np.asfortranarray(np.arange(60, dtype=np.float64).reshape(30, 2))
    y = np.arange(30, dtype=np.int32)
    for split in (0, 0.2):
        built = pipeline.from_arrays(
            x,
            y,
            copy=False,
            x_dtype="float32",
            y_dtype="int32",
            batch_size=30,
            shuffle=False,
            validation_split=split,
            seed=2,
        )
        features, labels = next(iter(built["dataset"]))
        assert features.dtype == tf.float32 and labels.dtype == tf.int32
        np.testing.assert_array_equal(features.numpy(), x[labels.numpy()])
        held = built["arrays"]
        assert held.x.dtype == np.float32 and held.x.flags.c_contiguous
        np.testing.assert_array_equal(held.x, x)
        np.testing.assert_array_equal(held.y, y)


def test_array_pipelines_skip_the_graph_rewrites_that_copy_the_data(ids: tuple) -> None:
    """tf.data serializes a pipeline, its captured tensors included, to rewrite it at
    every new iterator; in-memory pipelines have nothing to gain from the rewrites."""
    built = pipeline.from_arrays(*ids, batch_size=16, validation_split=0.2, seed=1)
    for dataset in (built["dataset"], built["validation"]):
        assert dataset.options().experimental_optimization.apply_default_optimizations is False


def test_cache_only_after_a_map_and_the_map_runs_in_the_graph(ids: tuple) -> None:
    x, y = ids
    built = pipeline.from_arrays(x, y, batch_size=100, shuffle=False, map=lambda a, b: (a * 2, b))
    assert built["info"]["steps"][:2] == ["map (parallel)", "cache"]
    np.testing.assert_array_equal(next(iter(built["dataset"]))[0].numpy(), x * 2)


def test_a_map_that_cannot_be_traced_is_a_classed_error(ids: tuple) -> None:
    def broken(a: object, b: object) -> object:
        raise TypeError("non-numeric argument to binary operator")

    with pytest.raises(errors.MapFunctionError, match="must use TensorFlow ops") as caught:
        pipeline.from_arrays(*ids, map=broken)
    assert "non-numeric argument" in str(caught.value)


def test_validation_split_is_disjoint_complete_and_reproducible(ids: tuple) -> None:
    first = pipeline.from_arrays(*ids, validation_split=0.2, seed=7)
    second = pipeline.from_arrays(*ids, validation_split=0.2, seed=7)
    train, validation = rows_of(first["dataset"]), rows_of(first["validation"])
    assert len(validation) == 20 and len(train) == 80
    assert sorted(np.concatenate([train, validation])) == list(range(100))
    np.testing.assert_array_equal(validation, rows_of(second["validation"]))
    assert first["validation_info"]["rows"] == 20
    assert first["validation_info"]["steps"][0] == "rows in order"


def test_augment_presets_run_on_batches_and_validation_gets_a_centre_crop() -> None:
    images = np.random.default_rng(0).random((10, 6, 7, 2), dtype=np.float32)
    built = pipeline.from_arrays(
        images,
        np.zeros(10, np.int32),
        augment={"crop": {"height": 4, "width": 3}, "flip_horizontal": {}},
        validation_split=0.2,
        seed=1,
    )
    assert built["dataset"].element_spec[0].shape.as_list() == [None, 4, 3, 2]
    assert built["validation"].element_spec[0].shape.as_list() == [None, 4, 3, 2]
    assert built["validation_info"]["steps"] == [
        "rows in order",
        "gather batches (32, parallel)",
        "centre crop",
        "prefetch (autotune)",
    ]
    batch = next(iter(built["validation"]))[0].numpy()
    kept = np.sort(rows_of(built["validation"], 0).reshape(2, -1), axis=None)
    assert batch.shape == (2, 4, 3, 2) and kept.size == 2 * 4 * 3 * 2


def test_per_image_presets_run_on_gathered_chunks_and_keep_each_label(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        array_source, "GATHER_CHUNK_BATCHES", 3
    )  # 3 chunks of 3 batches, and 1 of 1
    images = np.arange(25 * 3 * 4 * 2, dtype=np.float32).reshape(25, 3, 4, 2)
    labels = np.arange(25, dtype=np.int32)
    built = pipeline.from_arrays(
        images,
        labels,
        batch_size=2,
        seed=3,
        augment={"flip_horizontal": {}, "crop": {"height": 3, "width": 4}, "flip_vertical": {}},
    )
    # Crop draws one window per call, so it and what follows it run batch by batch.
    assert built["info"]["steps"] == [
        "shuffle rows each epoch",
        "gather batches (2, parallel)",
        "augment (flip_horizontal, parallel)",
        "augment (crop, flip_vertical, parallel)",
        "prefetch (autotune)",
    ]
    assert built["dataset"].element_spec[0].shape.as_list() == [None, 3, 4, 2]
    flips = {"h": 0, "v": 0, "none": 0}
    sizes = []
    for batch_images, batch_labels in built["dataset"]:
        sizes.append(len(batch_labels))
        for image, label in zip(batch_images.numpy(), batch_labels.numpy()):
            original = images[label]
            if np.array_equal(image, original):
                flips["none"] += 1
            elif np.array_equal(image, original[:, ::-1]):
                flips["h"] += 1
            elif np.array_equal(image, original[::-1, :]):
                flips["v"] += 1
            else:  # flipped both ways, or not the labelled image
                assert np.array_equal(image, original[::-1, ::-1]), label
    assert sizes == [2] * 12 + [1]
    assert min(flips.values()) > 0


def test_image_presets_on_tabular_arrays_are_a_bad_argument() -> None:
    with pytest.raises(errors.BadArgumentError, match=r"augment \(rotation\) cannot run on"):
        pipeline.from_arrays(np.zeros((8, 5), np.float32), augment={"rotation": {}})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"batch_size": 0}, "`batch_size` must be"),
        ({"batch_size": 2_000_000}, r"`batch_size` must be .*\(at most 1000000\)"),
        ({"batch_size": 2.5}, "`batch_size` must be one whole number"),
        ({"validation_split": 1.0}, "validation_split must be in"),
        ({"augment": {"zoom": {}}}, "Unknown augment preset.*Presets: flip_horizontal"),
        ({"augment": {"crop": {}}}, "'crop' \\(RandomCrop\\) rejected its parameters"),
        ({"augment": {"flip_horizontal": {}}}, "work on image batches"),
        ({"validation_split": 0.001}, "leaves no training or no validation rows"),
    ],
)
def test_bad_options_are_classed(ids: tuple, options: dict, message: str) -> None:
    with pytest.raises(errors.BadArgumentError, match=message):
        pipeline.from_arrays(*ids, **options)


def test_a_whole_number_batch_size_from_r_is_taken(ids: tuple) -> None:
    built = pipeline.from_arrays(*ids, batch_size=25.0, shuffle=False)  # an R double
    assert built["info"]["batches"] == 4


def test_rows_must_match_and_exist() -> None:
    with pytest.raises(errors.BadArgumentError, match="x has 3, y has 2"):
        pipeline.from_arrays(np.zeros((3, 2), np.float32), np.zeros(2, np.int32))
    with pytest.raises(errors.BadArgumentError, match="no rows"):
        pipeline.from_arrays(np.zeros((0, 2), np.float32))


def test_named_inputs_become_a_dict_element() -> None:
    built = pipeline.from_arrays(
        {"a": np.zeros((4, 2), np.float32), "b": np.ones((4, 3), np.float32)},
        np.zeros(4, np.int32),
    )
    spec = built["dataset"].element_spec[0]
    assert set(spec) == {"a", "b"} and spec["b"].shape.as_list() == [None, 3]


def test_prefetch_to_a_device_and_training(ids: tuple) -> None:
    from gpukeras.core.runtime import config

    keras = config.keras()
    built = pipeline.from_arrays(*ids, batch_size=10, prefetch=2, to_device="CPU:0")
    assert built["info"]["steps"][-2:] == ["prefetch (2)", "prefetch to CPU:0"]
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    seen = []
    counter = keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: seen.append(1))
    model.fit(built["dataset"], epochs=2, verbose=0, callbacks=[counter])
    assert len(seen) == 20  # every batch reaches Keras, both epochs


def test_describe_and_benchmark(ids: tuple) -> None:
    built = pipeline.from_arrays(*ids, batch_size=25, shuffle=False)
    facts = pipeline_facts.describe(built["dataset"])
    assert facts["cardinality"] == "4" and "float32" in facts["element_spec"]
    speed = pipeline_facts.benchmark(built["dataset"], steps=8)
    assert speed["steps"] == 8 and speed["elements_per_second"] > speed["batches_per_second"] > 0
    with pytest.raises(errors.BadArgumentError, match="steps must be"):
        pipeline_facts.benchmark(built["dataset"], steps=0)


def test_a_streamed_csv_split_by_position_is_disjoint_and_complete(tmp_path: Path) -> None:
    with (tmp_path / "data.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["a", "label"])
        writer.writerows([[i / 10, i] for i in range(300)])
    built = pipeline.from_source(
        "csv",
        {"pattern": str(tmp_path / "data.csv"), "label": "label"},
        batch_size=64,
        validation_split=0.25,
        seed=3,
    )
    train, validation = rows_of(built["dataset"]), rows_of(built["validation"])
    assert sorted(np.concatenate([train, validation])) == list(range(300))
    assert 40 < len(validation) < 110  # a seeded draw per row, about a quarter
    again = pipeline.from_source(
        "csv",
        {"pattern": str(tmp_path / "data.csv"), "label": "label"},
        batch_size=64,
        validation_split=0.25,
        seed=3,
    )
    np.testing.assert_array_equal(np.sort(validation), np.sort(rows_of(again["validation"])))
    built_arrays = pipeline.from_arrays(np.ones((10, 2), np.float32), validation_split=0.2, seed=1)
    for dataset in (built["dataset"], built["validation"], *map(built_arrays.get, DATASETS)):
        assert no_autotune_thread(dataset)


DATASETS = ("dataset", "validation")


def no_autotune_thread(dataset: object) -> bool:
    """Whether iterators of ``dataset`` (and of Keras' repeat() of it, which gpu_fit()
    hands Keras) run without tf.data's autotuning thread, whose join can stall the end
    of fit() for seconds (pipeline._without_autotune_thread)."""
    return all(d.options().autotune.enabled is False for d in (dataset, dataset.repeat()))


def test_an_image_folder_split_knows_both_lengths_and_validates_without_running_out(
    tmp_path: Path,
) -> None:
    """Counted files are split as arrays are, and each part is told its length: with a
    part of unknown length Keras ends every epoch with 'Your input ran out of data'."""
    import warnings

    import keras
    import tensorflow as tf

    from gpukeras.train import fit

    for i in range(30):
        image = np.full((4, 4, 1), i, dtype=np.uint8)
        target = tmp_path / "images" / f"class{i % 3}" / f"{i:02d}.png"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(tf.io.encode_png(image).numpy())
    source = {"path": str(tmp_path / "images"), "image_size": [4, 4], "color_mode": "grayscale"}
    built = pipeline.from_source("image_folder", source, batch_size=4, validation_split=0.2, seed=3)
    assert (built["info"]["rows"], built["validation_info"]["rows"]) == (24, 6)
    assert (built["info"]["batches"], built["validation_info"]["batches"]) == (6, 2)
    pixels = lambda dataset: sorted(int(x[0, 0, 0]) for x, _ in dataset.unbatch())  # noqa: E731
    train, validation = pixels(built["dataset"]), pixels(built["validation"])
    assert sorted(train + validation) == list(range(30)) and len(validation) == 6
    again = pipeline.from_source("image_folder", source, batch_size=4, validation_split=0.2, seed=3)
    assert pixels(again["validation"]) == validation

    model = keras.Sequential(
        [keras.Input((4, 4, 1)), keras.layers.Flatten(), keras.layers.Dense(3)]
    )
    model.compile(
        optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fit.fit(
            model, built["dataset"], validation_data=built["validation"], epochs=3, verbose=0
        )
    assert result["history"]["epoch"] == [1, 2, 3]
    assert len(result["history"]["val_loss"]) == 3
    assert not [w for w in caught if "ran out of data" in str(w.message)]

    # A model for colour images on these grayscale ones: the error says how to read them.
    colour = keras.Sequential([keras.Input((4, 4, 3)), keras.layers.Conv2D(2, 3)])
    colour.compile(optimizer="sgd", loss="mse")
    answer = bridge.call("fit", {"model": colour, "data": built["dataset"], "verbose": 0})
    assert answer["r_class"] == "gpukeras_error_bad_data"
    assert 'gpu_dataset(color_mode = "rgb") reads 3 channel(s)' in answer["message"]


def test_unknown_source_kind() -> None:
    with pytest.raises(errors.BadArgumentError, match="Unknown file source 'parquet'"):
        pipeline.from_source("parquet", {})


def test_the_datasets_gpu_dataset_made_are_known_by_what_they_were_made_from() -> None:
    tf = sources.tensorflow()
    x = np.arange(40, dtype=np.float32).reshape(20, 2)
    built = pipeline.from_arrays(
        x, np.arange(20), batch_size=4, validation_split=0.25, seed=1, cache=False
    )
    for dataset in (built["dataset"], built["validation"]):
        assert pipeline.made_here(dataset) == pipeline.Made(
            source="arrays", cache=False, user_map=False
        )
    assert pipeline.made_here(tf.data.Dataset.range(3).batch(2)) is None  # made elsewhere
    assert pipeline.made_here(built["dataset"].repeat()) is None
    assert pipeline.made_here("not a dataset") is None


def test_cache_true_on_files_is_applied_where_it_fits_and_says_why_not_elsewhere(
    tmp_path: Path,
) -> None:
    """CSV rows are counted on the first pass, so a small CSV is cached; TFRecord rows are
    not, so cache = TRUE is not applied there, and the dataset says why (not silently)."""
    with (tmp_path / "data.csv").open("w", newline="") as handle:
        csv.writer(handle).writerows([["a", "label"], *[[i / 10, i % 2] for i in range(40)]])
    built = pipeline.from_source(
        "csv", {"pattern": str(tmp_path / "data.csv"), "label": "label"}, batch_size=8
    )
    made = pipeline.made_here(built["dataset"])
    assert made is not None and made.cache is True and made.cache_declined is None
    assert "cache" in built["info"]["steps"] and "cache_declined" not in built["info"]
    with tf.io.TFRecordWriter(str(tmp_path / "part.tfrecord")) as writer:
        for i in range(10):
            feature = {"a": tf.train.Feature(float_list=tf.train.FloatList(value=[i / 10]))}
            writer.write(
                tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
            )
    streamed = pipeline.from_source("tfrecord", {"pattern": str(tmp_path)}, batch_size=8)
    made = pipeline.made_here(streamed["dataset"])
    assert made is not None and made.cache is False
    assert "not known before reading" in streamed["info"]["cache_declined"]
    assert made.cache_declined == streamed["info"]["cache_declined"]
    assert "cache" not in streamed["info"]["steps"]
