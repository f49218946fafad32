"""Tests of tpucost.method.hlo: unit cases, XLA's own parser as the reference, and fuzzing."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
import xla_reference
from conftest import CORPUS, XLA_CROSS_CHECK, corpus_modules
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tpucost import files
from tpucost.method import hlo, kernels

SMALL = """HloModule m, entry_computation_layout={(f32[2,3]{1,0})->f32[3]{0}}

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}

ENTRY %main (p: f32[2,3]) -> f32[3] {
  %p = f32[2,3]{1,0:T(8,128)(2,1)S(1)} parameter(0), metadata={op_name="x" source_line=3}
  %c = f32[] constant(0)
  ROOT %r = f32[3]{0} reduce(%p, /*index=1*/%c), dimensions={0}, to_apply=%add
}
"""


def test_small_module_structure():
    m = hlo.parse_module(SMALL)
    assert m.name == "m"
    assert list(m.computations) == ["add", "main"]
    assert m.entry.name == "main" and m.entry.is_entry
    r = m.entry.root
    assert (r.name, r.opcode, r.operands) == ("r", "reduce", ["p", "c"])
    assert r.attributes["dimensions"] == (0,)
    assert r.called_computations == ["add"]
    p = m.entry.instruction("p")
    assert p.shape.dims == (2, 3) and p.shape.element_type == "f32"
    assert p.shape.layout == hlo.Layout((1, 0), ((8, 128), (2, 1)), 1, "")
    assert p.attributes["metadata"] == {"op_name": "x", "source_line": 3}
    assert m.entry.instruction("c").attributes["literal"] == "0"
    assert m.attributes["entry_computation_layout"].startswith("{(")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("f32[]", hlo.Shape("f32")),
        ("bf16[<=8,4]{1,0}", hlo.Shape("bf16", (8, 4), (True, False), hlo.Layout((1, 0)))),
        ("(f32[1], (s4[2], token[]))", None),
        ("c64[3]{0:T(128)E(4)}", hlo.Shape("c64", (3,), (False,), hlo.Layout((0,), ((128,),), 0, "E(4)"))),
        ("f8e4m3fn[2,2]", hlo.Shape("f8e4m3fn", (2, 2), (False, False))),
    ],
)
def test_shapes(text, expected):
    shape = hlo.parse_shape(text)
    if expected is not None:
        assert shape == expected
    else:
        assert shape.is_tuple and [s.element_type for s in shape.leaves()] == ["f32", "s4", "token"]


def test_attributes_are_converted():
    text = """ENTRY e {
  a = f32[1,8,8,3] parameter(0)
  k = f32[3,3,3,4] parameter(1)
  c = f32[1,8,8,4] convolution(a, k), window={size=3x3 stride=1x1 pad=1_1x1_1 rhs_dilate=1x2}, dim_labels=b01f_01io->b01f, feature_group_count=1
  s = f32[1,4,8,4] slice(c), slice={[0:1], [0:8:2], [0:8], [0:4]}
  z = f32[] constant(0)
  q = f32[1,6,8,4] pad(s, z), padding=0_0x1_1_0x0_0x0_0
  d = f32[1,6,8,8] dot(q, k), lhs_contracting_dims={3}, rhs_contracting_dims={2}, backend_config={"x":[1,2]}
  ROOT t = f32[8,6,8,1] transpose(d), dimensions={3,1,2,0}
}"""
    m = hlo.parse_module(text)
    c = m.entry.instruction("c")
    assert c.attributes["window"] == hlo.Window((3, 3), (1, 1), ((1, 1), (1, 1)), (), (1, 2), ())
    assert c.attributes["dim_labels"] == "b01f_01io->b01f"
    assert c.attributes["feature_group_count"] == 1
    assert m.entry.instruction("s").attributes["slice"] == ((0, 1, 1), (0, 8, 2), (0, 8, 1), (0, 4, 1))
    assert m.entry.instruction("q").attributes["padding"] == ((0, 0, 0), (1, 1, 0), (0, 0, 0), (0, 0, 0))
    d = m.entry.instruction("d")
    assert d.attributes["lhs_contracting_dims"] == (3,) and d.attributes["backend_config"] == {"x": [1, 2]}
    assert m.entry.root.attributes["dimensions"] == (3, 1, 2, 0)
    assert m.name == "module"  # no header: XLA's default name


@pytest.mark.parametrize(
    "text, line, col, words",
    [
        (
            "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT q = f32[2] frobnicate(p)\n}",
            4,
            19,
            "unknown opcode",
        ),
        ("HloModule m\nENTRY e {\n  p = f33[2] parameter(0)\n}", 3, 7, "unknown element type"),
        ("HloModule m\nENTRY e {\n  ROOT q = f32[2] negate(nope)\n}", 3, 1, "'nope' is not defined"),
        ("HloModule m\nENTRY e {\n  p = f32[2 parameter(0)\n}", 3, 13, "',' or ']'"),
        ("HloModule m\nENTRY e {\n  p = f32[2]{1,0} parameter(0)\n}", 3, 18, "does not fit a rank-1"),
        (
            'HloModule m\nENTRY e {\n  p = f32[2] parameter(0), metadata={op_name="x}\n}',
            3,
            46,
            "unterminated",
        ),
        ("", 1, 1, "at least one computation"),
    ],
)
def test_errors_name_line_and_column(text, line, col, words):
    with pytest.raises(hlo.HloParseError) as info:
        hlo.parse_module(text, source="bad.hlo")
    err = info.value
    assert isinstance(err, ValueError)
    assert (err.line, err.column) == (line, col), str(err)
    assert words in str(err) and str(err).startswith(f"bad.hlo:{line}:{col}:")


@pytest.mark.slow
def test_cli_on_an_empty_hlo_file_prints_one_line_per_message(tmp_path):
    """`python -m tpucost predict` on an empty file, with a model trained on another device: the
    warning about the device and the parse error are one line each, and no line is source code."""
    bundled = files.bundled_dir() / "checkpoints" / "kernel-random" / "gnn"
    shutil.copytree(bundled, tmp_path / "model" / "gnn")
    config = tmp_path / "model" / "gnn" / "config.json"
    saved = json.loads(config.read_text())
    saved["extra"]["device"].update(id="0123456789ab", cpu_model="Some Other CPU")
    config.write_text(json.dumps(saved))
    (tmp_path / "empty.hlo").write_text("")
    proc = subprocess.run(
        [sys.executable, "-m", "tpucost", "predict", "empty.hlo", "--model", "model"],
        cwd=tmp_path,
        env={**os.environ, "TPUCOST_CACHE_DIR": str(tmp_path / "cache")},  # no calibration
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    lines = proc.stderr.splitlines()
    assert len(lines) == 2, proc.stderr
    assert lines[0].startswith(
        "warning: tpucost: the gnn model in model learned runtimes measured on cpu 'Some Other CPU'"
    ), lines[0]
    assert lines[0].endswith("to measure the error here and correct it"), lines[0]
    assert lines[1] == "error: empty.hlo:1:1: expected at least one computation; found end of input"


def test_compiled_jax_program_roundtrip():
    def f(x, w):
        y = jax.nn.relu(x @ w)
        loop = jax.lax.scan(lambda c, _: (jnp.tanh(c @ w @ w.T), None), x, None, length=20)[0]
        return jnp.sum(jnp.tanh(y), axis=0) + loop.sum()

    args = (jnp.ones((8, 16)), jnp.ones((16, 4)))
    text = jax.jit(f).lower(*args).compile().as_text()
    m = hlo.parse_module(text)
    assert m.name.startswith("jit_f")
    assert any(i.opcode == "while" for i in m.entry.instructions)
    assert any(i.opcode == "fusion" for c in m.computations.values() for i in c.instructions)


# --- layouts after whitespace; computations written inline -----------------------------------

# XLA's parser accepts whitespace (and comments) between a shape's dimensions and its layout.
SPACED_LAYOUTS = """HloModule spaced, entry_computation_layout={(bf16[1,128] {1,0}, (f32[4] {0}, s32[2,2] {0,1}))->bf16[1,128] {1,0}}

