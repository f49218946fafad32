"""Reading a profiler trace: each backend's kernel events of one compiled module.

`tpucost.method.measure` runs a program under ``jax.profiler`` and reads the trace back with
``jax.profiler.ProfileData``; this module finds, in that trace, the events of one module's kernels
on the backend that ran it (`kernel_events`), one reader per backend (`READERS`, keyed like
`tpucost.method.backends.BACKENDS`):

* XLA:CPU (`cpu_events`, checked on jax 0.10 and 0.7): kernel events on ``/host:CPU`` lines, with
  ``hlo_module``, ``hlo_op``, ``program_id`` and ``run_id`` stats, plus the ``end: <name>`` markers
  and the run's completion event that `tpucost.method.measure`'s asynchronous-kernel rule needs;
* GPU (`gpu_events`) and TPU (`tpu_events`), NOT run here: written against what xprof's trace
  viewer, tokamax's benchmarking and tune-jax's profile reader rely on (the book's "Measuring
  kernels" page lists each assumption and its source), tested on synthetic traces of that
  structure (tests/test_trace_readers.py).

An `Event` is one execution of one kernel in one run; a `Trace` the events of one module, the
runs' completion times where known and the module names seen.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

from tpucost.method.backends import Backend

__all__ = [
    "Run",
    "Event",
    "Trace",
    "hlo_op_name",
    "device_planes",
    "tpu_module",
    "XLA_MODULES_LINE",
    "XLA_OPS_LINE",
    "cpu_events",
    "gpu_events",
    "tpu_events",
    "READERS",
    "kernel_events",
]

#: A run's key: (program id, run id) on CPU, (program id, plane, run id) on a device.
Run = Hashable

_WAIT_EVENT = "ThunkExecutor::Execute (wait for completion)"
_END_PREFIX = "end: "


@dataclasses.dataclass(frozen=True)
class Event:
    """One execution of one kernel in one run (times in ns on the trace's clock)."""

    name: str
    run: Run
    start_ns: float
    end_ns: float
    marker_ns: float | None = None  # start of its "end: <name>" event (CPU)


@dataclasses.dataclass
class Trace:
    """The kernel events of one module, its runs' completion times where known, the modules seen."""

    events: list[Event]
    run_end_ns: dict[Run, float]  # from the run's completion event, where known
    modules_seen: set[str]
    run_ns: dict[Run, float] = dataclasses.field(default_factory=dict)  # a run's module event (TPU)


def _stats(event: Any) -> dict[str, Any]:
    return dict(event.stats)


def _plane_events(profile: Any, prefix: str) -> Iterable[tuple[Any, Any, dict[str, Any]]]:
    """(plane, event, stats) of every event on the planes whose name starts with ``prefix``."""
    for plane in profile.planes:
        if plane.name.startswith(prefix):
            for line in plane.lines:
                for ev in line.events:
                    yield plane, ev, _stats(ev)


def cpu_events(profile: Any, planes: str, module_name: str, program_ids: frozenset[int] | None) -> Trace:
    """XLA:CPU (checked on jax 0.10 and 0.7): kernel events on any line of the ``planes`` (``/host:CPU``)."""
    raw, markers, waits, seen = [], {}, {}, set()
    for _, ev, st in _plane_events(profile, planes):
        if "hlo_module" in st:
            seen.add(st["hlo_module"])
            if st["hlo_module"] == module_name and "hlo_op" in st:
                raw.append((ev, st))
        elif ev.name.startswith(_END_PREFIX) and "_c" in st:
            markers[st["_c"]] = ev.start_ns
        elif ev.name == _WAIT_EVENT and "run_id" in st:
            waits[st["run_id"]] = ev.start_ns + ev.duration_ns
    events = [
        Event(
            st["hlo_op"],
            (st.get("program_id"), st.get("run_id")),
            ev.start_ns,
            ev.start_ns + ev.duration_ns,
            markers.get(st.get("_p")),
        )
        for ev, st in raw
        if program_ids is None or st.get("program_id") in program_ids
    ]
    run_end = {e.run: waits[e.run[1]] for e in events if e.run[1] in waits}
    return Trace(events, run_end, seen)


def device_planes(profile: Any, prefix: str) -> Iterable[Any]:
    """The planes named ``prefix`` + a device ordinal (``/device:TPU:0``, ``/device:GPU:1``), nothing after it.

    xprof selects TPU TensorCore planes by the anchored pattern ``/device:TPU:<digits>`` (tsl's
    ``kTpuPlaneRegex``): a SparseCore plane (``/device:TPU:0 SparseCore 0``) shares the prefix and
    is not one. tune-jax takes the first plane whose name contains the platform, older tokamax
    every plane starting with ``/device:``; on a one-chip trace all of them read ``/device:TPU:0``.
    """
    for plane in profile.planes:
        if plane.name.startswith(prefix) and plane.name[len(prefix) :].isdigit():
            yield plane


# An HLO instruction printed as text, ``%fusion.3 = f32[8]{0} fusion(...)``: the name before " = ".
_HLO_TEXT_RE = re.compile(r"^%?([^\s=%]+) = ")


def hlo_op_name(event_name: str, stats: Mapping[str, Any]) -> str:
    """The HLO instruction an op event on a device plane stands for.

    Three forms, all supported: an ``hlo_op`` stat (XLA:CPU and GPU kernels; on GPU the names of
    nested ops joined by ``::``, the kernel's own last, as xprof's ``GpuEventStats`` splits them);
    an event whose metadata name is the instruction's HLO text and whose display name the short
    name (TPU ``XLA Ops``: xprof reads the display name, but ``jax.profiler.ProfileData`` returns
    the metadata *name*, checked on jax 0.10.2 and 0.7.2); or the short name itself.
    """
    op = stats.get("hlo_op")
    if isinstance(op, str) and op:
        return op.rsplit("::", 1)[-1]
    m = _HLO_TEXT_RE.match(event_name)
    return m.group(1) if m else event_name


def _device_span_ns(event: Any, stats: Mapping[str, Any]) -> tuple[float, float]:
    """(start, end) in ns of a device event. Its duration is the ``device_duration_ps`` stat where
    the event has one (TPU ``XLA Ops`` events do; xprof's ``GetDeviceEventTimespan`` prefers it),
    else the event's own; the start stays the event's, on the clock of the ``XLA Modules`` events
    it is matched against (``device_offset_ps`` counts on the device's clock)."""
    start = float(event.start_ns)
    duration = stats.get("device_duration_ps")
    if isinstance(duration, (int, float)) and not isinstance(duration, bool):
        return start, start + float(duration) / 1000.0
    return start, start + float(event.duration_ns)


def gpu_events(profile: Any, planes: str, module_name: str, program_ids: frozenset[int] | None) -> Trace:
    """XLA:GPU, NOT run here: written against xprof's and tune-jax's readers (docs/measuring.md).

    Kernel events sit on ``/device:GPU:<n>`` planes (one line per stream) with the stats
    ``hlo_module``, ``hlo_op`` and ``program_id`` (xprof's ``GpuEventStats``; tune-jax keys them
    by ``hlo_module`` and ``program_id``). ``run_id`` groups runs where present, else the k-th
    event of each kernel is taken to belong to run k. Event times are device times, so there is no
    async correction. One HLO op that launches several device kernels counts them as several calls.
    The readers differ on memory copies: xprof's XLA Ops line keeps only kernel events (those with
    ``kernel_details``), tune-jax every event of the plane; an event with the ``hlo_op`` of this
    module counts here either way (its device time belongs to that op).
    """
    events, seen, count = [], set(), defaultdict(int)
    for plane in device_planes(profile, planes):
        for line in plane.lines:
            for ev in line.events:
                st = _stats(ev)
                if "hlo_module" not in st:
                    continue
                seen.add(st["hlo_module"])
                if st["hlo_module"] != module_name or (
                    program_ids is not None and st.get("program_id") not in program_ids
                ):
                    continue
                name = hlo_op_name(ev.name, st)
                run = st.get("run_id")
                if run is None:
                    run, count[name] = count[name], count[name] + 1
                start, end = _device_span_ns(ev, st)
                events.append(Event(name, (st.get("program_id"), plane.name, run), start, end))
    return Trace(events, {}, seen)


# TPU lines (tsl's xplane_schema: kXlaModuleLineName, kXlaOpLineName). Read by exact name, as
# xprof's op-metrics converter does (IsOpLineName): "Async XLA Ops" (the transfers of async
# copies), "Steps", "XLA TraceMe", "Overlay" and the SparseCore lines are not read. (xprof's
# Python CLI matches "XLA OPS" as a substring, which would take "Async XLA Ops" too.)
XLA_MODULES_LINE = "XLA Modules"
XLA_OPS_LINE = "XLA Ops"
# An XLA Modules event's name, "<module>(<program id>)" (xprof's HloModuleNameWithProgramId form).
_TPU_MODULE_RE = re.compile(r"^(.*)\((\d+)\)$")


def tpu_module(event: Any, stats: Mapping[str, Any]) -> tuple[str, int | None]:
    """(module name, program id or None) of an ``XLA Modules`` event: from its ``hlo_module`` /
    ``program_id`` stats where it has them, else from its name ``<module>(<program id>)``."""
    m = _TPU_MODULE_RE.match(event.name)
    name, pid = (m.group(1), int(m.group(2))) if m else (event.name, None)
    return stats.get("hlo_module", name), stats.get("program_id", pid)


def tpu_events(profile: Any, planes: str, module_name: str, program_ids: frozenset[int] | None) -> Trace:
    """TPU, NOT run here: written against xprof's, tokamax's and tune-jax's readers, tested on
    synthetic traces of that structure (tests/test_trace_readers.py; docs/measuring.md lists the
    sources and what a first TPU run must check).

    On each TensorCore plane ``/device:TPU:<n>``:

    * line ``XLA Modules`` holds one event per program run, named ``<module>(<program id>)``, with
      a ``run_id`` stat (xprof's trace processor numbers the runs in order where it is missing);
    * line ``XLA Ops`` holds one event per op execution, inside its run's module event. The op's
      module is the module event enclosing the op's start (xprof's SparseCore converter and trace
      processor; xprof's TensorCore converter reads the op metadata's ``program_id`` stat, which
      ``ProfileData`` does not expose), or the op event's own ``hlo_module`` / ``program_id``
      stats where it carries them. Its name: `hlo_op_name`; its duration: `_device_span_ns`.

    A loop's op event encloses its body's op events (xprof subtracts children for a self time);
    the label here is the enclosing event, as on CPU, and the body kernels are ``nested``.
    """
    events, seen, run_ns = [], set(), {}
    for plane in device_planes(profile, planes):
        lines = {line.name: list(line.events) for line in plane.lines}
        modules = []  # (start, end, name, program id, run id), in start order
        for k, ev in enumerate(sorted(lines.get(XLA_MODULES_LINE, []), key=lambda e: e.start_ns)):
            st = _stats(ev)
            name, pid = tpu_module(ev, st)
            seen.add(name)
            span = (float(ev.start_ns), float(ev.start_ns + ev.duration_ns))
            modules.append((*span, name, pid, st.get("run_id", ("order", k))))
            if name == module_name and (program_ids is None or pid in program_ids):
                run_ns[(pid, plane.name, modules[-1][4])] = float(ev.duration_ns)
        starts = [m[0] for m in modules]
        for ev in lines.get(XLA_OPS_LINE, []):
            st = _stats(ev)
            i = bisect.bisect_right(starts, ev.start_ns) - 1
            enclosing = modules[i] if i >= 0 and ev.start_ns <= modules[i][1] else None
            if "hlo_module" in st:
                seen.add(st["hlo_module"])
                name, pid = st["hlo_module"], st.get("program_id")
                run = st.get("run_id", enclosing[4] if enclosing else None)
            elif enclosing is not None:
                _, _, name, pid, run = enclosing
            else:
                continue  # outside every module run (another program's op, or trace edges)
            if name != module_name or (program_ids is not None and pid not in program_ids):
                continue
            start, end = _device_span_ns(ev, st)
            events.append(Event(hlo_op_name(ev.name, st), (pid, plane.name, run), start, end))
    return Trace(events, {}, seen, run_ns)


#: The trace reader of each backend (`tpucost.method.backends`: where its kernel events are, and whether
#: an event can end before its kernel's work does).
READERS: dict[str, Callable[..., Trace]] = {"cpu": cpu_events, "gpu": gpu_events, "tpu": tpu_events}


def kernel_events(
    profile: Any, backend: Backend, module_name: str, program_ids: frozenset[int] | None
) -> Trace:
    """This module's kernel events in ``profile``; raises ValueError if there are none (matched by
    name when no event has ``program_ids``: an executable from JAX's persistent compilation cache)."""
    trace = READERS[backend.name](profile, backend.trace_planes, module_name, program_ids)
    if not trace.events and program_ids is not None and module_name in trace.modules_seen:
        program_ids, trace = None, READERS[backend.name](profile, backend.trace_planes, module_name, None)
    if not trace.events:
        raise ValueError(
            f"the trace has no kernel events of module {module_name!r} (program ids "
            f"{sorted(program_ids) if program_ids else 'unknown'}) on backend {backend.name!r}; "
            f"modules seen: {sorted(trace.modules_seen) or 'none'}"
        )
    if program_ids is None and len({e.run[0] for e in trace.events}) > 1:
        raise ValueError(
            f"several programs named {module_name!r} in the trace and no program id to tell them apart"
        )
    return trace
