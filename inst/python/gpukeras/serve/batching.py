"""Requests predicted together: the rows of requests that arrive within a short window,
or while the model is busy, stacked into one call of the model, each answered with its own
rows (as TF Serving's batching does).

Contract. A request to be predicted enters ``Batcher(predict, window, max_rows).request()``
as soon as it starts (before its body is read), and inside calls the function that block
gives with its features: it returns ``predict(features)``'s outputs (a list of arrays, a
row per row of ``features``), from any number of threads at once. From its start until it
joins a batch (or leaves the block without), a request is on its way. ``predict`` runs one
batch at a time: requests that join while it runs wait for it, and then go in one call.
The first request to join when none is waiting also waits at most ``window`` seconds for
others: no longer than until none is on its way any more (every request being read has
joined, or left), or ``max_rows`` rows wait. So a request alone, while the model is idle,
is predicted at once; ``max_rows``: one call's rows, the model's batch. Then ``predict``
runs once on their rows (stacked in their order of arrival, at most ``max_rows`` but for
one larger request) and each request gets its own rows; requests left over, or that join
meanwhile, form the next batch. Where the stacked call fails, each request is predicted
alone, so that an error is its own request's.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

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

    def __init__(self, predict: Predict, window: float, max_rows: int) -> None:
        self.predict_all = predict
        self.window = window
        self.max_rows = max_rows
        # guards what follows; notified when a request joins or leaves without
        self.changed = threading.Condition()
        self.pending: list[_Request] = []
        self.coming = 0  # requests on their way: started, not joined
        self.leading = False  # a request waits to lead the next batch
        self.busy = False  # a batch is being predicted

    @contextlib.contextmanager
    def request(self) -> Iterator[Predict]:
        """A request on its way from here; the function given joins it to a batch (see the
        module's contract)."""
        joined = False

        def join(features: np.ndarray) -> list[np.ndarray]:
            nonlocal joined
            joined = True
            return self._join(features)

        with self.changed:
            self.coming += 1
        try:
            yield join
        finally:
            if not joined:
                with self.changed:
                    self.coming -= 1
                    self.changed.notify_all()

    def _join(self, features: np.ndarray) -> list[np.ndarray]:
        request = _Request(features)
        with self.changed:
            self.coming -= 1
            self.pending.append(request)
            lead = not self.leading
            self.leading = True
            self.changed.notify_all()
        if lead:
            self._lead()
        request.done.wait()
        if request.error is not None:
            raise request.error
        assert request.outputs is not None
        return request.outputs

    def _lead(self, wait: bool = True) -> None:
        """Wait for the model and the others (see the contract), then predict the batch;
        requests left over (past ``max_rows``) go to a thread of their own at once."""
        deadline = time.monotonic() + (self.window if wait else 0)
        with self.changed:
            while True:
                left = deadline - time.monotonic()
                others = (
                    self.coming
                    and left > 0
                    and sum(len(r.features) for r in self.pending) < self.max_rows
                )
                if not (self.busy or others):
                    break
                self.changed.wait(None if self.busy else left)
            self.busy = True
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
        try:
            self._predict(batch)
        finally:
            with self.changed:
                self.busy = False
                self.changed.notify_all()

    def _predict(self, batch: list[_Request]) -> None:
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
