"""KerasHub presets loaded for a task (train/pretrained.py), on tiny presets this test saves.

Real KerasHub: a 2-layer BERT, and a 2-layer Gemma and GPT-2, with random weights written by its own
save_to_preset(), loaded back, fine-tuned (fully and with LoRA) and asked to predict or to
generate. Importing KerasHub
costs 15 s (TensorFlow through tensorflow-text): the tests are slow ones.
"""

from __future__ import annotations

import json
import shutil
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import CoreRun, run_core
from gpukeras.core import errors
from gpukeras.core.errors import BadArgumentError
from gpukeras.core.runtime import config
from gpukeras.data import encoding, encoding_words
from gpukeras.serve import encoding_file, scoring
from gpukeras.track import tracked_runs
from gpukeras.train import backup, fit, pretrained
from test_backup import crash_at, listing

pytest.importorskip("keras_hub")
pytestmark = pytest.mark.slow

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "testthat" / "python"))
from tiny_preset import (  # noqa: E402
    save_tiny_causal_lm_preset,
    save_tiny_gemma_preset,
    save_tiny_preset,
)


@pytest.fixture(scope="module")
def preset(tmp_path_factory: pytest.TempPathFactory) -> str:
    return save_tiny_preset(str(tmp_path_factory.mktemp("hub") / "tiny"))


@pytest.fixture(scope="module")
def lm_preset(tmp_path_factory: pytest.TempPathFactory) -> str:
    return save_tiny_gemma_preset(str(tmp_path_factory.mktemp("hub") / "tiny-lm"))


TEXTS = ["good movie", "great movie", "nice movie", "fine movie"] * 4 + [
    "bad movie",
    "awful movie",
    "poor movie",
    "sad movie",
] * 4
LABELS = [1] * 16 + [0] * 16


@pytest.fixture(scope="module")
def classifier_fit(preset: str) -> tuple[Any, dict, dict]:
    """The classifier fine-tuned (15 epochs, the rows reshuffled each), its dataset and what
    text_classifier() answered, which several tests check, save or serve (none changes it)."""
    loaded = pretrained.text_classifier(preset, num_classes=2, learning_rate=1e-2)
    made = pretrained.text_dataset(TEXTS, LABELS, ["neg", "pos"], 8, shuffle=True, seed=1)
    loaded["model"].fit(made["dataset"], epochs=15, verbose=0)
    return loaded["model"], made, loaded


SAVED_TEXTS = ["good movie", "sad movie", "the movie was fine"]


@pytest.fixture(scope="module")
def lora_fit(
    preset: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Any, dict, dict[str, Any]]:
    """The classifier fine-tuned with LoRA at rank 2 by the core's fit (3 epochs, its best
    epoch kept: gpu_backup(keep_best = )), its dataset, and the fit's answer with the model's
    predictions for ``SAVED_TEXTS`` at each epoch's end, which several tests check, save or
    copy (none changes the model)."""
    from gpukeras.tools import training

    config.keras().utils.set_random_seed(1)
    model = pretrained.text_classifier(preset, num_classes=2, lora_rank=2, learning_rate=1e-2)
    model = model["model"]
    made = pretrained.text_dataset(TEXTS, LABELS, ["neg", "pos"], batch_size=8)
    texts = pretrained.text_dataset(SAVED_TEXTS)["dataset"]
    predicted: dict[int, object] = {}

    class PredictEachEpoch(config.keras().callbacks.Callback):
        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            predicted[epoch + 1] = scoring.predict(self.model, texts)

    result = training.fit(
        model,
        made["dataset"],
        request={
            "epochs": 3,
            "seed": 5,
            "backup_dir": str(tmp_path_factory.mktemp("lora") / "backups"),
            "keep_best": 1,
            "keep_best_monitor": "loss",
            "callbacks": [PredictEachEpoch()],
            "monitor": False,
            "verbose": 0,
        },
    )
    return model, made, {"result": result, "predicted": predicted}


