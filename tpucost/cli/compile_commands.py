"""``compile``: a program compiled for a target (this CPU or a TPU chip, without one), its kernels and
the compiler's estimates (`tpucost.experiments.compiler`, `tpucost.experiments.xla_estimates`)."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from typing import Any

from tpucost.cli.common import emit, fail
from tpucost.experiments import command_tables, compiler, xla_estimates
from tpucost.experiments.autotune.tunable import load_tunable
from tpucost.experiments.programs import corpus
from tpucost.method import backends, hlo

__all__ = ["resolve_program", "cmd_compile", "add_compile_command"]


def resolve_program(spec: str) -> tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]:
    """``(fn, args, compiler_options)`` of PROGRAM: ``example:NAME`` or ``FILE.py:NAME`` (the
    autotuner's ``NAME(config) -> (fn, args)`` at its default configuration: its program space,
    or its tile space when it declares ``NAME.kernels``), or a corpus program id
    (``<family>-<form>-<seed>-<index>``, `tpucost.experiments.programs.corpus`). ValueError in one line otherwise."""
    if not spec.startswith("example:") and ":" not in spec:
        program = corpus.program_from_id(spec)
        return program.fn, tuple(program.args), {}
    tunable = load_tunable(spec, "program")
    if getattr(tunable.fn, "kernels", None):
        tunable = load_tunable(spec, "tile")
    config = tunable.space.default
    fn, args = tunable.build(config)
    return fn, args, tunable.compiler_options(config)


def _result(
    spec: str, estimate: xla_estimates.ProgramEstimate, cost: dict[str, float | None], target: backends.Target
) -> dict:
    return {
        "program": spec,
        "target": estimate.target,
        "compiler": estimate.compiler,
        # the clock that turns xla_estimated_cycles into xla_estimated_ns (None: cycles only)
        "clock_hz": target.clock_hz,
        "clock_source": target.clock_source or "this machine's CPU: no cycle estimates",
        "kernels": estimate.kernels,
        "cost_analysis": cost,
        "totals": {
            k: v
            for k, v in dataclasses.asdict(estimate).items()
            if k not in ("target", "compiler", "kernels")
        },
        "note": "xla_estimated_* and roofline_ns are model outputs (the compiler's and a documented-peak "
        "roofline), not measurements",
    }


def cmd_compile(args: argparse.Namespace) -> int:
    """``compile PROGRAM --target T``: compile (never run) and list kernels with the estimates."""
    try:
        target = backends.target(args.target)
        fn, fn_args, options = resolve_program(args.program)
        program = compiler.compile_for_target(fn, fn_args, target, options if not target.is_tpu else None)
    except compiler.TpuCompilerMissing as err:
        return fail(err)
    except (ValueError, hlo.HloParseError) as err:
        return fail(err)
    except Exception as err:  # the compiler's refusal of the user's program: one line
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        return fail(f"{args.program}: compiling for {args.target} failed: {type(err).__name__}: {first}")
    estimate = xla_estimates.program_estimate(program)
    return emit(
        _result(args.program, estimate, program.cost_analysis, target),
        args.json,
        command_tables.compile_table,
    )


def add_compile_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compile",
        help="compile a program for a target (cpu, tpu-v5e, ...) and list its kernels; never runs it",
        description="Compile a program for a target (never run it) and list its kernels with the compiler's "
        "estimates. Examples: python -m tpucost compile example:mixer --target tpu-v5e; "
        "python -m tpucost compile example:transformer --json; "
        "python -m tpucost compile my_model.py:build --target tpu-v6e (NAME(config) -> (fn, args)); "
        "python -m tpucost compile cnn-forward-0-0 (a corpus program id)",
    )
    p.add_argument(
        "program", help="example:NAME, FILE.py:NAME (NAME(config) -> (fn, args)) or a corpus program id"
    )
    p.add_argument(
        "--target",
        default="cpu",
        help=f"cpu (this machine) or a TPU target: {', '.join(t for t in backends.TARGETS if t != 'cpu')} "
        f"(tpu = {backends.DEFAULT_TPU_TARGET}); TPU targets need the tpu extra",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_compile)
