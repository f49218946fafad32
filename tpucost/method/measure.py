"""Per-kernel runtime labels from the JAX profiler (the "measure" stage).

Method
------
The paper labels each kernel (a node of the optimized, fused XLA graph) with its
measured runtime, the minimum of several runs. Here one compiled program is run
``repeats`` times under ``jax.profiler.start_trace``; the trace is read back in
memory with ``jax.profiler.ProfileData`` and every profiler event is matched to an
HLO instruction of *this* compiled module:

* an event belongs to us only if its ``hlo_module`` stat equals this module's name AND
  its ``program_id`` stat is this executable's id (the ``id`` of its ``HloModuleProto``;
  by name only for an executable from the persistent compilation cache), so another
  module of that name, run in between or concurrently, never mixes in;
* events are grouped into runs by ``run_id`` (one per program execution);
* the instruction name comes from the event's ``hlo_op`` stat.

The label of a kernel is, per run, its total time divided by the number of times
it ran in that run (a loop-body kernel runs once per iteration: its label is the
mean time of one call), then the minimum over runs. Loop-body kernels are also
inside their ``while`` kernel's label, so ``additivity_ratio`` skips them.

The asynchronous-kernel pitfall on XLA:CPU
-------------------------------------------
Some XLA:CPU thunks (Eigen convolutions, for one) may return after *launching*
their work on the intra-op thread pool: their profiler event then covers only the
launch (~10 us of a ~500 us convolution), and summed events can be a tenth of the
program's wall time. The same thunk sometimes runs synchronously instead (its
event is then the whole convolution). How it shows in the trace (jax 0.10):

* the kernel event (on a ``tf_XLAPjRtCpuClient`` thread, or the Python thread
  for small programs) is short; the pool threads show only
  ``ThreadpoolListener`` markers while the work runs, and no kernel event of the
  run executes unless the executor has independent work ("idle" time);
* the kernels waiting for it start when it completes, often on a ``tf_XLAEigen``
  thread. These are its consumers in the HLO graph *and* kernels the executor
  ordered after it for buffer reuse, which the HLO graph does not show;
* its ``end: <name>`` marker (linked to the kernel event by the flow stats
  ``_p`` / ``_c``) comes after those kernels ran, sometimes much later, and is
  sometimes missing; for a synchronous kernel the marker sits at the very end of
  the kernel event;
* the run ends with ``ThunkExecutor::Execute (wait for completion)`` (stat
  ``run_id``), whose end is when the last kernel completed.

Rule used here (``_event_label``): a kernel whose end marker sits at its event's end
is synchronous (label = event). Otherwise its completion bound is the first start
of a kernel consuming its result (HLO operand graph, looking through tuples,
get-tuple-elements and bitcasts), else the end of its enclosing loop kernel or of
the run. If the run was idle between the event's end and that bound for longer
than the event itself (and 5 us), the executor was waiting for this kernel: it
completed when the run resumed, at the end of the last idle gap before the bound,
and its label is the elapsed time from its start to then. If only its late marker
shows it async, the label is bound - start (an upper bound). Runs in which a kernel
known to be async elsewhere could not be classified are left out of its minimum. A
container kernel (a loop, a conditional) completes when the last kernel its bodies ran
completes: on several cores jaxlib 0.7 returns from a loop's event once its first
iteration is launched, and the iterations run on in the thread pool.
``Measurement.additivity_ratio`` (summed labels over the program's wall time) and
``span_ratio`` (over the traced run's span) check that the labels are honest.

The label mode. Labels are meant to be measured one kernel at a time on one core
(`tpucost.method.device.pin_to_one_core`, the TPU's execution model): on several cores XLA:CPU
may overlap independent kernels, and the rule above then gives each of two overlapping
kernels the other's time as well. ``measure_kernels`` warns once when it measures on
several CPU cores; every `Measurement` carries the device fingerprint (``label_mode``).

Only CPU has run here; the GPU and TPU readers of `tpucost.method.trace_events` follow
what xprof, tokamax and tune-jax rely on in a trace (their docstrings; docs/measuring.md, "The
TPU trace reader"), tested on synthetic traces of that structure (tests/test_trace_readers.py).
"""

from __future__ import annotations

import bisect
import dataclasses
import glob
import os
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import jax

