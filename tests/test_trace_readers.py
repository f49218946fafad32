"""The GPU and TPU trace readers of tpucost.method.measure, on synthetic profiles (no device needed).

The traces are serialized XSpace protos read back by ``jax.profiler.ProfileData``, the reader
``measure_kernels`` uses, so the tests see what that reader makes of a trace (it returns an event
metadata's *name*, not its display name, and hides the metadata's stats). Their structure follows
what xprof, tokamax and tune-jax rely on (docs/measuring.md, "The TPU trace reader"), including
the forms in which those readers and real traces differ.
"""

from __future__ import annotations

import pytest
from jax.profiler import ProfileData

from tpucost.method import backends, measure, trace_events
from tpucost.method.hlo import parse_module

pytestmark = pytest.mark.core  # ProfileData's parsing is version-sensitive (make test-colab)

TPU = backends.backend("tpu")
GPU = backends.backend("gpu")
T0_NS = 1_000_000  # the lines' timestamp
US = 1_000_000  # picoseconds in a microsecond


# ------------------------------------------------------------ a minimal XSpace (xplane.proto) writer


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _int_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _len_field(number: int, data: bytes | str) -> bytes:
    data = data.encode() if isinstance(data, str) else data
    return _varint(number << 3 | 2) + _varint(len(data)) + data


class Plane:
    """One XPlane: lines of events; event and stat metadata are interned by name."""

    def __init__(self, name: str):
        self.name = name
        self.lines: list[tuple[str, list[bytes]]] = []
        self.event_md: dict[tuple[str, str], int] = {}
        self.stat_md: dict[str, int] = {}

    def line(self, name: str) -> list[bytes]:
        self.lines.append((name, []))
        return self.lines[-1][1]

    def _stat(self, name: str, value: object) -> bytes:
        mid = self.stat_md.setdefault(name, len(self.stat_md) + 1)
        if isinstance(value, str):
            return _int_field(1, mid) + _len_field(5, value)  # str_value
        assert isinstance(value, int)
        return _int_field(1, mid) + (_int_field(3, value) if value >= 0 else _int_field(4, value))

    def event(self, line: list[bytes], name: str, start_us: float, dur_us: float, display="", **stats):
        """An event ``start_us`` after the line's timestamp; ``display``: its metadata's display name."""
        mid = self.event_md.setdefault((name, display), len(self.event_md) + 1)
        data = _int_field(1, mid) + _int_field(2, round(start_us * US)) + _int_field(3, round(dur_us * US))
        line.extend([data + b"".join(_len_field(4, self._stat(k, v)) for k, v in stats.items())])

    def serialize(self) -> bytes:
        out = _len_field(2, self.name)
        for i, (name, events) in enumerate(self.lines):
            body = _int_field(1, i + 1) + _len_field(2, name) + _int_field(3, T0_NS)
            out += _len_field(3, body + b"".join(_len_field(4, e) for e in events))
        for (name, display), mid in self.event_md.items():
            md = _int_field(1, mid) + _len_field(2, name) + (_len_field(4, display) if display else b"")
            out += _len_field(4, _int_field(1, mid) + _len_field(2, md))
        for name, mid in self.stat_md.items():
            out += _len_field(5, _int_field(1, mid) + _len_field(2, _int_field(1, mid) + _len_field(2, name)))
        return out


def profile(*planes: Plane) -> ProfileData:
    return ProfileData.from_serialized_xspace(b"".join(_len_field(1, p.serialize()) for p in planes))


# ------------------------------------------------------------------------------------- TPU traces

F_HLO = """HloModule jit_f

%fused (p: f32[8]) -> f32[8] {
  %p = f32[8] parameter(0)
  ROOT %t = f32[8] tanh(%p)
}

ENTRY %main (x: f32[8]) -> f32[8] {
  %x = f32[8] parameter(0)
  %fusion.1 = f32[8] fusion(%x), kind=kLoop, calls=%fused
  ROOT %copy.2 = f32[8] copy(%fusion.1)
}
"""
# The program id in an XLA Modules event's name: xprof's test trace of a TPU v6e
# (xprof/convert/test_xplanes/tpu_inference_2.xplane.pb) shows 64-bit ids such as this one.
PID = 12190760917235803885
# Kernel -> (start, duration) in us within each run of jit_f; runs start at 0, 100 and 300 us.
RUNS_US = (0.0, 100.0, 300.0)
F_OPS = {"fusion.1": [(2, 10), (2, 12), (2, 9)], "copy.2": [(20, 5), (20, 4), (20, 6)]}


