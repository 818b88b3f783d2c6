"""Requests predicted together: the rows of requests that arrive within a short window
stacked into one call of the model, each answered with its own rows (as TF Serving's
batching does).

Contract. ``Batcher(predict, window, max_rows, in_flight).predict(features)`` returns
``predict(features)``'s outputs (a list of arrays, a row per row of ``features``), called
from any number of threads at once. The first request to arrive when none is waiting
waits at most ``window`` seconds for others: no longer than until every request being
answered (``in_flight()`` of them) waits too, or ``max_rows`` rows do (so a request
alone is predicted at once; ``max_rows``: one call's rows, the model's batch); then it
runs ``predict`` once on their rows (stacked in their order of arrival, at most
``max_rows`` but for one larger request) and hands each request its own rows; requests
left over, or that arrive meanwhile, form the next batch. Where the
stacked call fails, each request is predicted alone, so that an error is its own
request's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np

Predict = Callable[[np.ndarray], list[np.ndarray]]


class _Request:
    def __init__(self, features: np.ndarray) -> None:
        self.features = features
        self.done = threading.Event()
        self.outputs: list[np.ndarray] | None = None
        self.error: BaseException | None = None


class Batcher:
    """See the module's contract."""

    def __init__(
        self, predict: Predict, window: float, max_rows: int, in_flight: Callable[[], int]
    ) -> None:
        self.predict_all = predict
        self.in_flight = in_flight
        self.window = window
        self.max_rows = max_rows
        self.lock = threading.Lock()
        self.pending: list[_Request] = []
        self.leading = False

    def predict(self, features: np.ndarray) -> list[np.ndarray]:
        request = _Request(features)
        with self.lock:
            self.pending.append(request)
            lead = not self.leading
            self.leading = self.leading or lead
        if lead:
            self._lead()
        request.done.wait()
        if request.error is not None:
            raise request.error
        assert request.outputs is not None
        return request.outputs

    def _lead(self, wait: bool = True) -> None:
        """Wait for the others (see the contract), then predict the batch; requests left
        over (past ``max_rows``) go to a thread of their own at once."""
        deadline = time.monotonic() + (self.window if wait else 0)
        while time.monotonic() < deadline:
            with self.lock:
                waiting = len(self.pending)
                if waiting >= self.in_flight() or (
                    sum(len(r.features) for r in self.pending) >= self.max_rows
                ):
                    break
            time.sleep(min(0.0005, self.window))
        with self.lock:
            batch: list[_Request] = []
            rows = 0
            while self.pending and (
                not batch or rows + len(self.pending[0].features) <= self.max_rows
            ):
                rows += len(self.pending[0].features)
                batch.append(self.pending.pop(0))
            self.leading = bool(self.pending)
            if self.leading:
                threading.Thread(target=self._lead, args=(False,), daemon=True).start()
        self._run(batch)

    def _run(self, batch: list[_Request]) -> None:
        outputs = None
        if len(batch) > 1:
            try:
                outputs = self.predict_all(np.concatenate([r.features for r in batch]))
            except Exception:  # each request predicted alone, below, for its own error
                outputs = None
        if outputs is not None:
            start = 0
            for request in batch:
                end = start + len(request.features)
                request.outputs = [output[start:end] for output in outputs]
                start = end
                request.done.set()
            return
        for request in batch:
            try:
                request.outputs = self.predict_all(request.features)
            except BaseException as error:
                request.error = error
            request.done.set()
