"""Mosaic's verdict: which candidate block configurations a TPU's compiler accepts.

For a tile problem (family, shape, dtype), `verdicts` lists every candidate configuration
(`tpucost.experiments.tiles.candidate_configs`: divisible, (8, 128)-aligned, before any VMEM rule) with

* ``legal``: the project's rules for the TPU backend (`tpucost.experiments.tiles.config_problems` with
  ``backend="tpu"``), decided without a compiler;
* ``compiles``: Mosaic's verdict, from compiling the Pallas kernel (``lowering="pallas"``,
  ``interpret=False``) for a TPU chip on the target's described device (libtpu's deviceless
  compiler: no TPU needed, nothing runs), with row-major operands (`compile_row_major` says why);
* ``error``: the first line of Mosaic's refusal (None when it compiles).

`agreement` counts how often the two agree and, above all, how many configurations the rules call
legal that Mosaic refuses (the rules must never do that). Compiling a small kernel takes well
under a second (about 0.06 s on a 2-core host after a first compile of about 0.4 s: one described
chip serves every compile of a process).

`agreement_sweep` (``python -m lab tiles-legal --sweep N --seed S``) measures the agreement on
random problems of every family (`sweep_problems`: dims that are no multiple of 128 or of 8
included), drawn from a stream of their own; `scoped_vmem_bytes` reads the scoped VMEM a compiled
kernel uses, the figure the families' temporaries were fitted to.

Learners without libtpu read the verdicts of notebook 04's problems from a bundled file
(`load_bundled`, written by `write_bundled`: ``python -m lab tiles-legal --write-bundled``).
"""

from __future__ import annotations

import datetime
import json
import math
import os
import re
import time
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import jax
import numpy as np
from jax.experimental.layout import Format, Layout

from tpucost.experiments import compiler
from tpucost.experiments.tiles import legality, problems
from tpucost.experiments.tiles.families import TILE_FAMILIES, family

__all__ = [
    "DEFAULT_TARGET",
    "BUNDLED_PROBLEMS",
    "compile_row_major",
    "scoped_vmem_bytes",
    "mosaic_verdict",
    "verdicts",
    "agreement",
    "problem_report",
    "SWEEP_STREAM",
    "sweep_problems",
    "agreement_sweep",
    "format_sweep",
    "bundled_path",
    "write_bundled",
    "load_bundled",
    "bundled_problem",
    "problem_verdicts",
]

#: The target `verdicts` compiles for: Colab's TPU chip.
DEFAULT_TARGET = "tpu-v5e"

#: The problems whose verdicts ship in the bundled file: the ones notebook 04 shows (its section 1
#: matmul, section 6's new matmul and its smoke-test shape, exercise 1's attention), plus a softmax
#: and a bfloat16 attention whose largest blocks do not fit VMEM.
BUNDLED_PROBLEMS: tuple[tuple[str, tuple[int, ...], str], ...] = (
    ("matmul", (256, 384, 512), "float32"),
    ("matmul", (384, 640, 896), "float32"),
    ("matmul", (128, 256, 384), "float32"),
    ("attention", (4, 512, 64), "float32"),
    ("softmax", (1024, 2048), "float32"),
    ("attention", (2, 2048, 128), "bfloat16"),
)