from tpucost.method import backends, device, wire
from tpucost.method.hlo import Computation, Module, parse_module
from tpucost.method.kernels import CONTROL_FLOW, NOT_KERNELS, decompose
from tpucost.method.trace_events import Event, Run, Trace, kernel_events

__all__ = [
    "Measurement",
    "compile_fn",
    "measure_kernels",
    "wall_time_ns",
    "best_wall_time_ns",
]

# Kernels that run other kernels (loop bodies, branches); their events enclose
# their children's, so they are not counted as "busy" time in the async rule.
# (A `call` left in the entry on CPU is a "small call": one kernel, no children.)
CONTAINER_OPCODES = CONTROL_FLOW - {"call"}

# Slack for "at the same time" between a kernel event's end and its end marker, and
# the least idle time that can make a kernel asynchronous.
_ASYNC_SLACK_NS = 5_000.0
# Untraced runs for the wall-time reference (its minimum), at least.
_MIN_WALL_RUNS = 5


@dataclasses.dataclass(frozen=True)
class Measurement:
    """Per-kernel runtime labels of one compiled program.

    Attributes:
        runtime_ns: kernel name -> label in ns: per run, the kernel's time per call
        (async completion included on CPU), then the minimum over runs.
        runs_seen: kernel name -> number of traced runs that reported it.
        calls_per_run: kernel name -> calls in one run (1 unless in a loop body).
        wall_ns_per_run: wall time of each untraced run of the program, from
        ``time.perf_counter_ns`` around the call and ``block_until_ready``.
        run_span_ns: per traced run, first kernel start to run completion.
        hlo_text: the optimized HLO text (``compiled.as_text()``).
        missing: kernels of the compiled module that no traced run reported.
        nested: kernels inside another kernel (loop bodies, branches); their time
        is already part of their parent's label.
        async_kernels: kernels found asynchronous (label extended past the event).
        module_name, backend, device_kind: what was measured, and where.
        device: `tpucost.method.device.fingerprint()` of the device that measured it (its
        ``label_mode`` says whether kernels ran one at a time).
        timeline: the traced run with the shortest span as (kernel, start ns from the
        run's first kernel, labelled duration ns), in start order: for drawing.
        module: ``hlo_text`` parsed (`tpucost.method.hlo.Module`), so callers need not parse it again.
    """

    runtime_ns: dict[str, float]
    runs_seen: dict[str, int]
    calls_per_run: dict[str, int]
    wall_ns_per_run: list[float]
    run_span_ns: list[float]
    hlo_text: str
    missing: list[str]
    nested: list[str]
    async_kernels: list[str]
    module_name: str
    backend: str
    device_kind: str
    timeline: tuple[tuple[str, float, float], ...] = ()
    module: Module | None = dataclasses.field(default=None, repr=False, compare=False)
    device: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def additivity_ratio(self) -> float:
        """Sum of the top-level kernels' labels over the program's wall time.

        Near 1 when labels add up to the program (the paper's assumption); far below
        1 when per-run overhead dominates or async work is missed.
        """
        return self._summed_labels_ns() / min(self.wall_ns_per_run)

    @property
    def span_ratio(self) -> float:
        """`additivity_ratio` against the shortest traced run's span (NaN if nothing ran): free of
        the dispatch time outside the executor and of a host's drift between the untraced and the
        traced runs. Below 1 when async work is missed, above 1 when overlapping kernels count
        each other's time."""
        return self._summed_labels_ns() / min(self.run_span_ns) if self.run_span_ns else float("nan")

    def _summed_labels_ns(self) -> float:
        calls, nested = self.calls_per_run, self.nested
        return sum(t * calls.get(k, 1) for k, t in self.runtime_ns.items() if k not in nested)


# --------------------------------------------------------------------------- HLO


def _executed_computations(module: Module) -> list[Computation]:
    """The computations a run executes instruction by instruction: the entry and,
    recursively, the bodies, conditions and branches of its control flow (the ones
    ``tpucost.method.kernels.decompose`` walks; fused and applied computations are not)."""
    found: dict[str, Computation] = {}
    stack = [module.entry]
    while stack:
        comp = stack.pop()
        if comp.name in found:
            continue
        found[comp.name] = comp
        stack.extend(
            module.computations[callee]
            for ins in comp.instructions
            if ins.opcode in CONTROL_FLOW
            for callee in ins.called_computations
            if callee in module.computations
        )
    return list(found.values())


