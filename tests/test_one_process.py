"""One process on an accelerator (issue 37, item 5): no second process touches a TPU or GPU, the
one-core pinning happens on XLA:CPU only, and figures of different backends are never combined.

There is no accelerator here: the tests simulate one by replacing `tpucost.method.device.expected_backend`
(the one place tpucost decides the backend) and record every process start (`subprocess.Popen`,
`multiprocessing`'s `Process.start`) and every pinning (`os.sched_setaffinity`), so that a second
process or a pin on the simulated accelerator fails the test. The programs still run on this
machine's CPU; nothing is timed.
"""

from __future__ import annotations

import functools
import importlib
import json
import multiprocessing.process
import os
import queue
import subprocess
import sys
import types
from pathlib import Path

import jax
import pytest
from test_autotune import _report  # a small report of the shape `autotune` writes

from tpucost import cli, tpu_host
from tpucost.experiments import autotune
from tpucost.experiments.autotune import protocol, wall_time
from tpucost.experiments.configs import autotune as autotune_config
from tpucost.method import device

remeasure = importlib.import_module(
    "tpucost.experiments.autotune.remeasure"
)  # the package's `remeasure` is the function

pytestmark = pytest.mark.core  # also run on Colab's versions (make test-colab)

TINY = """
import jax.numpy as jnp
import numpy as np


def tiny(config):
    x = jnp.asarray(np.random.default_rng(0).standard_normal((32, 32)), jnp.float32)
    n = config["n"]
    return (lambda x: sum(jnp.tanh(x @ x * i) for i in range(1, n + 1)).sum()), (x,)


tiny.space = {"n": [1, 2]}
"""


@pytest.fixture
def starts(monkeypatch):
    """Every Python process started from here on (``subprocess`` with this interpreter or another
    Python, and ``multiprocessing``), recorded and not started: a test on a simulated accelerator
    asserts the list stays empty. Other programs (``uname``, which `platform` runs) start as usual."""
    started: list[str] = []
    real_popen = subprocess.Popen

    def popen(*args, **kwargs):
        cmd = args[0] if args else kwargs.get("args")
        program = str(cmd[0] if isinstance(cmd, (list, tuple)) else cmd).split()[0]
        if program != sys.executable and "python" not in Path(program).name:
            return real_popen(*args, **kwargs)
        started.append(f"subprocess {cmd}")
        raise AssertionError("a second process was started")

    def process_start(self):
        started.append(f"multiprocessing {self.name}")
        raise AssertionError("a second process was started")

    monkeypatch.setattr(subprocess, "Popen", popen)
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", process_start)
    return started


@pytest.fixture
def pins(monkeypatch):
    """Every `os.sched_setaffinity` call, recorded and not made; this process seems to have 3 cores."""
    calls: list[tuple[int, set[int]]] = []
    monkeypatch.setattr(
        os, "sched_setaffinity", lambda pid, cores: calls.append((pid, set(cores))), raising=False
    )
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    return calls


def _simulate(monkeypatch, backend: str) -> None:
    monkeypatch.setattr(device, "expected_backend", lambda: backend)


# ------------------------------------------------------------------ which backend, before JAX starts


def test_the_backend_is_decided_before_jax_starts_from_platforms_and_device_files(tmp_path, monkeypatch):
    dev = tmp_path / "dev"
    dev.mkdir()
    decide = device.backend_before_start
    monkeypatch.setattr(tpu_host, "libtpu_installed", lambda: True)
    monkeypatch.setattr(device, "_gpu_plugin_installed", lambda kind: True)
    assert decide("", dev) == "cpu"  # no device files
    assert decide("tpu", dev) == "tpu" and decide("cpu", dev) == "cpu" and decide("tpu,cpu", dev) == "tpu"
    assert decide("cuda,cpu", dev) == "cpu"  # JAX skips CUDA without an NVIDIA device file
    (dev / "nvidia0").touch()
    assert decide("", dev) == "gpu" and decide("cuda,cpu", dev) == "gpu" and decide("cpu", dev) == "cpu"
    monkeypatch.setattr(device, "_gpu_plugin_installed", lambda kind: False)
    assert decide("", dev) == "cpu"  # a GPU without JAX's CUDA plugin: JAX runs on the CPU
    (dev / "vfio").mkdir()
    (dev / "vfio" / "0").touch()  # a TPU v5e VM's chip
    assert decide("", dev) == "tpu" and decide("cpu", dev) == "cpu"
    monkeypatch.setattr(tpu_host, "libtpu_installed", lambda: False)
    assert decide("", dev) == "cpu"  # a chip without libtpu