@pytest.fixture(scope="module")
def fresh_python(
    lm_preset: str, classifier_fit: tuple[Any, dict, dict], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """One fresh Python (KerasHub's import there costs about 15 s) that loads the saved
    classifier (``load_model``, its first call) and then the LoRA causal LM a background job
    carried to its child (``job_load_carried``), with what each test compares them with."""
    from gpukeras.train import job

    folder = tmp_path_factory.mktemp("fresh")
    model, made, _ = classifier_fit
    expected = scoring.predict(model, pretrained.text_dataset(SAVED_TEXTS)["dataset"])
    path = str(folder / "classifier.keras")
    scoring.save_model(model, path, made["encoding"])
    lm = pretrained.causal_lm(lm_preset, lora_rank=2, learning_rate=1e-3)["model"]
    job_dir = folder / "job"
    job_dir.mkdir()
    job.carry_model(lm, str(job_dir))
    run = run_core(
        "load_model",
        {"path": path},
        after=(
            "from gpukeras.serve import scoring\n"
            "from gpukeras.train import pretrained\n"
            "model = result['value']['model']\n"
            f"readback['predicted'] = scoring.predict(model, pretrained.text_dataset("
            f"{SAVED_TEXTS!r})['dataset']).tolist()\n"
            "readback['levels'] = result['value']['encoding']['y']['levels']\n"
            "readback['compiled'] = model.compiled\n"
            "result = {'ok': result['ok'], 'warnings': result.get('warnings')}\n"
            f"carried = bridge.call('job_load_carried', {{'job_dir': {str(job_dir)!r}, "
            "'sys_path': []})\n"
            "readback['carried_ok'] = carried['ok']\n"
            "lm = carried['value']['model']\n"
            "readback['params'] = pretrained.preset_params(lm)\n"
            "readback['trainable'] = pretrained._count(lm.trainable_weights)\n"
            "readback['rate'] = float(lm.optimizer.learning_rate.numpy())\n"
        ),
    )
    return {
        "run": run,
        "expected": expected,
        "lm_trainable": pretrained._count(lm.trainable_weights),
    }


def test_text_classifier_fine_tunes_and_predicts_probabilities(
    classifier_fit: tuple[Any, dict, dict],
) -> None:
    model, _, loaded = classifier_fit
    assert loaded["task"] == "BertTextClassifier"
    assert loaded["trainable"] == loaded["parameters"]
    texts = pretrained.text_dataset(TEXTS, batch_size=8)["dataset"]
    logits = model.predict(texts, verbose=0)
    # predict() gives each class's probability, the softmax of the model's logits
    probabilities = scoring.predict(model, texts)
    assert probabilities.shape == (32, 2)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-6)
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    np.testing.assert_allclose(probabilities, shifted / shifted.sum(1, keepdims=True), rtol=1e-5)
    assert np.mean(np.argmax(probabilities, axis=1) == np.array(LABELS)) > 0.9


def test_texts_have_an_encoding_of_their_own(preset: str) -> None:
    training = pretrained.text_dataset(["a", "b"], [0, 1], ["neg", "pos"])["encoding"]
    new = pretrained.text_dataset(["c"])["encoding"]
    assert training["inputs"] == {"x": {"type": "text"}}
    assert training["y"] == {"type": "factor", "levels": ["neg", "pos"]}
    assert new["y"] is None
    assert encoding.same_encoding(new, training) and encoding.same_encoding(training, training)
    arrays = {**training, "inputs": {"x": {"type": "array", "shape": [1], "names": None}}}
    assert not encoding.same_encoding(arrays, training)
    assert "  x: texts, tokenized by the model's preset" in encoding_words.encoding_lines(training)
    fit_line = encoding_words.encoding_lines(training, "fit")[0]
    assert fit_line.startswith("Encoding:       texts; classes neg, pos")
    model = pretrained.text_classifier(preset, num_classes=2)["model"]
    encoding_file.check(training, "m.gpukeras.json")  # a valid file's encoding: no error
    encoding_file.check_fits(training, model, "m.gpukeras.json")


