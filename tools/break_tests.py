"""Re-run the record that each reworked test fails when what it checks is broken (issue 52).

For each entry of `BREAKS`: the test is run with pytest as it is (it must pass), then under its
named break, a pytest plugin of tools/breaks/ that monkeypatches the code under test for that one
process (it must fail: a test failure, not an error). Nothing on disk changes. Writes the record,
with the command, the date, the commit and each test's two results and the failing assertion, to
docs/results/failing_tests.txt.

    .venv/bin/python tools/break_tests.py                 # every break: the record
    .venv/bin/python tools/break_tests.py --only NAME --out PATH   # one break (the quick test)

Exit status 0 when every test passes unbroken and fails under its break, 1 otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "docs" / "results" / "failing_tests.txt"
BREAKS_DIR = ROOT / "tools" / "breaks"


@dataclasses.dataclass(frozen=True)
class Break:
    """A named break (the module tools/breaks/NAME.py) and the test it must make fail."""

    name: str
    test: str  # a pytest node id, relative to the repository root
    checks: str  # the independent value the test checks


BREAKS: tuple[Break, ...] = (
    Break(
        "calibration_in_sample",
        "tests/test_calibration.py::test_cross_fitting_is_by_family",
        "median APE after correction by hand: 50% left out by family, the in-sample 30.6% by program halves",
    ),
    Break(
        "calibration_split_seed",
        "tests/test_calibration.py::test_the_bundled_models_training_kernels_are_known",
        "the checkpoints' evaluation.json: training / other kernel counts, the hard split's test families",
    ),
    Break(
        "structure_hash_counts_shapes",
        "tests/test_costmodel.py::test_evaluate_split_counts_the_structure_novel_rows_of_hand_built_graphs",
        "hand-built graphs: b is a training kernel at another shape (not novel), c and e new graphs",
    ),
    Break(
        "structure_hash_counts_shapes",
        "lab/tests/test_new_families.py::test_every_row_of_the_new_programs_is_scored_in_each_column",
        "hand-built new kernels of known novelty (x1 reshaped training kernel, x3 and x4 longer chains)",
    ),
    Break(
        "structure_hash_counts_shapes",
        "tests/test_costmodel.py::test_structure_hash_ignores_shapes_and_structure_novel_needs_a_new_graph",
        "one HLO fusion at f32, bf16, s32 and ranks 1-3: the same structure hash (the stated choice)",
    ),
    Break(
        "structure_hash_ignores_edges",
        "tests/test_costmodel.py::test_structure_hash_ignores_shapes_and_structure_novel_needs_a_new_graph",
        "the same fusion with one edge moved: another structure hash",
    ),
    Break(
        "structure_novel_is_unseen",
        "tests/test_notebook03.py::test_table_2_is_shown_by_novelty_with_the_constant_baseline",
        "notebook 03's Table 2 and structure-novel cells executed on hand-built rows: counts, MAPEs, sign tests",
    ),
    Break(
        "labels_inflated",
        "tests/test_measure.py::test_conv_labels_add_up_to_the_run",
        "summed labels of two disjoint kernels cannot exceed the run's span (ratio <= 1.01)",
    ),
)


@dataclasses.dataclass(frozen=True)
class Outcome:
    summary: str  # pytest's counts, e.g. "1 passed"
    passed: bool  # exactly: one or more passed, nothing failed or errored
    failed: bool  # exactly: a test failed, nothing errored
    seconds: float
    errors: tuple[str, ...]  # the first "E " lines of a failure


def _pytest(test: str, plugin: str | None, env: dict[str, str]) -> Outcome:
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        "-o",
        "addopts=",
        "--strict-markers",
    ]
    if plugin:
        cmd += ["-p", f"breaks.{plugin}"]
    cmd.append(test)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    out = proc.stdout + proc.stderr
    final = [
        ln for ln in out.splitlines() if re.search(r"\d+ (passed|failed|errors?|skipped)\b.* in [\d.]+s", ln)
    ]
    counts = {
        word: int(n)
        for n, word in re.findall(
            r"(\d+) (passed|failed|errors?|xfailed|skipped|deselected)", final[-1] if final else ""
        )
    }
    summary = ", ".join(f"{n} {w}" for w, n in counts.items()) or f"no result (exit {proc.returncode})"
    errors = counts.get("error", 0) + counts.get("errors", 0)
    lines = [ln.rstrip() for ln in out.splitlines() if ln.startswith("E ")]
    return Outcome(
        summary=summary,
        passed=proc.returncode == 0
        and counts.get("passed", 0) > 0
        and not counts.get("failed")
        and not errors,
        failed=proc.returncode == 1 and counts.get("failed", 0) > 0 and not errors,
        seconds=seconds,
        errors=tuple(ln[:160] for ln in lines[:4]),
    )


def _commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    changed = git("status", "--porcelain", "--untracked-files=no")
    return f"{head}{' with uncommitted changes' if changed else ''}"


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


HEADER = """\
# Each reworked test failing under a deliberate break (issue 52; not a timing)

