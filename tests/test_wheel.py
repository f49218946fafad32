"""The Colab path, without Colab: the built wheel alone runs every notebook and the CLI.

A learner on Colab (or anywhere outside a checkout) gets tpucost from `pip install`, which builds
a wheel. This test builds that wheel, makes a fresh virtual environment holding only Jupyter's
kernel machinery, copies notebooks/*.ipynb (nothing else) into an empty folder and executes them
there with TPUCOST_SMOKE=1. The first notebook's install cell installs the wheel
(TPUCOST_SOURCE=<wheel>) exactly as it would install from the repository on Colab; pip resolves
against constraints.txt (PIP_CONSTRAINT) and reuses the pip cache. Then `python -m tpucost data stats`
and `predict` run from that folder: bundled data and checkpoints must come from the wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WHEEL_LIMIT_BYTES = 25 * 1024 * 1024

RUN_NOTEBOOKS = """
import sys, nbformat
from nbclient import NotebookClient
for path in sys.argv[1:]:
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=900, kernel_name="python3").execute()
    print("executed", path, flush=True)
"""

HLO = """HloModule tiny, entry_computation_layout={(f32[64,64]{1,0})->f32[64,64]{1,0}}

ENTRY main {
  p = f32[64,64]{1,0} parameter(0)
  d = f32[64,64]{1,0} dot(p, p), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = f32[64,64]{1,0} tanh(d)
}
"""


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 600) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)], ROOT, dict(os.environ))
    (path,) = out.glob("tpucost-*.whl")
    return path


def test_wheel_carries_bundled_data_and_checkpoints(wheel):
    assert wheel.stat().st_size <= WHEEL_LIMIT_BYTES, f"wheel is {wheel.stat().st_size / 2**20:.1f} MB"
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in ("tpucost/bundled/kernels_cpu/schema.json", "tpucost/bundled/kernels_cpu/PROVENANCE.md",
                   "tpucost/bundled/checkpoints/kernel-random/gnn/params.msgpack",
                   "tpucost/bundled/checkpoints/kernel-hard/analytical.json",
                   "tpucost/bundled/autotune/transformer.json", "tpucost/bundled/autotune/README.md"):
        assert needed in names, f"{needed} is not in {wheel.name}"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_notebooks_and_cli_run_from_the_wheel_alone(wheel, tmp_path):
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, dict(os.environ))
    python = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TPUCOST_", "VIRTUAL_ENV", "PYTHON"))}
    env.update(PIP_CONSTRAINT=str(ROOT / "constraints.txt"), PIP_DISABLE_PIP_VERSION_CHECK="1",
               TPUCOST_SMOKE="1", TPUCOST_SOURCE=str(wheel), TPUCOST_CACHE_DIR=str(tmp_path / "cache"),
               MPLBACKEND="Agg", PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    _run([python, "-m", "pip", "install", "-q", "nbclient", "nbformat", "ipykernel"], tmp_path, env)
    probe = subprocess.run([python, "-c", "import tpucost"], cwd=tmp_path, capture_output=True, env=env)
    assert probe.returncode != 0, "the fresh environment must not have tpucost before the install cell runs"

    folder = tmp_path / "learner"
    folder.mkdir()
    notebooks = sorted((ROOT / "notebooks").glob("0*.ipynb"))
    for nb in notebooks:
        shutil.copy(nb, folder / nb.name)
    result = _run([python, "-c", RUN_NOTEBOOKS, *[p.name for p in notebooks]], folder, env, timeout=900)
    assert result.stdout.count("executed") == len(notebooks)

    located = _run([python, "-c", "import tpucost, pathlib; print(pathlib.Path(tpucost.__file__).parent)"], folder, env)
    assert Path(located.stdout.strip()).is_relative_to(venv), "tpucost must come from the wheel, not the checkout"

    stats = json.loads(_run([python, "-m", "tpucost", "data", "stats", "--json"], folder, env).stdout)
    assert stats["kernels"] > 0 and stats["programs"] > 0
    (folder / "tiny.hlo").write_text(HLO)
    predicted = json.loads(_run([python, "-m", "tpucost", "predict", "tiny.hlo", "--json"], folder, env).stdout)
    assert predicted["kernels"] and all(k["predicted_ns"] > 0 for k in predicted["kernels"])