def test_only_a_kerashub_classifiers_logits_become_probabilities(preset: str) -> None:
    import keras

    logits = np.array([[0.0, np.log(3.0)], [2.0, 2.0]], dtype="float32")
    two = pretrained.text_classifier(preset, num_classes=2)["model"]
    np.testing.assert_allclose(pretrained.probabilities(two, logits), [[0.25, 0.75], [0.5, 0.5]])
    one = pretrained.text_classifier(preset, num_classes=1)["model"]
    np.testing.assert_allclose(pretrained.probabilities(one, np.array([[0.0]])), [[0.5]])
    plain = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])
    assert pretrained.probabilities(plain, logits) is logits
    import keras_hub

    softmax = keras_hub.models.TextClassifier.from_preset(
        preset, num_classes=2, activation="softmax"
    )
    assert not pretrained.gives_logits(softmax)


def test_a_saved_text_classifier_predicts_the_same_in_a_fresh_python(
    fresh_python: dict[str, Any],
) -> None:
    run = fresh_python["run"]
    # loaded without Keras' warning that it cannot compile a KerasHub task: compiled again
    assert run.result == {"ok": True, "warnings": None}
    assert run.readback["levels"] == ["neg", "pos"]
    assert run.readback["compiled"]
    # the same but for float32 rounding: a fresh process's kernels may sum in another order
    np.testing.assert_allclose(
        np.array(run.readback["predicted"], dtype="float32"),
        fresh_python["expected"],
        rtol=1e-5,
        atol=1e-7,
    )


def test_lora_trains_only_the_adapters_kerashub_adds(preset: str) -> None:
    import keras_hub

    loaded = pretrained.text_classifier(preset, num_classes=3, lora_rank=2)
    reference = keras_hub.models.TextClassifier.from_preset(preset, num_classes=3)
    reference.backbone.enable_lora(rank=2)
    count = pretrained._count
    assert loaded["trainable"] == count(reference.trainable_weights)
    assert count(loaded["model"].backbone.trainable_weights) == count(
        reference.backbone.trainable_weights
    )
    assert loaded["trainable"] < loaded["parameters"] / 4


def test_sequence_length_is_the_preprocessors(preset: str) -> None:
    loaded = pretrained.text_classifier(preset, num_classes=2, sequence_length=6)
    assert loaded["model"].preprocessor.sequence_length == 6


