"""The lab's tests share tests/'s helpers and fixtures: tests/ goes on ``sys.path`` (for
``device_packs``), and tests/conftest.py's ``bundled_kernels`` fixture and test-process settings
(``pytest_configure``: no test touches the user's cache) apply here too."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2] / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from conftest import bundled_kernels, pytest_configure  # noqa: E402

__all__ = ["bundled_kernels", "pytest_configure"]
