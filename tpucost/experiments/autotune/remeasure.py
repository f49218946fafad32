"""Re-measuring configurations, interleaved, in a fresh process: the figures autotuning reports.

All configurations are compiled first, then run in ``rounds`` rounds, each once per round, so a
drift of the machine's speed hits every configuration alike; on XLA:CPU in a new Python process
(``python -m tpucost.experiments.autotune``, which inherits this process's CPU affinity) so that nothing of the
search's process state (caches, allocator) favours one of them.

On a TPU or GPU only one process may use the device (`tpucost.method.device`, "One process on an
accelerator"): there `remeasure_in_fresh_process` re-measures in this process instead and says so
(``"fresh_process": False``). Every result records the backend that measured it, and a child that
reports another backend than this process's is refused (`tpucost.method.device.BackendMismatch`).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax

from tpucost.experiments.autotune.tunable import load_tunable
from tpucost.method import backends, device
from tpucost.method.measure import compile_fn, wall_time_ns

__all__ = ["remeasure", "remeasure_in_fresh_process", "separate_processes", "main"]


def separate_processes(backend: str | None = None) -> bool:
    """Whether the autotuner may measure in second processes on ``backend`` (default: this
    process's, `tpucost.method.device.expected_backend`): on XLA:CPU only; on a TPU or GPU one process
    holds the device."""
    return (backend or device.expected_backend()) == "cpu"


def remeasure(spec: str, space: str, configs: Sequence[Mapping[str, Any]], rounds: int = 10) -> list[float]:
    """Minimum wall time (ns) of each configuration, in this process: all compiled first, then
    ``rounds`` rounds that run each once in turn (so a drift of the machine's speed hits every
    configuration alike)."""
    tunable = load_tunable(spec, space)
    built = []
    for config in configs:
        fn, args = tunable.build(config)
        compiled = compile_fn(fn, args, tunable.compiler_options(config))
        jax.block_until_ready(compiled(*args))
        built.append((compiled, args))
    best = [math.inf] * len(built)
    for _ in range(rounds):
        for i, (compiled, args) in enumerate(built):
            best[i] = min(best[i], wall_time_ns(compiled, *args, repeats=1)[0])
    return [float(b) for b in best]


def remeasure_in_fresh_process(
    spec: str, space: str, configs: Sequence[Mapping[str, Any]], rounds: int = 10, timeout_s: float = 900
) -> dict[str, Any]:
    """`remeasure` in a new Python process (``python -m tpucost.experiments.autotune``) on XLA:CPU, which
    inherits this process's CPU affinity (one core in the label mode) and is kept off any
    accelerator (`tpucost.method.device.cpu_only_env`); on a TPU or GPU in this process (one process
    holds the device).

    Returns ``{"runtime_ns", "pid", "backend", "fresh_process", "how", "seconds"}``: ``backend``
    is the one that measured, ``fresh_process`` whether that was another process, ``how`` the
    same in words. Raises `tpucost.method.device.BackendMismatch` when the fresh process reports another
    backend than this one's, RuntimeError when it fails."""
    mine = device.expected_backend()
    t0 = time.perf_counter()
    if not separate_processes(mine):
        runtimes = remeasure(spec, space, configs, rounds)
        return {
            "runtime_ns": runtimes,
            "pid": os.getpid(),
            "backend": mine,
            "fresh_process": False,
            "how": f"in this process (pid {os.getpid()}): on {mine} one process holds the device",
            "seconds": time.perf_counter() - t0,
        }
    if not spec.startswith("example:"):
        path, _, name = spec.rpartition(":")
        spec = f"{Path(path).resolve()}:{name}"
    payload = json.dumps(
        {"spec": spec, "space": space, "configs": [dict(c) for c in configs], "rounds": rounds}
    )
    proc = subprocess.run(
        [sys.executable, "-m", "tpucost.experiments.autotune"],
        input=payload,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
        env=device.cpu_only_env(dict(backends.backend(mine).child_process_env)),
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the fresh-process re-measurement failed (exit {proc.returncode}): {last}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    theirs = result.get("backend") or "an unrecorded backend"
    device.same_backend(
        "the fresh-process re-measurement",
        {f"this process ({os.getpid()})": mine, f"the fresh process ({result.get('pid')})": theirs},
    )
    result["backend"] = mine
    result["fresh_process"] = True
    result["how"] = f"in a fresh process (pid {result.get('pid')}; this one is {os.getpid()})"
    result["seconds"] = time.perf_counter() - t0
    return result


def main() -> None:
    """The fresh process of `remeasure_in_fresh_process`: a request on stdin, one JSON line out."""
    request = json.loads(sys.stdin.read())
    runtimes = remeasure(request["spec"], request["space"], request["configs"], int(request["rounds"]))
    print(
        json.dumps(
            {
                "runtime_ns": runtimes,
                "pid": os.getpid(),
                "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
                "backend": device.expected_backend(),
            }
        )
    )