def test_a_preset_folder_is_given_to_kerashub_as_its_absolute_path(
    preset: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(Path(preset).parent)
    assert pretrained._preset_path("./tiny") == str(Path(preset).resolve())
    assert pretrained._preset_path("tiny") == str(Path(preset).resolve())  # a folder here
    for name in ("bert_tiny_en_uncased", "hf://google/bert"):
        assert pretrained._preset_path(name) == name


def test_a_folder_that_is_not_a_preset_is_refused(tmp_path: Path) -> None:
    with pytest.raises(pretrained.BadPresetError, match="not a KerasHub preset folder"):
        pretrained.text_classifier(str(tmp_path), num_classes=2)
    with pytest.raises(pretrained.BadPresetError, match="not a KerasHub preset folder"):
        pretrained.text_classifier(str(tmp_path / "none"), num_classes=2)


@pytest.fixture(scope="module")
def hubless_python() -> CoreRun:
    """One fresh Python that checks the machine without a preset (``check``, its first call),
    then, KerasHub blocked (it was not imported: the check's test asserts it), asks for a
    text classifier: the answer is that second call's."""
    return run_core(
        "check",
        {"probe_training": False, "matmul_size": 64},
        after=(
            "readback['check_ok'] = result['ok']\n"
            "readback['hub'] = 'keras_hub' in sys.modules\n"
            "sys.modules['keras_hub'] = None\n"
            "result = bridge.call('text_classifier', "
            "{'preset': 'bert_tiny_en_uncased', 'num_classes': 2})"
        ),
    )


def test_without_keras_hub_the_error_says_how_to_install_it(hubless_python: CoreRun) -> None:
    run = hubless_python
    assert run.result["r_class"] == "gpukeras_error_keras_hub_missing"
    assert "keras-hub is not installed" in run.result["message"]
    assert 'install_gpukeras(extras = "hub")' in run.result["message"]


def test_without_tensorflow_a_preset_without_a_tokenizer_fine_tunes_on_token_ids() -> None:
    """On JAX with no TensorFlow installed (the GPU machines), KerasHub loads without it: a
    causal LM saved without a preprocessor loads with LoRA and trains on token ids through
    gpu_fit()'s core (as R hands over a named list of matrices), its memory plan for a
    sequence length is XLA's, and texts are refused with the classed error that says
    TensorFlow is missing."""
    from conftest import run_on_jax

    run = run_on_jax(
        "import tempfile\n"
        "import numpy as np\n"
        "from gpukeras.train import pretrained\n"
        "hub = pretrained.keras_hub()\n"
        "backbone = hub.models.Gemma3Backbone(vocabulary_size=32, image_size=None, num_layers=1,"
        " num_query_heads=2, num_key_value_heads=1, hidden_dim=16, intermediate_dim=32,"
        " head_dim=8)\n"
        "folder = tempfile.mkdtemp() + '/lm'\n"
        "hub.models.Gemma3CausalLM(backbone=backbone, preprocessor=None).save_to_preset(folder)\n"
        "loaded = bridge.call('causal_lm', {'preset': folder, 'lora_rank': 2})\n"
        "model = loaded['value']['model']\n"
        "ids = np.random.default_rng(1).integers(1, 32, size=(8, 9)).astype('float64')\n"
        "x = {'token_ids': ids[:, :-1], 'padding_mask': np.ones((8, 8))}\n"
        "data = {'gpukeras_handover': {'x': x, 'y': ids[:, 1:], 'y_dtype': 'int32',"
        " 'check_missing': True}}\n"
        "import dataclasses\n"
        "from gpukeras.train.fit_request import FitRequest\n"
        "request = {f.name: getattr(FitRequest(), f.name)"
        " for f in dataclasses.fields(FitRequest)}\n"
        "request.update(epochs=1, batch_size=4, verbose=0, monitor=False)\n"
        "trained = bridge.call('fit', {'model': model, 'data': data, 'request': request})\n"
        "planned = bridge.call('memory_plan', {'model': model, 'batch_size': 2,"
        " 'sequence_length': 8})['value']\n"
        "readback['plan'] = {k: planned[k] for k in ('method', 'fixed_mib', 'uncounted')}\n"
        "readback['plan']['parameters'] = next(p['mib'] for p in planned['parts']"
        " if p['part'] == 'parameters')\n"
        "texts = bridge.call('text_dataset', {'texts': ['the movie']})\n"
        "readback['loaded'] = {k: loaded['value'][k] for k in ('task', 'trainable')}\n"
        "readback['trained'] = trained['ok'] or trained['message']\n"
        "readback['loss'] = trained['value']['history']['loss'] if trained['ok'] else None\n"
        "readback['texts'] = texts.get('r_class')\n"
        "readback['tensorflow'] = sys.modules.get('tensorflow') is not None\n"
    )
    back = run.readback
    assert back["loaded"]["task"] == "Gemma3CausalLM"
    assert 0 < back["loaded"]["trainable"] < 2_000  # the adapters alone
    assert back["trained"] is True
    assert np.isfinite(back["loss"][0])
    # its memory plan, for sequences of 8 token ids, is the step XLA compiles with its LoRA
    plan = back["plan"]
    assert plan["method"] == "XLA's compiled step" and "input batch" not in plan["uncounted"]
    assert plan["parameters"] < plan["fixed_mib"] < 2 * plan["parameters"]  # full: 4 x
    assert back["texts"] == "gpukeras_error_tensorflow_missing"
    assert back["tensorflow"] is False


def test_a_causal_lm_fine_tunes_on_texts_and_generates_what_it_learnt(
    lm_preset: str, tmp_path: Path
) -> None:
    from gpukeras.core import compat

    loaded = pretrained.causal_lm(lm_preset, learning_rate=1e-2)
    model = loaded["model"]
    assert loaded["task"] == "GemmaCausalLM"
    assert loaded["trainable"] == loaded["parameters"]
    texts = pretrained.text_dataset(["the movie was good"] * 16, batch_size=8)["dataset"]
    # A seed leaves a SentencePiece tokenizer working: TensorFlow's seeding clears its kernel
    # cache, which held the op of Gemma's tokenizer (a NotFoundError at the first batch); the
    # core's seeding makes it again.
    compat.set_random_seed(config.keras(), 3, model)
    history = model.fit(texts, epochs=12, verbose=0).history["loss"]
    assert np.isfinite(history).all()
    generated = pretrained.generate(model, ["the movie", "the"], max_length=8)
    assert generated == ["the movie was good", "the movie was good"]
    assert pretrained.generate(model, ["the movie"], max_length=3) == ["the movie"]
    sampled = pretrained.generate(model, ["the movie"], sampler="top_k")
    assert len(sampled) == 1 and sampled[0].startswith("the movie")
    assert type(model.sampler).__name__ == "TopKSampler"
    # saved and loaded (compiled again), it generates the same
    path = str(tmp_path / "lm.keras")
    scoring.save_model(model, path, pretrained.text_dataset(["a"])["encoding"])
    again = pretrained.load_model(path)
    assert again.compiled
    assert pretrained.generate(again, ["the movie"], max_length=8) == ["the movie was good"]


def test_causal_lm_lora_trains_only_the_adapters_kerashub_adds(lm_preset: str) -> None:
    import keras_hub

    loaded = pretrained.causal_lm(lm_preset, lora_rank=2, sequence_length=6)
    reference = keras_hub.models.CausalLM.from_preset(lm_preset)
    reference.backbone.enable_lora(rank=2)
    assert loaded["trainable"] == pretrained._count(reference.trainable_weights)
    assert loaded["trainable"] < loaded["parameters"] / 4
    assert loaded["model"].preprocessor.sequence_length == 6


def test_generate_refuses_a_max_length_the_backbone_cannot_take_and_other_models(
    preset: str, tmp_path: Path
) -> None:
    # GPT-2's position embeddings take 16 tokens (Gemma's rotary ones have no limit)
    model = pretrained.causal_lm(save_tiny_causal_lm_preset(str(tmp_path / "gpt2")))["model"]
    with pytest.raises(BadArgumentError, match=r"`max_length` \(17\) is longer than the 16 tokens"):
        pretrained.generate(model, ["the"], max_length=17)
    classifier = pretrained.text_classifier(preset, num_classes=2)["model"]
    with pytest.raises(BadArgumentError, match="must be a causal language model"):
        pretrained.generate(classifier, ["the"])


def test_a_preset_without_the_task_is_refused(lm_preset: str, preset: str) -> None:
    with pytest.raises(pretrained.BadPresetError, match="as a causal language model"):
        pretrained.causal_lm(preset)
    with pytest.raises(pretrained.BadPresetError, match="as a text classifier"):
        pretrained.text_classifier(lm_preset, num_classes=2)


def test_a_tracked_fit_records_the_preset_and_the_lora_rank(lm_preset: str, preset: str) -> None:
    import keras

    lora = pretrained.causal_lm(lm_preset, lora_rank=2)["model"]
    params = tracked_runs.fit_params(lora, {}, {})
    assert params["preset"] == str(Path(lm_preset).resolve())
    assert params["lora_rank"] == "2"
    full = pretrained.text_classifier(preset, num_classes=2)["model"]
    assert tracked_runs.fit_params(full, {}, {})["lora_rank"] == "none"
    plain = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])
    assert not {"preset", "lora_rank"} & set(tracked_runs.fit_params(plain, {}, {}))


