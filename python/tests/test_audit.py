"""audit: each finding on a small real model built for it, and none on clean models."""

from __future__ import annotations

import pytest

from conftest import requires, run_core
from gpukeras import bridge
from gpukeras.core.runtime import config


def keras() -> object:
    return config.keras()


def sequential(*layers: object, shape: tuple = (64,), dtype: str = "float32") -> object:
    k = keras()
    return k.Sequential([k.Input(shape, dtype=dtype), *layers])


def findings(model: object, **kwargs: object) -> list[dict]:
    """The findings as R gets them, through the bridge."""
    answer = bridge.call("audit", {"model": model, **kwargs})
    assert answer["ok"], answer
    return answer["value"]["findings"]


def checks(model: object, **kwargs: object) -> list[tuple[str, str]]:
    return [(row["layer"], row["check"]) for row in findings(model, **kwargs)]


# Mixed precision: widths and batch size ------------------------------------------------------
def test_odd_widths_under_mixed_precision_are_flagged_with_the_rounded_width() -> None:
    layers = keras().layers
    model = sequential(
        layers.Dense(100, activation="relu", dtype="mixed_float16", name="hidden"),
        layers.Dense(10, activation="softmax", dtype="float32", name="out"),
    )
    rows = findings(model, batch_size=30)
    assert [(r["layer"], r["check"], r["severity"]) for r in rows] == [
        ("hidden", "dims_not_multiple_of_8", "warning"),
        ("(batch)", "batch_not_multiple_of_8", "warning"),
    ]
    hidden = rows[0]
    assert "float16 with units 100" in hidden["finding"]
    assert "units 104" in hidden["advice"]
    assert hidden["flops_share"] == pytest.approx(64 * 100 / (64 * 100 + 100 * 10))
    assert "batch size of 32" in rows[1]["advice"]


def test_multiples_of_8_float32_and_the_output_width_are_not_flagged() -> None:
    layers = keras().layers
    aligned = sequential(
        layers.Dense(128, dtype="mixed_bfloat16"),
        layers.Dense(10, activation="softmax", dtype="float32"),  # 10 classes: the task's width
    )
    assert findings(aligned, batch_size=32) == []
    # The same odd widths in float32: Tensor Core alignment does not apply.
    plain = sequential(layers.Dense(100), layers.Dense(10, activation="softmax"))
    assert findings(plain, batch_size=30) == []


def test_widths_that_come_from_the_data_are_only_info() -> None:
    layers = keras().layers
    model = sequential(layers.Dense(64, dtype="mixed_float16"), layers.Dense(1), shape=(30,))
    rows = findings(model)
    assert [(r["check"], r["severity"]) for r in rows] == [("dims_not_multiple_of_8", "info")]
    assert "input features (30) come from the data" in rows[0]["finding"]
    assert "pad the data to 32 input features" in rows[0]["advice"]


def test_embedding_attention_and_recurrent_widths() -> None:
    k = keras()
    tokens = k.Input((6,), dtype="int32")
    x = k.layers.Embedding(50, 12, dtype="mixed_bfloat16", name="embed")(tokens)
    x = k.layers.MultiHeadAttention(2, key_dim=6, dtype="mixed_bfloat16", name="attend")(x, x)
    x = k.layers.GRU(16, dtype="mixed_bfloat16", name="recur")(x)
    model = k.Model(tokens, k.layers.Dense(1, dtype="float32")(x))
    rows = {row["layer"]: row for row in findings(model)}
    assert set(rows) == {"embed", "attend"}
    assert "output_dim 12" in rows["embed"]["finding"]
    assert "key_dim 6, value_dim 6" in rows["attend"]["finding"]


def test_output_softmax_in_float16_is_flagged() -> None:
    layers = keras().layers
    model = sequential(
        layers.Dense(64, dtype="mixed_float16"),
        layers.Dense(3, activation="softmax", dtype="mixed_float16", name="probabilities"),
    )
    (row,) = findings(model)
    assert (row["layer"], row["check"], row["severity"]) == (
        "probabilities",
        "output_in_low_precision",
        "warning",
    )
    assert row["finding"].startswith("The output layer 'probabilities' computes its softmax in")
    assert 'dtype = "float32"' in row["advice"]


# FLOPs: dominant layers, separable convolutions -----------------------------------------------
def test_a_huge_dense_layer_doing_most_of_the_flops_is_flagged() -> None:
    layers = keras().layers
    model = sequential(layers.Dense(4096, name="huge"), layers.Dense(10), shape=(4096,))
    (row,) = findings(model)
    assert (row["layer"], row["check"]) == ("huge", "dominant_layer")
    share = 4096 * 4096 / (4096 * 4096 + 4096 * 10)
    assert row["flops_share"] == pytest.approx(share)
    assert "4096 x 4096 kernel (16.8 M weights)" in row["finding"]
    assert "4096 -> 512 -> 4096 needs 4.0x fewer" in row["advice"]
    # Large, but not a 4096 x 4096 kernel: nothing to say.
    assert findings(sequential(layers.Dense(1024), layers.Dense(10), shape=(1024,))) == []


