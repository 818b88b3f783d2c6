"""The prediction service's answers, in process (serve/service.py): the header checks in
their order, the refusals of bodies with their codes and fields, the default limits, the
OpenAPI description, and predictions equal to the model's own for records, columns and
rows. test_serve_server.py sends requests to it over real HTTP; R's test-serve.R compares
its answers with predict()."""

# ruff: noqa: E501 (answers are compared whole, as clients read them)
from __future__ import annotations

import json
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpukeras.core.errors import BadArgumentError
from gpukeras.core.runtime import config
from gpukeras.data.encoding import image_encoding
from gpukeras.serve import scoring, service, service_body, service_spec

ENCODING: dict[str, Any] = {
    "inputs": {
        "x": {
            "type": "data.frame",
            "columns": {
                "income": {"type": "numeric"},
                "region": {"type": "factor", "levels": ["east", "west"], "encoding": "one_hot"},
            },
            "column_order": ["income", "region"],
        }
    },
    "input_order": ["x"],
    "several": False,
    "y": {"type": "factor", "levels": ["high", "low"]},
    "na": "error",
    "x_dtype": "float32",
}
SETTINGS = {
    "token": "s3cret",
    "max_rows": 50,
    "host": "127.0.0.1",
    "allowed_hosts": ["scoring.example"],
}


def classifier(width: int) -> Any:
    keras = config.keras()
    model = keras.Sequential(
        [keras.Input(shape=(width,)), keras.layers.Dense(2, activation="softmax")]
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


def saved_model(folder: Path) -> str:
    """A classifier of the columns of ENCODING saved with it, as gpu_save() saves one."""
    path = str(folder / "served.keras")
    scoring.save_model(classifier(3), path, ENCODING)
    return path


@pytest.fixture(scope="module")
def served() -> service.Service:
    return service.service(classifier(3), ENCODING, SETTINGS)


def ask(
    served: service.Service,
    body: str = "",
    path: str = "/predict",
    query: str = "",
    **headers: str | None,
) -> str:
    """What a client reads: the status and the JSON answer."""
    given = {
        "host": "127.0.0.1:8000",
        "authorization": "Bearer s3cret",
        "content-type": "application/json",
        "content-length": str(len(body)),
    }
    given.update({k.replace("_", "-"): v for k, v in headers.items()})
    sent = {k: v for k, v in given.items() if v is not None}
    method = "POST" if path == "/predict" else "GET"
    answer = service.answer(served, method, path, query, sent, body.encode())
    return f"{answer['status']} {answer['body']}"


def test_the_headers_decide_in_order_host_origin_token_content_type_size(
    served: service.Service,
) -> None:
    assert ask(served, '[{"income": 5, "region": "west"}]').startswith("200 ")
    assert ask(served, host="attacker.example", authorization=None) == (
        '403 {"error": "forbidden_host", "message": "This service answers requests for localhost, '
        '127.0.0.1, scoring.example and loopback addresses, not for \\"attacker.example\\": a web '
        "page may be reaching it under its own name (DNS rebinding). If clients use that name, start "
        'the service with allowed_hosts = \\"attacker.example\\"."}'
    )
    assert "forbidden_origin" in ask(
        served, origin="https://attacker.example", content_type="text/plain"
    )
    assert ask(served, authorization=None, content_length="52428800").startswith(
        '401 {"error": "unauthorized", "message": "This service needs a token'
    )
    assert ask(served, content_type="text/plain;charset=UTF-8").endswith(
        'not \\"text/plain;charset=UTF-8\\"."}'
    )
    assert ask(served, content_length="52428800") == (
        '413 {"error": "too_large", "message": "The body is over 64.0 KiB; this service takes at '
        'most that (65536 bytes, max_bytes) per request: send the rows in parts.", "limit": '
        '"max_bytes", "max_bytes": 65536}'
    )
    assert ask(served, content_length=None, transfer_encoding="chunked").startswith("411 ")
    assert ask(served, authorization="Bearer wrong").endswith('"The bearer token is wrong."}')
    assert ask(served, path="/health", authorization=None) == '200 {"status":"ok"}'
    assert ask(served, path="/score").startswith(
        '404 {"error": "not_found", "message": "No route GET /score'
    )


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:8000",
        "localhost",
        "LOCALHOST.:8000",
        "127.0.0.2",
        "[::1]:8000",
        "scoring.example:443",
    ],
)
def test_loopback_the_address_and_allowed_hosts_are_answered(
    served: service.Service, host: str
) -> None:
    assert ask(served, path="/health", host=host).startswith("200 ")