@pytest.mark.parametrize("lora", ["keep", "merge"])
def test_a_lora_fine_tune_saved_with_its_adapters_kept_or_merged_predicts_the_same(
    preset: str, lora_fit: tuple[Any, dict, dict[str, Any]], tmp_path: Path, lora: str
) -> None:
    model, made, _ = lora_fit
    texts = pretrained.text_dataset(["good movie", "sad movie", "the movie was fine"])["dataset"]
    expected = scoring.predict(model, texts)
    path = str(tmp_path / "lora.keras")
    scoring.save_model(model, path, made["encoding"], lora=lora)
    loaded = scoring.load_model(path)
    again = loaded["model"]
    np.testing.assert_allclose(scoring.predict(again, texts), expected, atol=1e-5)
    adapters = [w for w in again.trainable_weights if "lora" in w.path]
    params = tracked_runs.fit_params(again, {}, {})
    assert params["preset"] == str(Path(preset).resolve())
    assert again.optimizer.learning_rate.numpy() == pytest.approx(1e-2)
    if lora == "keep":  # the same adapters, trainable alone with the head
        assert pretrained._count(again.trainable_weights) == pretrained._count(
            model.trainable_weights
        )
        assert len(adapters) == 8 and params["lora_rank"] == "2"
        assert loaded["preset"].endswith("; LoRA rank 2 (adapters trainable)")
    else:  # the kernels with the adapters added, LoRA gone
        assert not [w for w in again.weights if "lora" in w.path]
        assert params["lora_rank"] == "none"
        assert loaded["preset"].endswith("; LoRA rank 2 merged into the weights")