def test_a_costly_3x3_convolution_suggests_a_separable_one_with_the_factor() -> None:
    layers = keras().layers
    model = sequential(
        layers.Conv2D(256, 3, padding="same", name="conv"),
        layers.GlobalAveragePooling2D(),
        layers.Dense(10),
        shape=(8, 8, 256),
    )
    (row,) = findings(model)
    assert (row["layer"], row["check"], row["severity"]) == ("conv", "separable_conv", "info")
    assert row["factor"] == pytest.approx(9 * 256 * 256 / (9 * 256 + 256 * 256))
    assert "8.7x fewer multiply-adds" in row["finding"]
    assert "layer_separable_conv_2d(filters = 256, kernel_size = c(3, 3))" in row["advice"]
    # 1x1 convolutions (nothing to separate) and cheap ones are left alone.
    pointwise = sequential(
        layers.Conv2D(256, 1), layers.GlobalAveragePooling2D(), layers.Dense(8), shape=(8, 8, 256)
    )
    assert findings(pointwise) == []


# Layers that leave the GPU path --------------------------------------------------------------
@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda k: k.layers.LSTM(8, recurrent_dropout=0.1), "recurrent_dropout = 0.1"),
        (lambda k: k.layers.LSTM(8, activation="relu"), "activation relu (needs tanh)"),
        (lambda k: k.layers.LSTM(8, unroll=True), "unroll = TRUE"),
        (lambda k: k.layers.GRU(8, reset_after=False), "reset_after = FALSE"),
        (lambda k: k.layers.GRU(8, use_bias=False), "use_bias = FALSE"),
        (lambda k: k.layers.GRU(8, use_cudnn=False), "use_cudnn = FALSE"),
    ],
)
def test_recurrent_settings_that_rule_out_cudnn_are_flagged(make: object, reason: str) -> None:
    model = sequential(make(keras()), keras().layers.Dense(1), shape=(5, 8))  # type: ignore[operator]
    (row,) = findings(model)
    assert (row["check"], row["severity"]) == ("rnn_no_cudnn", "warning")
    assert reason in row["finding"]


def test_default_recurrent_layers_are_clean_and_bidirectional_is_reported_once() -> None:
    layers = keras().layers
    clean = sequential(layers.LSTM(8, return_sequences=True), layers.GRU(8), shape=(5, 8))
    assert findings(clean) == []
    wrapped = sequential(
        layers.Bidirectional(layers.LSTM(8, recurrent_dropout=0.2, name="lstm"), name="both"),
        shape=(5, 8),
    )
    assert checks(wrapped) == [("both/forward_lstm", "rnn_no_cudnn")]
    cells = sequential(layers.RNN(layers.LSTMCell(8), name="loop"), shape=(5, 8))
    (row,) = findings(cells)
    assert (row["check"], row["severity"]) == ("rnn_no_cudnn", "warning")
    assert "Use an LSTM layer" in row["advice"]


def test_cpu_only_preprocessing_and_lambda_layers_are_flagged() -> None:
    requires("tensorflow")  # the lookup layers are built from TensorFlow ops, on any backend
    k = keras()
    text = k.Input((1,), dtype="string")
    ids = k.layers.StringLookup(vocabulary=["a", "b", "c"], name="lookup")(text)
    hashed = k.layers.Hashing(num_bins=8, name="hash")(ids)
    doubled = k.layers.Lambda(lambda t: t * 2, name="double")(k.ops.cast(hashed, "float32"))
    model = k.Model(text, k.layers.Dense(1)(doubled))
    rows = {row["layer"]: row for row in findings(model)}
    assert {name: row["check"] for name, row in rows.items()} == {
        "lookup": "cpu_only_layer",
        "hash": "cpu_only_layer",
        "double": "lambda_layer",
    }
    assert rows["lookup"]["severity"] == "warning" and rows["double"]["severity"] == "info"
    where = "on the JAX backend" if config.backend == "jax" else "pinned to the CPU"
    assert where in rows["lookup"]["finding"]
    assert "gpu_dataset(..., map = )" in rows["lookup"]["advice"]