def test_once_jax_started_its_default_backend_decides(monkeypatch):
    monkeypatch.setattr(device, "backend_started", lambda: True)
    monkeypatch.setattr(jax, "default_backend", lambda: "cuda")
    assert device.expected_backend() == "gpu"
    monkeypatch.setattr(device, "backend_started", lambda: False)
    monkeypatch.setattr(device, "backend_before_start", lambda: "tpu")
    assert device.expected_backend() == "tpu"


@functools.cache
def _fresh_process(platforms: str) -> list[str]:
    """The lines a fresh process under ``JAX_PLATFORMS=platforms`` prints: the backend it expects and
    whether JAX started (line 1), then, on Linux, its cores and its pinning after `pin_to_one_core` (line 2).
    One process per platform serves both tests below (each start imports jax: seconds)."""
    code = (
        "import os, jax; from tpucost.method import device; from tpucost.compat import backend_started; "
        "print(device.expected_backend(), backend_started())\n"
        "if hasattr(os, 'sched_setaffinity'): p = device.pin_to_one_core(); print(len(os.sched_getaffinity(0)), p)"
    )
    env = {k: v for k, v in os.environ.items() if k != "TPUCOST_LABEL_CORE"}
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**env, "JAX_PLATFORMS": platforms},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.splitlines()


def test_the_decision_reads_jax_platforms_without_starting_jax():
    for platforms, expected in (("tpu", "tpu"), ("cpu", "cpu")):
        assert _fresh_process(platforms)[0].split() == [expected, "False"]


# ------------------------------------------------------------------------------------- pinning


@pytest.mark.parametrize("backend", ["tpu", "gpu"])
def test_on_an_accelerator_nothing_is_pinned_and_it_says_so(backend, monkeypatch, pins):
    _simulate(monkeypatch, backend)
    monkeypatch.setenv("TPUCOST_LABEL_CORE", "1")
    for pinning in (device.pin_to_one_core(), device.pin_to_one_core(core=0)):
        assert not pinning.pinned and pinning.core is None and pinning.backend == backend
        assert str(pinning).startswith(f"not pinned: JAX runs on {backend}")
        with pytest.raises(TypeError, match="not pinned"):
            int(pinning)
    args = types.SimpleNamespace(all_cores=False)
    assert not cli.label_mode(args).pinned  # the CLI's label mode, as `collect` and `autotune` call it
    assert pins == []


def test_on_cpu_it_still_pins_to_one_core(monkeypatch, pins):
    _simulate(monkeypatch, "cpu")
    monkeypatch.setattr(device, "backend_started", lambda: False)
    monkeypatch.delenv("TPUCOST_LABEL_CORE", raising=False)
    pinning = device.pin_to_one_core()
    assert pinning.pinned and int(pinning) == 0 and pinning.backend == "cpu"
    assert str(pinning) == "pinned to core 0 (XLA:CPU label mode)"
    assert cli.label_mode(types.SimpleNamespace(all_cores=False)).core == 0
    assert cli.label_mode(types.SimpleNamespace(all_cores=True)) is None
    assert pins == [(0, {0}), (0, {0})]


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or device.usable_cores() < 2, reason="needs Linux and two cores"
)
def test_a_real_process_pins_on_cpu_and_not_when_jax_will_run_on_a_tpu():
    cores = device.usable_cores()
    for platforms, expected in (("cpu", "1 pinned to core"), ("tpu", f"{cores} not pinned: JAX runs on tpu")):
        line = _fresh_process(platforms)[1]
        assert line.startswith(expected), line


# ----------------------------------------------------------------------- no second process on a TPU


@pytest.fixture
def tiny_spec(tmp_path):
    (tmp_path / "tiny.py").write_text(TINY)
    return f"{tmp_path}/tiny.py:tiny"