def test_check_preset_reads_a_presets_config_and_metadata_and_says_why_a_folder_is_none(
    preset: str, tmp_path: Path
) -> None:
    from gpukeras.tools import check

    row = pretrained.check_preset(preset)
    assert row == {
        "preset": str(Path(preset).resolve()),
        "loads": True,
        "backbone": "BertBackbone",
        "tasks": ["MaskedLM", "TextClassifier", "TextEmbedder"],
        "parameters": 5168,
        "problem": None,
    }
    assert check.preset_lines(row)[0].endswith(": loads (BertBackbone, 5,168 parameters)")
    none = pretrained.check_preset(str(tmp_path))
    assert not none["loads"] and "is not a KerasHub preset folder" in none["problem"]
    assert check.preset_lines(none) == [f"{tmp_path}: does NOT load", f"  {none['problem']}"]
    # metadata.json alone: KerasHub's loader finds no config.json
    (tmp_path / "metadata.json").write_text("{}")
    config = pretrained.check_preset(str(tmp_path))["problem"]
    assert "does not load as a KerasHub preset: Preset" in config
    assert config.endswith(
        "Give a folder save_to_preset() wrote, or a preset name such as 'bert_tiny_en_uncased'."
    )


def test_a_check_without_a_preset_does_not_import_keras_hub(hubless_python: CoreRun) -> None:
    assert hubless_python.readback["check_ok"] is True
    assert hubless_python.readback["hub"] is False


def test_a_served_text_classifier_takes_texts_and_answers_predicts_probabilities(
    classifier_fit: tuple[Any, dict, dict],
) -> None:
    import json

    from gpukeras.serve import service

    model, made, _ = classifier_fit
    served = service.service(model, made["encoding"], {"batch_size": 2})
    headers = {"host": "127.0.0.1:8000", "content-type": "application/json"}

    def ask(body: str, query: str = "") -> tuple[int, dict]:
        answer = service.answer(served, "POST", "/predict", query, headers, body.encode())
        return answer["status"], json.loads(answer["body"])

    texts = ["good movie", "sad movie", "the movie was fine"]
    expected = scoring.predict(model, pretrained.text_dataset(texts)["dataset"])
    status, answer = ask(json.dumps(texts))
    assert status == 200
    got = [[row["neg"], row["pos"]] for row in answer["predictions"]]
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert ask(json.dumps(texts), "type=class")[1]["predictions"] == [
        ["neg", "pos"][i] for i in np.argmax(expected, axis=1)
    ]
    assert ask('"good movie"')[1]["predictions"][0]["pos"] == pytest.approx(expected[0, 1])
    status, refused = ask('["good movie", null]')
    assert (status, refused["error"]) == (400, "missing_value")
    status, refused = ask('[{"x": "good movie"}]')
    assert (status, refused["error"]) == (400, "bad_body")
    assert refused["message"].startswith("This model takes texts: send them as a JSON array")
    meta = json.loads(service.answer(served, "GET", "/metadata", "", headers, b"")["body"])
    assert meta["input"] == {"form": "texts"}
    assert meta["classes"] == ["neg", "pos"]