def hlo_text(name: str) -> str:
    """What a TPU trace gives as an op's metadata name: the instruction's HLO text."""
    return f"%{name} = f32[8]{{0:T(256)}} fusion(f32[8]{{0:T(256)}} %x), kind=kLoop, calls=%fused"


def tpu_trace(op_form: str = "hlo_text", module_names: bool = True, **opts) -> ProfileData:
    """A one-chip TPU trace of three runs of jit_f with a run of jit_g (same op names) in between.

    ``op_form``: how an XLA Ops event names its op: ``"hlo_text"`` (metadata name = HLO text,
    display name = short name, as in xprof's v6e test trace), ``"short"`` (name only),
    ``"hlo_op"`` (an ``hlo_op`` stat, the event named by the op's category); ``"op_stats"``: the
    op events carry ``hlo_module`` / ``program_id`` / ``run_id`` stats and there is no module
    line. ``module_names``: XLA Modules events named ``jit_f(<id>)`` (else plain names with
    ``hlo_module`` / ``program_id`` stats). ``opts``: ``device_duration`` (the op events carry a
    ``device_duration_ps`` stat 1 us shorter than the event), ``f_module`` (jit_f's module name).
    """
    f_module = opts.get("f_module", "jit_f")
    tc = Plane("/device:TPU:0")
    steps, modules, ops = tc.line("Steps"), tc.line("XLA Modules"), tc.line("XLA Ops")
    async_ops, overlay = tc.line("Async XLA Ops"), tc.line("XLA TraceMe")
    tc.event(steps, "0", 0, 400)  # a step enclosing everything: not a module
    program_runs = [(f_module, PID, t0, run) for run, t0 in enumerate(RUNS_US, start=1)]
    program_runs.insert(1, ("jit_g", 8, 50.0, 1))
    for module, pid, t0, run in program_runs:
        if op_form != "op_stats":
            if module_names:
                tc.event(modules, f"{module}({pid})", t0, 40, run_id=run)
            else:
                tc.event(modules, module, t0, 40, hlo_module=module, program_id=pid, run_id=run)
        k = RUNS_US.index(t0) if module == f_module else 0
        for op, spans in F_OPS.items():
            start, dur = spans[k]
            if module == "jit_g":
                dur = 15  # jit_g's ops of the same names are far longer: they must not mix in
            stats = {"device_offset_ps": 7 * US, "device_duration_ps": (dur - 1) * US}
            stats = stats if opts.get("device_duration") else {}
            if op_form == "hlo_text":
                tc.event(ops, hlo_text(op), t0 + start, dur, display=op, **stats)
            elif op_form == "short":
                tc.event(ops, op, t0 + start, dur, **stats)
            elif op_form == "hlo_op":
                tc.event(ops, op.split(".")[0], t0 + start, dur, hlo_op=op, **stats)
            else:
                assert op_form == "op_stats"
                tc.event(ops, op, t0 + start, dur, hlo_module=module, program_id=pid, run_id=run, **stats)
        # the transfer of an async copy and the runtime's own markers: not ops of the program
        tc.event(async_ops, "copy-start", t0 + 1, 35, hlo_op="copy.2")
        tc.event(overlay, "dependency-wait", t0 + 15, 4)
    # an op after the last run's module event ended (a trace edge, a program without a module event)
    tc.event(ops, hlo_text("fusion.1"), RUNS_US[-1] + 45, 1000, display="fusion.1")
    # a SparseCore plane of the same chip (its name starts like a TensorCore plane's) and the host
    sc = Plane("/device:TPU:0 SparseCore 0")
    sc_ops = sc.line("XLA Ops")
    sc.event(sc_ops, "fusion.1", 2, 1000, hlo_module=f_module, program_id=PID, run_id=1)
    host = Plane("/host:CPU")
    host.event(host.line("python"), "fusion.1", 0, 1000, hlo_module=f_module, hlo_op="fusion.1")
    return profile(host, tc, sc)


