"""Calibrate a simulated foreign-device model and score it on programs the corpus does not contain.

Run as a script by `test_calibration.py` (a fresh process, pinned to one core before JAX starts:
the label mode). The bundled random-split GNN is wrapped so that it predicts a third of its
runtimes, as if it had learned a machine 3x faster, under another device fingerprint. Both the
bundled model and this shifted one are calibrated on one measurement of the calibration programs.
Prints one JSON line: per model (``bundled``, ``shifted``, each also ``_calibrated``) the median
APE (%) and the median log(measured / predicted) over the foreign programs' kernels (measured
once, here), and each calibration report's figures (``_report``).
"""

from __future__ import annotations

import json

from tpucost.method import device

device.pin_to_one_core()

import numpy as np  # noqa: E402
from foreign_programs import foreign_programs  # noqa: E402

from tpucost.experiments import calibration  # noqa: E402
from tpucost.method import costmodel  # noqa: E402
from tpucost.method.measure import measure_kernels  # noqa: E402


def measure(programs: list) -> list:
    """Each program's kernel labels, measured here and now (once: every model is scored on these)."""
    return [measure_kernels(fn, *args, repeats=10).runtime_ns for fn, args in programs]


def kernel_ratios(model: costmodel.CostModel, programs: list, labels: list) -> np.ndarray:
    """measured / predicted runtime of every kernel of ``programs`` (``labels`` measured here)."""
    predicted, measured = [], []
    for (fn, args), runtime_ns in zip(programs, labels, strict=True):
        for k in model.predict_program(fn, *args).kernels:
            if runtime_ns.get(k["name"], 0) > 0:
                predicted.append(k["predicted_ns"])
                measured.append(runtime_ns[k["name"]])
    return np.array(measured) / np.array(predicted)


def scores(ratios: np.ndarray) -> dict[str, float]:
    """Median APE (%) and median log(measured / predicted) (the bias: 0 is unbiased)."""
    return {
        "median_ape": float(np.median(100 * np.abs(1 / ratios - 1))),
        "log_bias": float(np.median(np.log(ratios))),
    }


def main() -> None:
    # Two instances of the bundled model: this one stays uncalibrated (the shifted model wraps
    # it), the one in ``models`` is calibrated below.
    bundled = costmodel.CostModel.load(method="gnn", calibrated=False)
    faster = device.fingerprint() | {"cpu_model": "A 3x Faster CPU"}
    models = {
        "bundled": costmodel.CostModel.load(method="gnn", calibrated=False),
        "shifted": costmodel.CostModel(
            "gnn",
            lambda graphs: bundled.predict(graphs) / 3.0,
            bundled.meta,
            "simulated-" + bundled.key,
            faster,
            bundled.trained_dispatch_ns,
        ),
    }
    # The shifted model trained on the bundled model's kernels: calibration leaves out the same ones.
    models["shifted"].loaded_with = bundled.loaded_with
    programs = foreign_programs()
    labels = measure(programs)
    ratios = {name: kernel_ratios(m, programs, labels) for name, m in models.items()}
    result = {name: scores(r) for name, r in ratios.items()} | {"kernels": len(ratios["bundled"])}
    cal = calibration.measure_calibration_set(n_programs=13, repeats=5, progress=False)
    for name, model in models.items():
        report = calibration.calibrate(model, calibration_set=cal)
        result[name + "_calibrated"] = scores(kernel_ratios(model, programs, labels))
        result[name + "_report"] = {
            "median_ape_before": report["median_ape_before"],
            "median_ape_after": report["median_ape_after"],
            "mode": report["mode"],
            "global_offset": report["correction"]["global_offset"],
            "kernels": report["kernels"],
            "training_kernels_left_out": report["training_kernels_left_out"],
        }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