def test_mask_before_an_lstm_is_flagged_on_jax_only() -> None:
    requires("jax")
    after = """
import keras
from gpukeras.tools import audit
def build(mask_zero):
    return keras.Sequential([
        keras.Input((5,), dtype="int32"),
        keras.layers.Embedding(10, 8, mask_zero=mask_zero),
        keras.layers.Dropout(0.1),
        keras.layers.LSTM(8, name="recur"),
    ])
readback["masked"] = [(f.layer, f.check) for f in audit.audit(build(True))["findings"]]
readback["plain"] = [(f.layer, f.check) for f in audit.audit(build(False))["findings"]]
"""
    run = run_core("start", env={"KERAS_BACKEND": "jax"}, after=after)
    assert run.readback == {"masked": [["recur", "rnn_mask_on_jax"]], "plain": []}


# The walk and the result ----------------------------------------------------------------------
def test_nested_models_are_walked_with_paths_and_outputs_known() -> None:
    k = keras()
    inner = k.Sequential(
        [
            k.Input((32,)),
            k.layers.Dense(100, dtype="mixed_float16", name="wide"),
            k.layers.Dense(12, dtype="mixed_float16", name="narrow"),
        ],
        name="block",
    )
    model = sequential(inner, k.layers.Dense(3, dtype="mixed_float16", name="out"), shape=(32,))
    # The inner model's last layer is not the model's output, so its width is the user's.
    assert checks(model) == [
        ("block/wide", "dims_not_multiple_of_8"),
        ("block/narrow", "dims_not_multiple_of_8"),
    ]


def test_a_clean_model_has_no_findings_and_the_summary_is_plain_data() -> None:
    layers = keras().layers
    model = sequential(layers.Dense(32, activation="relu"), layers.Dense(2))
    answer = bridge.call("audit", {"model": model, "batch_size": 30})
    assert answer["ok"], answer
    value = answer["value"]
    assert value["findings"] == []
    assert value["layers"] == 2
    assert value["flops_per_sample"] == 2 * (64 * 32 + 32 * 2)
    assert value["uncounted"] == []
    assert value["backend"] == config.backend


def test_bad_input_gives_classed_errors() -> None:
    k = keras()
    for model, r_class, text in [
        (
            3,
            "gpukeras_error_bad_model",
            "model must be a Keras 3 model (keras.Model), not builtins.int",
        ),
        (k.layers.Dense(2), "gpukeras_error_bad_model", "not keras.src.layers.core.dense.Dense"),
        (k.Sequential([k.layers.Dense(2)]), "gpukeras_error_bad_model", "The model is not built"),
    ]:
        answer = bridge.call("audit", {"model": model})
        assert (answer["ok"], answer["r_class"]) == (False, r_class)
        assert text in answer["message"]
        assert answer["traceback"] is None


def test_audit_lines_group_by_severity_wrap_and_count_the_rows_given() -> None:
    """print(gpu_audit())'s lines: the header with the model and counts, warnings then
    those worth a look, each finding and its advice wrapped under its bullet, the FLOPs
    not counted; rows without a share or a class, a subset without the model's details
    and no rows at all."""
    from gpukeras.tools.result_lines import audit_lines

    findings = {
        "layer": ["hidden", "(batch)", "hidden"],
        "layer_class": ["Dense", "", "Dense"],
        "check": ["dims_not_multiple_of_8", "batch_not_multiple_of_8", "dims_not_multiple_of_8"],
        "severity": ["warning", "warning", "info"],
        "finding": ["Units 100 are not a multiple of 8.", "Batch 50.", "Input 30 " * 6],
        "advice": ["Round to 104.", "Use 56.", "Pad."],
        "flops_share": [0.909, float("nan"), None],
        "factor": [None, None, None],
    }
    info = {
        "model": "m",
        "backend": "jax",
        "layers": 2,
        "batch_size": 50,
        "uncounted": ["LSTMCell"],
    }
    assert audit_lines(findings, info, width=40, bullet="*", arrow="->") == [
        "<gpukeras audit> model 'm' (jax backend), 2 layers checked, batch size 50: "
        "2 warnings, 1 to look at",
        "Warnings (2):",
        "  * hidden (Dense, 91% of FLOPs): Units",
        "    100 are not a multiple of 8.",
        "    -> Round to 104.",
        "  * (batch): Batch 50.",
        "    -> Use 56.",
        "Worth a look (1):",
        "  * hidden (Dense): Input 30 Input 30",
        "    Input 30 Input 30 Input 30 Input 30",
        "    -> Pad.",
        "FLOP shares are of the counted FLOPs (not counted: LSTMCell).",
    ]
    one = {name: values[:1] for name, values in findings.items()}
    assert audit_lines(one)[0] == "<gpukeras audit>: 1 warning, 0 to look at"
    none = {name: [] for name in findings}
    assert audit_lines(none, {**info, "batch_size": None}) == [
        "<gpukeras audit> model 'm' (jax backend), 2 layers checked",
        "No findings: nothing in this model stands in the way of the GPU.",
    ]
