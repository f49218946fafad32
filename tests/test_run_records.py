"""A notebook executed by tools/run_notebooks.py carries a run record naming the device that ran it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.notebooks  # starts a Jupyter kernel


def test_the_run_record_names_this_device(tmp_path):
    from tpucost.method import device

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "01_tiny.ipynb"
    nbformat.write(nb, path)
    out = tmp_path / "build"
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "run_notebooks.py"), "--out", str(out), str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    executed = nbformat.read(out / path.name, as_version=4)
    assert executed.cells[0].outputs[0]["text"].strip() == "42"
    record = executed.metadata["tpucost_run"]
    fingerprint = device.fingerprint()
    # the book's run line: this machine's id and CPU model, never "an unknown device"
    assert fingerprint["id"] in record["device"] and "unknown" not in record["device"]
    assert record["by"] == "`make demo`" and record["seconds"] >= 0
    assert fingerprint["id"] in run.stdout.splitlines()[0]
