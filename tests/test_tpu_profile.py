"""The TPU path against a real TPU v6e profile (tpucost/bundled/tpu_ground_truth/, measured by others).

Every expected value comes from outside tpucost: xprof 2.24.2's own ``hlo_stats`` of the same file
(tests/data/tpu/, its provenance in the bundled folder's README) and the facts its README lists.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

import pytest
from jax.profiler import ProfileData

from tpucost import compat
from tpucost.cli import main, show
from tpucost.method import backends, hlo, kernels, profiles, trace_events, wire
from tpucost.method.costmodel import CostModel

pytestmark = pytest.mark.core  # ProfileData and XLA's HLO printer are version-sensitive (make test-colab)

PROFILE = profiles.bundled_v6e_profile()
HLO_STATS = Path(__file__).parent / "data" / "tpu" / "xprof-2.24.2_hlo_stats.json"
JIT_F = 12190760917235803885  # the program id in jit_f's module events (its README)


@pytest.fixture(scope="module")
def report():
    return profiles.profile_report(PROFILE)


@pytest.fixture(scope="module")
def xprof():
    """(program id, op name) -> (occurrences, mean us) from xprof's hlo_stats table."""
    table = json.loads(HLO_STATS.read_text())
    cols = [c["id"] for c in table["cols"]]
    rows = [dict(zip(cols, [c.get("v") for c in r["c"]], strict=True)) for r in table["rows"]]
    return {(int(r["program_id"]), r["hlo_op_name"]): (r["occurrences"], r["avg_time"]) for r in rows}


def _ops(report):
    """(program id, op) -> (n, mean ns) of every op the report timed, kernels and not."""
    return {
        (m["program_id"], op["name"]): (op["n"], op["mean_ns"])
        for m in report["modules"]
        for op in (*m["kernels"], *m["not_kernels"])
        if op["n"]
    }


def test_the_shipped_profile_is_the_intact_blob():
    import hashlib

    digest = hashlib.sha256(PROFILE.read_bytes()).hexdigest()
    assert digest == "e312ef8bd5a5104a44b36201bec0e743ef4868cb179c9b67b679c9955f8279c6"


def test_every_op_mean_equals_xprofs_hlo_stats(report, xprof):
    ours = _ops(report)
    assert len(xprof) == 17 and set(ours) == set(xprof)
    for key, (n, mean_us) in xprof.items():
        assert ours[key][0] == n, key
        assert ours[key][1] / 1e3 == pytest.approx(mean_us, rel=1e-9), key


def test_event_durations_would_be_up_to_13_percent_off(xprof):
    """Why the reader takes ``device_duration_ps``: the events' own durations disagree with xprof."""
    profile = ProfileData.from_file(str(PROFILE))
    durations = defaultdict(list)
    for plane in trace_events.device_planes(profile, "/device:TPU:"):
        for line in plane.lines:
            if line.name == trace_events.XLA_OPS_LINE:
                for ev in line.events:
                    durations[trace_events.hlo_op_name(ev.name, {})].append(ev.duration_ns)
    off = {
        op: statistics.fmean(durations[op]) / 1e3 / mean_us - 1
        for (_, op), (_, mean_us) in xprof.items()
        if mean_us > 1000  # the long ops: ns-scale copy-starts are noise either way
    }
    assert 0.10 < max(off.values()) < 0.15, off


def test_a_run_of_jit_f_is_the_sum_of_its_kernels(report, xprof):
    jit_f = next(m for m in report["modules"] if m["program_id"] == JIT_F)
    assert jit_f["runs"] == 400 and jit_f["device"] == "TPU v6 Lite"
    assert 0.9 <= jit_f["kernel_sum_over_run"] <= 1.1  # per run, median over the 400
    # against xprof's means: the kernels (copy-done waits and fusions, no copy-start) make a run
    kernel_names = {k["name"] for k in jit_f["kernels"]}
    assert not any(name.startswith("copy-start") for name in kernel_names)
    xprof_sum_ns = (
        sum(us for (pid, op), (_, us) in xprof.items() if pid == JIT_F and op in kernel_names) * 1e3
    )
    assert xprof_sum_ns / jit_f["mean_run_ns"] == pytest.approx(1.0, abs=0.1)


def test_host_copies_wait_in_their_copy_done(report):
    jit_f = next(m for m in report["modules"] if m["program_id"] == JIT_F)
    module = hlo.parse_module(compat.hlo_text(profiles.embedded_hlo(PROFILE.read_bytes())[JIT_F][1]))
    ks = {k.name: k for k in kernels.decompose(module)}
    copies = [k for k in ks.values() if k.is_async_copy]
    assert len(copies) == 6 and all(k.host_copy for k in copies)  # every copy has S(5) on one side
    assert all(name.startswith("copy-done") for name in (k.name for k in copies))
    means = {k["name"]: k["mean_ns"] for k in jit_f["kernels"]}
    assert all(180e6 < means[n] < 200e6 for n in ("copy-done", "copy-done.2", "copy-done.4", "copy-done.5"))
    assert all(k["mean_ns"] < 10 for k in jit_f["not_kernels"])  # copy-start: the DMA's issue


