"""The learner's TPU-runtime code paths, driven on a CPU by a simulated TPU backend.

`simulated_tpu` makes this process look like a Colab TPU runtime after JAX started: jax's
backends-initialized flag (the private API `tpucost.compat.backend_started` reads) is True,
``jax.default_backend()`` is ``"tpu"`` and ``jax.devices()`` holds one fake chip of the given kind
(``"TPU v5 lite"``: v5e-1, ``"TPU v6 lite"``: v6e-1). Nothing is compiled for the fake chip:
wherever a deviceless compile would start (`jax.experimental.topologies`), the tests fail loudly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import pytest
from jax._src import xla_bridge
from jax.experimental import topologies

from tpucost import tpu_host
from tpucost.experiments import compiler, plots
from tpucost.experiments.tiles import mosaic
from tpucost.experiments.tiles import problems as tile_problems

ROOT = Path(__file__).resolve().parents[1]


class FakeTpu:
    """What tpucost reads of a TPU device: its platform and kind."""

    platform = "tpu"
    id = 0

    def __init__(self, device_kind: str):
        self.device_kind = device_kind

    def __repr__(self) -> str:
        return f"FakeTpu({self.device_kind!r})"


@pytest.fixture
def simulated_tpu(monkeypatch):
    """``simulated_tpu(kind)``: from then on this process runs on one TPU chip of ``kind`` (or on
    JAX's CPU for ``kind=None``), with JAX's backends up (``started``)."""

    def simulate(kind: str | None, started: bool = True) -> None:
        monkeypatch.setattr(xla_bridge, "backends_are_initialized", lambda: started)
        if kind is None:
            monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
            return
        chip = FakeTpu(kind)
        monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
        monkeypatch.setattr(jax, "devices", lambda *args, **kwargs: [chip])

    def no_deviceless_compile(*args, **kwargs):
        raise AssertionError("a deviceless compile was started on a TPU runtime")

    monkeypatch.setattr(topologies, "get_topology_desc", no_deviceless_compile)
    monkeypatch.setattr(compiler, "tpu_compiler_available", lambda: True)  # a TPU runtime has libtpu
    compiler.target_device.cache_clear()
    yield simulate
    compiler.target_device.cache_clear()


# --- 1. tpu_host: JAX's answer once its backends are up, the device files before ---------------


def test_libtpu_is_not_told_there_is_no_chip_when_jax_runs_on_one(simulated_tpu, monkeypatch):
    """A TPU whose device files are not where `tpu_chip_here` looks (a container): JAX's answer wins."""
    simulated_tpu("TPU v6 lite")
    monkeypatch.setattr(tpu_host, "tpu_chip_here", lambda dev=None: False)
    for key in tpu_host.QUIET_LIBTPU_ENV:
        monkeypatch.delenv(key, raising=False)
    tpu_host.quiet_libtpu_startup()
    assert not any(key in os.environ for key in tpu_host.QUIET_LIBTPU_ENV)


def test_runs_on_tpu_asks_jax_once_up_and_the_device_files_only_before(simulated_tpu, tmp_path, monkeypatch):
    (tmp_path / "vfio").mkdir()
    (tmp_path / "vfio" / "0").touch()  # a chip's device file
    simulated_tpu(None)  # JAX started on its CPU (JAX_PLATFORMS=cpu on a TPU VM)
    assert tpu_host.tpu_chip_here(tmp_path) and not tpu_host.runs_on_tpu(tmp_path)
    simulated_tpu("TPU v5 lite")
    assert tpu_host.runs_on_tpu(Path(tmp_path / "nothing"))

    def started_jax():
        raise AssertionError("asking started JAX")

    simulated_tpu(None, started=False)  # before JAX's backends are up: never start them
    monkeypatch.setattr(jax, "default_backend", started_jax)
    assert tpu_host.runs_on_tpu(tmp_path) and not tpu_host.runs_on_tpu(tmp_path / "nothing")


def test_import_tpucost_still_imports_no_jax():
    code = "import sys, tpucost; print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


# --- 2. compiler: on a TPU runtime, the chip at hand only ---------------------------------------


@pytest.mark.parametrize(("kind", "target"), [("TPU v5 lite", "tpu-v5e"), ("TPU v6 lite", "tpu-v6e")])
def test_a_tpu_runtime_compiles_for_its_own_chip(simulated_tpu, kind, target):
    simulated_tpu(kind)
    assert compiler.chip_here().name == target
    assert compiler.why_not_here(target) is None and compiler.why_not_here("cpu") is None
    assert compiler.target_device(target).device_kind == kind  # the real chip, not a described one


@pytest.mark.parametrize(
    ("kind", "why"),
    [
        (
            "TPU v6 lite",
            r"this runtime's TPU is a tpu-v6e \(TPU v6 lite\), so tpu-v5e is not compiled for here",
        ),
        ("TPU v7x", r"this runtime's TPU is 'TPU v7x', a kind tpucost does not know, so tpu-v5e"),
    ],
)
def test_another_chip_is_refused_in_one_sentence_never_compiled_deviceless(simulated_tpu, kind, why):
    simulated_tpu(kind)
    with pytest.raises(compiler.TpuTargetNotHere, match=why) as refused:
        compiler.target_device("tpu-v5e")
    message = str(refused.value)
    assert "\n" not in message and message.count(". ") == 0 and "deviceless compile" in message
    # the CLI and Mosaic's verdicts treat it as a missing compiler: an error line, not a refusal by Mosaic
    assert isinstance(refused.value, compiler.TpuCompilerMissing)
    with pytest.raises(compiler.TpuTargetNotHere):
        mosaic.mosaic_verdict(
            "matmul", (256, 256, 256), "float32", {"bm": 128, "bn": 128, "bk": 256}, "tpu-v5e"
        )


def test_notebooks_read_the_bundled_module_on_another_chip(simulated_tpu):
    simulated_tpu("TPU v6 lite")
    x = jnp.ones((8, 8), jnp.float32)
    program, source = compiler.compile_or_bundled(lambda a: a + 1, (x,), "tpu-v5e", bundled="nb03_net")
    assert program.target.name == "tpu-v5e" and source.startswith("bundled: notebook 03's Net")
    assert "this runtime's TPU is a tpu-v6e (TPU v6 lite), so tpu-v5e is not compiled for here" in source


def test_notebook_04_and_05_tpu_sections_read_their_bundled_results_on_another_chip(simulated_tpu):
    from tpucost.experiments import xla_estimates

    simulated_tpu("TPU v6 lite")
    verdict, source = mosaic.problem_verdicts("attention", (2, 2048, 128), "bfloat16")
    assert source.startswith("bundled (this runtime's TPU is a tpu-v6e") and verdict["candidates"]
    rows, said = xla_estimates.configuration_estimates_or_bundled(
        lambda a: a + 1, (jnp.ones((8, 8)),), ["default"], bundled="nb05_mixer_configurations"
    )
    assert rows and said.startswith("bundled:") and "this runtime's TPU is a tpu-v6e" in said


# --- 3. notebook 03: the TPU figure follows the backend; estimates are not runtimes ---------------


def test_estimates_are_drawn_as_estimates_not_as_measured_runtimes():
    measured = plots.program_kernels(["a", "b"], {"measured": [1.0, 2.0], "GNN": [1.5, 2.5]})
    estimated = plots.program_estimates(["a", "b"], {"XLA's estimate": [1.0, 3.0], "roofline": [0.5, 0.7]})
    assert "runtime" not in estimated.get_xlabel() and estimated.get_xlabel().startswith("estimated")
    assert "compiler's model" in estimated.get_xlabel()
    measured_markers = {ln.get_marker() for ln in measured.get_lines()}
    assert not measured_markers & {ln.get_marker() for ln in estimated.get_lines()}
    assert all(ln.get_markerfacecolor() == "none" for ln in estimated.get_lines())  # open markers
    plt.close("all")


def _tpu_figure_cell() -> str:
    cells = json.loads((ROOT / "notebooks" / "03_train_cost_model.ipynb").read_text())["cells"]
    return next("".join(c["source"]) for c in cells if 'bundled="nb03_net"' in "".join(c["source"]))


def _run_tpu_figure_cell(monkeypatch, capsys) -> tuple[plt.Figure, str]:
    """Notebook 03's TPU figure cell, run on section 5's state as a few made-up kernels."""
    shown = []
    monkeypatch.setattr(plt, "show", lambda: shown.append(plt.gcf()))
    names = ["fusion", "convolution.1", "dot"]
    state = {
        "jax": jax,
        "np": np,
        "plt": plt,
        "plots": plots,
        "fn": lambda a: a + 1,
        "x": jnp.ones((8, 8)),
        "names": names,
        "before_us": [1.0, 2.0, 3.0],
        "measured_us": [1.5, 2.5, 2.0],
        "before": types.SimpleNamespace(kernels_ns=6000.0),
    }
    exec(compile(_tpu_figure_cell(), "notebook 03's TPU figure cell", "exec"), state)
    assert len(shown) == 1
    return shown[0], capsys.readouterr().out


def _texts(fig: plt.Figure) -> list[str]:
    return [fig._suptitle.get_text()] + [t for ax in fig.axes for t in (ax.get_title(), ax.get_xlabel())]


def test_notebook03_tpu_figure_on_a_cpu(monkeypatch, capsys):
    monkeypatch.setattr(compiler, "tpu_compiler_available", lambda: False)  # the bundled module, quickly
    fig, out = _run_tpu_figure_cell(monkeypatch, capsys)
    suptitle, left, left_x, right, right_x = _texts(fig)
    assert suptitle.startswith("cpu:") and "(cpu)" in left and right.startswith("tpu-v5e, compiled not run")
    assert right_x.startswith("estimated") and "runtime" in left_x
    assert "XLA names a fusion after the ops it holds" in out or "no kernel name appears" in out
    plt.close("all")


def test_notebook03_tpu_figure_on_a_v6e_names_the_chip_and_the_bundled_v5e_module(
    simulated_tpu, monkeypatch, capsys
):
    simulated_tpu("TPU v6 lite")
    fig, out = _run_tpu_figure_cell(monkeypatch, capsys)
    suptitle, left, _, right, right_x = _texts(fig)
    assert suptitle.startswith("tpu-v6e:") and "(tpu-v6e)" in left and right.startswith("tpu-v5e, compiled")
    assert not any("CPU" in t or "cpu" in t for t in _texts(fig))
    assert right_x.startswith("estimated")
    assert "TPU module: bundled" in out and "this runtime's TPU is a tpu-v6e" in out
    assert "both panels come from the TPU compiler for this chip" not in out  # another chip's kernels
    plt.close("all")


def test_notebook03_tpu_figure_on_a_v5e_says_the_panels_hold_one_chip_s_kernels(
    simulated_tpu, monkeypatch, capsys
):
    simulated_tpu("TPU v5 lite")
    bundled, _ = compiler.load_bundled_program("nb03_net")  # stands in for the module compiled on the chip
    monkeypatch.setattr(compiler, "compile_for_target", lambda fn, args, target, options=None: bundled)
    fig, out = _run_tpu_figure_cell(monkeypatch, capsys)
    suptitle, left, _, right, _ = _texts(fig)
    assert suptitle.startswith("tpu-v5e:") and "(tpu-v5e)" in left and right.startswith("tpu-v5e, compiled")
    assert "TPU module: compiled here for tpu-v5e" in out
    assert "both panels come from the TPU compiler for this chip" in out
    plt.close("all")


# --- 4. notebook 04: which lowering is timed, and named, follows the backend ------------------------


def test_a_tpu_times_the_mosaic_kernel_and_a_cpu_the_data_s_lowering(simulated_tpu):
    simulated_tpu(None)
    assert tile_problems.measurement_lowering("xla_loop") == "xla_loop"  # as the bundled labels ran
    assert tile_problems.measurement_lowering("pallas") == "pallas"
    assert tile_problems.measurement_lowering() == "xla_loop"
    assert "interpret" in tile_problems.lowering_description("pallas")
    assert "XLA loop" in tile_problems.lowering_description("xla_loop")
    simulated_tpu("TPU v6 lite")
    assert tile_problems.measurement_lowering("xla_loop") == "pallas"  # the kernel itself, not an XLA loop
    assert tile_problems.lowering_description("pallas") == "the Pallas kernel compiled by Mosaic (pallas)"
    assert "interpret" in tile_problems.lowering_description("pallas", backend="cpu")  # the data's, named


def _nb04_cell(text: str) -> str:
    cells = json.loads((ROOT / "notebooks" / "04_tile_selection.ipynb").read_text())["cells"]
    return next(
        "".join(c["source"]) for c in cells if c["cell_type"] == "code" and text in "".join(c["source"])
    )


def test_notebook04_asks_the_library_which_lowering_it_times_and_names_it():
    section2 = _nb04_cell("tiles.step_overhead_shares(")
    assert "interpreter" not in section2 and "lowering_description('pallas')" in section2
    section6 = _nb04_cell("tiles.measure_configs(")
    assert "timed = tile_problems.measurement_lowering(ds.lowering)" in section6
    assert "lowering=timed" in section6 and "lowering=ds.lowering" not in section6
    assert "lowering_description(timed)" in section6
