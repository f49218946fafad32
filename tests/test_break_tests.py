"""tools/break_tests.py, the re-runnable record that each reworked test fails under a deliberate break
(docs/results/failing_tests.txt): one cheap break run for real, and every listed break well formed."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "break_tests.py"


def _tool():
    spec = importlib.util.spec_from_file_location("break_tests", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_every_break_names_a_plugin_and_an_existing_test():
    tool = _tool()
    assert len({(b.name, b.test) for b in tool.BREAKS}) == len(tool.BREAKS) >= 8
    for b in tool.BREAKS:
        plugin = (ROOT / "tools" / "breaks" / f"{b.name}.py").read_text()
        assert "def pytest_configure(config)" in plugin and plugin.startswith('"""'), b.name
        path, name = b.test.split("::")
        assert re.search(rf"^def {re.escape(name)}\(", (ROOT / path).read_text(), re.M), b.test


@pytest.mark.slow
def test_the_tool_records_a_test_failing_under_its_break(tmp_path):
    """The cheapest break (in-sample calibration errors, against a test of hand-computed errors), run
    by the tool as `make`-style code would: the test passes as it is and fails under the break."""
    out = tmp_path / "record.txt"
    cmd = [sys.executable, str(TOOL), "--only", "calibration_in_sample", "--out", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = out.read_text()
    assert "## tests/test_calibration.py::test_cross_fitting_is_by_family" in text
    assert re.search(r"^without the break: 1 passed \(", text, re.M), text
    assert re.search(r"^under the break:   1 failed \(", text, re.M), text
    assert re.search(r"^    E .*== 50\.0", text, re.M), text  # the hand-computed 50% is what fails
    assert "fails under the break and passes without it: yes" in text
    assert "tools/break_tests.py --only calibration_in_sample" in text  # the exact command
    bad = subprocess.run(
        [sys.executable, str(TOOL), "--only", "no_such_break"], cwd=ROOT, capture_output=True
    )
    assert bad.returncode == 2 and b"unknown break no_such_break" in bad.stderr