@pytest.mark.parametrize(
    "host",
    [
        "attacker.example",
        "127.0.0.1.attacker.example",
        "127.attacker.example",
        "10.0.0.5",
        "[::1].example",
    ],
)
def test_other_hosts_are_refused(served: service.Service, host: str) -> None:
    assert ask(served, path="/health", host=host).startswith('403 {"error": "forbidden_host"')


@pytest.mark.parametrize(
    ("origin", "status"),
    [
        ("http://localhost:3000", "200"),
        ("https://scoring.example", "200"),
        ("http://[::1]:8000", "200"),
        ("null", "403"),
        ("http://localhost.attacker.example", "403"),
        ("http://user@localhost", "403"),
    ],
)
def test_origins(served: service.Service, origin: str, status: str) -> None:
    assert ask(served, path="/health", origin=origin).startswith(status)


def test_every_address_and_any_host() -> None:
    from gpukeras.serve.service_checks import host_allowed, host_name, served_hosts

    everywhere = served_hosts("0.0.0.0", None)
    assert host_allowed(host_name("10.0.0.5:8000"), everywhere)
    assert not host_allowed(host_name("attacker.example"), everywhere)
    assert host_allowed(host_name("anything.example"), served_hosts("0.0.0.0", "*"))


def test_max_bytes_by_default_fits_max_rows_rows_twice_over_and_64_kib_at_least() -> None:
    part = ENCODING["inputs"]["x"]
    assert service.request_byte_limit(part, 50) == 64 * 1024
    assert service.request_byte_limit(part, 10000) == 2 * 10000 * (
        (6 + 4 + 24) + (6 + 4 + 6 * 4 + 2) + 2
    )
    # unnamed rows of numbers: 12 bytes a number, and the brackets of each row
    rows = {"type": "array", "shape": [28, 28], "names": None}
    assert service.request_byte_limit(rows, 1000) == 1000 * (12 * 784 + 2 * (1 + 28) + 2)


def test_an_image_models_default_limits_keep_a_request_within_bounded_memory() -> None:
    # rows of columns: 10,000, as before; images: what 16 MiB of float32 holds
    assert service.default_max_rows(ENCODING["inputs"]["x"]) == 10000
    one_hot = {"type": "factor", "levels": ["a"] * 1000, "encoding": "one_hot"}
    wide = {"type": "data.frame", "columns": {"f": one_hot}}
    assert service.default_max_rows(wide) == 16 * 2**20 // 4000
    image = image_encoding(["cat", "dog"], [32, 32], 3, "rgb", 1 / 255)["inputs"]["x"]
    assert service.default_max_rows(image) == 1365  # not 10,000 (1.5 GB of JSON)
    assert service.default_max_rows({**image, "shape": [224, 224, 3]}) == 27
    served = service.service(classifier(3), image_encoding(["a"], [32, 32], 3, "rgb", None), {})
    assert served.max_rows == 1365 and served.max_bytes == 53207700  # 51 MiB
    assert served.max_rows * 32 * 32 * 3 * 4 <= 16 * 2**20
    # a limit given is kept
    assert service.service(classifier(3), ENCODING, {"max_rows": 7}).max_rows == 7


def test_an_empty_body_is_told_what_to_send(served: service.Service) -> None:
    assert '[{\\"income\\":0,\\"region\\":\\"east\\"}]' in ask(served, "")


