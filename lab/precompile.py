"""Compiling a collection's next pairs on the spare core, so the measuring core mostly measures.

Compiling is most of a collection's time on XLA:CPU (80% in ``docs/results/collect_speed.txt``),
and the label mode (`tpucost.method.device.pin_to_one_core`) keeps the measuring process on one
core, so a 2-core machine's other core idles. A *precompile worker* is a second process, pinned to
a core the measuring process does not use, that compiles the pairs (program, configuration) the
measuring process will measure next and hands it the executables through JAX's persistent
compilation cache. The measuring process then compiles a pair as before
(`tpucost.method.measure.compile_fn`), but loads the worker's executable instead of compiling.

What this rests on (checked on jax 0.10.2, XLA:CPU, 2-core host)
-----------------------------------------------------------------
An executable written to the persistent cache (``jax_compilation_cache_dir``) by a process pinned
to core 1 is loaded by a process pinned to core 0 that compiles the same program with the same
compile options: a small CNN's gradient "compiled" in 0.014 s instead of 0.76 s, and
`tpucost.method.measure.measure_kernels` found the same kernels (names and count) in its trace.
XLA:CPU needs no ``jax_persistent_cache_enable_xla_caches`` flag (those caches are the GPU's);
it must be off here: JAX writes that cache's folder (inside the cache folder) into the compile
options, so two processes with different cache folders get different keys (a miss, checked).

How it works
------------
* `start` (in the measuring process, before it measures) makes a private folder (mode 0700: a
  compilation cache is code this process will run), points this process's persistent cache at its
  ``cache/``, read only (nothing compiled here is written), and starts ``python -m
  lab.precompile FOLDER`` with `tpucost.method.device.cpu_only_env`. The
  worker pins itself to a core outside the measuring process's affinity (before its JAX backend
  starts) and compiles into ``staging/``; when a pair is compiled it moves the pair's entries into
  ``cache/`` (a rename: a reader never sees half an entry) and marks the pair done.
* A pair is compiled by one process only: whoever creates ``claims/<index>`` first. The worker
  claims the pairs after the one being measured, at most ``ahead`` of it, in order, leaving to
  the measuring process those it would reach before the worker finished them (from running
  averages of the worker's compile time and the measuring process's pace); before
  compiling a pair the measuring process calls `Precompiler.prepare`, which claims it (nobody
  took it: compile it here, a cache miss) or waits until the worker has finished it (a cache hit).
  So the two cores share the compiling, and no pair is compiled twice.
* The worker deletes a pair's entries once the measuring process has moved past it: the cache
  holds at most ``ahead + 1`` pairs.
* `Precompiler.stop` stops the worker, removes the folder, restores this process's cache settings
  and returns what the worker did. A worker whose measuring process died sees its stdin close (or
  its parent change) after the pair it is compiling, removes the folder and exits.
* Never on an accelerator: one process holds the device there (`tpucost.method.device`), so
  `start` returns None; also where there is no spare core or this process is not pinned to one
  core (`unavailable` says why).

Labels are unchanged: the executable is the one XLA would have compiled here. The neighbour
compiling on the other core shares the caches and memory bandwidth with the measuring core;
``benchmarks/collect_prefetch.py`` measures both the speed-up and the labels' difference.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
from jax import monitoring
from jax.experimental.compilation_cache import compilation_cache

from tpucost.experiments.programs import Program, program_from_id
from tpucost.files import write_json_atomic
from tpucost.method import device
from tpucost.method.measure import compile_fn

__all__ = ["AHEAD", "unavailable", "Precompiler", "start", "serve", "main"]

#: The checkout that holds lab/ (not installed): the worker process imports lab from it.
_CHECKOUT = str(Path(__file__).resolve().parents[1])
#: How many pairs past the one being measured the worker compiles at most.
AHEAD = 4
#: The persistent cache settings `start` changes in the measuring process (and `stop` restores).
_PARENT_SETTINGS = (
    "jax_compilation_cache_dir",
    "jax_persistent_cache_min_compile_time_secs",
    "jax_persistent_cache_enable_xla_caches",
)
#: No XLA-side cache: JAX puts their folder (under the cache folder) in the compile options, so
#: the cache key, and the worker's ``staging/`` and the reader's ``cache/`` keys would differ.
_NO_XLA_CACHES = "none"
#: The cache events the measuring process counts.
_HIT, _REQUEST = "/jax/compilation_cache/cache_hits", "/jax/compilation_cache/compile_requests_use_cache"
#: How often a waiting process looks again (s).
_POLL_S = 0.005


def _spare_cores() -> list[int]:
    """The machine's cores outside this process's affinity (empty without an affinity API)."""
    if not hasattr(os, "sched_getaffinity"):
        return []
    return sorted(set(range(os.cpu_count() or 1)) - os.sched_getaffinity(0))


def unavailable() -> str | None:
    """Why `start` would not start a worker here, or None when it would.

    Not on an accelerator (one process holds the device), not where this process may run on
    several cores (it is not in the label mode, and the worker would share its cores), not where
    the machine has no core outside this process's affinity."""
    backend = device.expected_backend()
    if backend != "cpu":
        return f"JAX runs on {backend}: one process holds the device, so nothing compiles beside it"
    if device.usable_cores() != 1:
        return (
            f"this process may run on {device.usable_cores()} cores: pin it to one "
            "(tpucost.method.device.pin_to_one_core) so the worker has a core of its own"
        )
    if not _spare_cores():
        return "no core outside this process's affinity for the worker"
    return None


