"""The Colab path, without Colab: the built wheel alone runs every notebook and the CLI.

A learner on Colab (or anywhere outside a checkout) gets tpucost from `pip install`, which builds
a wheel. This test builds that wheel, makes a fresh virtual environment holding what the runtime
has before tpucost arrives, copies notebooks/*.ipynb (nothing else) into an empty folder and
executes them there with TPUCOST_SMOKE=1. The first notebook's install cell installs the wheel
(TPUCOST_SOURCE=<wheel>) exactly as it would install from the repository on Colab. Then the CLI
commands a learner uses run from that folder: bundled data and checkpoints must come from the wheel.

It runs once per runtime (`RUNTIMES`), each notebook executing once in each:

* ``newest``: the newest pins (constraints.txt) on this Python; the runtime has only Jupyter's
  kernel machinery, and the install cell brings everything else.
* ``colab``: Colab's image (constraints-colab.txt) on Colab's Python (``TPUCOST_COLAB_PYTHON``,
  which `make test` sets to pyenv's 3.13 where the machine has it; else this Python): jax, jaxlib,
  flax, optax, numpy, pandas, ... are preinstalled at Colab's versions, and the install cell must
  keep jax/jaxlib and add jraph and tpucost.

Both run from the newest environment's pytest (`make test-newest`), side by side with the other
tests; `make test-colab` runs the unit tests on Colab's versions. pip resolves against the pins
(PIP_CONSTRAINT) and reuses the pip cache.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WHEEL_LIMIT_BYTES = 25 * 1024 * 1024
#: The pins of the environment this pytest runs in.
PINS = ROOT / os.environ.get("TPUCOST_PINS", "constraints.txt")
#: What each runtime has before the install cell runs: Jupyter's kernel machinery, and on Colab's
#: image the scientific stack at Colab's versions (jraph and tpucost are not preinstalled there).
KERNEL = ["nbclient", "nbformat", "ipykernel"]
COLAB_STACK = [
    "jax",
    "jaxlib",
    "flax",
    "optax",
    "numpy",
    "pandas",
    "matplotlib",
    "seaborn",
    "scipy",
    "networkx",
    "tqdm",
]
RUNTIMES = {
    "newest": {"pins": ROOT / "constraints.txt", "python": sys.executable, "preinstalled": KERNEL},
    "colab": {
        "pins": ROOT / "constraints-colab.txt",
        "python": os.environ.get("TPUCOST_COLAB_PYTHON") or sys.executable,
        "preinstalled": KERNEL + COLAB_STACK,
    },
}

pytestmark = pytest.mark.core  # also run on Colab's versions (make test-colab)

RUN_NOTEBOOKS = """
import sys, time, nbformat
from nbclient import NotebookClient
for path in sys.argv[1:]:
    start = time.time()
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=900, kernel_name="python3").execute()
    print("executed", path, f"{time.time() - start:.0f} s", flush=True)
"""

HLO = """HloModule tiny, entry_computation_layout={(f32[64,64]{1,0})->f32[64,64]{1,0}}

ENTRY main {
  p = f32[64,64]{1,0} parameter(0)
  d = f32[64,64]{1,0} dot(p, p), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = f32[64,64]{1,0} tanh(d)
}
"""


def _pins(path: Path) -> dict[str, str]:
    return {
        m.group(1).lower().replace("_", "-"): m.group(2)
        for m in re.finditer(r"^([A-Za-z0-9_.\-]+)==(\S+)", path.read_text(), re.M)
    }


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 600) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, (
        f"{' '.join(cmd)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    return result


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """The wheel of this checkout, built once per test run and shared by the xdist workers (two
    builds at once share the checkout's build/ folder and break each other)."""
    from conftest import built_once

    def build(out: Path) -> None:
        _run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
            ROOT,
            dict(os.environ),
        )

    (path,) = built_once(tmp_path_factory, "wheel", build).glob("tpucost-*.whl")
    return path


def test_this_environment_has_the_versions_of_its_pins():
    """The run is on the versions it claims: jax and flax as pinned in TPUCOST_PINS."""
    pins = _pins(PINS)
    for name in ("jax", "jaxlib", "flax", "optax", "numpy"):
        assert importlib.metadata.version(name) == pins[name], (
            f"{name} {importlib.metadata.version(name)} is not {PINS.name}'s"
        )