%add (a: f32[] , b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (p: bf16[1,128] {1,0}, t: (f32[4] {0}, s32[2,2] {0,1})) -> bf16[1,128] {1,0} {
  %p = bf16[1,128] {1,0} parameter(0)
  %t = (f32[4] {0}, s32[2,2] {0,1}) parameter(1)
  %g = f32[4]
       {0} get-tuple-element(%t), index=0
  %z = f32[] constant(0)
  %sum = f32[] reduce(f32[4] { 0 } %g, %z), dimensions={0}, to_apply=%add
  %q = bf16[1,128] /* tiled */ {1,0:T(8,128)(2,1)} negate(bf16[1,128] {1,0} %p)
  ROOT %r = bf16[1,128] {1,0} add(%p, %q)
}
"""

# A '{' after a result shape opens the body unless an integer or ':' follows it (as in XLA).
BODY_AFTER_RESULT_SHAPE = """HloModule body
%neg (x: f32[4]) -> f32[4] {0} {
  %x = f32[4] parameter(0)
  ROOT %n = f32[4] negate(%x)
}
%id (x: f32[]) -> f32[]{
  ROOT %x = f32[] parameter(0)
}
ENTRY %main (p: f32[4], s: f32[]) -> (f32[4], f32[]) {
  %p = f32[4] parameter(0)
  %s = f32[] parameter(1)
  %c = f32[4] call(%p), to_apply=%neg
  %d = f32[] call(%s), to_apply=%id
  ROOT %t = (f32[4] {0}, f32[]) tuple(%c, %d)
}
"""

_REDUCER = """{
    a = f32[] parameter(0)
    b = f32[] parameter(1)
    ROOT s = f32[] OP(a, b)
  }"""

# Computations written inline in attributes: XLA names them _, _.1, ... in file order, after the
# names the text gives (here `_` and `_.1` are taken) and with inner bodies before outer ones.
INLINE_BODIES = f"""HloModule inline

%_ (x: f32[], y: f32[]) -> f32[] {{
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %m = f32[] multiply(%x, %y)
}}

%f (q: f32[4]) -> f32[] {{
  q = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(q, z), dimensions={{0}}, to_apply={_REDUCER.replace("OP", "add")}
}}

ENTRY e {{
  p = f32[4] parameter(0)
  z = f32[] constant(0)
  r1 = f32[] reduce(p, z), dimensions={{0}}, to_apply={_REDUCER.replace("OP", "maximum")}
  r2 = f32[] call(p), to_apply=%f
  r3 = f32[] reduce(p, z), dimensions={{0}}, to_apply=%_
  c = f32[] call(p), to_apply={{
    q = f32[4] parameter(0)
    z = f32[] constant(1)
    ROOT r = f32[] reduce(q, z), dimensions={{0}}, to_apply={_REDUCER.replace("OP", "minimum")}
  }}
  i = s32[] constant(0)
  w = s32[] while(i), condition={{
    a = s32[] parameter(0)
    ten = s32[] constant(10)
    ROOT lt = pred[] compare(a, ten), direction=LT
  }}, body={{
    a = s32[] parameter(0)
    one = s32[] constant(1)
    ROOT n = s32[] add(a, one)
  }}
  ROOT t = (f32[], f32[], f32[], f32[], s32[]) tuple(r1, r2, r3, c, w)
}}
"""

# A named computation that clashes with an earlier name (`_` after an inline `_`, `g` after
# `g.0`, the entry `_.1` after the renamed `_`) is renamed too, and so are the references to it.
CLASHING_NAMES = f"""HloModule clash

%g.0 (x: f32[], y: f32[]) -> f32[] {{
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %m = f32[] multiply(%x, %y)
}}

%f (q: f32[4]) -> f32[] {{
  q = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(q, z), dimensions={{0}}, to_apply={_REDUCER.replace("OP", "add")}
}}

%_ (x: f32[], y: f32[]) -> f32[] {{
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %m = f32[] subtract(%x, %y)
}}

%g (x: f32[], y: f32[]) -> f32[] {{
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %m = f32[] maximum(%x, %y)
}}

ENTRY _.1 {{
  p = f32[4] parameter(0)
  z = f32[] constant(0)
  a = f32[] reduce(p, z), dimensions={{0}}, to_apply=%_
  b = f32[] reduce(p, z), dimensions={{0}}, to_apply=%g
  c = f32[] reduce(p, z), dimensions={{0}}, to_apply=%g.0
  d = f32[] call(p), to_apply=%f
  ROOT t = (f32[], f32[], f32[], f32[]) tuple(a, b, c, d)
}}
"""


def _called(module: hlo.Module) -> dict[str, list[str]]:
    return {
        i.name: i.called_computations
        for c in module.computations.values()
        for i in c.instructions
        if i.called_computations
    }


def test_layout_after_whitespace():
    m = hlo.parse_module(SPACED_LAYOUTS)
    main = m.entry
    assert main.instruction("p").shape == hlo.Shape("bf16", (1, 128), (False, False), hlo.Layout((1, 0)))
    t = main.instruction("t").shape
    assert [leaf.layout for leaf in t.leaves()] == [hlo.Layout((0,)), hlo.Layout((0, 1))]
    assert main.instruction("g").shape.layout == hlo.Layout((0,))
    assert main.instruction("q").shape.layout == hlo.Layout((1, 0), ((8, 128), (2, 1)))
    assert [(n, s.layout) for n, s in main.parameters] == [("p", hlo.Layout((1, 0))), ("t", None)]
    assert main.parameters[1][1].tuple_shapes[1].layout == hlo.Layout((0, 1))
    assert main.result_shape.layout == hlo.Layout((1, 0))
    assert [(i.name, i.opcode, i.operands) for i in main.instructions][-3:] == [
        ("sum", "reduce", ["g", "z"]), ("q", "negate", ["p"]), ("r", "add", ["p", "q"]),
    ]  # fmt: skip
    assert hlo.parse_shape("f32[2,3] {1,0}") == hlo.parse_shape("f32[2,3]{1,0}")
    assert hlo.parse_shape("f32[2,3] /* c */ {\n 0, 1 }").layout == hlo.Layout((0, 1))


def test_brace_after_result_shape_opens_the_body():
    m = hlo.parse_module(BODY_AFTER_RESULT_SHAPE)
    neg, ident = m.computations["neg"], m.computations["id"]
    assert neg.result_shape.layout == hlo.Layout((0,)) and [i.name for i in neg.instructions] == ["x", "n"]
    assert ident.result_shape == hlo.Shape("f32") and [i.name for i in ident.instructions] == ["x.1"]
    assert m.entry.result_shape.is_tuple and m.entry.root.shape.tuple_shapes[0].layout == hlo.Layout((0,))
    m = hlo.parse_module("ENTRY %main (p: f32[4]) -> f32[4] {\n  ROOT %p = f32[4] parameter(0)\n}")
    assert m.entry.result_shape.layout is None and m.entry.root.name == "p"


def test_spaced_braces_without_a_dimension_are_not_a_layout():
    with pytest.raises(hlo.HloParseError, match="unexpected text after shape"):
        hlo.parse_shape("f32[4] {}")  # XLA: a '{' followed by '}' is no layout
    with pytest.raises(hlo.HloParseError, match="does not fit a rank-1"):
        hlo.parse_shape("f32[4] {1,0}")
    assert hlo.parse_shape("f32[]{}").layout == hlo.Layout(())  # glued: accepted, as before


def test_inline_computations_are_named_like_xla():
    m = hlo.parse_module(INLINE_BODIES)
    assert list(m.computations) == ["_", "_.1", "f", "_.2", "_.3", "_.4", "_.5", "_.6", "e"]
    assert [i.opcode for i in m.computations["_.1"].instructions] == ["parameter", "parameter", "add"]
    assert m.computations["_.3"].root.opcode == "minimum" and m.computations["_.4"].root.opcode == "reduce"
    assert _called(m) == {
        "r": ["_.1"], "r1": ["_.2"], "r2": ["f"], "r3": ["_"], "r.1": ["_.3"], "c": ["_.4"], "w": ["_.5", "_.6"],
    }  # fmt: skip
    w = m.entry.instruction("w")
    assert (w.attributes["condition"], w.attributes["body"]) == ("_.5", "_.6")
    assert m.entry.instruction("r1").attributes["to_apply"] == "_.2"
    assert m.computations["_.5"].root.opcode == "compare"
    assert [i.name for i in m.computations["_.2"].instructions] == [
        "a.1",
        "b.1",
        "s.1",
    ]  # names unique module-wide


def test_clashing_computation_names_are_renamed_like_xla():
    m = hlo.parse_module(CLASHING_NAMES)
    assert list(m.computations) == ["g.0", "_", "f", "_.1", "g.1", "_.2"]
    assert m.entry.name == "_.2" and m.entry.is_entry
    assert m.computations["_.1"].root.opcode == "subtract" and m.computations["g.1"].root.opcode == "maximum"
    # (a and b of the entry are a.1 and b.1: the inline body of f took a and b.)
    assert _called(m) == {"r": ["_"], "a.1": ["_.1"], "b.1": ["g.1"], "c": ["g.0"], "d": ["f"]}
    assert m.entry.instruction("b.1").attributes["to_apply"] == "g.1"


# --- XLA's parser as the reference -----------------------------------------------------------

needs_xla = pytest.mark.skipif(
    not xla_reference.available(), reason="jaxlib._hlo.hlo_module_from_text is not available"
)


@pytest.mark.slow
@needs_xla
def test_agrees_with_xla_on_generated_and_corpus_modules(generated_hlo):
    """Every generated module, and every corpus module XLA accepts, parses as XLA parses it."""
    generated = [(r["label"], r["text"]) for r in generated_hlo]
    from_corpus = corpus_modules()
    compared, rejected, differing = xla_reference.cross_check(generated + from_corpus)
    labels = {label for label, _ in generated}
    n_generated = sum(1 for label in compared if label in labels)
    XLA_CROSS_CHECK.update(generated=n_generated, corpus=len(compared) - n_generated)
    assert not differing, f"{len(differing)} modules differ from XLA's parser:\n" + "\n".join(differing[:10])
    assert len(generated) >= 150
    assert n_generated == len(generated), (
        f"XLA rejects generated modules: {[r for r in rejected if r in labels][:5]}"
    )
    if from_corpus:
        assert len(compared) - n_generated >= 390  # 395 modules of the corpus are accepted by jaxlib 0.10.2


@needs_xla
@pytest.mark.parametrize(
    "name", ["SPACED_LAYOUTS", "BODY_AFTER_RESULT_SHAPE", "INLINE_BODIES", "CLASHING_NAMES"]
)
def test_agrees_with_xla_on_spaced_layouts_and_inline_bodies(name):
    text = globals()[name]
    compared, rejected, differing = xla_reference.cross_check([(name, text)])
    assert compared == [name] and not differing, differing or rejected


@needs_xla
@pytest.mark.parametrize(
    "text",
    [
        "ENTRY %main (p: f32[]) -> f32[] {} {\n  ROOT %p = f32[] parameter(0)\n}",
        "ENTRY %main (p: f32[4]) -> f32[4] {\n  ROOT %p = f32[4] {} parameter(0)\n}",
        "ENTRY %main (p: f32[4]) -> f32[4] {\n  ROOT %p = f32[4] {1,0} parameter(0)\n}",
    ],
)
def test_rejects_what_xla_rejects_around_layouts(text):
    assert "error" in xla_reference.xla_parse([text])[0]
    with pytest.raises(hlo.HloParseError):
        hlo.parse_module(text)


# --- GPU and TPU modules of XLA's own tests, bundled (tests/data/hlo: README.md, MANIFEST.tsv) ---

BUNDLED_HLO = Path(__file__).resolve().parent / "data" / "hlo"


def bundled_hlo() -> list[dict[str, str]]:
    """Rows of tests/data/hlo/MANIFEST.tsv (file, platform, provenance, and what tpucost makes of it)."""
    with (BUNDLED_HLO / "MANIFEST.tsv").open() as f:
        return list(csv.DictReader(f, delimiter="\t"))


def test_the_bundled_modules_are_gpu_and_tpu_hlo_with_their_provenance():
    rows = bundled_hlo()
    assert sorted(p.name for p in BUNDLED_HLO.glob("*.hlo")) == sorted(r["file"] for r in rows)
    assert {r["platform"] for r in rows} == {"gpu", "tpu"}
    for r in rows:
        assert r["commit"] and r["source_path"] and r["origin"], r["file"]
        text = (BUNDLED_HLO / r["file"]).read_text()
        assert len(text.encode()) == int(r["bytes"]), r["file"]
        if r["platform"] == "tpu":  # what makes them TPU HLO: tiled layouts
            assert ":T(" in text, r["file"]
        else:  # GPU HLO: Triton or cuBLAS / cuDNN configs, or async collectives
            assert re.search(r"__triton|__cublas|__cudnn|-start\(", text), r["file"]


@pytest.mark.parametrize(
    "row", bundled_hlo(), ids=lambda r: f"{r['platform']}-{r['file'].split('__', 3)[-1]}"
)
def test_bundled_gpu_and_tpu_modules_parse_into_their_kernels(row):
    (text,) = hlo.split_modules((BUNDLED_HLO / row["file"]).read_text())
    module = hlo.parse_module(text, source=row["file"])
    assert (module.name, len(module.computations)) == (row["module"], int(row["computations"]))
    found = [f"{k.name}:{k.kind}" for k in kernels.decompose(module)]
    assert found == row["kernels"].split(";")


@needs_xla
def test_agrees_with_xla_on_the_bundled_gpu_and_tpu_modules():
    modules = [
        (r["file"], hlo.split_modules((BUNDLED_HLO / r["file"]).read_text())[0]) for r in bundled_hlo()
    ]
    compared, rejected, differing = xla_reference.cross_check(modules)
    XLA_CROSS_CHECK.update(bundled=len(compared))
    assert not differing and not rejected, differing or rejected
    assert compared == [label for label, _ in modules]


# Valid HLO that jaxlib 0.10.2's parser rejects: newer syntax (an async op with its body inline,
# which newer XLA accepts), or a computation called before the text defines it.
NEWER_SYNTAX = {
    "async fusion-start with an inline body": """HloModule main

ENTRY main {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  %fusion-start = ((), (), s32[]) fusion-start(), kind=kLoop, calls={
    p0 = f32[] parameter(0)
    p1 = f32[] parameter(1)
    ROOT add = f32[] add(p0, p1)
  }
  %fusion-update = ((f32[]), (), s32[]) fusion-update(%fusion-start, p0)
  ROOT %fusion-done = f32[] fusion-done(%fusion-update)
}
""",
    "computations defined after their callers": """HloModule m

ENTRY e {
  i = s32[] parameter(0)
  x = f32[] parameter(1)
  ROOT c = f32[] conditional(i, x, x), branch_computations={%b0, %b1}
}

%b0 (a: f32[]) -> f32[] {
  ROOT a = f32[] parameter(0)
}

%b1 (a: f32[]) -> f32[] {
  a = f32[] parameter(0)
  ROOT n = f32[] negate(a)
}
""",
}


def test_newer_syntax_parses(corpus):
    """Valid modules that jaxlib 0.10.2 rejects (newer or older syntax) still parse here: the
    built-in examples, plus those of the corpus when it is there."""
    modules = list(NEWER_SYNTAX.items())
    for row in corpus:
        if row["expected"] == "valid" and not row["jaxlib_0.10.2_parse"].startswith("ok"):
            modules += [(row["file"], text) for text in hlo.split_modules((CORPUS / row["file"]).read_text())]
    for label, text in modules:
        hlo.parse_module(text, source=label)
    if xla_reference.available():  # they are here because XLA's parser rejects them
        assert all("error" in r for r in xla_reference.xla_parse(list(NEWER_SYNTAX.values())))


def _corrupted(label: str, text: str) -> list[tuple[str, str]]:
    """Invalid variants of a valid module: one defect each."""
    root, m = next(
        (ln, m)
        for ln in text.splitlines()
        if ln.lstrip().startswith("ROOT ")
        for m in [re.search(r" [a-z][a-z0-9\-]*\((?:[^)]*[\s,])?(%?[A-Za-z_][\w.\-]*)\s*[,)]", ln)]
        if m
    )
    undefined = root[: m.start(1)] + "%no_such_instruction" + root[m.end(1) :]
    first = next(ln for ln in text.splitlines() if " = " in ln and not ln.startswith("HloModule"))
    cut = text.rstrip().rfind("}")
    return [
        (f"{label} [undefined operand]", text.replace(root, undefined, 1)),
        (f"{label} [unknown opcode]", text.replace(" parameter(0)", " parametre(0)", 1)),
        (f"{label} [unknown element type]", text.replace(first, first.replace(" = ", " = f33[3] ", 1), 1)),
        (f"{label} [defined twice]", text.replace(first, f"{first}\n{first}", 1)),
        (f"{label} [unclosed computation]", text[:cut]),
        (f"{label} [duplicate attribute]", text.replace(root, root + ", metadata={}, metadata={}", 1)),
    ]


@pytest.mark.slow
def test_invalid_modules_are_rejected(generated_hlo, corpus):
    """Defective variants of generated modules, and the corpus's invalid modules, are rejected."""
    sample = [r for r in generated_hlo if r["form"] == "forward" and r["config"] == "default"][:6]
    invalid = [bad for r in sample for bad in _corrupted(r["label"], r["text"])]
    invalid += [(r["file"], (CORPUS / r["file"]).read_text()) for r in corpus if r["expected"] != "valid"]
    assert len(invalid) >= 36
    for label, text in invalid:
        with pytest.raises(hlo.HloParseError):
            hlo.parse_module(text, source=label)
    if xla_reference.available():  # the defects are defects to XLA too
        generated_invalid = invalid[: 6 * len(sample)]
        results = xla_reference.xla_parse([text for _, text in generated_invalid])
        accepted = [
            label for (label, _), r in zip(generated_invalid, results, strict=True) if "error" not in r
        ]
        assert not accepted


@pytest.mark.slow  # compiles programs and cross-checks XLA's parser
@needs_xla
def test_agrees_with_xla_on_compiled_programs():
    from flax import nnx

    class Block(nnx.Module):
        def __init__(self, rngs):
            self.conv = nnx.Conv(3, 8, (3, 3), rngs=rngs)
            self.norm = nnx.LayerNorm(8, rngs=rngs)
            self.out = nnx.Linear(8, 4, rngs=rngs)

        def __call__(self, x):
            return jax.nn.log_softmax(self.out(self.norm(jax.nn.gelu(self.conv(x))).mean((1, 2))))

    model = Block(nnx.Rngs(0))
    x = jnp.ones((2, 16, 16, 3))
    texts = [
        jax.jit(lambda x: model(x)).lower(x).compile().as_text(),
        jax.jit(jax.grad(lambda x: model(x).sum())).lower(x).compile().as_text(),
        jax.jit(lambda x: jnp.sort(x.reshape(-1))[:5]).lower(x).compile().as_text(),
    ]
    assert xla_reference.assert_agrees(texts, ["fwd", "grad", "sort"]) == 3


# --- fuzzing: only HloParseError escapes, and nothing hangs -----------------------------------

_SEEDS = (
    [SMALL, SPACED_LAYOUTS, BODY_AFTER_RESULT_SHAPE, INLINE_BODIES, CLASHING_NAMES]
    + [p.read_text() for p in sorted(BUNDLED_HLO.glob("*.hlo"))]
    + [p.read_text()[:4000] for p in sorted(CORPUS.glob("*.hlo"))[:40] if p.stat().st_size < 6000]
)


@pytest.fixture(scope="session")
def fuzz_seeds(generated_hlo) -> list[str]:
    """The seeds above plus the smallest generated module of each form, stage and configuration."""
    smallest: dict[tuple[str, str, str], str] = {}
    for r in generated_hlo:
        key = (r["form"], r["stage"], r["config"])
        if key not in smallest or len(r["text"]) < len(smallest[key]):
            smallest[key] = r["text"]
    return _SEEDS + [text[:4000] for _, text in sorted(smallest.items())]


def _parses_or_raises_cleanly(text: str) -> None:
    try:
        hlo.parse_module(text)
    except hlo.HloParseError as err:
        assert "internal parser error" not in str(err), str(err)
        assert err.line >= 1 and err.column >= 1


@st.composite
def _mutated(draw, seeds: list[str]):
    text = draw(st.sampled_from(seeds))
    kind = draw(st.sampled_from(["truncate", "delete", "swap", "insert", "bytes"]))
    if kind == "truncate":
        return text[: draw(st.integers(0, len(text)))]
    if kind == "delete":
        i = draw(st.integers(0, len(text)))
        return text[:i] + text[i + draw(st.integers(1, 30)) :]
    if kind == "swap":
        tokens = text.split(" ")
        i, j = draw(st.integers(0, len(tokens) - 1)), draw(st.integers(0, len(tokens) - 1))
        tokens[i], tokens[j] = tokens[j], tokens[i]
        return " ".join(tokens)
    if kind == "insert":
        i = draw(st.integers(0, len(text)))
        return text[:i] + draw(st.text(alphabet='(){}[]%=,:;"/* \nROOTf32x0-<>.', max_size=12)) + text[i:]
    return draw(st.binary(max_size=300)).decode("latin-1")


@pytest.mark.slow
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzzed_input_raises_only_hlo_parse_error(fuzz_seeds, data):
    _parses_or_raises_cleanly(data.draw(_mutated(fuzz_seeds), label="text"))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_random_text_raises_only_hlo_parse_error(text):
    _parses_or_raises_cleanly(text)


@pytest.mark.timeout(20)
def test_pathological_inputs_do_not_hang_or_crash():
    for text in [
        "(" * 100_000,
        "HloModule m\nENTRY e {\n p = " + "(" * 5000 + "f32[]" + ")" * 5000 + " parameter(0)\n}",
        "HloModule m, a=" + "{" * 50_000,
        "ENTRY e {\n p = f32[] parameter(0)" + " " * 200_000 + ", x",
        'ENTRY e {\n p = f32[] parameter(0), metadata={op_name="' + "\\" * 10_000,
        "/*" + "x" * 100_000,
    ]:
        _parses_or_raises_cleanly(text)
