"""Tests of lab.precompile: a worker on the spare core compiles the next pairs
into JAX's persistent cache, and the measuring process (pinned to one core) loads them.

The measuring process must be pinned before JAX starts, so the measuring side runs in a fresh
Python process (``MEASURE``), once with the worker and once without, and prints what it saw.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import pytest

from lab import precompile
from tpucost.method import device

pytestmark = pytest.mark.skipif(jax.default_backend() != "cpu", reason="the worker runs on XLA:CPU only")

#: Three pairs: the first is compiled by the measuring process, the other two by the worker.
KEYS = ["mlp-forward-0-0/default", "cnn-grad-0-1/default", "mlp-forward-0-0/no_fusion"]

#: The measuring process: pinned to one core, with (argv[1] == "worker") or without the worker,
#: it compiles and measures ``KEYS`` in order and prints one JSON object.
MEASURE = """
import json, sys, time
from pathlib import Path
from tpucost.method import device
pin = device.pin_to_one_core()
from lab import precompile
from tpucost.experiments.programs import program_from_id
from tpucost.method.measure import compile_fn, measure_kernels
keys = json.loads(sys.argv[2])
worker = precompile.start(keys) if sys.argv[1] == "worker" else None
if worker is not None:  # let the worker finish both pairs: the test is about hits, not speed
    deadline = time.time() + 120
    while time.time() < deadline and not all((worker.root / "done" / str(i)).exists() for i in (1, 2)):
        time.sleep(0.05)
pairs = []
for key in keys:
    program_id, config = key.split("/")
    program = program_from_id(program_id)
    fn, options = program.configured(config)
    prepared = worker.prepare(key) if worker is not None else None
    t0 = time.perf_counter()
    compile_fn(fn, program.args, options)
    compile_s = time.perf_counter() - t0
    m = measure_kernels(fn, *program.args, repeats=2, compiler_options=options)
    pairs.append({"key": key, "prepared": prepared, "compile_s": compile_s,
                  "kernels": sorted(m.runtime_ns), "missing": m.missing})
summary = worker.stop() if worker is not None else None
root = str(worker.root) if worker is not None else None
print(json.dumps({"core": pin.core, "pairs": pairs, "summary": summary, "root": root,
                  "root_left": root is not None and Path(root).exists()}))
"""

#: A measuring process that starts a worker, prints its folder and waits to be killed.
ORPHAN = """
import json, sys, time
from tpucost.method import device
device.pin_to_one_core()
from lab import precompile
worker = precompile.start(json.loads(sys.argv[1]), ahead=1)
print(worker.root, flush=True)
time.sleep(600)
"""


def _measure(mode: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, mode, json.dumps(KEYS)],
        capture_output=True,
        text=True,
        env=device.cpu_only_env(),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_no_worker_on_an_accelerator(monkeypatch):
    monkeypatch.setattr(device, "expected_backend", lambda: "tpu")
    assert "one process holds the device" in (precompile.unavailable() or "")
    assert precompile.start(KEYS) is None


def test_no_worker_beside_a_process_on_several_cores(monkeypatch):
    monkeypatch.setattr(device, "expected_backend", lambda: "cpu")
    monkeypatch.setattr(device, "usable_cores", lambda: 2)
    assert "pin it to one" in (precompile.unavailable() or "")
    assert precompile.start(KEYS) is None


def test_ahead_must_be_positive(monkeypatch):
    with pytest.raises(ValueError, match="ahead must be >= 1"):
        precompile.start(KEYS, ahead=0)


@pytest.mark.slow
@pytest.mark.measures
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a spare core for the worker")
def test_the_measuring_process_loads_what_the_worker_compiled():
    plain, fed = _measure("plain"), _measure("worker")
    summary = fed["summary"]
    assert summary["core"] is not None and summary["core"] != fed["core"]  # another core
    assert summary["worker_compiled"] == 2 and summary["worker_errors"] == 0
    assert [p["prepared"] for p in fed["pairs"]] == [False, True, True]
    assert summary["compiled_here"] == 1 and summary["prepared"] == 2
    assert summary["cache_hits"] >= 2  # the two pairs the worker compiled were loaded, not compiled
    for without, with_worker in zip(plain["pairs"][1:], fed["pairs"][1:], strict=True):
        assert with_worker["kernels"] == without["kernels"], with_worker["key"]  # the same kernels
        assert not with_worker["missing"], with_worker["key"]  # all found in the trace
    loaded = sum(p["compile_s"] for p in fed["pairs"][1:])
    compiled = sum(p["compile_s"] for p in plain["pairs"][1:])
    assert loaded < 0.6 * compiled, (loaded, compiled)  # loading: well under compiling
    assert not fed["root_left"]  # stop() removed the worker's folder


@pytest.mark.slow
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a spare core for the worker")
def test_the_worker_leaves_when_the_measuring_process_dies():
    parent = subprocess.Popen(
        [sys.executable, "-c", ORPHAN, json.dumps(KEYS)],
        stdout=subprocess.PIPE,
        text=True,
        env=device.cpu_only_env(),
    )
    try:
        assert parent.stdout is not None
        root = Path(parent.stdout.readline().strip())
        assert root.is_dir()
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    deadline = time.time() + 120
    while root.exists() and time.time() < deadline:
        time.sleep(0.1)
    assert not root.exists(), f"the orphaned worker left {root}"


def test_the_worker_leaves_to_the_measuring_process_the_pairs_it_would_reach_first():
    schedule = precompile._Schedule()
    assert schedule.first_in_time(ahead=8) == 1  # nothing known yet: the next pair
    now = time.time()
    schedule.parent_at([(0, now - 1.0), (4, now)])  # 0.25 s per pair, pair 4 started just now
    schedule.compiled(0.9)  # the worker needs 0.9 s a pair: pairs 5-7 come sooner than that
    assert schedule.first_in_time(ahead=8) == 8
    assert schedule.first_in_time(ahead=2) == 6  # never further than ahead
    schedule.parent_at([(5, now + 2.0)])  # the measuring process slowed down: 2 s a pair
    assert schedule.first_in_time(ahead=8) == 6
