"""gpukeras: the Python core behind the gpukeras R package.

Importing this package is cheap on purpose: it imports neither TensorFlow nor
JAX, so GPU settings can still be applied before a runtime starts. Each
concept lives in its own module (``check``, ``devices``, ``placement``, ...);
R reaches them through ``gpukeras.bridge.call``.
"""

__version__ = "0.1.0"
