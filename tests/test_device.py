"""tpucost.device: the one-core label mode and the device fingerprint."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import pytest

from tpucost import device

pytestmark = pytest.mark.core  # also run on Colab's versions (make test-colab)

OVERLAP_PROGRAM = """
import json, sys
from tpucost import device
if sys.argv[1] == "pin":
    device.pin_to_one_core()
import jax, jax.numpy as jnp
from tpucost import compat
from tpucost.measure import measure_kernels

def f(x, w1, w2):  # two independent convolutions: XLA:CPU may run them at the same time
    conv = lambda w: jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return jnp.tanh(conv(w1)) + jnp.sin(conv(w2))

k = jax.random.split(jax.random.key(0), 3)
args = (jax.random.normal(k[0], (4, 48, 48, 32)), jax.random.normal(k[1], (5, 5, 32, 32)),
        jax.random.normal(k[2], (5, 5, 32, 32)))
eigen = compat.library_fusions_off()
m = measure_kernels(f, *args, repeats=7, compiler_options=eigen)
print(json.dumps({"ratio": m.additivity_ratio, "device": m.device, "labels": m.runtime_ns}))
"""


def _run_overlap_program(mode: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", OVERLAP_PROGRAM, mode], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(
    jax.default_backend() != "cpu" or not hasattr(os, "sched_setaffinity"),
    reason="the one-core mode is for XLA:CPU on Linux",
)
def test_one_core_mode_makes_overlapping_kernels_add_up():
    # Up to three fresh processes: another process loading the machine can stretch one run's
    # labels; unpinned, this program's labels sum to 1.4-2x its wall time every time.
    runs = []
    for _ in range(3):
        pinned = _run_overlap_program("pin")
        assert pinned["device"]["cores"] == 1 and pinned["device"]["label_mode"] == device.LABEL_MODE
        runs.append(pinned["ratio"])
        if 0.8 <= pinned["ratio"] <= 1.1:
            break
    assert 0.8 <= runs[-1] <= 1.1, f"summed labels / wall time in three pinned runs: {runs}"


@pytest.mark.skipif(device.usable_cores() < 2, reason="needs a process with several cores")
def test_pinning_after_the_backend_started_is_refused():
    jax.devices()  # the backend is running now
    with pytest.raises(RuntimeError, match="before the first JAX computation"):
        device.pin_to_one_core()
    assert device.usable_cores() >= 2  # nothing was changed


def test_fingerprint_names_the_hardware_and_its_id_hashes_only_that(monkeypatch):
    fp = device.fingerprint()
    for key in (
        "id",
        "backend",
        "device_kind",
        "cpu_model",
        "cpu_isa",
        "cores",
        "jax",
        "jaxlib",
        "label_mode",
    ):
        assert key in fp, key
    assert fp["backend"] == jax.default_backend() and fp["jax"] == jax.__version__
    assert fp["id"] == device.fingerprint()["id"]  # stable
    other = dict(fp, cpu_model="Another CPU")
    assert device._identity_hash(other) != fp["id"]
    assert device._identity_hash(dict(fp, cores=fp["cores"] + 7)) == fp["id"]  # cores are not the hardware
    assert device.differences(fp, other) == [f"cpu_model: {fp['cpu_model']!r} != 'Another CPU'"]
    assert fp["id"] in device.describe(fp) and "unrecorded" in device.describe(None)