BODIES = [
    (
        '[{"income": 5, "region": "west"}, {"income": null, "region": null}, {"income": 6}]',
        '400 {"error": "missing_value", "message": "Columns `income`, `region` are null (NA) in 2 row(s) '
        '(first: 2); the model was trained without NA.", "column": "income", "rows": [2, 3]}',
    ),
    (
        '[{"income": 5, "region": "west"}, {"income": 6, "region": null}]',
        '400 {"error": "missing_value", "message": "Column `region` is null (NA) in 1 row(s) (first: 2); '
        'the model was trained without NA.", "column": "region", "rows": [2]}',
    ),
    (
        "[" + ",".join(['{"income": 5, "region": "west"}'] * 51) + "]",
        '413 {"error": "too_many_rows", "message": "The body has 51 rows; this service takes at most 50 '
        'per request (max_rows): send them in parts.", "limit": "max_rows", "max_rows": 50}',
    ),
    (
        "[" + ",".join(f'{{"k{i}": 1}}' for i in range(1, 8001)) + "]",
        '400 {"error": "missing_column", "message": "The request lacks column(s) the model was trained '
        'on: income, region. Every row needs income, region.", "columns": ["income", "region"]}',
    ),
    (
        '{"income": [1, 2], "region": ["west"], "other": [1, 2, 3]}',
        '400 {"error": "bad_body", "message": "The columns have different lengths (income 2, region 1): '
        'each must have one value per row."}',
    ),
    (
        '[{"income": 1e400, "region": "west"}]',
        '400 {"error": "bad_data", "message": "Column `income` has Inf, NaN or numbers beyond float32\'s '
        "range (about 3.4e+38) in 1 row(s) (first: 1): the model cannot take them; send finite numbers "
        'within it.", "column": "income", "rows": [1]}',
    ),
    (
        '[{"income": 5, "region": "west"}, {"income": -1e308, "region": "east"}]',
        '400 {"error": "bad_data", "message": "Column `income` has Inf, NaN or numbers beyond float32\'s '
        "range (about 3.4e+38) in 1 row(s) (first: 2): the model cannot take them; send finite numbers "
        'within it.", "column": "income", "rows": [2]}',
    ),
    (
        '[{"income": {"nested": 1}, "region": "west"}]',
        '400 {"error": "wrong_type", "message": "Column `income` must hold single values, not nested '
        'arrays or objects.", "column": "income"}',
    ),
    (
        '[{"income": 5, "region": "west"}, 5]',
        '400 {"error": "bad_body", "message": "The body must be JSON records [{\\"column\\": value, ...}, '
        '...], columns {\\"column\\": [values], ...}, or rows of numbers [[...], ...]."}',
    ),
    (
        "[[5, 1]]",
        '400 {"error": "bad_body", "message": "This model takes named columns: send records, e.g. '
        '[{\\"income\\": 1.5, \\"region\\": \\"east\\"}]."}',
    ),
    (
        '[{"income": "high", "region": "west"}]',
        '400 {"error": "wrong_type", "message": "Column `income` must hold numbers, not strings.", '
        '"column": "income"}',
    ),
    ("[]", '400 {"error": "no_rows", "message": "The body holds no rows."}'),
    ('[{"income": NaN, "region": "west"}]', None),
]


@pytest.mark.parametrize(("body", "said"), BODIES)
def test_bodies_are_refused_with_their_code_and_fields(
    served: service.Service, body: str, said: str | None
) -> None:
    answer = ask(served, body, content_length=None)
    if said is None:
        assert answer.startswith('400 {"error": "malformed_json"')
    else:
        assert answer == said


def test_an_unseen_level_is_named_with_a_few_short_levels(served: service.Service) -> None:
    levels = ["n" * 100, "south", *(f"level {i}" for i in range(1, 10))]
    body = json.dumps([{"income": 5, "region": level} for level in levels])
    answer = json.loads(ask(served, body)[4:])
    assert answer["error"] == "unseen_level" and answer["column"] == "region"
    assert answer["levels"] == ["n" * 37 + "...", "south", "level 1", "level 2", "level 3"]
    assert answer["message"].endswith('"level 3" and 6 more. It knows "east", "west".')


def test_records_columns_and_one_record_are_predicted_as_the_model_predicts(
    served: service.Service,
) -> None:
    expected = served.model.predict_on_batch(np.array([[5, 0, 1], [6, 1, 0]], dtype="float32"))
    for body in (
        '[{"income": 5, "region": "west"}, {"region": "east", "income": 6, "id": [1]}]',
        '{"region": ["west", "east"], "income": [5, 6]}',
    ):
        got = json.loads(ask(served, body)[4:])["predictions"]
        assert np.allclose([[row["high"], row["low"]] for row in got], expected, atol=1e-6)
    one = json.loads(ask(served, '{"income": 5, "region": "west"}')[4:])["predictions"]
    assert len(one) == 1
    classes = json.loads(
        ask(served, '{"income": [5, 6], "region": ["west", "east"]}', query="type=class")[4:]
    )
    assert classes["predictions"] == [["high", "low"][int(np.argmax(row))] for row in expected]
    assert "bad_type" in ask(served, '[{"income": 5, "region": "west"}]', query="type=" + "z" * 100)


