"""The Colab path, without Colab: the built wheel alone runs every notebook and the CLI.

A learner on Colab (or anywhere outside a checkout) gets tpucost from `pip install`, which builds
a wheel. This test builds that wheel, makes a fresh virtual environment holding what the runtime
has before tpucost arrives, copies notebooks/*.ipynb (nothing else) into an empty folder and
executes them there with TPUCOST_SMOKE=1. The first notebook's install cell installs the wheel
(TPUCOST_SOURCE=<wheel>) exactly as it would install from the repository on Colab. Then the CLI
commands a learner uses run from that folder: bundled data and checkpoints must come from the wheel,
and each command must print what this checkout prints, or what the bundled records hold (`evaluate`
on Colab's versions only: on the newest, notebooks 03 and 04 have just computed the same tables).

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

The newest runtime's executed notebooks are kept, each with its run record, in
``build/tested-notebooks/`` (`TESTED_NOTEBOOKS`): `make test` renders them into a book
(``tools/build_docs.py --executed build/tested-notebooks``) and checks it in Chromium
(`tests/test_site.py`), so the book it checks shows these very runs and nothing executes twice.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import json
import os
import re
import shutil
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tpucost.experiments import tile_experiments

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "tpucost" / "bundled"
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

#: Where the newest runtime's executed notebooks are kept (`make test` builds its book from them).
TESTED_NOTEBOOKS = ROOT / "build" / "tested-notebooks"
#: The runtime whose executed notebooks are kept.
KEPT_RUNTIME = "newest"

pytestmark = pytest.mark.core  # also run on Colab's versions (make test-colab)

#: Run in the fresh environment: argv = tools/run_notebooks.py, the folder for the executed copies,
#: the device line of their run record, then the notebooks. Each executes in its own folder
#: (`run_notebooks.execute`: the executed copy is written with its run record, as make demo's).
RUN_NOTEBOOKS = """
import importlib.util, sys, time
from pathlib import Path
spec = importlib.util.spec_from_file_location("run_notebooks", sys.argv[1])
run_notebooks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run_notebooks)
out, device = Path(sys.argv[2]), sys.argv[3]
by = "`make test` (tests/test_wheel.py, from the wheel in a fresh environment)"
for path in sys.argv[4:]:
    start = time.time()
    run_notebooks.execute(Path(path).resolve(), out, 900, device, by=by)
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
    # lab/ and so lab/pending/ too, the measurements pending a pack's rebuild
    lab = [n for n in names if n.startswith("lab/")]
    assert not lab, f"lab/ (python -m lab) ships in {wheel.name}: {lab[:3]}"
    # `make` lets Python write __pycache__/ beside the package's modules: none of it ships.
    cached = [n for n in names if "__pycache__/" in n or n.endswith(".pyc")]
    assert not cached, f"compiled bytecode ships in {wheel.name}: {cached[:3]}"