def labels_of(trace: trace_events.Trace, hlo: str = F_HLO) -> dict[str, float]:
    """Per-kernel labels in us (`measure._labels`, as `measure_kernels` makes them on TPU)."""
    out = measure._labels(trace, parse_module(hlo), TPU.async_kernels)
    return {k: round(v / 1000, 6) for k, v in out.runtime_ns.items()}


EXPECTED_US = {"fusion.1": 9.0, "copy.2": 4.0}  # the minimum over the three runs of jit_f


@pytest.mark.parametrize("op_form", ["hlo_text", "short", "hlo_op", "op_stats"])
def test_tpu_reader_labels_every_form_of_op_name(op_form):
    trace = trace_events.kernel_events(tpu_trace(op_form), TPU, "jit_f", frozenset({PID}))
    assert sorted({e.name for e in trace.events}) == ["copy.2", "fusion.1"]
    assert len(trace.events) == 6  # two ops x three runs: no jit_g, SparseCore, host or async event
    assert len({e.run for e in trace.events}) == 3
    assert labels_of(trace) == EXPECTED_US
    assert "jit_g" in trace.modules_seen


def test_tpu_reader_reads_the_module_from_stats_or_from_the_name():
    by_stats = trace_events.kernel_events(tpu_trace(module_names=False), TPU, "jit_f", frozenset({PID}))
    assert labels_of(by_stats) == EXPECTED_US
    assert by_stats.modules_seen == {"jit_f", "jit_g"}


def test_tpu_reader_prefers_the_device_duration_stat():
    trace = trace_events.kernel_events(tpu_trace(device_duration=True), TPU, "jit_f", frozenset({PID}))
    assert labels_of(trace) == {k: v - 1 for k, v in EXPECTED_US.items()}


def test_tpu_reader_gives_no_labels_for_another_module():
    with pytest.raises(ValueError, match="jit_h"):
        trace_events.kernel_events(tpu_trace(), TPU, "jit_h", frozenset({PID}))
    # The ops inside jit_g's run are jit_g's, whatever their names.
    g = trace_events.kernel_events(tpu_trace(), TPU, "jit_g", None)
    assert labels_of(g) == {"fusion.1": 15.0, "copy.2": 15.0}
    # A module that merely starts like ours is another module.
    with pytest.raises(ValueError, match="modules seen"):
        trace_events.kernel_events(tpu_trace(f_module="jit_f_2"), TPU, "jit_f", frozenset({PID}))


def test_tpu_reader_program_ids():
    profile_ = tpu_trace()
    # Another executable's id: no event of it, and the module's name is in the trace, so the
    # reader matches by name alone (XLA's HloModuleProto id need not be the trace's program id).
    fallback = trace_events.kernel_events(profile_, TPU, "jit_f", frozenset({5}))
    assert labels_of(fallback) == EXPECTED_US
    # Two programs of one name in the trace and no id to tell them apart: refused.
    tc = Plane("/device:TPU:0")
    modules, ops = tc.line("XLA Modules"), tc.line("XLA Ops")
    for pid, t0 in ((1, 0), (2, 100)):
        tc.event(modules, f"jit_f({pid})", t0, 40, run_id=1)
        tc.event(ops, hlo_text("fusion.1"), t0 + 2, 10, display="fusion.1")
    two = profile(tc)
    with pytest.raises(ValueError, match="several programs"):
        trace_events.kernel_events(two, TPU, "jit_f", None)
    only_2 = trace_events.kernel_events(two, TPU, "jit_f", frozenset({2}))
    assert [(e.name, e.start_ns) for e in only_2.events] == [("fusion.1", T0_NS + 102_000)]