def _first_line(err: BaseException) -> str:
    """The first informative line of a compiler error: its first line, plus the sentence that
    says by how much VMEM ran out when it has one (the first line alone is a bare error code)."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    first = lines[0] if lines else type(err).__name__
    if first.endswith(":") and len(lines) > 1:
        detail = next((ln for ln in lines[1:] if "Scoped allocation" in ln or "Ran out" in ln), lines[1])
        at = detail.find("Scoped allocation")
        first = f"{first} {detail[at:] if at >= 0 else detail}"
    first = f"{type(err).__name__}: {first}"
    return first if len(first) <= 300 else first[:297] + "..."


def compile_row_major(
    family_name: str,
    shape: Sequence[int],
    dtype: Any,
    config: Mapping[str, int],
    target: str = DEFAULT_TARGET,
    vmem_limit_bytes: int | None = None,
) -> Any:
    """One configuration's kernel compiled (never run) for ``target`` with its arguments and
    result in row-major layouts (`jax.experimental.layout.Format`): the layouts the Pallas call
    asks of its operands, which its producers inside a program are given. Returns jax's compiled
    object; raises jax's error when the compiler refuses, `tpucost.experiments.compiler.TpuCompilerMissing`
    without libtpu. ``vmem_limit_bytes``: Mosaic's scoped VMEM limit (default: the chip's, 16 MiB
    on a v5e), for measuring what a kernel needs.

    Why not XLA's default layouts: a standalone ``jax.jit`` lets XLA choose the entry layouts, and
    for a dim that is no multiple of the tile it picks the less padded one (``f32[1744,2328]``
    becomes ``{0,1:T(8,128)}``, ``bf16[2,1300,128]`` ``{2,0,1:T(2,128)}``), then relayouts with a
    ``copy`` that memory-space assignment places in VMEM (``S(1)``) when it fits. The kernel then
    reads whole operands already in VMEM, outside its 16 MiB of scoped VMEM, and compiles with
    blocks far over it: a verdict on XLA's layout preference for the array, not on the blocks."""
    cfg = dict(config)
    fn, specs = problems.kernel(
        family_name,
        shape,
        dtype,
        cfg,
        "tpu",
        lowering="pallas",
        check=False,
        vmem_limit_bytes=vmem_limit_bytes,
    )
    placed = compiler.target_sharding(target)

    def row_major(rank: int) -> Any:
        return Format(Layout(tuple(range(rank))), placed)

    args = [jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=row_major(len(s.shape))) for s in specs]
    out = jax.eval_shape(fn, *specs)
    return jax.jit(fn, out_shardings=row_major(len(out.shape))).lower(*args).compile()


def scoped_vmem_bytes(compiled: Any) -> int | None:
    """The scoped VMEM the compiled Pallas kernel uses (``used_scoped_memory_configs`` of its
    ``tpu_custom_call`` in the optimized module), or None when the module does not say."""
    for line in compiled.as_text().splitlines():
        if "tpu_custom_call" in line:
            sizes = re.findall(
                r'"used_scoped_memory_configs":\[\{"memory_space":"1","offset":"\d+","size":"(\d+)"', line
            )
            if sizes:
                return int(sizes[0])
    return None


def mosaic_verdict(
    family_name: str,
    shape: Sequence[int],
    dtype: Any,
    config: Mapping[str, int],
    target: str = DEFAULT_TARGET,
) -> tuple[bool, str | None]:
    """``(compiles, first line of the error or None)``: Mosaic's verdict on one configuration,
    compiled (never run) for ``target`` with row-major operands (`compile_row_major`). Raises
    `tpucost.experiments.compiler.TpuCompilerMissing` without libtpu, ValueError for a bad family, shape,
    dtype or a config that does not divide."""
    legality.plan(family_name, shape, dtype, config)  # ValueError before any compiling
    try:
        compile_row_major(family_name, shape, dtype, config, target)
    except compiler.TpuCompilerMissing:
        raise
    except Exception as err:  # noqa: BLE001 - any refusal (lowering or compiling) is the verdict
        return False, _first_line(err)
    return True, None


def _verdict_row(
    family_name: str, shape: Sequence[int], dtype: Any, config: Mapping[str, int], target: str
) -> dict[str, Any]:
    """One row of `verdicts`: ``config``, ``legal``, ``compiles``, ``error``, ``compile_s``."""
    legal = not legality.config_problems(family_name, shape, dtype, config, backend="tpu")
    start = time.perf_counter()
    compiles, error = mosaic_verdict(family_name, shape, dtype, config, target)
    return {
        "config": dict(config),
        "legal": legal,
        "compiles": compiles,
        "error": error,
        "compile_s": round(time.perf_counter() - start, 4),
    }


def verdicts(
    family_name: str, shape: Sequence[int], dtype: Any = "float32", target: str = DEFAULT_TARGET
) -> list[dict[str, Any]]:
    """Every candidate configuration of a problem with ``config``, ``legal`` (the TPU backend's
    rules), ``compiles`` (Mosaic's verdict for ``target``), ``error`` and ``compile_s``."""
    fam = family(family_name)
    shape = legality.check_shape(fam.name, shape)
    compiler.require_tpu_compiler("Mosaic's verdict")
    return [
        _verdict_row(fam.name, shape, dtype, c, target)
        for c in legality.candidate_configs(fam.name, shape, dtype)
    ]


