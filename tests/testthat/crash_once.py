"""A Keras callback that kills its own process with SIGSEGV, for the tests of
gpu_fit(background = TRUE): a crash of the training child, the way a native
library's segfault ends it (or sends it another signal, as a scheduler's
SIGTERM). A marker file counts the crashes across restarts."""

import os
import signal
from pathlib import Path

import keras


class CrashAt(keras.callbacks.Callback):
    """Segfault (or send ``signal_name``) at batch ``batch`` of epoch ``epoch`` (0-based), at
    most ``times`` times."""

    def __init__(
        self, marker: str, epoch: int, batch: int, times: int = 1, signal_name: str = "SIGSEGV"
    ) -> None:
        super().__init__()
        self.marker = marker
        self.at = (int(epoch), int(batch))
        self.times = int(times)
        self.signal = getattr(signal, signal_name)
        self.epoch = 0

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.epoch = epoch

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if (self.epoch, batch) != self.at:
            return
        marker = Path(self.marker)
        crashes = int(marker.read_text()) if marker.exists() else 0
        if crashes >= self.times:
            return
        marker.write_text(str(crashes + 1))
        os.kill(os.getpid(), self.signal)
