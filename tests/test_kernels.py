"""Tests of tpucost.method.kernels.decompose and the `python -m tpucost hlo` command."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import pytest
from conftest import CORPUS

from tpucost.cli import main
from tpucost.method import hlo, kernels

pytestmark = pytest.mark.core  # also run on Colab's versions (make test-colab)

LOOP = """HloModule loop
%fused (p0: f32[4], p1: f32[4]) -> (f32[4], f32[4]) {
  %p0 = f32[4]{0} parameter(0)
  %p1 = f32[4]{0} parameter(1)
  %m = f32[4]{0} multiply(%p0, %p1)
  %e = f32[4]{0} exponential(%m)
  ROOT %t = (f32[4]{0}, f32[4]{0}) tuple(%m, %e)
}
%body (s: (s32[], f32[4])) -> (s32[], f32[4]) {
  %s = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %x = f32[4]{0} get-tuple-element(%s), index=1
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %f = (f32[4]{0}, f32[4]{0}) fusion(%x, %x), kind=kLoop, calls=%fused
  %y = f32[4]{0} get-tuple-element(%f), index=1
  ROOT %r = (s32[], f32[4]{0}) tuple(%next, %y)
}
%cond (s: (s32[], f32[4])) -> pred[] {
  %s = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %n = s32[] constant(7)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}
ENTRY %main (a: f32[4]) -> f32[4] {
  %a = f32[4]{0} parameter(0)
  %c = f32[4]{0} copy(%a)
  %zero = s32[] constant(0)
  %init = (s32[], f32[4]{0}) tuple(%zero, %c)
  %w = (s32[], f32[4]{0}) while(%init), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"7"}}
  ROOT %out = f32[4]{0} get-tuple-element(%w), index=1
}
"""


def test_decompose_walks_loop_bodies_and_skips_non_kernels():
    ks = kernels.decompose(hlo.parse_module(LOOP))
    by_name = {k.name: k for k in ks}
    # copy in the entry; add and fusion in the body; compare in the condition (names are
    # made unique module-wide, as XLA does: the condition's `s` and `i` become `s.1`, `i.1`)
    assert set(by_name) == {"c", "next", "f", "lt"}
    assert by_name["c"].calls_per_run == 1 and by_name["f"].calls_per_run == 7


def test_fusion_kernel_graph():
    f = {k.name: k for k in kernels.decompose(hlo.parse_module(LOOP))}["f"]
    assert f.kind == "kLoop" and f.opcode == "fusion" and f.computation == "body"
    assert [n.opcode for n in f.nodes] == ["parameter", "parameter", "multiply", "exponential", "tuple"]
    assert sorted(f.edges) == [(0, 2), (1, 2), (2, 3), (2, 4), (3, 4)]
    assert f.outputs == [2, 3, 4]  # the root tuple and the two values it returns


def test_lone_op_gets_one_parameter_per_operand():
    text = """ENTRY e {
  a = f32[8,16]{1,0} parameter(0)
  b = f32[16,4]{1,0} parameter(1)
  ROOT d = f32[8,4]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""
    (k,) = kernels.decompose(hlo.parse_module(text))
    assert [n.opcode for n in k.nodes] == ["parameter", "parameter", "dot"]
    assert [n.shape.dims for n in k.nodes[:2]] == [(8, 16), (16, 4)]
    assert k.edges == [(0, 2), (1, 2)] and k.outputs == [2] and k.kind == "dot"


def test_compiled_program_kernels_match_entry_instructions():
    def f(x, w):
        return jax.nn.softmax(jnp.tanh(x @ w) * 2.0)

    text = jax.jit(f).lower(jnp.ones((32, 64)), jnp.ones((64, 16))).compile().as_text()
    module = hlo.parse_module(text)
    ks = kernels.decompose(module)
    expected = [i.name for i in module.entry.instructions if i.opcode not in kernels.NOT_KERNELS]
    assert [k.name for k in ks] == expected and ks
    for k in ks:
        assert all(0 <= a < k.num_nodes and 0 <= b < k.num_nodes for a, b in k.edges)
        assert (
            k.outputs
            and all(n.opcode == "parameter" for n in k.nodes[: k.num_inputs])
            or k.opcode == "fusion"
        )


@pytest.mark.slow
def test_generated_and_corpus_modules_decompose(generated_hlo, corpus):
    """Optimized modules generated from tpucost.experiments.programs (up to 3 per form and configuration), and
    the first 80 corpus files when the corpus is there, decompose into kernels."""
    picked: dict[tuple[str, str], list[dict[str, str]]] = {}
    for record in generated_hlo:
        if (
            record["stage"] == "optimized"
            and len(picked.setdefault((record["form"], record["config"]), [])) < 3
        ):
            picked[(record["form"], record["config"])].append(record)
    n_generated = 0
    for record in (r for records in picked.values() for r in records):
        ks = kernels.decompose(hlo.parse_module(record["text"], source=record["label"]))
        assert ks, record["label"]
        for k in ks:
            assert k.nodes and k.outputs, (record["label"], k.name)
            n_generated += 1
    assert (
        len(picked) >= 7 and n_generated > 300
    )  # 7 (form, configuration) pairs on jaxlib 0.7.2, 10 on 0.10.2
    n = 0
    for row in corpus[:80]:
        if row["expected"] != "valid":
            continue
        for text in hlo.split_modules((CORPUS / row["file"]).read_text()):
            try:
                module = hlo.parse_module(text)
            except hlo.HloParseError:
                continue
            for k in kernels.decompose(module):
                assert k.nodes and k.outputs
                n += 1
    assert n > 100 or not corpus


def test_cli_json(tmp_path, capsys):
    path = tmp_path / "loop.hlo"
    path.write_text(LOOP)
    assert main(["hlo", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["name"] == "loop" and out["computations"] == 4 and out["instructions"] == 23
    assert {k["name"]: (k["opcode"], k["nodes"], k["edges"]) for k in out["kernels"]} == {
        "c": ("copy", 2, 1),
        "next": ("add", 3, 2),
        "f": ("fusion", 5, 5),
        "lt": ("compare", 3, 2),
    }


def test_cli_table_and_bad_file(tmp_path, capfd):
    good = tmp_path / "loop.hlo"
    good.write_text(LOOP)
    assert main(["hlo", str(good)]) == 0
    assert "4 kernels" in capfd.readouterr().out
    bad = tmp_path / "bad.hlo"
    bad.write_text(LOOP.replace("exponential(%m)", "exponential(%m"))
    assert main(["hlo", str(bad)]) == 2  # in process: capfd also holds what C++ writes to fd 2
    err = capfd.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"{bad}:7:3:" in lines[0], err
    assert main(["hlo", str(tmp_path / "missing.hlo")]) == 2


@pytest.mark.parametrize("flag", [[], ["--json"]])
def test_cli_on_compiled_hlo(tmp_path, flag, capsys):
    text = jax.jit(lambda x: jnp.cumsum(jnp.sin(x), axis=0) @ x).lower(jnp.ones((16, 16))).compile().as_text()
    path = tmp_path / "prog.hlo"
    path.write_text(text)
    assert main(["hlo", str(path), *flag]) == 0
    assert "jit_" in capsys.readouterr().out
