"""A server that accepts connections and never answers: a socket on 127.0.0.1 (a free port,
printed once listening) that accepts every connection and writes nothing, until killed.

Run by test-track.R (helper-mlflow.R's ``start_silent_server()``), python/tests/test_tracking.py
and bench/tracking_silent.R.
"""

import socket

with socket.socket() as listening:
    listening.bind(("127.0.0.1", 0))
    listening.listen(64)
    print(listening.getsockname()[1], flush=True)
    held = []  # open, unanswered, until the process ends
    while True:
        held.append(listening.accept()[0])