def test_a_kernel_without_an_event_is_reported(report):
    by_name = {m["module"]: m for m in report["modules"]}
    assert by_name["jit_convert_element_type"]["runs"] == 1
    assert sorted(by_name["jit_convert_element_type"]["missing"]) == ["copy", "copy.1"]
    assert by_name["jit_broadcast_in_dim"]["missing"] == ["copy"]
    table = show(report)  # the command's table: each module's missing kernels on a line
    assert (
        sum(
            line.strip() in ("missing: copy", "missing: copy.1, copy", "missing: copy, copy.1")
            for line in table.splitlines()
        )
        == 2
    )


def test_the_compilers_estimates_sit_beside_the_measurements(report):
    cycles = {
        k["name"]: k["xla_estimated_cycles"]
        for m in report["modules"]
        for k in m["kernels"]
        if k["xla_estimated_cycles"] is not None
    }
    assert cycles == {
        "broadcast_add_fusion": 14_180_608,
        "broadcast_add_fusion.1": 14_180_608,
        "broadcast_add_fusion.2": 14_180_608,
        "broadcast.2": 27_402_272,
    }
    # the v6e's clock is not documented consistently (backends.TARGETS): cycles, no ns
    assert backends.tpu_target("TPU v6 Lite").clock_hz is None
    assert all(k["xla_estimated_ns"] is None for m in report["modules"] for k in m["kernels"])


def test_program_ids_are_fingerprints_and_modules_match_by_name(report):
    """The module event's id is not HloModuleProto.id: the HLO is found by the metadata's key,
    and a TPU measurement matches its module by name (Backend.trace_program_ids)."""
    embedded = profiles.embedded_hlo(PROFILE.read_bytes())
    assert set(embedded) == {m["program_id"] for m in report["modules"]}
    assert all(m["hlo"] for m in report["modules"])
    module_id = wire.field_values(embedded[JIT_F][1], 5)[0]  # HloModuleProto.id
    assert module_id == 12 != JIT_F
    tpu = backends.backend("tpu")
    assert not tpu.trace_program_ids and backends.backend("cpu").trace_program_ids
    profile = ProfileData.from_file(str(PROFILE))
    by_id = trace_events.tpu_events(profile, tpu.trace_planes, "jit_f", frozenset({module_id}))
    assert by_id.events == []  # matching by the proto's id finds nothing
    by_name = trace_events.kernel_events(profile, tpu, "jit_f", None)
    assert len(by_name.events) == 400 * 15  # 9 kernels and 6 copy-starts, each run


@pytest.mark.parametrize("damage", ["garbled", "truncated"])
def test_a_damaged_profile_is_one_line(tmp_path, damage, capfd):
    """In process (capfd also holds what C++ writes to the file descriptors); a fresh process's
    one-line errors are checked once for every command in test_autotune.py."""
    data = PROFILE.read_bytes()
    # the damaged xprof copy: the file went through a lossy UTF-8 decode (its README)
    bad = data.decode("utf-8", "replace").encode("utf-8") if damage == "garbled" else data[: len(data) // 2]
    path = tmp_path / "bad.xplane.pb"
    path.write_bytes(bad)
    capfd.readouterr()
    assert main(["trace", str(path)]) == 2
    run = capfd.readouterr()
    assert run.out == ""
    assert run.err.count("\n") == 1 and str(path) in run.err and "not an xplane.pb profile" in run.err


def test_trace_json_has_the_documented_keys(capfd):
    capfd.readouterr()
    assert main(["trace", str(PROFILE), "--json"]) == 0
    out = json.loads(capfd.readouterr().out)
    module = out["modules"][0]
    assert {"module", "device", "runs", "mean_run_ns", "kernels"} <= set(module)
    assert {"name", "n", "mean_ns", "xla_estimated_cycles"} <= set(module["kernels"][0])


def test_no_cpu_dispatch_overhead_on_a_tpu_program():
    text = compat.hlo_text(profiles.embedded_hlo(PROFILE.read_bytes())[JIT_F][1])
    model = CostModel(
        "constant",
        lambda graphs: [1000.0] * len(graphs),
        {},
        "k",
        {"backend": "cpu"},
        trained_dispatch_ns=7000,
    )
    on_tpu, on_cpu = model.predict_hlo(text, backend="tpu"), model.predict_hlo(text, backend="cpu")
    assert on_tpu.dispatch_ns == 0 and on_tpu.total_ns == pytest.approx(9 * 1000.0)
    assert on_cpu.dispatch_ns == pytest.approx(9 * 7000.0)


def test_the_compilers_estimates_against_the_v6e_measurements(xprof):
    from tpucost.experiments import xla_estimates

    rows = {r["kernel"]: r for r in xla_estimates.profile_estimates()}
    assert set(rows) == {
        "broadcast_add_fusion",
        "broadcast_add_fusion.1",
        "broadcast_add_fusion.2",
        "broadcast.2",
    }
    fusion = rows["broadcast_add_fusion"]
    measured_ns = xprof[(JIT_F, "broadcast_add_fusion")][1] * 1e3
    assert fusion["implied_clock_hz"] == pytest.approx(14_180_608 / measured_ns * 1e9)
    # 918 TFLOP/s over 4 MXUs of 256 x 256 multiply-adds (2 flops each): 1.751 GHz
    assert fusion["estimated_ns_at"]["4 MXUs of 256x256"] == pytest.approx(
        14_180_608 / 1.750946e9 * 1e9, rel=1e-6
    )
    assert fusion["device"] == "TPU v6 Lite" and "2025-03-11" in fusion["source"]
