"""The TPU compiler's own cost estimates: the closest public trace of the paper's analytical baseline.

The paper compares its learned model with "the analytical performance model of the XLA TPU
compiler". That model is not public, but its output is: the optimized TPU module that
`tpucost.experiments.compiler` gets from libtpu carries, on each top-level instruction the compiler costed, an
``"estimated_cycles"`` entry in its ``backend_config`` (cycles of one TensorCore), and the compiled
program's ``cost_analysis()`` gives whole-program flops, bytes accessed and ``optimal_seconds``.
This module reads them, per kernel (`kernel_rows`), per program (`program_estimate`) and per compile
configuration (`configuration_estimates`), serves them as a predictor of a data set's kernels
(`estimate_predictor`: the paper's analytical row of Table 2, on data measured on a TPU), and puts
beside them a roofline with the chip's documented peak numbers (`tpucost.method.backends.Target`: peak bf16 FLOP/s and HBM bandwidth, no
transcendental peak, no launch overhead) computed by `tpucost.method.analytical` from the same kernels.

Every figure here is a model's output, never a measurement, and it depends on the libtpu that
compiled the program (two libtpu versions gave different estimates for the same program):
`ProgramEstimate.compiler` names it. Where the target's clock is unknown (`Target.clock_hz` is
None), estimates stay in cycles and their ns are None.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tpucost.experiments import compiler, kernel_experiments
from tpucost.experiments.compiler import TargetProgram
from tpucost.experiments.data import kernel as kernel_data
from tpucost.experiments.programs import corpus
from tpucost.files import read_json_object, write_json_atomic
from tpucost.method import analytical, backends, features, kernels, profiles
from tpucost.method.backends import Target
from tpucost.method.kernels import estimated_cycles
from tpucost.method.splits import Split

__all__ = [
    "estimated_cycles",
    "documented_roofline",
    "kernel_rows",
    "ProgramEstimate",
    "program_estimate",
    "configuration_estimates",
    "save_bundled_configuration_estimates",
    "configuration_estimates_or_bundled",
    "estimate_predictor",
    "evaluate_estimates",
    "profile_estimates",
]


def documented_roofline(target: Target) -> analytical.DeviceRoofline | None:
    """A `tpucost.method.analytical.DeviceRoofline` from the chip's documented peaks (bf16 FLOP/s, HBM
    bytes/s; transcendentals not limited, no launch overhead), or None for a target without them."""
    if not target.peak_bf16_flops or not target.hbm_bytes_per_s:
        return None
    return analytical.DeviceRoofline(
        peak_flops=target.peak_bf16_flops,
        peak_transcendentals=math.inf,
        bandwidth_bytes_per_s=target.hbm_bytes_per_s,
        launch_overhead_ns=0.0,
        backend=target.backend,
        device_kind=target.device_kind or "",
    )


def kernel_rows(program: TargetProgram) -> list[dict[str, Any]]:
    """One row per kernel of ``program`` (`tpucost.method.kernels.decompose` order).

    Keys: ``name`` (the instruction's name in the module, what a profiler reports), ``kind``,
    ``opcode``, ``custom_call_target``, ``computation``, ``calls_per_run``, ``async_copy``,
    ``xla_estimated_cycles`` and ``xla_estimated_ns`` (the compiler's estimate of one run: None
    where it gave none; ns None where the target's clock is unknown) and ``roofline_ns`` (the
    documented-peak roofline of `documented_roofline`; None for the CPU target).
    """
    clock = program.target.clock_hz
    roofline = documented_roofline(program.target)
    rows = []
    for kernel in kernels.decompose(program.module):
        cycles = estimated_cycles(kernel)
        cost = analytical.kernel_cost(features.featurize(kernel)) if roofline else None
        rows.append(
            {
                "name": kernel.name,
                "kind": kernel.kind,
                "opcode": kernel.opcode,
                "custom_call_target": kernel.custom_call_target,
                "computation": kernel.computation,
                "calls_per_run": kernel.calls_per_run,
                "async_copy": kernel.is_async_copy,
                "xla_estimated_cycles": cycles,
                "xla_estimated_ns": cycles / clock * 1e9 if cycles is not None and clock else None,
                "roofline_ns": analytical.roofline_ns(cost, roofline) if cost is not None else None,
            }
        )
    return rows


@dataclasses.dataclass(frozen=True)
class ProgramEstimate:
    """A program's estimates, all model outputs (see the module docstring).

    Attributes:
      target: the target's name; compiler: jax, jaxlib and libtpu versions.
      kernels: `kernel_rows`.
      estimated_kernels: kernels with a compiler estimate; kernels: all kernels but async copies.
      xla_estimated_ns: sum over estimated kernels of estimate x calls per run (None without a clock).
      xla_estimated_cycles: the same sum in cycles.
      optimal_ns: ``cost_analysis()``'s ``optimal_seconds`` in ns (None where absent).
      roofline_ns: sum over kernels (not async copies) of the documented-peak roofline x calls per run.
      flops, bytes_accessed: ``cost_analysis()``'s.
    """

    target: str
    compiler: dict[str, str | None]
    kernels: list[dict[str, Any]]
    estimated_kernels: int
    compute_kernels: int
    xla_estimated_cycles: int
    xla_estimated_ns: float | None
    optimal_ns: float | None
    roofline_ns: float | None
    flops: float | None
    bytes_accessed: float | None


def program_estimate(program: TargetProgram) -> ProgramEstimate:
    """Per-kernel rows and per-program sums of ``program``'s estimates. The sums are of the compute
    kernels: the compiler gives an async copy no estimate, and a roofline cannot say how much of a
    copy compute hides (its measured label is the ``copy-done``'s wait, `tpucost.method.kernels`), so
    these sums estimate the compute, not a whole run."""
    rows = kernel_rows(program)
    compute = [r for r in rows if not r["async_copy"]]
    estimated = [r for r in compute if r["xla_estimated_cycles"] is not None]
    cycles = sum(r["xla_estimated_cycles"] * r["calls_per_run"] for r in estimated)
    clock = program.target.clock_hz
    optimal = program.cost_analysis.get("optimal_seconds")
    has_roofline = bool(compute) and all(r["roofline_ns"] is not None for r in compute)
    return ProgramEstimate(
        target=program.target.name,
        compiler=dict(program.compiler),
        kernels=rows,
        estimated_kernels=len(estimated),
        compute_kernels=len(compute),
        xla_estimated_cycles=cycles,
        xla_estimated_ns=cycles / clock * 1e9 if clock else None,
        optimal_ns=optimal * 1e9 if optimal is not None else None,
        roofline_ns=sum(r["roofline_ns"] * r["calls_per_run"] for r in compute) if has_roofline else None,
        flops=program.cost_analysis.get("flops"),
        bytes_accessed=program.cost_analysis.get("bytes_accessed"),
    )


def configuration_estimates(
    fn: Callable[..., Any], args: Sequence[Any], target: Target | str, configurations: Iterable[str]
) -> list[dict[str, Any]]:
    """One row per compile configuration (names of `tpucost.experiments.programs.CONFIGURATIONS` that only set
    compile options): ``configuration``, ``kernels`` (async copies aside), ``estimated_kernels``,
    ``xla_estimated_ns`` (None without a clock), ``xla_estimated_cycles`` and ``optimal_ns`` of
    ``fn(*args)`` compiled for ``target`` under it."""
    rows = []
    for name in configurations:
        options = dict(corpus.CONFIGURATIONS[name].compiler_options)
        estimate = program_estimate(compiler.compile_for_target(fn, args, target, options))
        rows.append(
            {
                "configuration": name,
                "kernels": estimate.compute_kernels,
                "estimated_kernels": estimate.estimated_kernels,
                "xla_estimated_cycles": estimate.xla_estimated_cycles,
                "xla_estimated_ns": estimate.xla_estimated_ns,
                "optimal_ns": estimate.optimal_ns,
            }
        )
    return rows


def _bundled_configurations_path(name: str) -> Path:
    return compiler.bundled_program_path(name).with_suffix(".json")


def save_bundled_configuration_estimates(
    rows: Sequence[dict[str, Any]], name: str, what: str, command: str, path: str | os.PathLike | None = None
) -> Path:
    """Write `configuration_estimates` rows of a TPU target as ``tpucost/bundled/tpu/<name>.json``
    with their provenance (what program, the command, the date, the compiler's versions)."""
    out = Path(path) if path is not None else _bundled_configurations_path(name)
    return write_json_atomic(
        out,
        {
            "program": what,
            "target": backends.DEFAULT_TPU_TARGET,
            "compiler": compiler.compiler_versions(backends.DEFAULT_TPU_TARGET),
            "command": command,
            "date": datetime.date.today().isoformat(),
            "note": "compiled, never run: the TPU compiler's own estimates under each configuration",
            "rows": list(rows),
        },
    )


def configuration_estimates_or_bundled(
    fn: Callable[..., Any], args: Sequence[Any], configurations: Iterable[str], bundled: str
) -> tuple[list[dict[str, Any]], str]:
    """`configuration_estimates` for `tpucost.method.backends.DEFAULT_TPU_TARGET` where libtpu is installed
    and this process may compile for it (`tpucost.experiments.compiler.why_not_here`: not on a TPU
    runtime of another chip), else the bundled rows ``bundled`` (another program's, maybe: the
    sentence returned says which, and why they are read)."""
    why_not = compiler.why_not_here(backends.DEFAULT_TPU_TARGET)
    if compiler.tpu_compiler_available() and why_not is None:
        rows = configuration_estimates(fn, args, backends.DEFAULT_TPU_TARGET, configurations)
        libtpu = compiler.compiler_versions(backends.DEFAULT_TPU_TARGET)["libtpu"]
        return rows, f"compiled here for {backends.DEFAULT_TPU_TARGET} by libtpu {libtpu}"
    saved = read_json_object(_bundled_configurations_path(bundled), "bundled TPU configuration estimates")
    c = saved["compiler"]
    return list(saved["rows"]), (
        f"bundled: {saved['program']}, compiled for {saved['target']} by libtpu {c['libtpu']} (jax {c['jax']}) on "
        f"{saved['date']}; "
        + (why_not if why_not is not None else f"to compile your own: {compiler.INSTALL_HINT}")
    )


def estimate_predictor(
    programs: Iterable[tuple[str, str]], target: Target | str
) -> Callable[[Sequence[features.KernelGraph]], np.ndarray]:
    """The compiler's estimates as a predictor of a data set's kernels (graphs -> ns, float[n]).

    Compiles each ``(corpus program id, configuration)`` for ``target`` and keeps the estimate (ns)
    of each kernel under its `tpucost.experiments.data.kernel.kernel_hash` with the target's backend and device
    kind, the hash a collection on that chip gives it. A graph whose hash is not among them (a
    kernel the compiler gave no estimate, or one measured on another device) is predicted NaN,
    which `tpucost.method.metrics.runtime_metrics` drops and counts (``n_dropped``). A target without a
    known clock predicts NaN everywhere.
    """
    target = backends.target(target)
    backend, kind = target.backend, target.device_kind or ""
    estimates: dict[str, float] = {}
    for program_id, configuration in sorted(set(programs)):
        program = corpus.program_from_id(program_id)
        fn, options = program.configured(configuration)
        compiled = compiler.compile_for_target(fn, program.args, target, options)
        for kernel, row in zip(kernels.decompose(compiled.module), kernel_rows(compiled), strict=True):
            if row["xla_estimated_ns"] is not None:
                estimates[kernel_data.kernel_hash(features.featurize(kernel), backend, kind)] = row[
                    "xla_estimated_ns"
                ]

    def predict(graphs: Sequence[features.KernelGraph]) -> np.ndarray:
        hashes = (kernel_data.kernel_hash(g, backend, kind) for g in graphs)
        return np.array([estimates.get(h, np.nan) for h in hashes], dtype=np.float64)

    return predict


def evaluate_estimates(ds: kernel_data.KernelDataset, split: Split) -> dict[str, Any]:
    """Table 2's analytical row on a TPU: the compiler's estimates scored like a model
    (`tpucost.experiments.kernel_experiments.evaluate_split`) on the test programs of ``split``, each compiled again
    for the chip the data set was measured on, under the configurations it was measured under.

    Raises ValueError, saying why, when ``ds`` was not measured on one TPU chip that `TARGETS`
    knows: the estimates predict a TPU's kernels, and another device's labels (the bundled data
    set is XLA:CPU's) hold none of them.
    """
    measured_on = sorted(set(ds.table.columns["backend"].astype(str)))
    kinds = sorted(set(ds.table.columns["device_kind"].astype(str)))
    target = backends.tpu_target(kinds[0]) if measured_on == ["tpu"] and len(kinds) == 1 else None
    if target is None:
        devices = ", ".join(measured_on) + ("" if kinds == measured_on else f" ({', '.join(kinds)})")
        raise ValueError(
            f"this data set was measured on {devices}: the TPU compiler's "
            "estimates predict a TPU's kernels, so their row needs labels measured on a TPU of a known kind "
            "(notebook 02 on a TPU runtime)"
        )
    tests = np.isin(ds.source_program_id, split.test_ids)
    pairs = zip(ds.source_program_id[tests].tolist(), ds.source_configuration[tests].tolist(), strict=True)
    return kernel_experiments.evaluate_split(ds, split, estimate_predictor(pairs, target))


#: Where `profile_estimates`' measurements come from (tpucost/bundled/tpu_ground_truth/README.md).
V6E_PROFILE_SOURCE = "a real TPU v6e, profiled 2025-03-11 (openxla/xprof test data, Apache-2.0)"


def profile_estimates(report: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The TPU compiler's estimates beside a real chip's measurements: one row per kernel of a
    profile (`tpucost.method.profiles.profile_report`; default: the shipped TPU v6e profile) that
    carries both. Row: ``module``, ``kernel``, ``estimated_cycles``, ``measured_ns``,
    ``implied_clock_hz`` (the clock at which the estimate would equal the measurement) and, per
    clock the chip's documented numbers allow (`Target.clock_candidates_hz`), the estimate in ns
    under that clock (``estimated_ns_at``). Few points, real ones: ``device`` and ``source`` say whose."""
    report = report if report is not None else profiles.profile_report(profiles.bundled_v6e_profile())
    target = backends.tpu_target(report["device"])
    candidates = target.clock_candidates_hz if target else ()
    rows = []
    for module in report["modules"]:
        for k in module["kernels"]:
            cycles, measured = k["xla_estimated_cycles"], k["mean_ns"]
            if cycles is None or not measured:
                continue
            rows.append(
                {
                    "module": module["module"],
                    "kernel": k["name"],
                    "estimated_cycles": cycles,
                    "measured_ns": measured,
                    "implied_clock_hz": cycles / measured * 1e9,
                    "estimated_ns_at": {why: cycles / hz * 1e9 for hz, why in candidates},
                    "device": report["device"],
                    "source": V6E_PROFILE_SOURCE
                    if report["profile"].endswith("tpu_inference_2.xplane.pb")
                    else report["profile"],
                }
            )
    return rows
