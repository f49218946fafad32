"""Deliberate breaks of the code under test, one pytest plugin module each, for tools/break_tests.py.

Each module monkeypatches the library in ``pytest_configure`` (before the test modules are imported,
so names they import are patched too) for that one pytest process: no file changes. Load one with
``PYTHONPATH=tools python -m pytest -p breaks.NAME TEST``.
"""
