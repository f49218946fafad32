"""A profile in, kernel labels out: any ``*.xplane.pb`` a JAX program's profiler wrote.

Notebook 02, section 6 (a real TPU profile). `tpucost.method.measure` runs a program under the
profiler and labels its kernels; this module reads a profile somebody already captured (with
``jax.profiler.trace``, on a TPU, GPU or CPU) and reports, per compiled module it ran: its runs,
their mean time, and per kernel the number of executions and their mean time (`profile_report`,
``python -m tpucost trace``). The events are read by the backend readers of
`tpucost.method.trace_events`, so a profile and a measurement label kernels the same way.

Where the trace embeds the compiled HLO (TPU profiles do: an ``Hlo Proto`` stat on the event
metadata of the ``/host:metadata`` plane, keyed by the program's id), the module goes through the
project's own parser and decomposition (`tpucost.method.kernels`): a kernel with no event is then
reported with ``n = 0``, never silently absent, ops that ran but are not kernels (a ``copy-start``,
the few ns that issue a DMA) are listed apart, and a kernel carries the TPU compiler's own
estimate (``xla_estimated_cycles``, `tpucost.method.backends.Target` turns it into ns where the
chip's clock is known).

The program id in a TPU module event's name (``jit_f(12190760917235803885)``) is the executable's
fingerprint, not the ``HloModuleProto.id`` (12) that XLA:CPU reports as ``program_id``: the
embedded HLO is found by that fingerprint, the same key the metadata plane uses, and
`tpucost.method.measure` matches a TPU module by name (`Backend.trace_program_ids`).
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from jax.profiler import ProfileData

from tpucost import compat
from tpucost.files import bundled_dir
from tpucost.method import backends, hlo, kernels, trace_events, wire

__all__ = ["embedded_hlo", "backend_configs", "plane_backend", "profile_report", "bundled_v6e_profile"]

_METADATA_PLANE = "/host:metadata"
_HLO_PROTO_STAT = "Hlo Proto"


def _planes(space: bytes) -> list[bytes]:
    return [p for p in wire.field_values(space, 1) if isinstance(p, bytes)]


def _name(message: bytes, number: int = 2) -> str:
    values = wire.field_values(message, number)
    return values[0].decode("utf-8", "replace") if values and isinstance(values[0], bytes) else ""


def _map_values(plane: bytes, number: int) -> list[bytes]:
    """The values of a ``map<int64, Message>`` field of an XPlane (entries: key 1, value 2)."""
    return [v for entry in wire.field_values(plane, number) for v in wire.field_values(entry, 2)]


def embedded_hlo(space: bytes) -> dict[int, tuple[str, bytes]]:
    """Program id -> (module name, serialized ``HloModuleProto``) of every module whose HLO the
    trace embeds (xplane.proto: XPlane ``event_metadata`` 4 / ``stat_metadata`` 5; XEventMetadata
    ``id`` 1, ``name`` 2, ``stats`` 5; XStat ``metadata_id`` 1, ``bytes_value`` 6; the stat holds an
    ``xla.HloProto`` whose field 1 is the module)."""
    found = {}
    for plane in _planes(space):
        if _name(plane) != _METADATA_PLANE:
            continue
        stat_names = {wire.field_values(m, 1)[0]: _name(m) for m in _map_values(plane, 5)}
        for meta in _map_values(plane, 4):
            for stat in wire.field_values(meta, 5):
                ids, blobs = wire.field_values(stat, 1), wire.field_values(stat, 6)
                if ids and blobs and stat_names.get(ids[0]) == _HLO_PROTO_STAT:
                    program_id = wire.field_values(meta, 1)[0]
                    module = wire.field_values(blobs[0], 1)
                    name = _name(meta).split("(")[0]
                    if module:
                        found[int(program_id)] = (name, module[0])
    return found


def plane_backend(profile: Any) -> tuple[backends.Backend, str]:
    """The backend whose device planes the profile holds (TPU, then GPU, else the host CPU) and
    its device, in words (a TPU plane's ``device_type_string``: ``"TPU v6 Lite"``)."""
    for name in ("tpu", "gpu"):
        record = backends.backend(name)
        for plane in trace_events.device_planes(profile, record.trace_planes):
            stats = dict(plane.stats)
            return record, str(stats.get("device_type_string") or plane.name)
    return backends.backend("cpu"), "cpu"


def backend_configs(module_proto: bytes) -> dict[str, Any]:
    """Instruction name -> its ``backend_config`` (parsed JSON) in a serialized ``HloModuleProto``
    (computations 3, instructions 2; HloInstructionProto ``name`` 1, ``backend_config`` 43): jaxlib
    0.7.2's HLO printer leaves the TPU compiler's configs out of the text, 0.10.2's keeps them."""
    out = {}
    for comp in wire.field_values(module_proto, 3):
        for inst in wire.field_values(comp, 2):
            config = wire.field_values(inst, 43)
            if config and config[0]:
                try:
                    out[wire.field_values(inst, 1)[0].decode()] = json.loads(config[0])
                except (ValueError, IndexError):
                    continue
    return out


def _estimate(kernel: kernels.Kernel, target: backends.Target | None) -> tuple[int | None, float | None]:
    cycles = kernels.estimated_cycles(kernel)
    ns = cycles / target.clock_hz * 1e9 if cycles is not None and target and target.clock_hz else None
    return cycles, ns


def profile_report(path: str | Path) -> dict[str, Any]:
    """Every module the profile at ``path`` ran: ``{"profile", "device", "backend", "modules": [...]}``.

    A module: ``module`` (its name), ``program_id``, ``device``, ``runs``, ``mean_run_ns`` (None
    where the trace has no run events), ``kernel_sum_over_run`` (per run, the kernels' summed
    labels over the run's time, median over runs; None without run events), ``hlo`` (whether the
    trace embeds its HLO), ``kernels`` (``name``, ``opcode``, ``n``, ``mean_ns``,
    ``xla_estimated_cycles``, ``xla_estimated_ns``), ``not_kernels`` (ops timed that are not
    kernels) and ``missing`` (kernels of the HLO with no event). ValueError (one line, naming the
    file) for a file that is not a profile.
    """
    path = Path(path)
    try:
        space = path.read_bytes()
        hlo_of = embedded_hlo(space)
        profile = ProfileData.from_serialized_xspace(space)
    except OSError as err:
        raise ValueError(f"{path}: cannot read the profile ({err.strerror})") from None
    except Exception as err:  # WireError, or ProfileData's own parse error
        raise ValueError(f"{path}: not an xplane.pb profile ({str(err).splitlines()[0]})") from None
    backend, device = plane_backend(profile)
    target = backends.tpu_target(device) if backend.name == "tpu" else None
    reader = trace_events.READERS[backend.name]
    seen = reader(profile, backend.trace_planes, "", None).modules_seen
    modules = []
    for module_name in sorted(seen):
        trace = reader(profile, backend.trace_planes, module_name, None)
        for pid in sorted({r[0] for r in (*trace.run_ns, *(e.run for e in trace.events))}, key=str):
            events = [e for e in trace.events if e.run[0] == pid]
            runs = {r: ns for r, ns in trace.run_ns.items() if r[0] == pid}
            modules.append(_module_entry(module_name, pid, events, runs, hlo_of.get(pid), device, target))
    return {"profile": str(path), "device": device, "backend": backend.name, "modules": modules}


def _module_entry(
    name: str,
    pid: Any,
    events: list[trace_events.Event],
    run_ns: dict[Any, float],
    embedded: tuple[str, bytes] | None,
    device: str,
    target: backends.Target | None,
) -> dict[str, Any]:
    by_op: dict[str, list[float]] = defaultdict(list)
    for e in events:
        by_op[e.name].append(e.end_ns - e.start_ns)
    ks = kernels.decompose(hlo.parse_module(compat.hlo_text(embedded[1]), source=name)) if embedded else None
    if ks and any(k.backend_config is None for k in ks):  # an older XLA's printer leaves them out
        configs = backend_configs(embedded[1])
        for kernel in ks:
            kernel.backend_config = kernel.backend_config or configs.get(kernel.instruction.name)
    names = [k.name for k in ks] if ks is not None else sorted(by_op)
    rows = []
    for i, kernel_name in enumerate(names):
        times = by_op.get(kernel_name, [])
        cycles, est_ns = _estimate(ks[i], target) if ks is not None else (None, None)
        rows.append(
            {
                "name": kernel_name,
                "opcode": ks[i].opcode if ks is not None else None,
                "n": len(times),
                "mean_ns": statistics.fmean(times) if times else None,
                "xla_estimated_cycles": cycles,
                "xla_estimated_ns": est_ns,
            }
        )
    kernel_names = set(names)
    per_run: dict[Any, float] = defaultdict(float)
    for e in events:
        if e.name in kernel_names:
            per_run[e.run] += e.end_ns - e.start_ns
    ratios = [per_run[r] / ns for r, ns in run_ns.items() if ns > 0]
    return {
        "module": name,
        "program_id": pid,
        "device": device,
        "runs": len(run_ns) or len({e.run for e in events}),
        "mean_run_ns": statistics.fmean(run_ns.values()) if run_ns else None,
        "kernel_sum_over_run": statistics.median(ratios) if ratios else None,
        "hlo": embedded is not None,
        "kernels": rows,
        "not_kernels": [
            {"name": op, "n": len(t), "mean_ns": statistics.fmean(t)}
            for op, t in sorted(by_op.items())
            if op not in kernel_names
        ],
        "missing": [r["name"] for r in rows if r["n"] == 0],
    }


def bundled_v6e_profile() -> Path:
    """The shipped profile of a real TPU v6e (``tpucost/bundled/tpu_ground_truth/``, its README)."""
    return bundled_dir() / "tpu_ground_truth" / "tpu_inference_2.xplane.pb"
