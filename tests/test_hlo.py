"""Tests of tpucost.hlo: unit cases, XLA's own parser as the reference, and fuzzing."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
import xla_reference
from conftest import CORPUS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tpucost import hlo

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
        ("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT q = f32[2] frobnicate(p)\n}", 4, 19, "unknown opcode"),
        ("HloModule m\nENTRY e {\n  p = f33[2] parameter(0)\n}", 3, 7, "unknown element type"),
        ("HloModule m\nENTRY e {\n  ROOT q = f32[2] negate(nope)\n}", 3, 1, "'nope' is not defined"),
        ("HloModule m\nENTRY e {\n  p = f32[2 parameter(0)\n}", 3, 13, "',' or ']'"),
        ("HloModule m\nENTRY e {\n  p = f32[2]{1,0} parameter(0)\n}", 3, 18, "does not fit a rank-1"),
        ('HloModule m\nENTRY e {\n  p = f32[2] parameter(0), metadata={op_name="x}\n}', 3, 46, "unterminated"),
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


# --- XLA's parser as the reference -----------------------------------------------------------

needs_xla = pytest.mark.skipif(not xla_reference.available(), reason="jaxlib._hlo.hlo_module_from_text is not available")


def _summary(module: hlo.Module) -> dict:
    return {c.name: {i.name: [i.opcode, i.operands] for i in c.instructions} for c in module.computations.values()}


def _assert_agrees(texts: list[str], labels: list[str]) -> int:
    reference = xla_reference.xla_parse(texts)
    compared = 0
    for text, label, ref in zip(texts, labels, reference, strict=True):
        if "error" in ref:
            continue
        ours = hlo.parse_module(text, source=label)
        assert _summary(ours) == ref["computations"], f"{label}: differs from XLA's parser"
        compared += 1
    return compared


@needs_xla
def test_agrees_with_xla_on_the_corpus(corpus):
    texts, labels = [], []
    for row in corpus:
        if row["expected"] != "valid":
            continue
        for i, text in enumerate(hlo.split_modules((CORPUS / row["file"]).read_text())):
            texts.append(text)
            labels.append(f"{row['file']}#{i}")
    compared = _assert_agrees(texts, labels)
    assert compared >= 390  # 395 modules of the corpus are accepted by jaxlib 0.10.2


def test_newer_syntax_in_the_corpus_parses(corpus):
    """Valid modules that jaxlib 0.10.2 rejects (newer or older syntax) still parse here."""
    newer = [r for r in corpus if r["expected"] == "valid" and not r["jaxlib_0.10.2_parse"].startswith("ok")]
    assert newer
    for row in newer:
        for text in hlo.split_modules((CORPUS / row["file"]).read_text()):
            hlo.parse_module(text, source=row["file"])


def test_invalid_corpus_modules_are_rejected(corpus):
    invalid = [r for r in corpus if r["expected"] != "valid"]
    assert invalid
    for row in invalid:
        with pytest.raises(hlo.HloParseError):
            hlo.parse_module((CORPUS / row["file"]).read_text(), source=row["file"])


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
    assert _assert_agrees(texts, ["fwd", "grad", "sort"]) == 3


# --- fuzzing: only HloParseError escapes, and nothing hangs -----------------------------------

_SEEDS = [SMALL] + [
    p.read_text()[:4000] for p in sorted(CORPUS.glob("*.hlo"))[:40] if p.stat().st_size < 6000
]


def _parses_or_raises_cleanly(text: str) -> None:
    try:
        hlo.parse_module(text)
    except hlo.HloParseError as err:
        assert "internal parser error" not in str(err), str(err)
        assert err.line >= 1 and err.column >= 1


@st.composite
def _mutated(draw):
    text = draw(st.sampled_from(_SEEDS))
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


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated())
def test_fuzzed_input_raises_only_hlo_parse_error(text):
    _parses_or_raises_cleanly(text)


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
        "ENTRY e {\n p = f32[] parameter(0), metadata={op_name=\"" + "\\" * 10_000,
        "/*" + "x" * 100_000,
    ]:
        _parses_or_raises_cleanly(text)
