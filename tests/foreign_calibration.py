"""Calibrate a simulated foreign-device model and score it on programs the corpus does not contain.

Run as a script by `test_calibration.py` (a fresh process, pinned to one core before JAX starts:
the label mode). The bundled random-split GNN is wrapped so that it predicts a third of its
runtimes, as if it had learned a machine 3x faster, under another device fingerprint. Prints one
JSON line: the median APE (%) over the foreign programs' kernels (measured once, here) of the
bundled model as it is (``unshifted``), of the shifted model before and after calibrating here,
and the calibration report's figures.
"""

from __future__ import annotations

import json

from tpucost import device

device.pin_to_one_core()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from tpucost import costmodel  # noqa: E402
from tpucost.measure import measure_kernels  # noqa: E402


def foreign_programs() -> list:
    """Five programs the corpus does not contain, written here, with their arguments."""
    k = jax.random.split(jax.random.key(7), 6)
    x = jax.random.normal(k[0], (128, 384))
    w1, w2 = jax.random.normal(k[1], (384, 768)) / 20, jax.random.normal(k[2], (768, 192)) / 30
    img = jax.random.normal(k[3], (4, 48, 48, 24))
    filt = jax.random.normal(k[4], (3, 3, 24, 40)) / 10
    seq = jax.random.normal(k[5], (8, 96, 64))

    def mlp(x, w1, w2):
        return jax.nn.log_softmax(jax.nn.gelu(x @ w1) @ w2)

    def conv(img, filt):
        y = jax.lax.conv_general_dilated(
            img, filt, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )
        return jax.nn.relu(y).mean(axis=(1, 2))

    def attention(s):
        scores = jnp.einsum("bqd,bkd->bqk", s, s) / 8.0
        return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(scores, axis=-1), s)

    def elementwise(x):
        return jnp.tanh(jnp.exp(-x * x) + jnp.cos(x)).cumsum(axis=1)

    return [
        (mlp, (x, w1, w2)),
        (conv, (img, filt)),
        (attention, (seq,)),
        (elementwise, (x,)),
        (jax.grad(lambda w1, x, w2: mlp(x, w1, w2).sum()), (w1, x, w2)),
    ]


def measure(programs: list) -> list:
    """Each program's kernel labels, measured here and now (once: every model is scored on these)."""
    return [measure_kernels(fn, *args, repeats=10).runtime_ns for fn, args in programs]


def kernel_errors(model: costmodel.CostModel, programs: list, labels: list) -> np.ndarray:
    """APE (%) of ``model`` on every kernel of ``programs`` against the measured ``labels``."""
    predicted, measured = [], []
    for (fn, args), runtime_ns in zip(programs, labels, strict=True):
        for k in model.predict_program(fn, *args).kernels:
            if runtime_ns.get(k["name"], 0) > 0:
                predicted.append(k["predicted_ns"])
                measured.append(runtime_ns[k["name"]])
    return 100 * np.abs(np.array(predicted) - np.array(measured)) / np.array(measured)


def main() -> None:
    bundled = costmodel.CostModel.load(method="gnn", calibrated=False)
    faster = device.fingerprint() | {"cpu_model": "A 3x Faster CPU"}
    model = costmodel.CostModel(
        "gnn",
        lambda graphs: bundled.predict(graphs) / 3.0,
        bundled.meta,
        "simulated-" + bundled.key,
        faster,
        bundled.trained_dispatch_ns,
    )
    programs = foreign_programs()
    labels = measure(programs)
    unshifted = kernel_errors(bundled, programs, labels)
    before = kernel_errors(model, programs, labels)
    report = model.calibrate(n_programs=13, repeats=5, progress=False)
    after = kernel_errors(model, programs, labels)
    print(
        json.dumps(
            {
                "kernels": len(after),
                "unshifted": float(np.median(unshifted)),
                "before": float(np.median(before)),
                "after": float(np.median(after)),
                "calibration_before": report["median_ape_before"],
                "calibration_after": report["median_ape_after"],
                "mode": report["mode"],
                "global_offset": report["correction"]["global_offset"],
            }
        )
    )


if __name__ == "__main__":
    main()