def test_tpu_reader_numbers_runs_without_run_ids_and_keeps_loop_bodies_nested():
    loop_hlo = """HloModule jit_loop

%body (s: (s32[], f32[8])) -> (s32[], f32[8]) {
  %s = (s32[], f32[8]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %v = f32[8] get-tuple-element(%s), index=1
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %t.4 = f32[8] tanh(%v)
  ROOT %out = (s32[], f32[8]) tuple(%next, %t.4)
}

%cond (c: (s32[], f32[8])) -> pred[] {
  %c = (s32[], f32[8]) parameter(0)
  %k = s32[] get-tuple-element(%c), index=0
  %n = s32[] constant(2)
  ROOT %lt = pred[] compare(%k, %n), direction=LT
}

ENTRY %main (x: f32[8]) -> f32[8] {
  %x = f32[8] parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], f32[8]) tuple(%zero, %x)
  %while.3 = (s32[], f32[8]) while(%init), condition=%cond, body=%body
  ROOT %res = f32[8] get-tuple-element(%while.3), index=1
}
"""
    tc = Plane("/device:TPU:0")
    modules, ops = tc.line("XLA Modules"), tc.line("XLA Ops")
    for t0, body in ((0, (3, 4)), (100, (2, 5))):  # no run_id stats
        tc.event(modules, "jit_loop(3)", t0, 50)
        tc.event(ops, hlo_text("while.3"), t0 + 1, 30, display="while.3")
        for k, dur in enumerate(body):
            tc.event(ops, hlo_text("t.4"), t0 + 2 + 10 * k, dur, display="t.4")
    trace = trace_events.kernel_events(profile(tc), TPU, "jit_loop", frozenset({3}))
    assert len({e.run for e in trace.events}) == 2
    out = measure._labels(trace, parse_module(loop_hlo), TPU.async_kernels)
    assert out.runtime_ns == {"while.3": 30_000.0, "t.4": 3_500.0}  # per-call mean, min over runs
    assert out.calls_per_run == {"while.3": 1, "t.4": 2}
    assert measure._nested_names(parse_module(loop_hlo), out.runtime_ns) == ["t.4"]


def test_hlo_op_name_forms():
    assert trace_events.hlo_op_name(hlo_text("copy-done.5"), {}) == "copy-done.5"
    assert trace_events.hlo_op_name("fusion.3 = f32[8] fusion(%x)", {}) == "fusion.3"
    assert trace_events.hlo_op_name("fusion.3", {}) == "fusion.3"
    assert trace_events.hlo_op_name("loop fusion", {"hlo_op": "fusion.3"}) == "fusion.3"
    assert trace_events.hlo_op_name("kernel_a", {"hlo_op": "while.1::fusion.3"}) == "fusion.3"


# ------------------------------------------------------------------------------------- GPU traces


def test_gpu_reader_on_stream_lines():
    gpu = Plane("/device:GPU:0")
    stream = gpu.line("Stream #7(Compute)")
    gpu.event(stream, "kernel_a", 0, 10, hlo_module="jit_f", hlo_op="fusion.1", program_id=7, run_id=1)
    gpu.event(stream, "kernel_b", 20, 5, hlo_module="jit_g", hlo_op="fusion.1", program_id=8, run_id=1)
    gpu.event(stream, "kernel_a", 100, 12, hlo_module="jit_f", hlo_op="fusion.1", program_id=7, run_id=2)
    gpu.event(
        stream, "kernel_c", 120, 3, hlo_module="jit_f", hlo_op="while.2::fusion.3", program_id=7, run_id=2
    )
    host = Plane("/host:CPU")
    host.event(host.line("python"), "x", 0, 1000, hlo_module="jit_f", hlo_op="fusion.1", program_id=7)
    other = Plane("/device:GPU:0 extra")
    other.event(other.line("s"), "y", 0, 1000, hlo_module="jit_f", hlo_op="fusion.1", program_id=7)
    trace = trace_events.kernel_events(profile(host, gpu, other), GPU, "jit_f", frozenset({7}))
    assert [(e.name, e.run[-1], e.end_ns - e.start_ns) for e in trace.events] == [
        ("fusion.1", 1, 10_000.0),
        ("fusion.1", 2, 12_000.0),
        ("fusion.3", 2, 3_000.0),
    ]
    assert trace.modules_seen == {"jit_f", "jit_g"}
    with pytest.raises(ValueError, match="jit_h"):
        trace_events.kernel_events(profile(gpu), GPU, "jit_h", frozenset({7}))