def test_rows_of_numbers_for_a_model_of_a_matrix() -> None:
    encoding = {
        "inputs": {"x": {"type": "array", "shape": [2], "names": ["a", "b"]}},
        "input_order": ["x"],
        "y": None,
        "na": "drop",
    }
    matrix = service.service(classifier(2), encoding, {"max_rows": 10})
    by_rows = json.loads(ask(matrix, "[[1, 2], [null, 1], [3, 4]]")[4:])["predictions"]
    by_name = json.loads(
        ask(matrix, '[{"b": 2, "a": 1}, {"a": null, "b": 1}, {"a": 3, "b": 4}]')[4:]
    )
    assert by_rows[1] is None and by_rows == by_name["predictions"]
    assert "row 2 holds 1" in ask(matrix, "[[1, 2], [1]]")
    assert '"column": "b", "rows": [2]' in ask(matrix, '[[1, 2], [1, "NaN"]]')
    assert '"column": "b"' in ask(matrix, '[{"a": 1, "b": 1e39}]')
    assert '"wrong_type"' in ask(matrix, '[{"a": "long", "b": 1}]')
    meta = json.loads(ask(matrix, path="/metadata")[4:])
    assert meta["input"]["form"] == "records or rows" and meta["na"] == "drop"


def test_metadata_and_the_openapi_description(served: service.Service) -> None:
    meta = json.loads(ask(served, path="/metadata")[4:])
    assert [c["name"] for c in meta["input"]["columns"]] == ["income", "region"]
    assert meta["classes"] == ["high", "low"] and meta["max_bytes"] == 65536
    assert meta["outputs"][0]["shape"] == [None, 2] and meta["token_required"]
    schema = service_spec.predict_spec(served)["requestBody"]["content"]["application/json"][
        "schema"
    ]
    record = schema["oneOf"][0]
    assert record["items"]["properties"]["region"] == {"type": "string", "enum": ["east", "west"]}
    assert record["maxItems"] == 50 and len(schema["oneOf"]) == 2


def test_a_model_of_several_inputs_is_refused() -> None:
    part = {"type": "array", "shape": [2], "names": None}
    encoding = {"inputs": {"a": part, "b": part}, "several": True}
    with pytest.raises(BadArgumentError, match="one input; this one has 2"):
        service.service(classifier(2), encoding, {"max_rows": 10})


def test_requests_on_their_way_together_are_predicted_in_one_call_each_with_its_own_rows() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from gpukeras.serve.batching import Batcher

    calls: list[int] = []

    def predict(features: np.ndarray) -> list[np.ndarray]:
        calls.append(len(features))
        if (features < 0).any():
            raise ValueError("a negative row")
        return [features * 2]

    def asked(batcher: Batcher, together: threading.Barrier, features: np.ndarray) -> Any:
        with batcher.request() as join:
            together.wait()  # all on their way before any joins
            return join(features)

    batcher = Batcher(predict, window=30.0, max_rows=100)
    rows = [np.full((i + 1, 1), float(i)) for i in range(8)]
    eight = threading.Barrier(8)
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda features: asked(batcher, eight, features), rows))
    assert all(np.array_equal(answer[0], row * 2) for answer, row in zip(answers, rows))
    assert calls == [36]  # one call once none was on its way, long before the window
    # an error is its own request's: the others are answered
    calls.clear()
    bad = [np.full((1, 1), -1.0), np.ones((2, 1)), np.ones((1, 1))]
    three = threading.Barrier(3)
    with ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(asked, batcher, three, features) for features in bad]
    assert isinstance(futures[0].exception(), ValueError)
    assert np.array_equal(futures[1].result()[0], np.full((2, 1), 2.0))
    # a request alone waits for no one, nor for one that left without joining (refused)
    began = time.monotonic()
    with batcher.request() as join:
        assert np.array_equal(join(np.ones((1, 1)))[0], np.full((1, 1), 2.0))
    two = threading.Barrier(2)

    def refused() -> None:
        with batcher.request():
            two.wait()

    with ThreadPoolExecutor(2) as pool:
        pool.submit(refused)
        assert np.array_equal(asked(batcher, two, np.ones((1, 1)))[0], np.full((1, 1), 2.0))
    assert time.monotonic() - began < 10


