"""Reading autotuning reports: the bundled experiments, the noise floor, tables beside the paper's.

Every report records the backend that measured it (``"backend"``, also in its ``"fresh_process"``
and ``"noise"`` records, and in `measurement_noise`'s result): the tables and findings here refuse
(`tpucost.method.device.BackendMismatch`, one line) to set figures of different backends side by side or
against each other; a record without a backend (an older report) is taken as its report's.

The model guard (`tpucost.method.autotune.guard`): a report's model-guided seeds say when the search
stopped trusting the model (``fell_back_at``); `report_table`, `arms_comparison_table` and
`findings` show it, and read older reports, written before the guard, as unguarded (NaN, no line).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from tpucost.experiments.autotune.evaluators import DeviceEvaluator, ProgramPredictor, compile_candidate
from tpucost.experiments.autotune.remeasure import remeasure_in_fresh_process, separate_processes
from tpucost.experiments.autotune.tunable import Tunable, load_tunable
from tpucost.files import bundled_dir
from tpucost.method import device
from tpucost.method.costmodel import CostModel

__all__ = [
    "BUNDLED_NAME",
    "report_backend",
    "COMPARISONS",
    "PAPER_MODEL_VS_DEVICE",
    "bundled_reports",
    "measurement_noise",
    "report_table",
    "arms_comparison_table",
    "findings",
    "noise_floor",
    "fell_back_at",
    "compare_predicted_and_measured",
]


#: The folder of the autotuning experiments docs/autotuning.md shows under `tpucost.files.bundled_dir()`: one
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


def report_backend(report: Mapping[str, Any], name: str = "the report") -> str | None:
    """The backend that measured ``report`` (None: not recorded), after checking that its
    re-measurement and noise floor were measured on it too (`tpucost.method.device.BackendMismatch`)."""
    return device.same_backend(
        f"{name} ({report.get('program', 'unnamed')})",
        {
            "its searches": report.get("backend"),
            "its re-measurement": report.get("fresh_process", {}).get("backend"),
            "its noise floor": report.get("noise", {}).get("backend"),
        },
    )


def _one_backend(reports: Mapping[str, Mapping[str, Any]], what: str) -> str | None:
    """The backend of all ``reports`` (each checked by `report_backend`), or BackendMismatch."""
    return device.same_backend(what, {str(name): report_backend(r) for name, r in reports.items()})


def measurement_noise(
    spec: str,
    space: str = "program",
    processes: int = 3,
    rounds: int = 10,
    config: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The noise floor of a reported runtime: ``config`` (default: the default configuration)
    re-measured exactly as `autotune` reports it (`remeasure_in_fresh_process`, ``rounds`` rounds)
    in ``processes`` separate fresh processes on XLA:CPU; on a TPU or GPU ``processes`` times in
    this process (one process holds the device; ``"separate_processes": False``). ``spread`` =
    slowest / fastest - 1: speedups closer to 1 than that cannot be told from noise. ``backend``:
    the one that measured them all (re-measurements on different backends are refused)."""
    if processes < 2:
        raise ValueError(f"processes must be >= 2 to see a spread, got {processes}")
    tunable = load_tunable(spec, space)
    config = dict(config) if config is not None else tunable.space.default
    results = [remeasure_in_fresh_process(tunable.spec, space, [config], rounds) for _ in range(processes)]
    backend = device.same_backend(
        "the noise floor", {f"re-measurement {i + 1}": r["backend"] for i, r in enumerate(results)}
    )
    runtimes = [r["runtime_ns"][0] for r in results]
    return {
        "config": config,
        "runtime_ns": runtimes,
        "processes": processes,
        "rounds": rounds,
        "spread": max(runtimes) / min(runtimes) - 1.0,
        "backend": backend,
        "separate_processes": separate_processes(backend),
    }


def fell_back_at(entry: Mapping[str, Any]) -> list[int | None] | None:
    """Per seed of a report's entry (one arm and start), the candidates measured when the model
    guard made the search fall back to device-only (None: it never did); None when no seed ran
    with a guard (another arm, ``guard=None``, or a report written before the guard)."""
    seeds = entry.get("seeds", [])
    if not any(s.get("guard") for s in seeds):
        return None
    return [s.get("fell_back_at") for s in seeds]


def _fell_back_count(entry: Mapping[str, Any]) -> float:
    """How many seeds fell back (NaN: no guard, `fell_back_at`)."""
    per_seed = fell_back_at(entry)
    return math.nan if per_seed is None else float(sum(n is not None for n in per_seed))


def _fell_back_text(entry: Mapping[str, Any] | None) -> Any:
    """Per seed, where the guarded search fell back ("4, -, 5"; -: never), or NaN without a guard."""
    per_seed = None if entry is None else fell_back_at(entry)
    return math.nan if per_seed is None else ", ".join("-" if n is None else str(n) for n in per_seed)


