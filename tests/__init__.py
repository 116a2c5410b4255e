"""The test suite, a package so that tests import their helpers as ``tests.support.<module>``.

pytest's default (``prepend``) import mode puts the directory above this package, the
repository root, on ``sys.path`` when it imports ``tests/conftest.py``.
"""