def test_requests_that_join_while_the_model_predicts_go_together_once_it_is_done() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from gpukeras.serve.batching import Batcher

    calls: list[int] = []
    gate = threading.Event()

    def predict(features: np.ndarray) -> list[np.ndarray]:
        calls.append(len(features))
        gate.wait(30)  # the first call holds the model until the others joined
        return [features + 1]

    batcher = Batcher(predict, window=0.001, max_rows=100)

    def asked(features: np.ndarray) -> Any:
        with batcher.request() as join:
            return join(features)

    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(asked, np.zeros((1, 1)))
        while not calls:
            time.sleep(0.01)
        later = [pool.submit(asked, np.full((1, 1), float(i))) for i in range(1, 4)]
        while len(batcher.pending) < 3:
            time.sleep(0.01)
        gate.set()
        assert np.array_equal(first.result()[0], np.ones((1, 1)))
        assert [f.result()[0][0, 0] for f in later] == [2.0, 3.0, 4.0]
    assert calls == [1, 3]


def test_requests_submitted_go_in_one_call_once_none_on_its_way_is_left() -> None:
    import queue

    from gpukeras.serve.batching import Batcher

    calls: list[int] = []

    def predict(features: np.ndarray) -> list[np.ndarray]:
        calls.append(len(features))
        return [features * 2]

    batcher = Batcher(predict, window=30.0, max_rows=100)
    answered: queue.Queue[tuple[int, Any, Any]] = queue.Queue()
    arrived = batcher.on_its_way()  # an event loop's requests read, not yet submitted
    for i in range(3):
        batcher.submit(
            np.full((i + 1, 1), float(i)),
            lambda outputs, error, i=i: answered.put((i, outputs, error)),
        )
    time.sleep(0.2)
    assert calls == []  # they wait, within the window, for the one on its way
    arrived()
    results = sorted((answered.get(timeout=30) for _ in range(3)), key=lambda r: r[0])
    assert calls == [6]
    for i, outputs, error in results:
        assert error is None
        assert np.array_equal(outputs[0], np.full((i + 1, 1), 2.0 * i))


def test_a_service_that_batches_answers_concurrent_requests_with_their_own_rows() -> None:
    from concurrent.futures import ThreadPoolExecutor

    batched = service.service(classifier(3), ENCODING, {"max_rows": 50, "batch_window": 0.05})
    bodies = [
        json.dumps([{"income": i + j, "region": "west" if j % 2 else "east"} for j in range(i + 1)])
        for i in range(6)
    ]
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda body: json.loads(ask(batched, body)[4:]), bodies))
    for i, answer in enumerate(answers):
        alone = json.loads(ask(served_alone(batched), bodies[i])[4:])
        assert len(answer["predictions"]) == i + 1
        got = [[row["high"], row["low"]] for row in answer["predictions"]]
        want = [[row["high"], row["low"]] for row in alone["predictions"]]
        assert np.allclose(got, want, atol=1e-6)


