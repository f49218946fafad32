"""Reading autotuning reports: the bundled experiments, the noise floor, tables beside the paper's."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from tpucost.autotune.evaluators import DeviceEvaluator, ProgramPredictor, compile_candidate
from tpucost.autotune.remeasure import remeasure_in_fresh_process
from tpucost.autotune.tunable import Tunable, load_tunable
from tpucost.costmodel import CostModel
from tpucost.files import bundled_dir

__all__ = [
    "BUNDLED_NAME",
    "PAPER_MODEL_VS_DEVICE",
    "bundled_reports",
    "measurement_noise",
    "report_table",
    "comparison_table",
    "compare_predicted_and_measured",
]


#: The folder of the README's autotuning experiments under `tpucost.files.bundled_dir()`: one
#: ``python -m tpucost autotune --json`` report per program, with their provenance in its README.
BUNDLED_NAME = "autotune"

#: Kaufman et al. (MLSys 2021, Section 6.3): how much faster the model-guided search's
#: configuration was than device-only's, on average, per start.
PAPER_MODEL_VS_DEVICE = {"from_default": 0.02, "from_random": 0.08}


def bundled_reports(folder: str | os.PathLike | None = None) -> dict[str, dict[str, Any]]:
    """The bundled experiments' reports, by program (``"example:mixer"``, ...), program space first."""
    folder = Path(folder) if folder is not None else bundled_dir() / BUNDLED_NAME
    files = sorted(folder.glob("*.json"))
    if not files:
        raise FileNotFoundError(f"no autotuning reports (*.json) in {folder}")
    reports: dict[str, dict[str, Any]] = {}
    for f in files:
        try:
            report = json.loads(f.read_text())
        except json.JSONDecodeError as err:
            raise ValueError(f"{f}: line {err.lineno}, column {err.colno}: {err.msg}") from None
        missing = {
            "program",
            "space",
            "default_ns",
            "strategies",
            "model_guided_faster_than_device_only",
        } - set(report)
        if missing:
            raise ValueError(f"{f}: not an autotuning report, missing {sorted(missing)}")
        reports[report["program"]] = report
    return dict(sorted(reports.items(), key=lambda item: (item[1]["space"], item[0])))


def measurement_noise(
    spec: str,
    space: str = "program",
    processes: int = 3,
    rounds: int = 10,
    config: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The noise floor of a reported runtime: ``config`` (default: the default configuration)
    re-measured exactly as `autotune` reports it (`remeasure_in_fresh_process`, ``rounds`` rounds)
    in ``processes`` separate fresh processes. ``spread`` = slowest / fastest - 1: speedups closer
    to 1 than that cannot be told from noise."""
    if processes < 2:
        raise ValueError(f"processes must be >= 2 to see a spread, got {processes}")
    tunable = load_tunable(spec, space)
    config = dict(config) if config is not None else tunable.space.default
    runtimes = [
        remeasure_in_fresh_process(tunable.spec, space, [config], rounds)["runtime_ns"][0]
        for _ in range(processes)
    ]
    return {
        "config": config,
        "runtime_ns": runtimes,
        "processes": processes,
        "rounds": rounds,
        "spread": max(runtimes) / min(runtimes) - 1.0,
    }


def report_table(report: Mapping[str, Any]) -> Any:
    """One row per strategy and start: mean speedup over the default with its range over seeds,
    device seconds, candidates measured and predicted, and the best seed's configuration (pandas)."""
    rows = [
        {
            "strategy": strategy,
            "start": start,
            "speedup": e["speedup_vs_default"],
            "min": e["speedup_spread"]["min"],
            "max": e["speedup_spread"]["max"],
            "device s": e["device_seconds"],
            "measured": e["candidates_measured"],
            "predicted": e["candidates_predicted"],
            "best config (best seed)": e["best_config"],
        }
        for strategy, starts in report["strategies"].items()
        for start, e in starts.items()
    ]
    return pd.DataFrame(rows)


def comparison_table(reports: Mapping[str, Mapping[str, Any]]) -> Any:
    """The paper's comparison, one row per program and start (pandas).

    ``device only`` and ``model + device``: each strategy's mean speedup over the default (over
    seeds). ``model vs device-only %``: how much faster model + device's configuration was than
    device-only's, computed per seed (device-only runtime / model + device runtime - 1, both from
    the fresh process) and then averaged over seeds, with its ``min %`` and ``max %``; so it is not
    the ratio of the two mean speedups. ``paper %``: the paper's figure (Section 6.3), for
    program-space rows only (the paper tuned XLA's own program options, not Pallas block shapes:
    NaN for the tile space). ``noise floor %``: where the report has one (``"noise"``), the
    default's slowest / fastest fresh-process runtime - 1 (`measurement_noise`)."""
    rows = []
    for program, r in reports.items():
        for start, c in r["model_guided_faster_than_device_only"].items():
            noise = r.get("noise", {}).get("spread")
            rows.append(
                {
                    "program": program,
                    "space": r["space"],
                    "start": start,
                    "seeds": len(r["seeds"]),
                    "device only": r["strategies"]["device_only"][start]["speedup_vs_default"],
                    "model + device": r["strategies"]["model_guided"][start]["speedup_vs_default"],
                    "model vs device-only %": 100 * c["mean"],
                    "min %": 100 * c["min"],
                    "max %": 100 * c["max"],
                    "paper %": 100 * PAPER_MODEL_VS_DEVICE[start] if r["space"] == "program" else math.nan,
                    "noise floor %": math.nan if noise is None else 100 * noise,
                }
            )
    return pd.DataFrame(rows)


def compare_predicted_and_measured(
    tunable: Tunable, configs: Sequence[Mapping[str, Any]], cost_model: CostModel, repeats: int = 5
) -> Any:
    """Each configuration predicted (`ProgramPredictor`) and measured (`DeviceEvaluator`): a
    pandas table with the knobs, ``predicted ms``, ``measured ms``, ``compile s``, ``device s``
    and ``measured / first`` (the first configuration is the reference, usually the default). Each
    configuration is compiled once, for both."""
    predictor, device = ProgramPredictor(tunable, cost_model), DeviceEvaluator(tunable, repeats=repeats)
    rows = []
    for config in configs:
        candidate = compile_candidate(tunable, config)
        p, m = predictor.predict(candidate), device.measure(candidate)
        rows.append(
            {
                **config,
                "predicted ms": p.cost_ns / 1e6,
                "measured ms": m.cost_ns / 1e6,
                "compile s": m.compile_seconds,
                "device s": m.seconds,
            }
        )
    table = pd.DataFrame(rows)
    table["measured / first"] = table["measured ms"] / table["measured ms"].iloc[0]
    return table