@pytest.mark.slow  # a whole autotune run (make check leaves it out)
@pytest.mark.timeout(600)
@pytest.mark.parametrize("backend", ["tpu"])
def test_an_accelerator_autotune_measures_scores_and_takes_its_noise_floor_in_one_process(
    backend, tiny_spec, monkeypatch, starts
):
    from tpucost.method.costmodel import CostModel

    _simulate(monkeypatch, backend)
    monkeypatch.setattr(wall_time, "scoring_cores", lambda: [1])  # spare cores that must stay unused
    model = CostModel.load(calibrated=False)
    config = autotune_config.AutotuneConfig(
        budget_s=0.2,
        seeds=(0,),
        n_candidates=2,
        starts=("from_default",),
        repeats=1,
        fresh_rounds=1,
        noise_processes=2,  # fresh_process=True, scoring="auto": what the notebook and the CLI ask for
    )
    report = autotune.autotune(tiny_spec, config, cost_model=model).report
    assert starts == []
    assert report["backend"] == backend
    fresh = report["fresh_process"]
    assert fresh["pid"] == fresh["parent_pid"] == os.getpid() and fresh["separate_process"] is False
    assert fresh["backend"] == backend and f"on {backend} one process holds the device" in fresh["how"]
    noise = report["noise"]
    assert noise["backend"] == backend and noise["separate_processes"] is False and noise["processes"] == 3
    assert "in this process" in noise["how"]
    wall = report["wall_time"]
    assert wall["scoring"] == "sequential" and wall["scoring_cores"] == []
    assert f"on {backend} one process holds the device" in wall["scoring_why"]
    assert autotune.findings(report) and len(autotune.report_table(report)) > 0  # one backend: readable

    floor = autotune.measurement_noise(tiny_spec, processes=2, rounds=1)
    assert floor["backend"] == backend and floor["separate_processes"] is False
    assert starts == []


@pytest.mark.parametrize("backend", ["tpu", "gpu"])
def test_a_scoring_worker_is_refused_on_an_accelerator_before_it_starts(backend, monkeypatch, starts):
    _simulate(monkeypatch, backend)
    tunable = types.SimpleNamespace(spec="example:mixer", kind="program")
    with pytest.raises(RuntimeError, match=f"on {backend} one process holds the device"):
        wall_time.ScoringWorker(tunable, {"cost_model": {}}, [1])
    assert starts == []


# --------------------------------------------------------------- children: forced to CPU, checked


def _fake_child(backend: str | None, calls: list):
    """`subprocess.run` of a fresh re-measurement that reports ``backend``."""

    def run(cmd, input, env, **kwargs):
        calls.append({"cmd": cmd, "env": env, "request": json.loads(input)})
        n = len(json.loads(input)["configs"])
        out = {"runtime_ns": [1e6] * n, "pid": 4242, **({"backend": backend} if backend else {})}
        return subprocess.CompletedProcess(cmd, 0, json.dumps(out) + "\n", "")

    return run


@pytest.mark.parametrize("theirs", ["tpu", "gpu", None])
def test_a_fresh_process_that_reports_another_backend_is_refused(theirs, monkeypatch):
    _simulate(monkeypatch, "cpu")
    calls: list = []
    monkeypatch.setattr(remeasure.subprocess, "run", _fake_child(theirs, calls))
    with pytest.raises(device.BackendMismatch) as err:
        remeasure.remeasure_in_fresh_process("example:mixer", "program", [{}], rounds=1)
    message = str(err.value)
    assert "\n" not in message and "the fresh process (4242) on" in message and "this process" in message
    assert calls[0]["env"]["JAX_PLATFORMS"] == "cpu"  # the child is kept off any accelerator


def test_a_scoring_worker_that_reports_another_backend_is_refused(monkeypatch):
    """The worker's process, faked: it says it is ready on a TPU while this process is on the CPU."""
    _simulate(monkeypatch, "cpu")
    made = []

    class Process:
        pid, exitcode = 4243, None

        def __init__(self, target, args, daemon):
            self.args = args
            made.append(self)

        def start(self):
            self.args[6].put(("ready", None, "tpu"))  # the outbox

        def is_alive(self):
            return False

        def join(self, timeout=None):
            pass

    ctx = types.SimpleNamespace(Queue=queue.Queue, Process=Process)
    monkeypatch.setattr(wall_time.multiprocessing, "get_context", lambda method: ctx)
    tunable = types.SimpleNamespace(spec="example:mixer", kind="program")
    with pytest.raises(device.BackendMismatch, match=r"the scoring worker \(4243\) on tpu"):
        wall_time.ScoringWorker(tunable, {"cost_model": {}}, [1])
    assert made and made[0].args[4]["JAX_PLATFORMS"] == "cpu"  # the worker's environment


# ------------------------------------------------------------ CPU: the separate processes stay


class _Spawned(Exception):
    pass