def test_a_background_jobs_child_gets_the_model_with_its_preset_and_lora(
    lm_preset: str, fresh_python: dict[str, Any]
) -> None:
    readback = fresh_python["run"].readback
    assert readback["carried_ok"] is True
    assert readback["params"] == {"preset": str(Path(lm_preset).resolve()), "lora_rank": 2}
    assert readback["trainable"] == fresh_python["lm_trainable"]
    assert readback["rate"] == pytest.approx(1e-3)


def test_a_lora_fits_weights_load_back_with_their_adapters(lm_preset: str, tmp_path: Path) -> None:
    # what a background job's child gives back: Keras alone would load each kernel with its
    # adapters added, and the adapters as zeros that train no more
    from gpukeras.train import job

    trained = pretrained.causal_lm(lm_preset, lora_rank=2, learning_rate=1e-2)["model"]
    texts = pretrained.text_dataset(["the movie was good"] * 4, batch_size=2)["dataset"]
    trained.fit(texts, epochs=1, verbose=0)
    path = job.save_trained(trained, str(tmp_path / "trained.weights.h5"))
    assert (tmp_path / "trained.lora.h5").is_file()
    model = pretrained.causal_lm(lm_preset, lora_rank=2, learning_rate=1e-2)["model"]
    model.fit(texts, epochs=1, verbose=0)  # its optimizer built, as the parent's is
    job.load_trained(model, path)
    for got, expected in zip(model.weights, trained.weights, strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(expected), atol=1e-7)
    assert any(np.abs(np.asarray(w)).max() > 0 for w in model.weights if "lora_kernel_b" in w.path)


