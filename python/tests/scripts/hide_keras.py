"""Imported as a child's ``setup`` code: drop the folder Keras is installed in from sys.path.

Wherever that folder is, Keras then cannot be imported, as if it were not installed.
"""

import importlib.util
import os
import sys

_folder = os.path.dirname(os.path.dirname(importlib.util.find_spec("keras").origin))
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or ".") != _folder]