def test_a_batch_of_records_is_encoded_together_and_an_unseen_level_refused_in_its_own_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # (a request with an unseen level costs its batch no call of the model: the others
    # are still predicted together)
    # as gpu_serve()'s event loop submits the requests it has read (server.py)
    import queue

    from gpukeras.data import encoding

    encoded: list[int] = []
    real = encoding.encode_frame

    def counted(frame: Any) -> Any:
        encoded.append(len(frame["columns"]["income"]["values"]))
        return real(frame)

    monkeypatch.setattr(encoding, "encode_frame", counted)
    dropping = {**ENCODING, "na": "drop"}
    batched = service.service(classifier(3), dropping, {"max_rows": 50, "batch_window": 30.0})
    alone = service.service(batched.model, dropping, {"max_rows": 50})
    predicted_rows: list[int] = []
    model_call = batched.batcher.predict_all  # type: ignore[union-attr]

    def counted_call(inputs: Any) -> Any:
        predicted_rows.append(len(inputs))
        return model_call(inputs)

    batched.batcher.predict_all = counted_call  # type: ignore[union-attr]
    headers = {"host": "127.0.0.1:8000", "content-type": "application/json"}

    def answers(bodies: list[str]) -> list[Any]:
        answered: queue.Queue[tuple[int, Any]] = queue.Queue()
        arrived = batched.batcher.on_its_way()  # type: ignore[union-attr]
        for i, body in enumerate(bodies):
            started = service.begin(batched, "POST", "/predict", "", headers, body.encode())
            assert isinstance(started, service.Pending), started

            def done(outputs: Any, error: Any, i: int = i, started: Any = started) -> None:
                def predicted(_: Any) -> Any:
                    if error is not None:
                        raise error
                    return outputs

                answered.put((i, service.complete(batched, started, predicted)))

            batched.batcher.submit(started.features, done)  # type: ignore[union-attr]
        arrived()
        got = dict(answered.get(timeout=60) for _ in bodies)
        return [(got[i]["status"], json.loads(got[i]["body"])) for i in range(len(bodies))]

    bodies = [
        json.dumps([{"income": i + j, "region": "west" if j % 2 else "east"} for j in range(i + 1)])
        for i in range(4)
    ]
    bodies[2] = (
        '[{"income": 1, "region": "west"}, {"income": null, "region": "east"}, {"income": 3, "region": null}]'
    )
    encoded.clear()
    together = answers(bodies)
    assert encoded == [1 + 2 + 3 + 4]  # the batch's rows in one call of the encoding
    assert predicted_rows == [1 + 2 + 1 + 4]  # and of the model: the rows with NA dropped
    assert_close(together, [(200, json.loads(ask(alone, body)[4:])) for body in bodies])
    assert together[2][1]["predictions"][1] is None  # the NA row's (na = "drop")
    # an unseen level: the batch fails to encode, each request is encoded alone, that one
    # is answered with its 400, and the others are predicted together, answered as alone
    bodies[1] = '[{"income": 2, "region": "north"}]'
    encoded.clear()
    predicted_rows.clear()
    together = answers(bodies)
    assert encoded[0] == 1 + 1 + 3 + 4 and sorted(encoded[1:]) == [1, 1, 3, 4]
    assert predicted_rows == [1 + 1 + 4]
    status, problem = together.pop(1)
    assert (status, problem["error"], problem["levels"]) == (400, "unseen_level", ["north"])
    assert_close(
        together, [(200, json.loads(ask(alone, b)[4:])) for b in bodies if "north" not in b]
    )


def assert_close(got: Any, want: Any) -> None:
    """``got`` is ``want`` but for float32 rounding: a model's outputs for a row may differ in
    the last digits with the batch it is predicted in (the CPU's kernels block by rows)."""
    if isinstance(want, float):
        assert got == pytest.approx(want, rel=1e-5, abs=1e-7)
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, type(want)) and len(got) == len(want), (got, want)
        for a, b in zip(got, want):
            assert_close(a, b)
    elif isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), (got, want)
        for name in want:
            assert_close(got[name], want[name])
    else:
        assert got == want


def served_alone(batched: service.Service) -> service.Service:
    """The same model served without batching."""
    return service.service(batched.model, ENCODING, {"max_rows": 50})


def image_service(rescale: float | None = 1 / 255, **settings: Any) -> service.Service:
    """A classifier of 4 x 4 RGB images read with ``rescale``, served as gpu_serve() serves
    an image folder's fit."""
    keras = config.keras()
    model = keras.Sequential(
        [keras.Input(shape=(4, 4, 3)), keras.layers.Flatten(), keras.layers.Dense(2)]
    )
    encoding = image_encoding(["cat", "dog"], [4, 4], 3, "rgb", rescale)
    return service.service(model, encoding, {"batch_size": 8, **settings})


def pixels(rows: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(rows, 4, 4, 3)).astype("float64")


