"""Score a kernel model on the ten programs of `new_programs`, measured here and now, after `calibrate`.

Run as a script (a fresh process, pinned to one core before JAX starts: the label mode)::

    python tests/new_program_errors.py [--model DIR] [--method gnn]

Prints one JSON line: per program the median APE (%) of its kernels of >= 5 us; over all their
kernels of >= 5 us the median APE before and after calibrating on this device, and the
calibration report's mode. Issue 20's target is a median APE <= 20% after calibration, for a
model trained on data of this device type.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

os.environ.setdefault(
    "TPUCOST_CACHE_DIR", tempfile.mkdtemp(prefix="tpucost-new-programs-")
)  # not the user's cache

from tpucost.method import device  # noqa: E402

device.pin_to_one_core()

import numpy as np  # noqa: E402
from new_programs import NEW_PROGRAMS  # noqa: E402

from tpucost.experiments import calibration  # noqa: E402
from tpucost.method import costmodel  # noqa: E402
from tpucost.method.measure import measure_kernels  # noqa: E402

MIN_NS = 5_000.0


def errors(model: costmodel.CostModel, programs: dict, labels: dict) -> dict[str, np.ndarray]:
    """Per program, the APE (%) of each kernel of >= 5 us (labels measured here)."""
    out = {}
    for name, (fn, args) in programs.items():
        ape = [
            100 * abs(k["predicted_ns"] / labels[name][k["name"]] - 1)
            for k in model.predict_program(fn, *args).kernels
            if labels[name].get(k["name"], 0) >= MIN_NS
        ]
        out[name] = np.array(ape)
    return out


def summary(per_program: dict[str, np.ndarray]) -> dict:
    every = np.concatenate([a for a in per_program.values() if len(a)])
    return {
        "median_ape": float(np.median(every)),
        "kernels": len(every),
        "per_program": {n: (float(np.median(a)) if len(a) else None) for n, a in per_program.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=None)
    parser.add_argument("--method", default="gnn")
    args = parser.parse_args()
    programs = {name: make() for name, make in NEW_PROGRAMS.items()}
    labels = {name: measure_kernels(fn, *a, repeats=10).runtime_ns for name, (fn, a) in programs.items()}
    model = costmodel.CostModel.load(args.model, method=args.method, calibrated=False)
    result = {"device": device.fingerprint()["id"], "model_device": (model.trained_on or {}).get("id")}
    result["before"] = summary(errors(model, programs, labels))
    report = calibration.calibrate(
        model, calibration_set=calibration.measure_calibration_set(26, 5, progress=False)
    )
    result["after"] = summary(errors(model, programs, labels))
    result["calibration_mode"] = report["mode"]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
