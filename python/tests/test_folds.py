"""tools/folds.py: gpu_cv()'s folds and gpu_search()'s held-out rows, drawn with a seed."""

from __future__ import annotations

from collections import Counter

from gpukeras.tools.folds import folds


def test_stratified_folds_keep_each_class_share_within_one_row() -> None:
    classes = ["a"] * 60 + ["b"] * 30 + ["c"] * 9
    fold = folds(99, 3, 1, classes=classes)
    shares = Counter(zip(fold, classes))
    for f in (1, 2, 3):
        for label, whole in (("a", 60), ("b", 30), ("c", 9)):
            assert abs(shares[(f, label)] - whole / 3) <= 1
    assert fold == folds(99, 3, 1, classes=classes)  # the same seed, the same folds
    assert fold != folds(99, 3, 2, classes=classes)


def test_grouped_folds_keep_groups_whole_and_sizes_close() -> None:
    groups = [f"patient{i:02d}" for i in range(20) for _ in range(5 if i < 10 else 1)]
    fold = folds(len(groups), 4, 2, groups=groups)
    assert all(len({f for f, g in zip(fold, groups) if g == name}) == 1 for name in set(groups))
    sizes = Counter(fold).values()
    assert len(sizes) == 4 and max(sizes) - min(sizes) <= 5


def test_random_folds_differ_in_size_by_one_row_at_most() -> None:
    fold = folds(10, 3, -7)  # a negative seed is a seed too
    assert sorted(Counter(fold).values()) == [3, 3, 4]


def test_out_of_fold_predictions_take_the_mean_of_a_row_held_out_twice() -> None:
    import numpy as np

    from gpukeras.tools.folds import out_of_fold

    first = [np.array([[1.0, 0.0], [3.0, 1.0]]), np.array([1.0, 2.0])]
    second = [np.array([[2.0, 1.0]]), np.array([4.0])]
    scores, vector = out_of_fold([first, second], [[1, 2], 2], 3)
    np.testing.assert_array_equal(scores[:2], [[1.0, 0.0], [2.5, 1.0]])
    assert np.isnan(scores[2]).all()  # never held out
    np.testing.assert_array_equal(vector[:2], [[1.0], [3.0]])  # a vector as one column


def test_split_gives_each_fold_its_rows() -> None:
    from gpukeras.tools.folds import split

    made = split(10, 3, 1, labels=["a", "b"] * 5)
    assert made["kind"] == "stratified by the labels"
    assert sorted(row for fold in made["held_out"] for row in fold) == list(range(1, 11))
    for held, train in zip(made["held_out"], made["train"]):
        assert held == sorted(held) and sorted(held + train) == list(range(1, 11))
    assert split(10, 3, 1, labels=["a"] * 10, groups=list("aabbccddee"))["kind"] == "grouped"
    assert split(10, 3, 1)["kind"] == "random"


def test_result_gathers_the_folds_metrics_summary_and_predictions() -> None:
    import math

    import numpy as np

    from gpukeras.tools.folds import result

    made = result(
        metrics=[{"loss": 0.5, "accuracy": 1.0}, {"loss": 0.7, "accuracy": 0.5}],
        trained=["population", "processes"],
        devices=["CPU", "CPU"],
        predictions=[np.array([[1.0], [2.0]]), np.array([[3.0]])],
        held_out=[[1, 2], 3],
        rows=3,
        split="random",
        seed=1,
    )
    assert made["metrics"] == {"fold": [1, 2], "loss": [0.5, 0.7], "accuracy": [1.0, 0.5]}
    assert made["trained"] == "population and processes"
    assert list(made["summary"]) == [
        "held_out_loss_mean",
        "held_out_accuracy_mean",
        "held_out_loss_sd",
        "held_out_accuracy_sd",
    ]
    assert math.isclose(made["summary"]["held_out_loss_mean"], 0.6)
    assert not made["several"]
    np.testing.assert_array_equal(made["predictions"][0], [[1.0], [2.0], [3.0]])
    assert made["lines"][0] == "<gpukeras_cv> 2 folds (random), seed 1"
    several = result(
        [{"loss": 1.0}] * 2,
        ["processes"] * 2,
        ["CPU"] * 2,
        [{"a": np.ones((1, 1)), "b": np.zeros((1, 2))}] * 2,
        [1, 2],
        2,
        "random",
        1,
    )
    assert several["several"] and [p.shape for p in several["predictions"]] == [(2, 1), (2, 2)]


def test_labels_that_are_classes_are_stratified_by() -> None:
    import numpy as np

    from gpukeras.tools.folds import class_labels

    # as R hands them over: a factor's values as text, logicals, R's integers, one column
    assert class_labels(np.array(["no", "yes"])) == ["no", "yes"]
    assert class_labels(np.array([True, False])) == ["True", "False"]
    assert class_labels(np.array([[1], [2]], np.int32)) == ["1", "2"]
    # doubles, several columns, none: not classes
    for labels in (np.array([0.5, 1.0]), np.zeros((2, 2), np.int32), None):
        assert class_labels(labels) is None