def test_a_tracked_runs_copy_of_a_lora_fit_is_the_model_with_its_preset_and_adapters(
    lora_fit: tuple[Any, dict, dict[str, Any]],
) -> None:
    from gpukeras.track import model_copy

    model, made, _ = lora_fit
    texts = pretrained.text_dataset(["good movie", "sad movie"])["dataset"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        folder = model_copy.ModelCopy(model).folder(made["encoding"])
    # Keras' "compile() was not called" (the task's compile is its own) is not raised on the
    # sending thread, where the session's call running meanwhile would record it as its own
    assert not [w for w in caught if "compile()" in str(w.message)]
    try:
        loaded = scoring.load_model(str(Path(folder, "model", "model.keras")))
    finally:
        shutil.rmtree(folder)
    np.testing.assert_allclose(
        scoring.predict(loaded["model"], texts), scoring.predict(model, texts), atol=1e-5
    )
    assert tracked_runs.fit_params(loaded["model"], {}, {})["lora_rank"] == "2"


def test_a_backed_up_lora_fit_resumes_with_its_adapters_as_the_unbroken_run(
    preset: str, tmp_path: Path
) -> None:
    # Keras' own save_weights() would back up each kernel with its adapters added, and resume
    # with that sum and zero adapters: another run, its adapters no longer LoRA's factors.
    def lora_classifier(seed: int) -> object:
        config.keras().utils.set_random_seed(seed)
        made = pretrained.text_classifier(preset, num_classes=2, lora_rank=2, learning_rate=1e-2)
        return made["model"]

    data = pretrained.text_dataset(TEXTS, LABELS, ["neg", "pos"], batch_size=4)["dataset"]
    common = {"epochs": 3, "seed": 5, "monitor": False, "verbose": 0, "steps_per_execution": 1}
    reference = lora_classifier(1)
    fit.fit(reference, data, **common)
    folder = tmp_path / "backups"
    with pytest.raises(errors.CallbackError):
        fit.fit(
            lora_classifier(1),
            data,
            backup_dir=str(folder),
            backup_freq=3,
            callbacks=[crash_at(1, 5)],
            **common,
        )
    state = backup.read_state(str(folder))
    assert state is not None and state.previous is not None
    # the two kept generations' adapters, each beside its weights; those of older ones removed
    kept = {s.weights.removesuffix(".weights.h5") + ".lora.h5" for s in (state, state.previous)}
    assert {name for name in listing(folder) if name.endswith(".lora.h5")} == kept
    assert state.adapters in kept
    # a backup whose newest adapters a crash cut short resumes from the one before
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    (broken / state.adapters).write_bytes(b"cut short")
    fallback = backup.resume_state(str(broken))
    assert fallback is not None and fallback.generation == state.generation
    assert fallback.files() == state.previous.files()
    assert f"the newest backup's LoRA adapters ({state.adapters}) are " in str(fallback.fallback)
    # one written before the adapters were kept apart (none beside its weights) resumes as then
    older = tmp_path / "older"
    shutil.copytree(folder, older)
    written = json.loads((older / backup.STATE_FILE).read_text())
    for generation in (written, written["previous"]):
        (older / generation.pop("adapters")).unlink()
        del generation["adapters_size"], generation["adapters_sha256"]
    (older / backup.STATE_FILE).write_text(json.dumps(written))
    answer = fit.fit(lora_classifier(2), data, backup_dir=str(older), backup_freq=3, **common)
    assert answer["settings"]["resumed_from"] == {"epoch": 2, "batches_done": 3}
    assert not older.exists()
    # adapters a write killed midway left, which no backup names, go when the fit completes
    (folder / f"{backup.WEIGHTS_PREFIX}000009-abc{pretrained.ADAPTERS_SUFFIX}").write_bytes(b"cut")
    resumed = lora_classifier(2)  # other initial weights and adapters: the backup's replace them
    answer = fit.fit(resumed, data, backup_dir=str(folder), backup_freq=3, **common)
    assert answer["settings"]["resumed_from"] == {"epoch": 2, "batches_done": 3}
    for got, want in zip(resumed.weights, reference.weights, strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-6, err_msg=got.path)
    adapters = [w for w in resumed.trainable_weights if "lora_kernel" in w.path]
    assert len(adapters) == 8
    assert all(np.abs(np.asarray(w)).max() > 0 for w in adapters)
    assert not folder.exists()  # done: every generation's weights and adapters removed


def test_a_lora_fits_kept_best_model_loads_with_its_adapters_and_predicts_as_at_its_epoch(
    lora_fit: tuple[Any, dict, dict[str, Any]],
) -> None:
    # gpu_backup(keep_best = ): Keras' own save would add the adapters into each kernel and
    # load LoRA back with zero adapters, without the preset the fit was of
    model, _, fitted = lora_fit
    texts = pretrained.text_dataset(SAVED_TEXTS)["dataset"]
    (best,) = fitted["result"]["settings"]["best"]["best"]
    loaded = scoring.load_model(best["path"])
    again = loaded["model"]
    np.testing.assert_allclose(
        scoring.predict(again, texts), fitted["predicted"][best["epoch"]], atol=1e-6, rtol=0
    )
    assert pretrained._count(again.trainable_weights) == pretrained._count(model.trainable_weights)
    adapters = [w for w in again.trainable_weights if "lora_kernel" in w.path]
    assert len(adapters) == 8
    assert all(np.abs(np.asarray(w)).max() > 0 for w in adapters)
    assert loaded["preset"].endswith("; LoRA rank 2 (adapters trainable)")
    assert tracked_runs.fit_params(again, {}, {})["lora_rank"] == "2"