def test_an_image_model_is_served_as_predict_scores_an_array_of_images() -> None:
    served = image_service()
    meta = json.loads(ask(served, path="/metadata", authorization=None)[4:])
    assert meta["input"] == {
        "form": "rows",
        "shape": [4, 4, 3],
        "dtype": "float32",
        "image": {"size": [4, 4], "color_mode": "rgb", "rescale": 1 / 255},
        "pixels": [0, 1.0],
    }
    assert meta["classes"] == ["cat", "dog"] and meta["max_rows"] == 10000
    scaled = pixels(20) / 255
    expected = served.model.predict_on_batch(scaled.astype("float32"))
    answer = json.loads(ask(served, json.dumps(scaled.tolist()), authorization=None)[4:])
    got = [[row["cat"], row["dog"]] for row in answer["predictions"]]
    assert np.allclose(got, expected, atol=1e-5) and "warnings" not in answer
    # raw 0-255 pixels to a model trained on [0, 1]: scored as predict() scores them,
    # with predict()'s warning, never silently
    raw = json.loads(ask(served, json.dumps(pixels(20).tolist()), authorization=None)[4:])
    assert raw["warnings"] == [
        "The request's pixels reach 255, but the model was trained on pixels in [0, 1]: its "
        "predictions would mean little. Scale them as in training: multiply each pixel by "
        "0.003922 before sending them (/metadata's input.pixels is the range the model takes)."
    ]
    # and the other way round: [0, 1] pixels to a model trained on 0-255
    plain = json.loads(ask(image_service(None), json.dumps(scaled.tolist()))[4:])
    assert "multiply each pixel by 255 before sending" in plain["warnings"][0]
    # a row of another image size or color mode is refused with the shape it needs
    gray = json.dumps(np.zeros((1, 4, 4, 1)).tolist())
    assert (
        '"error": "bad_data", "message": "Each row must have shape (4, 4, 3); these have (4, 4, 1)."'
        in ask(served, gray)
    )


@pytest.mark.parametrize(
    "body",
    [
        "[[[[1, 2, 3]]]]",
        "[[[[1,2]]]]",
        "[[[[1,2,null]]]]",
        "[[[[1,2,3,]]]]",
        "[[[[1,2, ]]]]",
        "[[[[1,2,3 4]]]]",
        "[[[[1,2, -]]]]",
        "[[[[1,2,--3]]]]",
        "[[[[1,2,3]]]][[[[1,2,3]]]]",
        '[[[[1,2,"3"]]]]',
        "[[[[1,2,1e39]]]]",
        "[]",
        "",
    ],
)
def test_rows_of_numbers_are_read_straight_into_float32_or_refused_as_json_refuses_them(
    body: str,
) -> None:
    part = {"type": "array", "shape": [1, 1, 3], "names": None}
    read = service_body.numeric_rows(body.encode(), part)
    try:
        cells = np.array(json.loads(body), dtype=object)
        numbers = cells.shape[1:] == (1, 1, 3) and all(
            isinstance(cell, (int, float)) for cell in cells.reshape(-1)
        )
    except ValueError:
        numbers = False
    if read is None:
        assert not numbers  # left to JSON values, which read NA or refuse it
    else:
        assert read.dtype == np.float32
        assert np.array_equal(read, np.array(json.loads(body), dtype="float32"))


def test_an_image_request_is_read_without_a_python_object_per_value() -> None:
    served = image_service()
    body = json.dumps(np.round(pixels(2000) / 255, 6).tolist(), separators=(",", ":")).encode()
    tracemalloc.start()
    try:
        features, keep, rows, warnings = service_body.features(body, served)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # JSON values took 8.7 times the body's bytes (a float object and a list slot a value)
    assert rows == 2000 and features.dtype == np.float32 and keep is None and not warnings
    assert peak < 3 * len(body)


def test_a_request_over_an_image_models_rows_is_refused_naming_the_limit() -> None:
    served = image_service(max_rows=5)
    answer = json.loads(ask(served, json.dumps(pixels(6).tolist()))[4:])
    assert answer == {
        "error": "too_many_rows",
        "message": "The body has 6 rows; this service takes at most 5 per request (max_rows): "
        "send them in parts.",
        "limit": "max_rows",
        "max_rows": 5,
    }