def _kernel_names(module: Module) -> list[str]:
    """Names of the kernels of a compiled module (``tpucost.method.kernels.decompose``)."""
    return [k.name for k in decompose(module)]


def _consumers(module: Module) -> dict[str, frozenset[str]]:
    """Instruction name -> names of the kernels that read its result.

    Looks through non-kernel instructions (tuple, get-tuple-element, bitcast, ...)
    within the same computation; a value that only reaches the computation's root
    has no consumer there.
    """
    users: dict[str, set[str]] = defaultdict(set)
    opcode: dict[str, str] = {}
    for comp in _executed_computations(module):
        for ins in comp.instructions:
            opcode[ins.name] = ins.opcode
            for op in ins.operands:
                users[op].add(ins.name)

    def kernel_users(name: str, seen: set[str]) -> set[str]:
        found: set[str] = set()
        for user in users.get(name, ()):
            if user in seen:
                continue
            seen.add(user)
            if opcode.get(user) in NOT_KERNELS:
                found |= kernel_users(user, seen)
            else:
                found.add(user)
        return found

    return {name: frozenset(kernel_users(name, set())) for name in opcode}


def _nested_names(module: Module, kernels: Iterable[str]) -> list[str]:
    """The kernels outside the entry computation (loop bodies, branches)."""
    entry = {i.name for i in module.entry.instructions}
    return sorted(k for k in kernels if k not in entry)


def _container_bodies(module: Module) -> dict[str, frozenset[str]]:
    """Container kernel (a loop, a conditional) -> the instructions its bodies, conditions and
    branches run, at any depth."""
    bodies: dict[str, frozenset[str]] = {}

    def inside(comp_names: Iterable[str], seen: set[str]) -> set[str]:
        names: set[str] = set()
        for callee in comp_names:
            if callee in seen or callee not in module.computations:
                continue
            seen.add(callee)
            for ins in module.computations[callee].instructions:
                names.add(ins.name)
                if ins.opcode in CONTROL_FLOW:
                    names |= inside(ins.called_computations, seen)
        return names

    for comp in _executed_computations(module):
        for ins in comp.instructions:
            if ins.opcode in CONTAINER_OPCODES:
                bodies[ins.name] = frozenset(inside(ins.called_computations, set()))
    return bodies


def _program_ids(compiled: Any) -> frozenset[int] | None:
    """The profiler's ``program_id`` of a compiled executable, or None if unknown.

    XLA:CPU reports ``HloModule::unique_id()``, field 5 (``id``) of ``HloModuleProto``; read with
    `tpucost.method.wire` (checked on jax 0.10 CPU: the ids match the trace's ``program_id``)."""
    try:
        modules = compiled.runtime_executable().hlo_modules()
        ids = {next(iter(wire.field_values(m.as_serialized_hlo_module_proto(), 5)), None) for m in modules}
    except Exception:  # private surface: fall back to module-name matching
        return None
    ids.discard(None)
    return frozenset(ids) or None


# ------------------------------------------------------------------------ labels


SYNC, ASYNC, UNKNOWN = "sync", "async", "unknown"


def _idle_segments(run_events: list[Event], containers: frozenset[str]) -> list[tuple[float, float]]:
    """Gaps in the run during which no (non-container) kernel event was executing;
    the last one is open-ended."""
    busy = sorted((e.start_ns, e.end_ns) for e in run_events if e.name not in containers)
    gaps, reach = [], busy[0][1] if busy else 0.0
    for start, end in busy[1:]:
        if start > reach:
            gaps.append((reach, start))
        reach = max(reach, end)
    gaps.append((reach, float("inf")))
    return gaps


def _completion_bound(
    ev: Event,
    starts_by_name: Mapping[str, list[float]],
    consumers: frozenset[str],
    container_events: list[Event],
    run_end: float,
) -> float:
    """Latest time ``ev``'s work can have finished: the first start of a kernel that
    reads its result, else the end of the enclosing container kernel or of the run.

    ``starts_by_name`` holds each kernel's event starts in this run, sorted, so the
    next start of a consumer is a binary search (loops make runs of many events).
    """
    starts = []
    for name in consumers:
        name_starts = starts_by_name.get(name, [])
        i = bisect.bisect_right(name_starts, ev.start_ns)
        if i < len(name_starts):
            starts.append(name_starts[i])
    if starts:
        return min(starts)
    enclosing = [e.end_ns for e in container_events if e.start_ns <= ev.start_ns and e.end_ns >= ev.end_ns]
    return min(enclosing, default=run_end)