@pytest.mark.slow  # a whole autotune run (make check leaves it out)
@pytest.mark.timeout(600)
def test_on_cpu_the_remeasurement_noise_floor_and_scoring_use_separate_processes(tiny_spec, monkeypatch):
    from tpucost.method.costmodel import CostModel

    _simulate(monkeypatch, "cpu")
    calls: list = []
    monkeypatch.setattr(remeasure.subprocess, "run", _fake_child("cpu", calls))
    config = autotune_config.AutotuneConfig(
        budget_s=0.2,
        seeds=(0,),
        n_candidates=2,
        starts=("from_default",),
        repeats=1,
        fresh_rounds=1,
        noise_processes=2,
        budgets=("device_seconds",),
    )
    report = autotune.autotune(tiny_spec, config, cost_model=CostModel.load(calibrated=False)).report
    assert len(calls) == 1 + 2  # the re-measurement, then two noise processes
    assert all(c["cmd"][1:] == ["-m", "tpucost.experiments.autotune"] for c in calls)
    fresh = report["fresh_process"]
    assert (
        fresh["pid"] == 4242 != fresh["parent_pid"]
        and fresh["separate_process"]
        and fresh["backend"] == "cpu"
    )
    assert report["noise"]["separate_processes"] and report["noise"]["backend"] == "cpu"
    floor = autotune.measurement_noise(tiny_spec, processes=2, rounds=1)
    assert len(calls) == 5 and floor["separate_processes"] and floor["backend"] == "cpu"

    # With a spare core the wall-time arms start their scoring worker (here: stopped at its start).
    def worker(*args, **kwargs):
        raise _Spawned

    monkeypatch.setattr(wall_time, "scoring_cores", lambda: [1])
    monkeypatch.setattr(wall_time, "ScoringWorker", worker)
    with pytest.raises(_Spawned):
        config = autotune_config.AutotuneConfig(
            budget_s=0.2,
            seeds=(0,),
            n_candidates=2,
            starts=("from_default",),
            repeats=1,
            arms=("device_only", "model_guided"),
            noise_processes=0,
        )
        autotune.autotune(tiny_spec, config, cost_model=CostModel.load(calibrated=False))


# ------------------------------------------------------------------- reports of one backend only


def test_reports_of_different_backends_are_not_compared():
    cpu, tpu = dict(_report("a"), backend="cpu"), dict(_report("b"), backend="tpu")
    assert (
        autotune.arms_comparison_table({"a": cpu, "b": dict(_report("b"), backend="cpu")}).attrs["backend"]
        == "cpu"
    )
    with pytest.raises(device.BackendMismatch) as err:
        autotune.arms_comparison_table({"a": cpu, "b": tpu})
    assert "\n" not in str(err.value) and "a on cpu, b on tpu" in str(err.value)
    mixed = dict(cpu, noise={"spread": 0.02, "backend": "tpu"})  # a noise floor of another backend
    for read in (autotune.findings, autotune.report_table):
        with pytest.raises(device.BackendMismatch, match="its searches on cpu, its noise floor on tpu"):
            read(mixed)
    assert autotune.findings(_report("old"))  # an older report without backends still reads


def test_a_noise_floor_of_another_backend_is_refused(monkeypatch):
    tunable = types.SimpleNamespace(
        spec="example:mixer", kind="program", space=types.SimpleNamespace(default={})
    )
    monkeypatch.setattr(
        protocol,
        "remeasure_in_fresh_process",
        lambda *a, **k: {"runtime_ns": [1.0], "backend": "tpu"},
    )
    with pytest.raises(device.BackendMismatch, match="the noise floor"):
        protocol._noise(tunable, 1.0, 2, 1, True, "cpu")


@pytest.mark.slow  # starts notebook kernels (make check leaves it out)
def test_the_notebooks_print_what_the_pinning_did():
    """Notebooks 02, 03 and 05 print the `Pinning` (pinned or not, and why), not a fixed sentence."""
    import nbformat

    root = Path(__file__).resolve().parents[1] / "notebooks"
    for name in ("02_measure_kernels", "03_train_cost_model", "05_autotuner"):
        nb = nbformat.read(root / f"{name}.ipynb", as_version=4)
        cells = [c.source for c in nb.cells if c.cell_type == "code" and "pin_to_one_core" in c.source]
        assert len(cells) == 1, name
        assert any(
            "print(" in line and "device.pin_to_one_core()" in line for line in cells[0].splitlines()
        ), name