def agreement(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How the rules' ``legal`` and Mosaic's ``compiles`` agree over ``rows`` (of any number of
    problems): ``candidates``, ``legal``, ``compiles``, ``agree``, ``agreement`` (a fraction, None
    for no rows), ``false_legal`` (legal but refused: must be 0) and ``false_illegal`` (refused
    by the rules, compiled by Mosaic: the rules' caution)."""
    n = len(rows)
    agree = sum(bool(r["legal"]) == bool(r["compiles"]) for r in rows)
    return {
        "candidates": n,
        "legal": sum(bool(r["legal"]) for r in rows),
        "compiles": sum(bool(r["compiles"]) for r in rows),
        "agree": agree,
        "agreement": agree / n if n else None,
        "false_legal": sum(bool(r["legal"]) and not r["compiles"] for r in rows),
        "false_illegal": sum(not r["legal"] and bool(r["compiles"]) for r in rows),
    }


def problem_report(
    family_name: str, shape: Sequence[int], dtype: Any = "float32", target: str = DEFAULT_TARGET
) -> dict[str, Any]:
    """`verdicts` of one problem with its `agreement`, the compiler's versions and the seconds
    the compiles took: what ``python -m lab tiles-legal`` prints."""
    start = time.perf_counter()
    rows = verdicts(family_name, shape, dtype, target)
    return {
        "family": family_name,
        "shape": [int(d) for d in shape],
        "dtype": str(dtype),
        "target": target,
        "compiler": compiler.compiler_versions(target),
        "seconds": round(time.perf_counter() - start, 2),
        "agreement": agreement(rows),
        "candidates": rows,
    }


# ---------------------------------------------------------------------------------------------
# The agreement sweep: random problems the rules were not written for
# ---------------------------------------------------------------------------------------------

#: Mixed into every sweep's seed, so that its problems are drawn from a stream of their own (not
#: the notebook's, the bundled file's or `tpucost.experiments.tiles.sample_shapes`' draws).
SWEEP_STREAM = 0x5EE9

#: The kinds of dim a sweep draws: a multiple of 128, a multiple of 8 that is no multiple of 128,
#: and (``odd_dims``) a dim that is no multiple of 8.
DIM_KINDS = ("lane", "sublane", "odd")

#: The largest operand or output a sweep's problem may have (bytes at 4 bytes an element): big
#: enough that full-dim blocks pass the 16 MiB of scoped VMEM, small enough to compile quickly.
SWEEP_MAX_ARRAY_BYTES = 48 * 2**20


def _sweep_dim(rng: Any, lo: int, hi: int, kinds: Sequence[str]) -> int:
    """One dim in about ``[lo, hi]``, log-uniform, of a kind drawn from ``kinds``."""
    kind = kinds[int(rng.integers(len(kinds)))]
    size = int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))
    if kind == "lane":
        return max(128, 128 * round(size / 128))
    if kind == "sublane":
        size = max(8, 8 * round(size / 8))
        return size + 8 if size % 128 == 0 else size
    size = max(1, size)
    return size + 1 if size % 8 == 0 else size


def _sweep_shape(name: str, rng: Any, kinds: Sequence[str]) -> tuple[int, ...]:
    """One random problem shape of family ``name`` (sizes chosen so that the largest blocks
    cross the VMEM budget)."""
    if name == "matmul":
        return tuple(_sweep_dim(rng, 8, 4096, kinds) for _ in range(3))
    if name == "bmm":
        return (int(rng.integers(1, 9)),) + tuple(_sweep_dim(rng, 8, 2048, kinds) for _ in range(3))
    if name in ("softmax", "layernorm", "reduce"):
        return (_sweep_dim(rng, 8, 8192, kinds), _sweep_dim(rng, 8, 8192, kinds))
    if name == "attention":
        return (int(rng.integers(1, 5)), _sweep_dim(rng, 8, 4096, kinds), _sweep_dim(rng, 8, 256, kinds))
    if name == "conv":
        hw = int(rng.integers(3, 33))
        return (
            int(rng.integers(1, 5)),
            hw,
            hw,
            _sweep_dim(rng, 1, 128, kinds),
            _sweep_dim(rng, 8, 512, kinds),
        )
    raise ValueError(f"no sweep shapes for tile family {name!r}")