def _idle_within(lo: float, hi: float, gaps: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The parts of the idle gaps inside [lo, hi], in time order (gaps sorted, disjoint)."""
    out = []
    i = bisect.bisect_right(gaps, (lo, float("inf")))
    i = max(i - 1, 0)  # the gap that may contain lo
    while i < len(gaps) and gaps[i][0] < hi:
        g0, g1 = gaps[i]
        if g1 > lo:
            out.append((max(g0, lo), min(g1, hi)))
        i += 1
    return out


def _event_label(ev: Event, bound: float, gaps: list[tuple[float, float]]) -> tuple[float, str]:
    """Label (ns) and kind (SYNC / ASYNC / UNKNOWN) of one kernel call on CPU.

    * SYNC: the end marker sits at the event's end; the label is the event.
    * ASYNC, shown by idle time: after the event ended and before ``bound`` the run
      was idle (no kernel event executing) for longer than the event itself and a
      small slack, i.e. the executor waited for this kernel. Its work ended when the
      run resumed, at the end of the last idle gap before ``bound``: the label is the
      elapsed time from the event's start to then (like a synchronous event, it
      includes whatever ran alongside).
    * ASYNC, shown only by a late end marker (its work overlapped other kernels,
      so no idle gap): the label is ``bound`` - start, an upper bound.
    * UNKNOWN: no marker and no idle evidence; the label is the event.
    """
    duration = ev.end_ns - ev.start_ns
    if ev.marker_ns is not None and ev.marker_ns - ev.end_ns <= _ASYNC_SLACK_NS:
        return duration, SYNC
    idle = _idle_within(ev.end_ns, bound, gaps)
    if sum(hi - lo for lo, hi in idle) > max(duration, _ASYNC_SLACK_NS):
        return idle[-1][1] - ev.start_ns, ASYNC
    if ev.marker_ns is not None:
        return max(duration, bound - ev.start_ns), ASYNC
    return duration, UNKNOWN


def _container_label(ev: Event, run_events: list[Event], body: frozenset[str]) -> tuple[float, str]:
    """Label and kind of a container kernel's call: from its start to the end of the last kernel
    its bodies ran before the container's next call (an asynchronous loop returns after its first
    iteration was launched, as jaxlib 0.7 does on several cores, and runs on in the thread pool)."""
    later = [e.start_ns for e in run_events if e.name == ev.name and e.start_ns > ev.start_ns]
    until = min(later, default=float("inf"))
    end = max(
        [ev.end_ns, *(e.end_ns for e in run_events if e.name in body and ev.start_ns <= e.start_ns < until)]
    )
    return end - ev.start_ns, ASYNC if end - ev.end_ns > _ASYNC_SLACK_NS else SYNC


def _run_labels(
    run_events: list[Event],
    consumers: Mapping[str, frozenset[str]],
    bodies: Mapping[str, frozenset[str]],
    run_end: float,
    async_completion: bool,
) -> list[tuple[float, str]]:
    """(label in ns, kind) per event of one run; ``bodies``: container -> what it runs (`_container_bodies`)."""
    if not async_completion:
        return [(e.end_ns - e.start_ns, SYNC) for e in run_events]
    containers = frozenset(bodies)
    gaps = _idle_segments(run_events, containers)
    starts_by_name: dict[str, list[float]] = defaultdict(list)
    for e in run_events:
        starts_by_name[e.name].append(e.start_ns)
    for name_starts in starts_by_name.values():
        name_starts.sort()
    container_events = [e for e in run_events if e.name in containers]
    out = []
    for ev in run_events:
        if ev.name in containers:
            out.append(_container_label(ev, run_events, bodies[ev.name]))
            continue
        if ev.marker_ns is not None and ev.marker_ns - ev.end_ns <= _ASYNC_SLACK_NS:
            out.append((ev.end_ns - ev.start_ns, SYNC))  # end marker at the event's end
            continue
        bound = _completion_bound(
            ev, starts_by_name, consumers.get(ev.name, frozenset()), container_events, run_end
        )
        out.append(_event_label(ev, bound, gaps))
    return out


@dataclasses.dataclass(frozen=True)
class _Labels:
    runtime_ns: dict[str, float]
    runs_seen: dict[str, int]
    calls_per_run: dict[str, int]
    run_span_ns: list[float]
    async_kernels: list[str]
    timeline: tuple[tuple[str, float, float], ...]


_Timeline = tuple[tuple[str, float, float], ...]
_PerRun = tuple[dict[str, list[tuple[float, bool]]], dict[str, int], list[float], set[str], _Timeline]


def _per_run_per_call(trace: Trace, module: Module, async_completion: bool) -> _PerRun:
    """name -> [(time per call, some call unclassified)] per run; calls per run;
    run spans; names found asynchronous; the timeline of the shortest run."""
    consumers, bodies = _consumers(module), _container_bodies(module)
    by_run: dict[Run, list[Event]] = defaultdict(list)
    for ev in trace.events:
        by_run[ev.run].append(ev)
    per_run: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    calls: dict[str, int] = {}
    spans: list[float] = []
    asyncs: set[str] = set()
    timeline: _Timeline = ()
    for run, evs in by_run.items():
        evs.sort(key=lambda e: e.start_ns)
        run_end = trace.run_end_ns.get(run, max(e.end_ns for e in evs))
        spans.append(run_end - evs[0].start_ns)
        total, count, unknown = defaultdict(float), defaultdict(int), defaultdict(bool)
        labels = _run_labels(evs, consumers, bodies, run_end, async_completion)
        if spans[-1] == min(spans):
            timeline = tuple(
                (ev.name, ev.start_ns - evs[0].start_ns, lab)
                for ev, (lab, _) in zip(evs, labels, strict=True)
            )
        for ev, (label, kind) in zip(evs, labels, strict=True):
            total[ev.name] += label
            count[ev.name] += 1
            unknown[ev.name] |= kind == UNKNOWN
            if kind == ASYNC:
                asyncs.add(ev.name)
        for name in total:
            per_run[name].append((total[name] / count[name], unknown[name]))
            calls[name] = max(calls.get(name, 0), count[name])
    return per_run, calls, spans, asyncs, timeline


def _labels(trace: Trace, module: Module, async_completion: bool) -> _Labels:
    """Per-kernel labels: per run, time per call; then the minimum over runs.

    For a kernel found asynchronous in some run, runs in which a call of it could
    not be classified (its event may be the launch only) are left out of the minimum
    unless no other run is left.
    """
    per_run, calls, spans, asyncs, timeline = _per_run_per_call(trace, module, async_completion)
    runtime = {}
    for name, values in per_run.items():
        trusted = [t for t, unknown in values if not (unknown and name in asyncs)]
        runtime[name] = min(trusted or [t for t, _ in values])
    return _Labels(
        runtime_ns=runtime,
        runs_seen={k: len(v) for k, v in per_run.items()},
        calls_per_run=calls,
        run_span_ns=spans,
        async_kernels=sorted(asyncs),
        timeline=timeline,
    )


# ----------------------------------------------------------------------- running


def _block(out: Any) -> Any:
    return jax.block_until_ready(out)


def compile_fn(
    fn: Callable[..., Any], args: Sequence[Any], compiler_options: Mapping[str, Any] | None = None
) -> jax.stages.Compiled:
    """``jax.jit(fn)`` lowered for ``args`` and compiled with ``compiler_options`` (never run).

    The one place tpucost compiles a program: measuring, collecting, the corpus and predicting
    all call it, so they compile the same way (no options: ``compiler_options=None``).
    """
    return jax.jit(fn).lower(*args).compile(compiler_options=dict(compiler_options or {}) or None)


def best_wall_time_ns(
    compiled: Callable[..., Any],
    args: Sequence[Any],
    repeats: int = 5,
    warmup: int = 1,
    budget_s: float | None = None,
) -> float:
    """The minimum wall time (ns) of ``repeats`` runs of a compiled ``compiled(*args)``, after
    ``warmup`` untimed runs; the one timing loop of tpucost's measurements that need no trace.

    With ``budget_s``, a slow program gets fewer runs (at least one): as many as fit in
    ``budget_s`` seconds at the speed of its last warm-up run (a run of 0.5 s or more varies far
    less, in relative terms, than the millisecond runs that get all ``repeats``).
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats must be >= 1 and warmup >= 0, got {repeats} and {warmup}")
    runs = repeats
    for _ in range(warmup):
        t0 = time.perf_counter()
        _block(compiled(*args))
        if budget_s is not None:
            runs = max(1, min(repeats, int(budget_s / max(time.perf_counter() - t0, 1e-9))))
    return float(min(wall_time_ns(compiled, *args, repeats=runs)))