Each test is run with pytest as it is (it must pass), then under its named break: a pytest plugin
module of tools/breaks/ (loaded with `-p breaks.NAME`, PYTHONPATH=tools) that monkeypatches the
code under test in that one process; no file changes. Under the break the test must fail (a test
failure, not an error). "checks": the independent value the test compares with.

This record replaces docs/results/failing_tests_issue38.txt, dropped: its breaks were plugins of a
session's own folder, never committed, so none of its commands could be re-run; some of its lines
were garbled (the plugin path replaced by a phrase) and its module paths were those before the
split into tpucost.method and tpucost.experiments. Its tests are not re-run here; this file is
written by its command and only by it.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", action="append", metavar="NAME", help="only this break (repeatable)")
    parser.add_argument(
        "--out", type=Path, default=RECORD, help=f"the record (default {RECORD.relative_to(ROOT)})"
    )
    args = parser.parse_args(argv)
    known = {b.name for b in BREAKS}
    unknown = sorted(set(args.only or ()) - known)
    if unknown:
        parser.error(f"unknown break {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    chosen = [b for b in BREAKS if not args.only or b.name in args.only]
    missing = [b.name for b in chosen if not (BREAKS_DIR / f"{b.name}.py").is_file()]
    if missing:
        parser.error(f"no plugin tools/breaks/NAME.py for {', '.join(missing)}")

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "tools"), env.get("PYTHONPATH", "")) if p)
    env.pop("BREAK_FACTOR", None)  # each plugin's own default
    shown = " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    python = os.path.relpath(sys.executable, ROOT) if sys.executable.startswith(str(ROOT)) else sys.executable
    started = datetime.datetime.now().astimezone()
    lines = [
        HEADER,
        f"$ {python} tools/break_tests.py{' ' + shown if shown else ''}",
        f"run {started:%Y-%m-%d %H:%M %Z} in {ROOT} at commit {_commit()}; {_cpu()}, "
        f"{os.cpu_count()} cores; Python {platform.python_version()}",
        "",
    ]
    ok = True
    for b in chosen:
        print(f"== {b.name}: {b.test}", flush=True)
        plain = _pytest(b.test, None, env)
        broken = _pytest(b.test, b.name, env)
        good = plain.passed and broken.failed
        ok &= good
        doc = (BREAKS_DIR / f"{b.name}.py").read_text().split('"""')[1]
        lines += [
            f"## {b.test}",
            f"checks: {b.checks}",
            f"break: {b.name} (tools/breaks/{b.name}.py): {' '.join(doc.split())}",
            f"without the break: {plain.summary} ({plain.seconds:.1f} s)",
            f"under the break:   {broken.summary} ({broken.seconds:.1f} s)",
            *(f"    {e}" for e in broken.errors),
            f"fails under the break and passes without it: {'yes' if good else 'NO'}",
            "",
        ]
        print(f"   without: {plain.summary}; under the break: {broken.summary}: {'ok' if good else 'NOT OK'}")
    total = len(chosen)
    done = sum(1 for ln in lines if ln.endswith("passes without it: yes"))
    lines.append(f"{done} of {total} tests fail under their break and pass without it.")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