def sweep_problems(
    n_problems: int,
    seed: int = 0,
    families: Sequence[str] | None = None,
    dtypes: Sequence[str] = legality.SUPPORTED_DTYPES,
    odd_dims: bool = True,
) -> list[tuple[str, tuple[int, ...], str]]:
    """``n_problems`` random ``(family, shape, dtype)``, deterministic for ``seed``: families in
    turn, a dtype drawn per problem, each dim a multiple of 128, a multiple of 8 (not of 128) or,
    with ``odd_dims``, no multiple of 8 (`DIM_KINDS`), log-uniform in a family's range; no array
    over `SWEEP_MAX_ARRAY_BYTES`. Drawn from a stream of their own (`SWEEP_STREAM`)."""
    names = [family(f).name for f in (families or TILE_FAMILIES)]
    dts = [legality.dtype_name(d) for d in dtypes]
    if n_problems < 0 or not names or not dts:
        raise ValueError("a sweep needs n_problems >= 0, a family and a dtype")
    kinds = DIM_KINDS if odd_dims else DIM_KINDS[:2]
    rng = np.random.default_rng([SWEEP_STREAM, int(seed)])
    out: list[tuple[str, tuple[int, ...], str]] = []
    while len(out) < n_problems:
        name = names[len(out) % len(names)]
        dtype = dts[int(rng.integers(len(dts)))]
        shape = _sweep_shape(name, rng, kinds)
        fam = family(name)
        if max(math.prod(s) for s in fam.arg_shapes(shape)) * 4 > SWEEP_MAX_ARRAY_BYTES:
            continue
        if (name, shape, dtype) not in out:
            out.append((name, shape, dtype))
    return out


def agreement_sweep(
    n_problems: int,
    seed: int = 0,
    families: Sequence[str] | None = None,
    dtypes: Sequence[str] = legality.SUPPORTED_DTYPES,
    odd_dims: bool = True,
    per_problem: int = 4,
    target: str = DEFAULT_TARGET,
) -> dict[str, Any]:
    """The rules against Mosaic on random problems (`sweep_problems`): up to ``per_problem``
    candidates of each (drawn at random, the same ``seed``), compiled for ``target``.

    Returns ``{"seed", "problems", "target", "compiler", "seconds", "agreement" (of every row:
    `agreement`), "misses" (the rows where the rules and Mosaic disagree, each with its family,
    shape and dtype)}``: what ``python -m lab tiles-legal --sweep N --seed S`` prints."""
    if per_problem < 1:
        raise ValueError(f"per_problem must be >= 1, got {per_problem}")
    compiler.require_tpu_compiler("Mosaic's verdict")
    start = time.perf_counter()
    pick = np.random.default_rng([SWEEP_STREAM, int(seed), 1])
    rows, misses = [], []
    drawn = sweep_problems(n_problems, seed, families, dtypes, odd_dims)
    for name, shape, dtype in drawn:
        candidates = legality.candidate_configs(name, shape, dtype)
        if len(candidates) > per_problem:
            chosen = sorted(pick.choice(len(candidates), per_problem, replace=False))
            candidates = [candidates[i] for i in chosen]
        for config in candidates:
            row = _verdict_row(name, shape, dtype, config, target)
            rows.append(row)
            if row["legal"] != row["compiles"]:
                misses.append({"family": name, "shape": list(shape), "dtype": dtype, **row})
    return {
        "seed": int(seed),
        "problems": len(drawn),
        "families": sorted({f for f, _, _ in drawn}),
        "odd_dims": bool(odd_dims),
        "per_problem": per_problem,
        "target": target,
        "compiler": compiler.compiler_versions(target),
        "seconds": round(time.perf_counter() - start, 1),
        "agreement": agreement(rows),
        "misses": misses,
    }