def test_wheel_carries_bundled_data_and_checkpoints(wheel):
    assert wheel.stat().st_size <= WHEEL_LIMIT_BYTES, f"wheel is {wheel.stat().st_size / 2**20:.1f} MB"
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in (
        "tpucost/bundled/kernels_cpu/schema.json",
        "tpucost/bundled/kernels_cpu/PROVENANCE.md",
        "tpucost/bundled/checkpoints/kernel-random/gnn/params.msgpack",
        "tpucost/bundled/checkpoints/kernel-hard/analytical.json",
        "tpucost/bundled/autotune/nnx_vit.json",
        "tpucost/bundled/autotune/README.md",
    ):
        assert needed in names, f"{needed} is not in {wheel.name}"


@pytest.mark.notebooks
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("runtime", list(RUNTIMES))
def test_notebooks_and_cli_run_from_the_wheel_alone(wheel, tmp_path, runtime):
    pins, python_for_venv, preinstalled = (RUNTIMES[runtime][k] for k in ("pins", "python", "preinstalled"))
    venv = tmp_path / "venv"
    _run([python_for_venv, "-m", "venv", str(venv)], tmp_path, dict(os.environ))
    python = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TPUCOST_", "VIRTUAL_ENV", "PYTHON"))}
    env.update(
        PIP_CONSTRAINT=str(pins),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        TPUCOST_SMOKE="1",
        TPUCOST_SOURCE=str(wheel),
        TPUCOST_CACHE_DIR=str(tmp_path / "cache"),
        MPLBACKEND="Agg",
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
    )
    if "TPUCOST_LABEL_CORE" in os.environ:  # this worker's core for the notebooks' label mode
        env["TPUCOST_LABEL_CORE"] = os.environ["TPUCOST_LABEL_CORE"]
    _run([python, "-m", "pip", "install", "-q", *preinstalled], tmp_path, env)
    probe = subprocess.run([python, "-c", "import tpucost"], cwd=tmp_path, capture_output=True, env=env)
    assert probe.returncode != 0, "the fresh environment must not have tpucost before the install cell runs"

    folder = tmp_path / "learner"
    folder.mkdir()
    notebooks = sorted((ROOT / "notebooks").glob("0*.ipynb"))
    for nb in notebooks:
        shutil.copy(nb, folder / nb.name)
    result = _run([python, "-c", RUN_NOTEBOOKS, *[p.name for p in notebooks]], folder, env, timeout=1200)
    print(result.stdout)
    assert result.stdout.count("executed") == len(notebooks)

    located = _run(
        [python, "-c", "import tpucost, pathlib; print(pathlib.Path(tpucost.__file__).parent)"], folder, env
    )
    assert Path(located.stdout.strip()).is_relative_to(venv), (
        "tpucost must come from the wheel, not the checkout"
    )
    versions = _run(  # on Colab's image the install cell kept the runtime's own jax and jaxlib
        [python, "-c", "import jax, jaxlib; print(jax.__version__, jaxlib.__version__)"], folder, env
    )
    assert versions.stdout.split() == [_pins(pins)["jax"], _pins(pins)["jaxlib"]]

    def cli(*args: str) -> str:
        return _run([python, "-m", "tpucost", *args], folder, env).stdout

    stats = json.loads(cli("data", "stats", "--json"))
    assert stats["kernels"] > 0 and stats["programs"] > 0
    (folder / "tiny.hlo").write_text(HLO)
    predicted = json.loads(cli("predict", "tiny.hlo", "--json"))
    assert predicted["kernels"] and all(k["predicted_ns"] > 0 for k in predicted["kernels"])
    kernel_table = json.loads(cli("evaluate", "--task", "kernel", "--json"))
    assert {"gnn", "lstm", "analytical"} <= set(kernel_table)
    tile_table = json.loads(cli("evaluate", "--task", "tile", "--json"))
    assert tile_table
    suggested = json.loads(cli("suggest-tiles", "matmul", "--shape", "256,256,256", "--top", "3", "--json"))
    assert suggested
    assert "--budget-seconds" in cli("autotune", "--help")