def report_table(report: Mapping[str, Any], budget: str | None = None) -> Any:
    """One row per budget, arm and start: mean speedup over the default with its range over seeds,
    device and wall seconds, candidates measured and predicted, ``fell back`` (how many seeds the
    model guard sent to device-only; NaN for a search without a guard, `fell_back_at`), and the
    best seed's configuration (pandas). ``budget``: only ``"device_seconds"`` or ``"wall_time"``
    rows (default: both, where the report has both). A report whose parts were measured on
    different backends is refused."""
    report_backend(report)
    sections = [("device_seconds", report)]
    if "wall_time" in report:
        sections.append(("wall_time", report["wall_time"]))
    rows = [
        {
            "budget": name,
            "strategy": strategy,
            "start": start,
            "speedup": e["speedup_vs_default"],
            "min": e["speedup_spread"]["min"],
            "max": e["speedup_spread"]["max"],
            "device s": e["device_seconds"],
            "wall s": e.get("wall_seconds", math.nan),
            "measured": e["candidates_measured"],
            "predicted": e["candidates_predicted"],
            "fell back": _fell_back_count(e),
            "best config (best seed)": e["best_config"],
        }
        for name, section in sections
        if budget in (None, name)
        for strategy, starts in section["strategies"].items()
        for start, e in starts.items()
    ]
    return pd.DataFrame(rows)


#: The columns of `arms_comparison_table` that compare model-guided with another arm: (column, budget,
#: other arm). "vs" columns: how much faster model-guided's configuration was, in %.
COMPARISONS: tuple[tuple[str, str, str], ...] = (
    ("model vs device-only %", "device_seconds", "device_only"),
    ("model vs control %", "device_seconds", "random_order"),
    ("model vs heuristic %", "device_seconds", "heuristic"),
    ("wall: model vs device-only %", "wall_time", "device_only"),
    ("wall: model vs control %", "wall_time", "random_order"),
)


def arms_comparison_table(reports: Mapping[str, Mapping[str, Any]]) -> Any:
    """The paper's comparison with issue 22's arms, one row per program and start (pandas).

    ``device only``, ``model + device``, ``control`` (the model's candidates in random order) and
    ``heuristic``: each arm's mean speedup over the default (over seeds) at equal device seconds.
    The `COMPARISONS` columns: how much faster model + device's configuration was than the other
    arm's, computed per seed (other's runtime / model + device's - 1, both from the fresh process)
    and then averaged over seeds; so not the ratio of two mean speedups. ``wall:`` columns are at
    equal wall time (predicting included). ``min %`` and ``max %``: the device-only comparison's
    range over seeds. ``paper %``: the paper's figure (Section 6.3), for program-space rows only
    (the paper tuned XLA's own program options, not Pallas block shapes: NaN for the tile space).
    ``noise floor %``: where the report has one (``"noise"``), the default's slowest / fastest
    fresh-process runtime - 1 (`measurement_noise`). ``fell back at``: per seed, the candidates
    model + device had measured when its model guard sent it to device-only ("4, -, 5"; -: never;
    `fell_back_at`). A column the report lacks is NaN (``fell back at``: a report without the
    guard). The table's ``attrs["backend"]``: the backend of the reports; reports of different
    backends in one table are refused (`tpucost.method.device.BackendMismatch`): compare each backend's reports on their own."""
    backend = _one_backend(reports, "the comparison table")
    rows = []
    for program, r in reports.items():
        noise = r.get("noise", {}).get("spread")
        sections = {"device_seconds": r, "wall_time": r.get("wall_time", {})}
        for start, c in r["model_guided_faster_than_device_only"].items():
            row = {"program": program, "space": r["space"], "start": start, "seeds": len(r["seeds"])}
            for column, arm in (
                ("device only", "device_only"),
                ("model + device", "model_guided"),
                ("control", "random_order"),
                ("heuristic", "heuristic"),
            ):
                entry = r["strategies"].get(arm, {}).get(start)
                row[column] = math.nan if entry is None else entry["speedup_vs_default"]
            for column, budget, other in COMPARISONS:
                gain = sections[budget].get("model_guided_faster_than", {}).get(other, {}).get(start)
                row[column] = math.nan if gain is None else 100 * gain["mean"]
            row["min %"], row["max %"] = 100 * c["min"], 100 * c["max"]
            row["paper %"] = 100 * PAPER_MODEL_VS_DEVICE[start] if r["space"] == "program" else math.nan
            row["noise floor %"] = math.nan if noise is None else 100 * noise
            row["fell back at"] = _fell_back_text(r["strategies"].get("model_guided", {}).get(start))
            rows.append(row)
    table = pd.DataFrame(rows)
    table.attrs["backend"] = backend
    return table