def format_sweep(report: Mapping[str, Any]) -> str:
    """`agreement_sweep`'s report as the lines the CLI prints."""
    a = report["agreement"]
    pct = 100 * (a["agreement"] or 0.0)
    lines = [
        f"sweep seed {report['seed']}: {report['problems']} random problems "
        f"({'odd dims included' if report['odd_dims'] else 'dims multiples of 8'}), up to "
        f"{report['per_problem']} candidates each, compiled for {report['target']} "
        f"(libtpu {report['compiler']['libtpu']}, jax {report['compiler']['jax']}) in {report['seconds']} s",
        f"candidates: {a['candidates']}",
        f"agree: {a['agree']} ({pct:.1f}%)",
        f"legal but Mosaic refuses: {a['false_legal']}",
        f"refused by rules, compiles: {a['false_illegal']}",
    ]
    for m in report["misses"]:
        kind = "legal, REFUSED" if m["legal"] else "refused by rules, compiles"
        lines.append(
            f"  miss: {m['family']} {tuple(m['shape'])} {m['dtype']} {json.dumps(m['config'])}: {kind}"
            + (f" ({m['error']})" if m["error"] else "")
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The bundled verdicts
# ---------------------------------------------------------------------------------------------


def bundled_path(target: str = DEFAULT_TARGET) -> Path:
    """Where the bundled verdicts of ``target`` live: ``tpucost/bundled/tpu/tile_legality_<chip>.json``."""
    chip = target.removeprefix("tpu-")
    return Path(str(resources.files("tpucost") / "bundled" / "tpu" / f"tile_legality_{chip}.json"))


def write_bundled(
    path: str | os.PathLike | None = None,
    problems_: Sequence[tuple[str, Sequence[int], str]] = BUNDLED_PROBLEMS,
    target: str = DEFAULT_TARGET,
    command: str = "python -m lab tiles-legal --write-bundled",
) -> dict[str, Any]:
    """Compile every candidate of ``problems_`` for ``target`` and write the verdicts as JSON with
    their provenance (command, versions, date); returns what was written."""
    out = Path(path) if path is not None else bundled_path(target)
    reports = [problem_report(f, s, d, target) for f, s, d in problems_]
    for report in reports:
        for row in report["candidates"]:
            row.pop("compile_s", None)
        report.pop("seconds", None)
        report.pop("compiler", None)
    data = {
        "provenance": {
            "command": command,
            "target": target,
            "compiler": compiler.compiler_versions(target),
            "date": datetime.date.today().isoformat(),
            "what": "every candidate block configuration (tpucost.experiments.tiles.candidate_configs) of each "
            "problem: legal = the TPU backend's rules, compiles = Mosaic's verdict from a deviceless "
            "compile (tpucost.experiments.tiles.mosaic.verdicts)",
        },
        "agreement": agreement([r for rep in reports for r in rep["candidates"]]),
        "problems": reports,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n")
    return data


def load_bundled(target: str = DEFAULT_TARGET, path: str | os.PathLike | None = None) -> dict[str, Any]:
    """The bundled verdicts of ``target`` (see `write_bundled`); FileNotFoundError naming the
    path when there are none."""
    where = Path(path) if path is not None else bundled_path(target)
    if not where.is_file():
        raise FileNotFoundError(f"no bundled Mosaic verdicts for {target} at {where}")
    return json.loads(where.read_text())


def bundled_problem(
    family_name: str, shape: Sequence[int], dtype: str = "float32", target: str = DEFAULT_TARGET
) -> dict[str, Any]:
    """One problem's report from the bundled verdicts; KeyError listing the bundled problems."""
    data = load_bundled(target)
    for report in data["problems"]:
        if (report["family"], tuple(report["shape"]), report["dtype"]) == (
            family_name,
            tuple(int(d) for d in shape),
            dtype,
        ):
            return {**report, "compiler": data["provenance"]["compiler"]}
    known = ", ".join(f"{r['family']} {tuple(r['shape'])} {r['dtype']}" for r in data["problems"])
    raise KeyError(f"{family_name} {tuple(shape)} {dtype} is not among the bundled verdicts ({known})")


def problem_verdicts(
    family_name: str, shape: Sequence[int], dtype: str = "float32", target: str = DEFAULT_TARGET
) -> tuple[dict[str, Any], str]:
    """``(report, source)``: `problem_report` compiled here when libtpu is installed and this process
    may compile for ``target`` (source ``"compiled here"``), else the bundled verdicts of the problem
    (source ``"bundled"``, with the reason on a TPU runtime of another chip:
    `tpucost.experiments.compiler.why_not_here`)."""
    why_not = compiler.why_not_here(target)
    if compiler.tpu_compiler_available() and why_not is None:
        return problem_report(family_name, shape, dtype, target), "compiled here"
    return bundled_problem(family_name, shape, dtype, target), "bundled" + (
        f" ({why_not})" if why_not else ""
    )