def _claim(root: Path, index: int) -> bool:
    """Claim pair ``index`` for the calling process; False when the other process claimed it."""
    try:
        os.close(os.open(root / "claims" / str(index), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def _done_file(root: Path, index: int) -> Path:
    return root / "done" / str(index)


class Precompiler:
    """A running precompile worker, seen from the measuring process (made by `start`).

    ``keys``: the pairs to measure, in order (``"<program_id>/<configuration>"``); ``root``: the
    worker's folder. Counts: ``prepared`` (pairs the worker compiled before they were measured),
    ``compiled_here`` (pairs claimed by this process), ``waited_s`` (time `prepare` waited for the
    worker), ``cache_hits`` and ``cache_requests`` (of this process's compiles since `start`).
    """

    def __init__(self, keys: Sequence[str], root: Path, process: subprocess.Popen, saved: dict[str, Any]):
        self.keys = list(keys)
        self.root = root
        self._index = {key: i for i, key in enumerate(self.keys)}
        self._process = process
        self._saved = saved
        self.prepared = self.compiled_here = self.cache_hits = self.cache_requests = 0
        self.waited_s = 0.0
        monitoring.register_event_listener(self._count)

    def _count(self, event: str, **_: Any) -> None:
        self.cache_hits += event == _HIT
        self.cache_requests += event == _REQUEST

    def _tell(self, index: int) -> None:
        """Tell the worker which pair is being measured (it may have exited: then nothing)."""
        if self._process.stdin is None:
            return
        try:
            self._process.stdin.write(f"{index} {time.time()}\n".encode())
            self._process.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass

    def prepare(self, key: str) -> bool:
        """Call before compiling pair ``key`` here: True when its executable is in the cache.

        Claims the pair for this process (False: compile it here as usual), or, where the
        worker claimed it, waits until the worker finished it (True: the compile here loads the
        worker's executable; False if the worker failed on it or exited). A key not in ``keys``
        is False. Also tells the worker that ``key`` is being measured (its window moves)."""
        index = self._index.get(key)
        if index is None:
            return False
        self._tell(index)
        if _claim(self.root, index):
            self.compiled_here += 1
            return False
        t0 = time.perf_counter()
        done = _done_file(self.root, index)
        while not done.exists() and self._process.poll() is None:
            time.sleep(_POLL_S)
        self.waited_s += time.perf_counter() - t0
        ok = done.exists() and done.read_text().strip() == "ok"
        self.prepared += ok
        return ok

    def _worker_log(self) -> list[dict[str, Any]]:
        path = self.root / "worker.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def stop(self) -> dict[str, Any]:
        """Stop the worker, remove its folder, restore this process's cache settings; returns
        ``{"core", "worker_compiled", "worker_errors", "worker_compile_s", "prepared",
        "compiled_here", "waited_s", "cache_hits", "cache_requests", "worker_exit"}``."""
        if self._process.poll() is None:
            self._process.terminate()  # its work is disposable: no need to finish a compile
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdin is not None:
            self._process.stdin.close()
        log = self._worker_log()
        stderr = (self.root / "worker.err").read_text(errors="replace") if self.root.exists() else ""
        shutil.rmtree(self.root, ignore_errors=True)
        monitoring.unregister_event_listener(self._count)
        for name, value in self._saved.items():
            jax.config.update(name, value)
        compilation_cache.reset_cache()
        pairs = [e for e in log if "key" in e]
        summary = {
            "core": next((e["core"] for e in log if "core" in e), None),
            "worker_compiled": sum(e["status"] == "ok" for e in pairs),
            "worker_errors": sum(e["status"] == "error" for e in pairs),
            "worker_compile_s": round(sum(e.get("compile_s", 0.0) for e in pairs), 3),
            "prepared": self.prepared,
            "compiled_here": self.compiled_here,
            "waited_s": round(self.waited_s, 3),
            "cache_hits": self.cache_hits,
            "cache_requests": self.cache_requests,
            "worker_exit": self._process.returncode,
        }
        if not log and stderr.strip():
            summary["worker_stderr"] = stderr.strip()[-2000:]
        return summary

    def __enter__(self) -> Precompiler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start(keys: Sequence[str], ahead: int = AHEAD) -> Precompiler | None:
    """Start a precompile worker for the pairs ``keys`` (``"<program_id>/<configuration>"``, in
    the order they will be measured; the first is left to this process), or None where
    `unavailable` gives a reason (an accelerator, no spare core, this process not pinned).

    From here until `Precompiler.stop`, this process's compiles read the worker's cache (and
    write nothing to it). Call `Precompiler.prepare` before compiling each pair.
    """
    if ahead < 1:
        raise ValueError(f"ahead must be >= 1, got {ahead}")
    if unavailable() is not None:
        return None
    root = Path(tempfile.mkdtemp(prefix="tpucost_precompile_"))  # mode 0700
    for folder in ("cache", "staging", "claims", "done"):
        (root / folder).mkdir()
    write_json_atomic(root / "pairs.json", {"keys": list(keys), "ahead": ahead, "cores": _spare_cores()})
    saved = {name: getattr(jax.config, name) for name in _PARENT_SETTINGS}
    jax.config.update("jax_compilation_cache_dir", str(root / "cache"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1e9)  # read only here
    jax.config.update("jax_persistent_cache_enable_xla_caches", _NO_XLA_CACHES)
    compilation_cache.reset_cache()  # the cache is looked up again at the next compile
    with open(root / "worker.jsonl", "wb") as out, open(root / "worker.err", "wb") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "lab.precompile", str(root)],
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=err,
            env=device.cpu_only_env(
                {"PYTHONPATH": os.pathsep.join(filter(None, (_CHECKOUT, os.environ.get("PYTHONPATH"))))}
            ),
        )
    return Precompiler(keys, root, process, saved)


# --- the worker -----------------------------------------------------------------------------


def _pin_worker(cores: Sequence[int]) -> int | None:
    """Pin this process to the first of ``cores`` it may run on; None when none."""
    for core in cores:
        try:
            os.sched_setaffinity(0, {core})
        except OSError:
            continue
        return core
    return None


class _Inbox:
    """The measuring process's messages on stdin: the index of the pair it is measuring and when
    it started it (``time.time()``), one per line."""

    def __init__(self, fd: int = 0):
        self.fd, self.buffer, self.closed = fd, b"", False

    def read(self, timeout: float) -> list[tuple[int, float]]:
        """The messages sent since the last read, waiting up to ``timeout`` s for the first."""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        while ready and not self.closed:
            chunk = os.read(self.fd, 65536)
            self.closed = not chunk
            self.buffer += chunk
            ready, _, _ = select.select([self.fd], [], [], 0)
        *lines, self.buffer = self.buffer.split(b"\n")
        return [(int(index), float(when)) for index, when in (line.split() for line in lines if line.strip())]


def _log(entry: dict[str, Any]) -> None:
    print(json.dumps(entry), flush=True)


def _compile_pair(key: str, built: dict[str, Program]) -> None:
    """Compile pair ``key`` as `measure_program` does (the program kept for its next configuration)."""
    program_id, _, config = key.rpartition("/")
    if program_id not in built:
        built.clear()
        built[program_id] = program_from_id(program_id)
    program = built[program_id]
    fn, options = program.configured(config)
    compile_fn(fn, program.args, options)


def _publish(root: Path, index: int, owner: dict[str, int]) -> None:
    """Move the entries compiled for pair ``index`` from ``staging/`` into ``cache/``."""
    for entry in (root / "staging").iterdir():
        if entry.is_file():
            os.replace(entry, root / "cache" / entry.name)
            owner[entry.name] = index


def _drop_before(root: Path, position: int, owner: dict[str, int]) -> None:
    """Delete the cache entries of pairs before ``position`` (measured already)."""
    for name in [n for n, i in owner.items() if i < position]:
        (root / "cache" / name).unlink(missing_ok=True)
        del owner[name]


class _Schedule:
    """Which pair the worker compiles next: the first it can finish before the measuring process
    gets there, from running averages of its own compile time and of the measuring process's
    seconds per pair (a pair the measuring process would reach first is left to it, rather than
    making it wait for the worker: when the worker's core is slower or busy, the measuring
    process compiles more pairs itself)."""

    #: Weight of the newest observation in the running averages.
    WEIGHT = 0.3

    def __init__(self) -> None:
        self.position, self.since, self.heard = 0, time.time(), False
        self.compile_s: float | None = None
        self.pace_s: float | None = None

    def _average(self, old: float | None, new: float) -> float:
        return new if old is None else (1 - self.WEIGHT) * old + self.WEIGHT * new

    def parent_at(self, messages: Sequence[tuple[int, float]]) -> None:
        """The measuring process reported the pairs it reached: ``(index, time)``, in order."""
        for index, when in messages:
            if self.heard and index > self.position:
                self.pace_s = self._average(self.pace_s, (when - self.since) / (index - self.position))
            if not self.heard or index > self.position:
                self.position, self.since, self.heard = index, when, True

    def compiled(self, seconds: float) -> None:
        """The worker compiled a pair in ``seconds``."""
        self.compile_s = self._average(self.compile_s, seconds)

    def first_in_time(self, ahead: int) -> int:
        """The first pair the worker would finish before the measuring process reaches it
        (at most ``ahead`` past the pair being measured; the next one while nothing is known)."""
        if self.compile_s is None or not self.pace_s:
            return self.position + 1
        ready_at = time.time() + self.compile_s - self.since
        return self.position + min(ahead, max(1, math.ceil(ready_at / self.pace_s)))


def serve(root: Path, inbox: _Inbox | None = None) -> None:
    """The worker: compile the pairs of ``root/pairs.json`` ahead of the measuring process.

    Pins itself to a spare core, then claims and compiles pair after pair, at most ``ahead`` past
    the one being measured (stdin: its index, one per line), skipping those the measuring process
    would reach before the worker finished them (`_Schedule`), each published as `start`
    describes. Returns at EOF on stdin or when its parent changed, after removing ``root``.
    """
    spec = json.loads((root / "pairs.json").read_text())
    keys, ahead = list(spec["keys"]), int(spec["ahead"])
    core = _pin_worker(spec["cores"])
    _log({"core": core})
    if core is None:
        return
    jax.config.update("jax_compilation_cache_dir", str(root / "staging"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    jax.config.update("jax_persistent_cache_enable_xla_caches", _NO_XLA_CACHES)
    compilation_cache.reset_cache()
    inbox = inbox or _Inbox()
    parent, following, schedule = os.getppid(), 1, _Schedule()
    owner: dict[str, int] = {}
    built: dict[str, Program] = {}
    try:
        while not inbox.closed and os.getppid() == parent:
            has_work = following < len(keys) and following <= schedule.position + ahead
            schedule.parent_at(inbox.read(0.0 if has_work else 1.0))
            _drop_before(root, schedule.position, owner)
            following = max(following, schedule.first_in_time(ahead))
            if not (following < len(keys) and following <= schedule.position + ahead):
                continue
            index, following = following, following + 1
            if not _claim(root, index):
                continue
            t0 = time.perf_counter()
            try:
                _compile_pair(keys[index], built)
                status = "ok"
            except Exception as err:  # noqa: BLE001 - the measuring process compiles it and logs why
                status = "error"
                _log({"key": keys[index], "status": status, "error": f"{type(err).__name__}: {err}"})
            _publish(root, index, owner)
            _done_file(root, index).write_text(status)
            schedule.compiled(time.perf_counter() - t0)
            if status == "ok":
                _log({"key": keys[index], "status": status, "compile_s": round(time.perf_counter() - t0, 4)})
    finally:  # the measuring process is gone (`Precompiler.stop` terminates the worker instead)
        shutil.rmtree(root, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m lab.precompile FOLDER``: run `serve` (started by `start`)."""
    parser = argparse.ArgumentParser(description="tpucost's precompile worker (started by precompile.start)")
    parser.add_argument("folder", type=Path)
    serve(parser.parse_args(argv).folder)


if __name__ == "__main__":
    main()