#: A live noise floor resting on fewer measurements of the default than this is named as such.
FEW_NOISE_MEASUREMENTS = 4


def noise_floor(
    report: Mapping[str, Any], bundled: Mapping[str, Any] | None = None
) -> tuple[float | None, str]:
    """The noise floor a report's differences are judged against, and where it comes from in words:
    the report's own spread, raised to ``bundled``'s (the bundled experiment of the same program
    and backend, measured over more processes) where that is larger. A floor from fewer than
    `FEW_NOISE_MEASUREMENTS` measurements of the default says so."""
    noise = report.get("noise") or {}
    floor, where = noise.get("spread"), "this run's"
    if floor is not None and noise.get("processes", FEW_NOISE_MEASUREMENTS) < FEW_NOISE_MEASUREMENTS:
        where = f"this run's ({noise['processes']} measurements of the default)"
    kept = (bundled or {}).get("noise") or {}
    if kept.get("spread") is not None and report_backend(bundled) == report_backend(report):
        if floor is None or kept["spread"] > floor:
            floor, where = kept["spread"], "the bundled experiment's"
    return floor, where


def findings(report: Mapping[str, Any], bundled: Mapping[str, Any] | None = None) -> list[str]:
    """What a report says, in sentences a reader can check against its numbers: per start, each
    arm's speedup (saying so when model + device and device-only both end below the default),
    what the model's ranking adds (model + device against its random-order control), model +
    device against the heuristic and, at equal wall time, against device-only; where model +
    device ran with the model guard, in how many seeds it fell back to device-only; each difference
    judged against the noise floor where there is one (`noise_floor`: at least ``bundled``'s, the
    bundled experiment of the same program; measured on the report's backend: a noise floor of
    another backend is refused): "better" or "worse by more than" the floor, or "inside" it."""
    report_backend(report)
    noise, floor_source = noise_floor(report, bundled)
    wall = report.get("wall_time", {})

    def gain(section: Mapping[str, Any], other: str, start: str) -> str | None:
        g = section.get("model_guided_faster_than", {}).get(other, {}).get(start)
        if g is None:
            return None
        if noise is None:
            verdict = ""
        elif abs(g["mean"]) <= noise:
            verdict = f", inside {floor_source} {100 * noise:.1f}% noise floor"
        else:
            side = "better" if g["mean"] > 0 else "worse"
            verdict = f", {side} by more than {floor_source} {100 * noise:.1f}% noise floor"
        return f"{100 * g['mean']:+.1f}% (per seed {100 * g['min']:+.1f} .. {100 * g['max']:+.1f}{verdict})"

    lines = []
    for start in report["model_guided_faster_than_device_only"]:
        speedups = {
            arm: starts[start]["speedup_vs_default"]
            for arm, starts in report["strategies"].items()
            if start in starts
        }
        where = start.replace("_", " ")
        line = f"{report['program']}, {where}: " + ", ".join(
            f"{arm.replace('_', ' ')} {v:.3f}x" for arm, v in speedups.items()
        )
        if speedups["model_guided"] < 1 and speedups["device_only"] < 1:
            line += " of the default: model + device and device-only both end below it"
        else:
            line += " of the default"
        lines.append(line)
        guard_line = _guard_finding(report["strategies"].get("model_guided", {}).get(start))
        if guard_line is not None:
            lines.append(guard_line)
        for label, section, other in (
            (
                "what the model's ranking adds (model + device vs its random-order control)",
                report,
                "random_order",
            ),
            ("model + device vs device-only, equal device seconds", report, "device_only"),
            ("model + device vs the heuristic", report, "heuristic"),
            ("model + device vs device-only, equal wall time", wall, "device_only"),
            ("model + device vs the control, equal wall time", wall, "random_order"),
        ):
            text = gain(section, other, start)
            if text is not None:
                lines.append(f"  {label}: {text}")
    return lines


def _guard_finding(entry: Mapping[str, Any] | None) -> str | None:
    """The model guard's line of `findings` for model + device's entry (None: no guard)."""
    per_seed = None if entry is None else fell_back_at(entry)
    if per_seed is None:
        return None
    fell = [(s, n) for s, n in zip(entry["seeds"], per_seed, strict=True) if n is not None]
    if not fell:
        return f"  the model guard kept model + device on the model in all {len(per_seed)} seeds"
    where = "; ".join(
        f"seed {s['seed']} after {n} measured ({s.get('fallback_reason') or 'no reason recorded'})"
        for s, n in fell
    )
    return f"  the model guard sent model + device to device-only in {len(fell)} of {len(per_seed)} seeds: {where}"


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
