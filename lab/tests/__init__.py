"""Tests of the lab (`lab`): run by ``make test`` and ``make check`` with tests/ (pyproject.toml's ``testpaths``)."""
