"""Requests predicted together: the rows of requests that arrive within a short window,
or while the model is busy, stacked into one call of the model, each answered with its own
rows (as TF Serving's batching does).

Contract. ``Batcher(predict, window, max_rows, prepare, stack)`` predicts in a thread of
its own (the model's), one batch at a time, by ``predict`` (a list of arrays, a row per row
of its input). A request's features are anything with a length (its rows) that ``stack``
(default: NumPy's concatenate) joins, in order, into one batch's features, and that
``prepare`` (default: none) turns into the model's input, a row per row, in the model's
thread (an encoding, which may refuse a request's rows). A request joins in one of two
ways, from any number of threads at once:

- ``request()``, a block that a request enters as soon as it starts (before its body is
  read) and inside which it calls the function the block gives with its features: it
  returns ``predict(prepare(features))``'s outputs for its rows, or raises its error. From its start
  until it joins (or leaves the block without), a request is on its way.
- ``submit(features, done)``, which returns at once: ``done(outputs, error)`` is called in
  the model's thread once the request's rows are predicted (an event loop's request, whose
  features were read where it runs: it waits in no thread of its own). ``on_its_way()``
  counts one more request on its way until the function it returns is called (an event
  loop's requests that it has read but not yet submitted).

Requests that join while the model predicts wait for it, and then go in one call. The
first request to join while the model is idle and none is waiting also waits at most
``window`` seconds for others: no longer than until none is on its way any more (every
request being read has joined, or left), or ``max_rows`` rows wait. So a request alone,
while the model is idle, is predicted at once; ``max_rows``: one call's rows, the model's
batch. Then ``prepare`` and ``predict`` run once on their rows (stacked in their order of
arrival, at most ``max_rows`` but for one larger request) and each request gets its own
rows; requests left over go next, at once. An error is its own request's: where ``prepare``
fails on the stacked features, each request's are prepared alone, a request whose
``prepare`` fails gets its error and the others are predicted together still; where the
stacked ``predict`` fails, each request is predicted alone. The model's thread ends once its
Batcher is no longer referenced.
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

Predict = Callable[[Any], list[np.ndarray]]
# called with a request's outputs, or None and its error
Done = Callable[[list[np.ndarray] | None, BaseException | None], None]
IDLE_SECONDS = 5.0  # how often an idle model thread looks whether its Batcher is still used


class _Request:
    def __init__(self, features: Any, done: Done) -> None:
        self.features = features
        self.done = done
        self.joined = time.monotonic()


class Batcher:
    """See the module's contract."""

    def __init__(
        self,
        predict: Predict,
        window: float,
        max_rows: int,
        prepare: Callable[[Any], Any] | None = None,
        stack: Callable[[list[Any]], Any] = np.concatenate,
    ) -> None:
        self.predict_all = predict
        self.prepare = prepare or (lambda features: features)
        self.stack = stack
        self.window = window
        self.max_rows = max_rows
        # guards what follows; notified when a request joins or leaves without
        self.changed = threading.Condition()
        self.pending: list[_Request] = []
        self.coming = 0  # requests on their way: started, not joined
        self.rows = 0  # the pending requests' rows
        self.left_over = False  # the pending requests were left over from the last batch
        threading.Thread(
            target=_model_thread, args=(weakref.ref(self), self.changed), daemon=True
        ).start()

    @contextlib.contextmanager
    def request(self) -> Iterator[Predict]:
        """A request on its way from here; the function given joins it to a batch and waits
        for its outputs (see the module's contract)."""
        joined = False

        def join(features: Any) -> list[np.ndarray]:
            nonlocal joined
            joined = True
            answered = threading.Event()
            result: list[list[np.ndarray] | None | BaseException | None] = []

            def done(outputs: list[np.ndarray] | None, error: BaseException | None) -> None:
                result.extend((outputs, error))
                answered.set()

            self._add(_Request(features, done), coming=True)
            answered.wait()
            outputs, error = result
            if error is not None:
                raise error  # type: ignore[misc]
            return outputs  # type: ignore[return-value]

        arrived = self.on_its_way()
        try:
            yield join
        finally:
            if not joined:
                arrived()

    def on_its_way(self) -> Callable[[], None]:
        """One more request on its way, until the function returned is called (once)."""
        with self.changed:
            self.coming += 1

        def arrived() -> None:
            with self.changed:
                self.coming -= 1
                self.changed.notify_all()

        return arrived

    def submit(self, features: Any, done: Done) -> None:
        """``features`` joined to a batch; ``done`` called in the model's thread once they
        are predicted (see the module's contract)."""
        self._add(_Request(features, done), coming=False)

    def _add(self, request: _Request, coming: bool) -> None:
        with self.changed:
            if coming:
                self.coming -= 1
            self.pending.append(request)
            self.rows += len(request.features)
            # the model's thread waits for a first request, for none on its way, or for
            # max_rows rows: woken for no other, as each wake-up costs it the GIL
            if len(self.pending) == 1 or not self.coming or self.rows >= self.max_rows:
                self.changed.notify_all()

    def next_batch(self) -> list[_Request]:
        """The next batch, once the window allows (see the contract); under ``changed``,
        with a request pending."""
        if not self.left_over:
            deadline = self.pending[0].joined + self.window
            while (
                self.coming
                and self.rows < self.max_rows
                and (left := deadline - time.monotonic()) > 0
            ):
                self.changed.wait(left)
        batch: list[_Request] = []
        rows = 0
        while self.pending and (not batch or rows + len(self.pending[0].features) <= self.max_rows):
            rows += len(self.pending[0].features)
            batch.append(self.pending.pop(0))
        self.rows -= rows
        self.left_over = bool(self.pending)
        return batch

    def predict_batch(self, batch: list[_Request]) -> None:
        inputs = None
        if len(batch) > 1:
            with contextlib.suppress(Exception):  # prepared alone, below, for its own error
                inputs = self.prepare(self.stack([r.features for r in batch]))
        if inputs is None:
            kept, parts = [], []
            for request in batch:
                try:
                    parts.append(self.prepare(request.features))
                except BaseException as error:
                    request.done(None, error)
                else:
                    kept.append(request)
            if not parts:
                return
            batch, inputs = kept, parts[0] if len(parts) == 1 else np.concatenate(parts)
        ends = np.cumsum([len(request.features) for request in batch])
        try:
            outputs = self.predict_all(inputs)
        except BaseException as error:
            if len(batch) == 1:
                batch[0].done(None, error)
                return
            outputs = None  # each request predicted alone, below, for its own error
        for request, start, end in zip(batch, [0, *ends[:-1]], ends):
            if outputs is not None:
                request.done([output[start:end] for output in outputs], None)
                continue
            try:
                own = self.predict_all(inputs[start:end])
            except BaseException as error:
                request.done(None, error)
            else:
                request.done(own, None)


def _model_thread(owner: weakref.ref[Batcher], changed: threading.Condition) -> None:
    """The model's thread: predicts the batches of the Batcher ``owner`` (``changed``: its
    condition) one at a time, until it is no longer referenced."""
    while True:
        with changed:
            batcher = owner()
            while batcher is not None and not batcher.pending:
                del batcher
                changed.wait(IDLE_SECONDS)
                batcher = owner()
            if batcher is None:
                return
            batch = batcher.next_batch()
        batcher.predict_batch(batch)
        del batcher, batch