def test_make_test_checks_a_book_of_the_notebooks_its_wheel_test_executed():
    """`make test` (CI): every other test first (the browser tests left out), then the book rendered
    from the notebooks this file's test executed (`TESTED_NOTEBOOKS`), then the browser tests
    (tests/test_site.py) on it, where a missing browser or book fails; `make browser` fails where
    it cannot install Chromium."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\ntest-newest:", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    tested = TESTED_NOTEBOOKS.relative_to(ROOT)
    assert '-m "not quiet and not browser"' in recipe[0] and '-m "quiet and not browser"' in recipe[1]
    assert recipe[2].endswith(f"tools/build_docs.py --executed {tested} --out build/tested-site")
    assert "TPUCOST_REQUIRE_BROWSER=1 TPUCOST_SITE=build/tested-site" in recipe[3]
    assert recipe[3].endswith("-m browser tests/test_site.py")
    browser = makefile.split("\nbrowser:", 1)[1].split("\n\n", 1)[0]
    assert "exit 1" in browser and "warning" not in browser


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
    executed = tmp_path / "executed"
    if runtime == KEPT_RUNTIME:
        shutil.rmtree(TESTED_NOTEBOOKS, ignore_errors=True)  # no book from an older run's notebooks
    from tpucost.method import device

    notebook_run = subprocess.Popen(
        [
            python,
            "-c",
            RUN_NOTEBOOKS,
            str(ROOT / "tools" / "run_notebooks.py"),
            str(executed),
            device.describe(device.fingerprint()),
            *[p.name for p in notebooks],
        ],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:  # meanwhile, what this checkout's CLI prints (the wheel carries the same data and models)
        expected_stats = _checkout_json("data", "stats")
        expected_tiles = tile_experiments.suggest_tiles("matmul", (256, 256, 256), top=3)
        stdout, stderr = notebook_run.communicate(timeout=1200)
    finally:
        notebook_run.kill()
    print(stdout)
    assert notebook_run.returncode == 0, f"the notebooks failed:\n{stdout[-3000:]}\n{stderr[-3000:]}"
    assert stdout.count("executed") == len(notebooks)
    assert sorted(p.name for p in executed.glob("*.ipynb")) == [p.name for p in notebooks]
    if runtime == KEPT_RUNTIME:
        shutil.copytree(executed, TESTED_NOTEBOOKS)

    code = "import jax, jaxlib, pathlib, tpucost\nprint(pathlib.Path(tpucost.__file__).parent)\n"
    code += "print(jax.__version__, jaxlib.__version__)"
    wheel_package, versions = _run([python, "-c", code], folder, env).stdout.splitlines()[-2:]
    assert Path(wheel_package).is_relative_to(venv), "tpucost must come from the wheel, not the checkout"
    # On Colab's image the install cell kept the runtime's own jax and jaxlib.
    assert versions.split() == [_pins(pins)["jax"], _pins(pins)["jaxlib"]]

    def cli(*args: str) -> subprocess.CompletedProcess:
        return _run([python, "-m", "tpucost", *args], folder, env)

    # Each command prints what this checkout prints, or what the bundled files record.
    stats = cli("data", "stats", "--json")
    assert json.loads(stats.stdout) == expected_stats and not stats.stderr

    (folder / "tiny.hlo").write_text(HLO)
    predicted = cli("predict", "tiny.hlo", "--json")
    jax_version, jaxlib_version = _pins(pins)["jax"], _pins(pins)["jaxlib"]
    # (The notebooks stored a calibration in the environment's cache: the CLI applies it, and so here.)
    expected, warned = _expected_prediction(jax_version, jaxlib_version, Path(env["TPUCOST_CACHE_DIR"]))
    result = json.loads(predicted.stdout)
    assert [k["name"] for k in result["kernels"]] == ["d", "t"]  # the dot and the tanh of HLO
    assert [k["predicted_ns"] for k in result["kernels"]] == pytest.approx(
        [k["predicted_ns"] for k in expected.kernels], rel=1e-4
    )
    assert (result["kernels_ns"], result["dispatch_ns"], result["total_ns"]) == pytest.approx(
        (expected.kernels_ns, expected.dispatch_ns, expected.total_ns), rel=1e-4
    )
    # A warning (the bundled model learned another device or jaxlib, with no calibration for this
    # one) would be one line, with no source line; here the notebooks' calibration holds for both.
    lines = predicted.stderr.replace(wheel_package, str(ROOT / "tpucost")).splitlines()
    assert lines == [f"warning: {message}" for message in warned], predicted.stderr

    if runtime == "colab":
        # Table 2 and Table 3 as the CLI prints them from the wheel on Colab's versions. On the newest
        # pins notebooks 03 and 04, just executed from this wheel, computed both tables (every method,
        # every tile model), and tests/test_exercises.py checks them against the bundled records in
        # the newest environment: there the two commands would repeat 20 s of work at this test's end.
        _check_the_tables_against_the_bundled_records(cli)

    suggested = json.loads(
        cli("suggest-tiles", "matmul", "--shape", "256,256,256", "--top", "3", "--json").stdout
    )
    assert [s["config"] for s in suggested["suggestions"]] == [s["config"] for s in expected_tiles]
    for key in ("score", "predicted_ns"):
        assert [s[key] for s in suggested["suggestions"]] == pytest.approx(
            [s[key] for s in expected_tiles], rel=1e-4
        )
    assert "--budget-seconds" in cli("autotune", "--help").stdout


def _check_the_tables_against_the_bundled_records(cli) -> None:
    """`evaluate --task kernel` and `--task tile` print the bundled models' Table 2 and Table 3 as
    the bundled records have them (evaluation.json of kernel-random, tile_evaluation.json)."""
    kernel_table = json.loads(cli("evaluate", "--task", "kernel", "--json").stdout)
    recorded = json.loads((BUNDLED / "checkpoints" / "kernel-random" / "evaluation.json").read_text())
    assert set(kernel_table) == set(recorded["results"]) == {"gnn", "lstm", "analytical", "constant"}
    for method, table in kernel_table.items():
        record = recorded["results"][method]  # recorded before median_ape was: the keys it has
        row = {k: v for k, v in table["all_test_program_kernels"].items() if k in record}
        assert {"mape_ge5us", "mape_lt5us", "kendall_median", "n_kernels", "n_programs"} <= set(row)
        assert row == pytest.approx({k: record[k] for k in row}, rel=1e-4, nan_ok=True), method

    tile_table = json.loads(cli("evaluate", "--task", "tile", "--json").stdout)
    recorded = json.loads((BUNDLED / "checkpoints" / "tile_evaluation.json").read_text())["random"]
    assert list(tile_table) == list(recorded)
    for name, row in tile_table.items():
        assert row["n_kernels"] == recorded[name]["n_kernels"] > 0, name
        if name == "analytical":  # its constants are measured on this machine (a roofline), each run
            assert -1 <= row["kendall_mean"] <= 1 and row["top1"] >= row["top5"] >= row["top10"] >= 0
            continue
        # A heuristic's equal scores are ties, whose share of tau-b scipy 1.16 and 1.17 count differently.
        tau = 2e-3 if name in tile_experiments.HEURISTICS else 1e-6
        assert row["kendall_mean"] == pytest.approx(recorded[name]["kendall_mean"], abs=tau), name
        assert [row[k] for k in ("top1", "top5", "top10")] == pytest.approx(
            [recorded[name][k] for k in ("top1", "top5", "top10")], rel=1e-6
        ), name


def _checkout_json(*command: str) -> dict:
    """What this checkout's CLI prints for ``command --json``, run in this process."""
    from tpucost import cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main([*command, "--json"]) == 0
    return json.loads(out.getvalue())


def _expected_prediction(jax_version: str, jaxlib_version: str, cache: Path) -> tuple[Any, list[str]]:
    """The bundled GNN's estimate for `HLO` on this machine under another jax and jaxlib, loaded
    as `python -m tpucost predict` loads it there (with the calibrations stored in ``cache``), and
    the messages of the warnings it gives (the checkout's paths in them)."""
    from tpucost.method import costmodel, device

    here = device.fingerprint()
    with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        patch.setenv("TPUCOST_CACHE_DIR", str(cache))
        patch.setattr(device, "fingerprint", lambda: dict(here, jax=jax_version, jaxlib=jaxlib_version))
        patch.setattr(device, "_warned", set())
        estimate = costmodel.CostModel.load().predict_hlo(HLO)
    return estimate, [str(w.message) for w in caught]
