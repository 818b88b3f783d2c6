"""The foundation every layer stands on: errors, names for framework objects, the software
stack, the runtime-config object, private framework attributes (``compat``), argument
rules, learning-rate schedules and URLs as they may be shown.

The core's layers, each importing only from those below it (python/tests/test_imports.py
checks): ``core`` < ``gpu`` < ``data`` < ``distribute`` < ``train`` < ``serve`` < ``track``
< ``tools`` < ``search``; the ``bridge`` on top is the one door R comes through.
"""
