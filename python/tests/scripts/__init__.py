"""Python that the tests run in fresh processes, kept as files so that ruff checks it.

``core_child.py`` is the fresh Python of ``conftest.run_core``; the other
modules are imported by the code a test runs there (its directory is the
child's first ``sys.path`` entry) or started as workers.
"""