def wall_time_ns(fn: Callable[..., Any], *args: Any, repeats: int = 5) -> list[float]:
    """Wall time of ``fn(*args)`` up to ``block_until_ready``, in ns, per run.

    The program's reference time is the minimum. ``fn`` should already be compiled
    (a jitted function called once, or a ``Compiled``), or the first run includes
    compilation.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        _block(fn(*args))
        times.append(float(time.perf_counter_ns() - t0))
    return times


def _traced_profile(
    compiled: Callable[..., Any], args: Sequence[Any], repeats: int, read: Callable[[Any], Trace]
) -> Trace:
    """Run ``compiled`` ``repeats`` times under the profiler and read the trace."""
    with tempfile.TemporaryDirectory(prefix="tpucost-trace-") as tmp:
        try:
            jax.profiler.start_trace(tmp)
        except RuntimeError as err:
            raise RuntimeError("cannot start the JAX profiler (is another trace active?)") from err
        try:
            for _ in range(repeats):
                _block(compiled(*args))
        finally:
            jax.profiler.stop_trace()
        paths = glob.glob(os.path.join(tmp, "**", "*.xplane.pb"), recursive=True)
        if not paths:
            raise ValueError(f"the profiler wrote no .xplane.pb under {tmp}")
        return read(jax.profiler.ProfileData.from_file(max(paths, key=os.path.getmtime)))


def _device_kind(compiled: Any) -> str:
    try:
        return compiled.runtime_executable().local_devices()[0].device_kind
    except Exception:
        return jax.devices()[0].device_kind


def measure_kernels(
    fn: Callable[..., Any],
    *args: Any,
    repeats: int = 5,
    compiler_options: Mapping[str, Any] | None = None,
    warmup: int = 1,
) -> Measurement:
    """Compile ``fn`` for ``args``, run it under the profiler, label its kernels.

    Args:
        fn: a function of arrays (use ``functools.partial`` for static arguments).
        ``*args``: example arguments; the program is compiled for their shapes.
        repeats: traced runs (labels are minima over them); also the number of
        untraced wall-time runs (at least 5).
        compiler_options: passed to ``Lowered.compile``, e.g.
        ``{"xla_disable_hlo_passes": "fusion"}``.
        warmup: untraced runs before timing.

    Raises:
        ValueError: bad ``repeats``, or no event of this module in the trace.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    fingerprint = device.fingerprint()
    if fingerprint["label_mode"] != device.LABEL_MODE:
        device.warn_once(
            f"measuring XLA:CPU kernels with {fingerprint['cores']} cores: independent kernels may "
            "run at the same time and their labels then count that time twice. For labels that add "
            "up, call tpucost.method.device.pin_to_one_core() before the first JAX computation.",
            key="measure: several cores",
        )
    compiled = compile_fn(fn, args, compiler_options)
    hlo_text = compiled.as_text()
    module = parse_module(hlo_text)  # parsed once; the helpers below share it
    module_name, backend = module.name, backends.backend()
    async_completion = backend.async_kernels
    program_ids = _program_ids(compiled) if backend.trace_program_ids else None
    for _ in range(warmup):
        _block(compiled(*args))
    wall = wall_time_ns(compiled, *args, repeats=max(repeats, _MIN_WALL_RUNS))
    kernels = _kernel_names(module)
    if kernels:
        trace = _traced_profile(
            compiled, args, repeats, lambda p: kernel_events(p, backend, module_name, program_ids)
        )
    else:  # nothing runs (e.g. the identity): nothing to trace
        trace = Trace([], {}, set())
    labels = _labels(trace, module, async_completion)
    return Measurement(
        runtime_ns=labels.runtime_ns,
        runs_seen=labels.runs_seen,
        calls_per_run=labels.calls_per_run,
        wall_ns_per_run=wall,
        run_span_ns=labels.run_span_ns,
        hlo_text=hlo_text,
        missing=[k for k in kernels if k not in labels.runtime_ns],
        nested=_nested_names(module, set(kernels) | set(labels.runtime_ns)),
        async_kernels=labels.async_kernels,
        module_name=module_name,
        backend=jax.default_backend(),
        device_kind=_device_kind(compiled),
        timeline=labels.timeline,
        module=module,
        device=fingerprint,
    )
