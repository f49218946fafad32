"""Mosaic's verdict: which candidate block configurations a TPU's compiler accepts.

For a tile problem (family, shape, dtype), `verdicts` lists every candidate configuration
(`tpucost.tiles.candidate_configs`: divisible, (8, 128)-aligned, before any VMEM rule) with

* ``legal``: the project's rules for the TPU backend (`tpucost.tiles.config_problems` with
  ``backend="tpu"``), decided without a compiler;
* ``compiles``: Mosaic's verdict, from compiling the Pallas kernel (``lowering="pallas"``,
  ``interpret=False``) for a TPU chip with `tpucost.compiler.compile_for_target` (libtpu's
  deviceless compiler: no TPU needed, nothing runs);
* ``error``: the first line of Mosaic's refusal (None when it compiles).

`agreement` counts how often the two agree and, above all, how many configurations the rules call
legal that Mosaic refuses (the rules must never do that). Compiling a small kernel takes well
under a second (about 0.06 s on a 2-core host after a first compile of about 0.4 s: one described
chip serves every compile of a process).

Learners without libtpu read the verdicts of notebook 04's problems from a bundled file
(`load_bundled`, written by `write_bundled`: ``python -m tpucost tiles-legal --write-bundled``).
"""

from __future__ import annotations

import datetime
import json
import os
import time
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from tpucost import compiler
from tpucost.tiles import problems
from tpucost.tiles.families import family
from tpucost.tpu_host import tpu_chip_here

__all__ = [
    "DEFAULT_TARGET",
    "BUNDLED_PROBLEMS",
    "mosaic_verdict",
    "verdicts",
    "agreement",
    "problem_report",
    "bundled_path",
    "write_bundled",
    "load_bundled",
    "bundled_problem",
    "problem_verdicts",
    "plot_verdicts",
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


def _allow_shared_libtpu() -> None:
    """On a machine without a TPU chip, let several processes load libtpu at once (its lock file
    guards a chip; a deviceless compile holds none). Without it a second process that compiles
    for a TPU fails with ``ABORTED: Internal error when accessing libtpu multi-process lockfile``."""
    if not tpu_chip_here():
        os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")


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


def mosaic_verdict(
    family_name: str,
    shape: Sequence[int],
    dtype: Any,
    config: Mapping[str, int],
    target: str = DEFAULT_TARGET,
) -> tuple[bool, str | None]:
    """``(compiles, first line of the error or None)``: Mosaic's verdict on one configuration,
    compiled (never run) for ``target``. Raises `tpucost.compiler.TpuCompilerMissing` without
    libtpu, ValueError for a bad family, shape, dtype or a config that does not divide."""
    _allow_shared_libtpu()
    fn, specs = problems.kernel(family_name, shape, dtype, config, "tpu", lowering="pallas", check=False)
    try:
        compiler.compile_for_target(fn, specs, target)
    except compiler.TpuCompilerMissing:
        raise
    except Exception as err:  # noqa: BLE001 - any refusal (lowering or compiling) is the verdict
        return False, _first_line(err)
    return True, None


def verdicts(
    family_name: str, shape: Sequence[int], dtype: Any = "float32", target: str = DEFAULT_TARGET
) -> list[dict[str, Any]]:
    """Every candidate configuration of a problem with ``config``, ``legal`` (the TPU backend's
    rules), ``compiles`` (Mosaic's verdict for ``target``), ``error`` and ``compile_s``."""
    fam = family(family_name)
    shape = problems.check_shape(fam.name, shape)
    if not compiler.tpu_compiler_available():
        raise compiler.TpuCompilerMissing(f"Mosaic's verdict needs the TPU compiler: {compiler.INSTALL_HINT}")
    rows = []
    for config in problems.candidate_configs(fam.name, shape, dtype):
        legal = not problems.config_problems(fam.name, shape, dtype, config, backend="tpu")
        start = time.perf_counter()
        compiles, error = mosaic_verdict(fam.name, shape, dtype, config, target)
        rows.append(
            {
                "config": config,
                "legal": legal,
                "compiles": compiles,
                "error": error,
                "compile_s": round(time.perf_counter() - start, 4),
            }
        )
    return rows


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
    the compiles took: what ``python -m tpucost tiles-legal`` prints."""
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
    command: str = "python -m tpucost tiles-legal --write-bundled",
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
            "what": "every candidate block configuration (tpucost.tiles.candidate_configs) of each "
            "problem: legal = the TPU backend's rules, compiles = Mosaic's verdict from a deviceless "
            "compile (tpucost.tiles.mosaic.verdicts)",
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
    """``(report, source)``: `problem_report` compiled here when libtpu is installed (source
    ``"compiled here"``), else the bundled verdicts of the problem (source ``"bundled"``)."""
    if compiler.tpu_compiler_available():
        return problem_report(family_name, shape, dtype, target), "compiled here"
    return bundled_problem(family_name, shape, dtype, target), "bundled"


def plot_verdicts(rows: Sequence[Mapping[str, Any]], x: str, y: str, ax: Any = None, title: str = "") -> Any:
    """A grid of configurations over block keys ``x`` and ``y`` (each cell: the configurations
    with those two sizes), coloured by verdict: green where the rules call it legal and Mosaic
    compiles it, red where Mosaic refuses and the rules agree, and orange or purple where they
    disagree (legal but refused / illegal but compiled). Returns the matplotlib axes."""
    import matplotlib.pyplot as plt  # only for the picture
    from matplotlib.colors import ListedColormap

    xs = sorted({int(r["config"][x]) for r in rows})
    ys = sorted({int(r["config"][y]) for r in rows})
    kinds = ("legal, compiles", "illegal, refused", "legal, REFUSED", "illegal, compiles")
    grid = [[float("nan")] * len(xs) for _ in ys]
    for r in rows:
        kind = (
            (0 if r["compiles"] else 1)
            if bool(r["legal"]) == bool(r["compiles"])
            else (2 if r["legal"] else 3)
        )
        i, j = ys.index(int(r["config"][y])), xs.index(int(r["config"][x]))
        old = grid[i][j]
        grid[i][j] = kind if old != old or kind >= 2 else min(old, kind)  # a disagreement shows
    if ax is None:
        _, ax = plt.subplots(figsize=(1.0 + 0.55 * len(xs), 0.8 + 0.45 * len(ys)))
    cmap = ListedColormap(["#4caf50", "#e57373", "#ff9800", "#7e57c2"])
    ax.imshow(grid, cmap=cmap, vmin=0, vmax=3, origin="lower", aspect="auto")
    ax.set_xticks(range(len(xs)), [str(v) for v in xs])
    ax.set_yticks(range(len(ys)), [str(v) for v in ys])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title or "the TPU rules' verdict beside Mosaic's")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in cmap.colors]
    ax.legend(handles, kinds, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    return ax
