"""Notebook 01, section 2: read the HLO text XLA prints into plain Python objects.

`parse_module(text)` reads one HLO module (``jax.jit(f).lower(x).compile().as_text()`` on CPU,
GPU or TPU, or a module of XLA's own tests) into a `Module` of `Computation` s of `Instruction` s,
each with its `Shape`, operands and attributes. Its grammar, read below from the smallest part
up (after XLA's ``xla/hlo/parser/hlo_parser.cc``, which checks more than we need)::

    shape        f32[2,<=3]{1,0:T(8,128)S(1)}  |  (shape, ...)  |  token[]
    instruction  [ROOT] %name = shape opcode(operand, ...), attribute=value, ...
    computation  [ENTRY] %name (p: shape, ...) -> shape { instruction ... }
    module       HloModule name, attribute=value, ...   computation ...

Attributes that later stages read become Python values (``dimensions`` -> ints, ``window`` ->
`Window`, ``slice``, ``padding``, ``backend_config`` JSON and ``metadata`` -> dicts, ...), the
others keep their text. Names are XLA's: unique module-wide, inline bodies (``to_apply={...}``)
named ``_``, ``_.1``, .... Bad input raises `HloParseError` (a `ValueError`) naming line and
column and quoting the text there; no other exception leaves `parse_module`, and none hangs it.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["HloParseError", "Layout", "Shape", "Window", "Instruction", "Computation", "Module"]
__all__ += ["OPCODES", "ELEMENT_TYPES", "parse_module", "parse_shape", "split_modules"]

# 1. The vocabulary: opcodes, element types, and which attributes hold what ------------------

#: Every opcode of XLA (jaxlib 0.10.2 knows these 133), in XLA's text spelling.
OPCODES: tuple[str, ...] = tuple(
    """abs acos acosh add add-dependency after-all all-gather all-gather-done all-gather-start all-reduce
    all-reduce-done all-reduce-start all-to-all and asin asinh async-done async-start async-update atan2
    atanh batch-norm-grad batch-norm-inference batch-norm-training bitcast bitcast-convert broadcast call
    cbrt ceil cholesky clamp count-leading-zeros collective-broadcast collective-permute
    collective-permute-done collective-permute-start compare complex concatenate conditional constant
    convert convolution copy copy-done copy-start cosine cosh custom-call divide domain dot
    dynamic-reshape dynamic-slice dynamic-update-slice erf exponential exponential-minus-one fft floor
    fusion gather get-dimension-size get-tuple-element imag infeed iota is-finite log log-plus-one
    logistic map maximum minimum mulhi multiply negate not opt-barrier or outfeed pad parameter
    partition-id popcnt power ragged-all-to-all ragged-dot real recv recv-done reduce reduce-precision
    reduce-scatter reduce-window remainder replica-id reshape reverse rng rng-bit-generator
    rng-get-and-update-state round-nearest-afz round-nearest-even rsqrt scaled-dot scan scatter select
    select-and-scatter send send-done set-dimension-size shift-left shift-right-arithmetic
    shift-right-logical sign sine sinh slice sort sqrt stochastic-convert subtract tan tanh topk transpose
    triangular-solve tuple while xor""".split()
)
_OPCODE_SET = frozenset(OPCODES)

#: Element types of array shapes, with their size in bits (token/opaque have none).
ELEMENT_TYPES: dict[str, int] = {
    "pred": 8, "s1": 1, "s2": 2, "s4": 4, "s8": 8, "s16": 16, "s32": 32, "s64": 64, "u1": 1, "u2": 2, "u4": 4,
    "u8": 8, "u16": 16, "u32": 32, "u64": 64, "f4e2m1fn": 4, "f8e3m4": 8, "f8e4m3": 8, "f8e4m3fn": 8,
    "f8e4m3b11fnuz": 8, "f8e4m3fnuz": 8, "f8e5m2": 8, "f8e5m2fnuz": 8, "f8e8m0fnu": 8, "f16": 16, "bf16": 16,
    "f32": 32, "f64": 64, "c64": 64, "c128": 128, "token": 0, "opaque": 0,
}  # fmt: skip

# Attributes holding a list of ints `{1,2,3}`, one int, or the name(s) of called computations.
_INT_LIST_ATTRS = frozenset(
    """dimensions lhs_contracting_dims rhs_contracting_dims lhs_batch_dims rhs_batch_dims dynamic_slice_sizes
    fft_length slice_sizes offset_dims collapsed_slice_dims start_index_map update_window_dims
    inserted_window_dims scatter_dims_to_operand_dims operand_batching_dims start_indices_batching_dims
    input_batching_dims scatter_indices_batching_dims lhs_ragged_dims rhs_group_dims""".split()
)
_INT_ATTRS = frozenset(
    """index index_vector_dim feature_group_count batch_group_count channel_id exponent_bits mantissa_bits k
    num_carries""".split()
)
_COMPUTATION_ATTRS = frozenset(
    """to_apply body condition calls branch_computations true_computation false_computation select scatter
    called_computations""".split()
)
_MAX_NESTING = 200  # brackets or tuple shapes nested deeper are refused (no Python crash)

# 2. What a parse gives: the data model ---------------------------------------------------------


class HloParseError(ValueError):
    """Malformed HLO text; ``line`` and ``column`` are 1-based."""

    def __init__(self, message: str, line: int, column: int, source: str = "<hlo>"):
        self.message, self.line, self.column, self.source = message, line, column, source
        super().__init__(f"{source}:{line}:{column}: {message}")


@dataclass(frozen=True)
class Layout:
    """``{1,0:T(8,128)(2,1)S(1)}``: minor_to_major=(1, 0), tiles=((8, 128), (2, 1)) (a ``*`` tile
    dimension is -1), memory_space=1; other layout attributes verbatim in ``extra``."""

    minor_to_major: tuple[int, ...]
    tiles: tuple[tuple[int, ...], ...] = ()
    memory_space: int = 0
    extra: str = ""


@dataclass(frozen=True)
class Shape:
    """An array (element type, dims, layout), a tuple, a token or opaque; ``b(f32[2])``, a buffer,
    is element type ``buffer`` around its one shape. A dim ``<=8`` is 8 and dynamic, ``?`` is -1."""

    element_type: str
    dims: tuple[int, ...] = ()
    dynamic_dims: tuple[bool, ...] = ()
    layout: Layout | None = None
    tuple_shapes: tuple[Shape, ...] = ()

    @property
    def is_tuple(self) -> bool:
        return self.element_type == "tuple"

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def num_elements(self) -> int:
        """Elements of an array shape (1 for a scalar); summed over leaves for a tuple."""
        return sum(s.num_elements for s in self.tuple_shapes) if self.is_tuple else math.prod(self.dims)

    @property
    def byte_size(self) -> int:
        """Bytes of the data (without tiling padding); summed over leaves for a tuple."""
        if self.is_tuple:
            return sum(s.byte_size for s in self.tuple_shapes)
        return (self.num_elements * ELEMENT_TYPES.get(self.element_type, 0) + 7) // 8

    def leaves(self) -> Iterator[Shape]:
        """The array/token leaves of a (possibly nested) tuple shape, left to right."""
        if self.is_tuple or self.element_type == "buffer":
            for s in self.tuple_shapes:
                yield from s.leaves()
        else:
            yield self

    def __str__(self) -> str:
        if self.is_tuple:
            return "(" + ", ".join(str(s) for s in self.tuple_shapes) + ")"
        dims = (f"<={d}" if dyn else str(d) for d, dyn in zip(self.dims, self.dynamic_dims, strict=False))
        return f"{self.element_type}[{','.join(dims)}]"


@dataclass(frozen=True)
class Window:
    """A convolution / reduce-window window; one entry per spatial dimension."""

    size: tuple[int, ...] = ()
    stride: tuple[int, ...] = ()
    pad: tuple[tuple[int, int], ...] = ()
    lhs_dilate: tuple[int, ...] = ()
    rhs_dilate: tuple[int, ...] = ()
    reversal: tuple[int, ...] = ()

    @property
    def rank(self) -> int:
        return max(map(len, (self.size, self.stride, self.pad, self.lhs_dilate, self.rhs_dilate)))


@dataclass
class Instruction:
    """One HLO instruction: ``%name = shape opcode(operands), attributes``."""

    name: str
    opcode: str
    shape: Shape
    operands: list[str] = field(default_factory=list)
    attributes: dict[str, Any] = field(default_factory=dict)
    called_computations: list[str] = field(default_factory=list)
    is_root: bool = False
    line: int = 0

    def __repr__(self) -> str:
        return f"Instruction({self.name!r}, {self.opcode!r}, {self.shape}, operands={self.operands})"


@dataclass
class Computation:
    """A named graph of instructions; `root` is the instruction marked ROOT (or the last one)."""

    name: str
    instructions: list[Instruction]
    parameters: list[tuple[str, Shape]] = field(default_factory=list)
    result_shape: Shape | None = None
    is_entry: bool = False
    attributes: dict[str, Any] = field(default_factory=dict)

    @property
    def root(self) -> Instruction:
        return next((i for i in self.instructions if i.is_root), self.instructions[-1])

    def instruction(self, name: str) -> Instruction:
        """The instruction called `name` (KeyError if there is none)."""
        for inst in self.instructions:
            if inst.name == name:
                return inst
        raise KeyError(name)

    def __repr__(self) -> str:
        return f"Computation({self.name!r}, {len(self.instructions)} instructions)"


@dataclass
class Module:
    """A parsed HLO module: computations in file order and the entry computation."""

    name: str
    computations: dict[str, Computation]
    entry: Computation
    attributes: dict[str, Any] = field(default_factory=dict)

    @property
    def num_instructions(self) -> int:
        return sum(len(c.instructions) for c in self.computations.values())

    def __repr__(self) -> str:
        return f"Module({self.name!r}, {len(self.computations)} computations)"


_UNKNOWN = Shape("unknown")  # the shape of an instruction written without one

# 3. Tokens: whitespace and comments, names, integers, strings, bracketed groups ----------------

_SKIP = re.compile(r"(?:[ \t\r\n\f\v]|/\*.*?\*/|//[^\n]*)*", re.S)
_NAME = re.compile(r"%?([A-Za-z_][A-Za-z0-9_.\-]*)")
_ATTR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_ATTR_START = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*[ \t]*=")
_OPCODE = re.compile(r"[a-z][a-z0-9\-]*")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT = re.compile(r"[+-]?\d+")
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"', re.S)
_QUOTED = {q: re.compile(rf"{q}(?:[^{q}\\]|\\.)*{q}", re.S) for q in "\"'"}
_CLOSE = {"(": ")", "[": "]", "{": "}"}
_DIM = re.compile(r"(<=)?(\d+)|\?")  # 8, <=8 (dynamic) or ? (unknown, -1)
_LAYOUT_START = re.compile(r"-?\d|:")
_LAYOUT_TAG = re.compile(r"[A-Z]+|[#*]")
_DIM_LABELS = re.compile(r"[0-9bf?]{2,}_[0-9io?]{2,}->[0-9bf?]{2,}")
_PADDING = re.compile(r"-?\d+_-?\d+(?:_-?\d+)?(?:x-?\d+_-?\d+(?:_-?\d+)?)*")
_MESH = re.compile(r"mesh\[(.*)\]\s*\{(.*)\}", re.S)
_ALIAS = re.compile(r"\{[\d,\s]*\}\s*:\s*\(\s*\d+\s*,\s*\{[\d,\s]*\}\s*(?:,\s*(?:may|must)-alias\s*)?\)")
_INLINE_BODY = re.compile(r"\{\s*(?:ROOT\s+)?%?[A-Za-z_][A-Za-z0-9_.\-]*\s*=")
_INLINE_OP = re.compile(r"([a-z][a-z0-9\-]*)\(")
_SECTIONS = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")


def _unquote(quoted: str) -> str:
    """The text of a quoted string, its escapes (``\\n``, ``\\"``, ...) resolved."""
    if "\\" not in quoted:
        return quoted[1:-1]
    escapes = {"n": "\n", "t": "\t", "r": "\r"}
    return re.sub(r"\\(.)", lambda m: escapes.get(m[1], m[1]), quoted[1:-1], flags=re.S)


class _Parser:
    """Recursive descent over the text, one method per rule; `pos` only moves forward."""

    def __init__(self, text: str, source: str = "<hlo>"):
        self.text, self.source, self.pos, self.depth = text, source, 0, 0
        self.pending: list[Instruction] = []  # instructions written inline as operands
        self.inline_count = self.inline_bodies = 0  # those, and computations written inline
        self.inline_computations: list[Computation] = []  # bodies written inside attributes
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def error(self, message: str, pos: int | None = None) -> HloParseError:
        """An error at `pos` (default: here) that quotes the rest of its line."""
        pos = self.pos if pos is None else min(pos, len(self.text))
        end = self.text.find("\n", pos)
        snippet = self.text[pos : end if end != -1 else len(self.text)][:60]
        found = repr(snippet) if snippet.strip() else "end of line" if end != -1 else "end of input"
        return HloParseError(f"{message}; found {found}", *self.where(pos), self.source)

    def where(self, pos: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.line_starts, pos)
        return line, pos - self.line_starts[line - 1] + 1

    def skip(self) -> int:
        """Skip whitespace and comments; the position reached."""
        self.pos = _SKIP.match(self.text, self.pos).end()
        if self.text.startswith("/*", self.pos):
            raise self.error("unterminated /* comment")
        return self.pos

    def peek(self, s: str) -> bool:
        return self.text.startswith(s, self.skip())

    def accept(self, s: str) -> bool:
        if not self.peek(s):
            return False
        self.pos += len(s)
        return True

    def expect(self, s: str, what: str | None = None) -> None:
        if not self.accept(s):
            raise self.error(f"expected {what or repr(s)}")

    def match(self, pattern: re.Pattern[str], what: str) -> re.Match[str]:
        m = pattern.match(self.text, self.skip())
        if not m:
            raise self.error(f"expected {what}")
        self.pos = m.end()
        return m

    def word(self) -> str:
        """The identifier that comes next (not consumed), or ''."""
        m = _WORD.match(self.text, self.skip())
        return m[0] if m else ""

    def keyword(self, word: str) -> bool:
        if self.word() != word:
            return False
        self.pos += len(word)
        return True

    def name(self, what: str = "a name") -> str:
        return self.match(_NAME, what)[1]

    def integer(self, what: str = "an integer") -> int:
        return int(self.match(_INT, what)[0])

    def listed(self, read: Callable[[], Any], close: str, what: str) -> list[Any]:
        """`read()` items separated by ',' up to `close` (the opening bracket already read)."""
        items = []
        if not self.accept(close):
            items.append(read())
            while not self.accept(close):
                self.expect(",", f"',' or '{close}' in {what}")
                items.append(read())
        return items

    def balanced(self) -> str:
        """One bracketed group ``(...)``, ``[...]`` or ``{...}`` (strings respected)."""
        start = self.skip()
        if self.text[start : start + 1] not in _CLOSE:
            raise self.error("expected '(', '[' or '{'")
        self.pos = self.group_end(start)
        return self.text[start : self.pos]

    def group_end(self, pos: int) -> int:
        """The position after the group opened at `pos`."""
        text, stack = self.text, [_CLOSE[self.text[pos]]]
        pos += 1
        while stack:
            if pos >= len(text):
                raise self.error(f"missing {stack[-1]!r}", pos)
            c = text[pos]
            if c == '"' or c == "'":
                pos = self.string_end(pos)
                continue
            if c in _CLOSE:
                if len(stack) > _MAX_NESTING:
                    raise self.error("brackets nested too deeply", pos)
                stack.append(_CLOSE[c])
            elif c in ")]}":
                if c != stack[-1]:
                    raise self.error(f"expected {stack[-1]!r} to close a bracket", pos)
                stack.pop()
            pos += 1
        return pos

    def string_end(self, pos: int) -> int:
        m = _QUOTED[self.text[pos]].match(self.text, pos)
        if not m:
            raise self.error("unterminated string", pos)
        return m.end()

    def int_of(self, text: str, pos: int, what: str) -> int:
        """`text` as an integer, or an error at `pos`."""
        if not _INT.fullmatch(text := text.strip()):
            raise self.error(f"expected an integer {what}, got {text!r}", pos)
        return int(text)

    # 4. Shapes: f32[2,<=3]{1,0:T(8,128)S(1)}, (shape, ...), b(shape), token[] ------------------

    def looks_like_shape(self) -> bool:
        if self.text.startswith(("(", "b("), self.skip()):
            return True
        m = _WORD.match(self.text, self.pos)
        return bool(m) and m[0] in ELEMENT_TYPES and self.text.startswith("[", m.end())

    def shape(self) -> Shape:
        self.depth += 1
        if self.depth > _MAX_NESTING:
            raise self.error("shapes nested too deeply")
        try:
            if self.accept("("):
                return Shape("tuple", tuple_shapes=tuple(self.listed(self.shape, ")", "a tuple shape")))
            if self.text.startswith("b(", self.pos):  # a buffer: b(f32[2,4])
                self.pos += 2
                inner = self.shape()
                self.expect(")", "')' to close the buffer shape")
                return Shape("buffer", tuple_shapes=(inner,))
            start = self.pos
            word = self.match(_WORD, "a shape")[0]
            if word not in ELEMENT_TYPES:
                raise self.error(f"unknown element type {word!r}", start)
            if word in ("token", "opaque") and not self.peek("["):
                return Shape(word)
            self.expect("[", f"'[' after element type {word!r}")
            dims = self.listed(lambda: self.match(_DIM, "a dimension size"), "]", "the dimensions")
            sizes = tuple(int(m[2]) if m[2] else -1 for m in dims)
            layout = self.layout(len(dims)) if self.layout_follows() else None
            return Shape(word, sizes, tuple(m[0] != m[2] for m in dims), layout)
        finally:
            self.depth -= 1

    def layout_follows(self) -> bool:
        """Whether a layout ``{...}`` comes next, glued to the dims or after whitespace.

        As in XLA, a ``{`` starts a layout only when an integer or ``:`` follows it (``f32[4]
        {0}``); any other ``{`` is not part of the shape -- e.g. the body of ``ENTRY %main (p:
        f32[4]) -> f32[4] {``. A glued ``{}`` is also read as an (empty) layout, which XLA rejects.
        """
        brace = _SKIP.match(self.text, self.pos).end()
        if not self.text.startswith("{", brace):
            return False
        if _LAYOUT_START.match(self.text, _SKIP.match(self.text, brace + 1).end()):
            return True
        return brace == self.pos and self.text.startswith("}", brace + 1)

    def layout(self, rank: int) -> Layout:
        self.expect("{")
        minor_to_major: list[int] = []
        if not self.peek("}") and not self.peek(":"):
            minor_to_major.append(self.integer("a layout dimension"))
            while self.accept(","):
                minor_to_major.append(self.integer("a layout dimension"))
        tiles: list[tuple[int, ...]] = []
        memory_space, extra = 0, ""
        if self.accept(":"):
            while not self.accept("}"):
                tag_start = self.pos
                tag = self.match(_LAYOUT_TAG, "a layout attribute (T, S, E, L, D, ...)")[0]
                groups = []
                while self.peek("("):
                    groups.append(self.balanced())
                if not groups:
                    raise self.error(f"expected '(' after layout attribute {tag!r}")
                if tag == "T":  # tiles: T(8,128)(2,1), a `*` dimension is -1
                    for g in groups:
                        parts = [s.strip() for s in g[1:-1].split(",")] if g[1:-1].strip() else []
                        tile = (
                            -1 if s == "*" else self.int_of(s, tag_start, "tile dimension") for s in parts
                        )
                        tiles.append(tuple(tile))
                elif tag == "S":
                    memory_space = self.int_of(groups[0][1:-1], tag_start, "memory space")
                else:
                    extra += tag + "".join(groups)
        else:
            self.expect("}", "'}' to close the layout")
        if minor_to_major and sorted(minor_to_major) != list(range(rank)):
            dims = ",".join(map(str, minor_to_major))
            raise self.error(f"layout {{{dims}}} does not fit a rank-{rank} shape")
        return Layout(tuple(minor_to_major), tuple(tiles), memory_space, extra)

    # 5. Attribute values: the text of `key=value`, then the Python value later stages read ----

    def attribute_value(self, key: str) -> str:
        """The text of one value: brackets and strings balanced, ending at ',' or a space."""
        start = self.skip()
        if key == "literal" and self.looks_like_shape():  # `literal=s32[] 1`: a shape, then a value
            self.shape()
            self.skip()
        text, pos = self.text, self.pos
        while pos < len(text):
            c = text[pos]
            if c in _CLOSE:
                pos = self.group_end(pos)
            elif c == '"':
                pos = self.string_end(pos)
            elif c in ",)]}" or c.isspace():
                # `replica_groups=mesh[...] {...}` is the one value with a space in it.
                if not (c.isspace() and text.startswith("mesh[", start)):
                    break
                nxt = _SKIP.match(text, pos).end()
                if not text.startswith("{", nxt):
                    break
                pos = nxt
            elif text.startswith(("/*", "//"), pos):
                break
            else:
                pos += 1
        if pos == start:
            raise self.error(f"expected a value for attribute {key!r}")
        self.pos = pos
        return text[start:pos]

    def convert(self, key: str, value: str, pos: int) -> Any:
        """An attribute's text as the Python value later stages read (errors point at `pos`)."""
        braced = value.startswith("{") and value.endswith("}")
        if key == "dimensions":
            dims = self.int_list(key, value, pos)
            if any(d < 0 for d in dims):
                raise self.error(f"dimensions must not be negative, got {value!r}", pos)
            return dims
        if key in _INT_LIST_ATTRS:
            if value.startswith("{{"):  # a list of lists, e.g. slice_sizes={{2,4},{2,4}}
                return tuple(self.int_list(key, g, pos) for g in re.findall(r"\{[^{}]*\}", value))
            return self.int_list(key, value, pos)
        if key in _INT_ATTRS:
            return self.int_of(value, pos, f"for {key}")
        if key in _COMPUTATION_ATTRS:
            names = self.names(key, value, pos)
            if key in ("branch_computations", "calls", "called_computations") and value.startswith("{"):
                return names
            if len(names) != 1:
                raise self.error(f"attribute {key!r} names one computation", pos)
            return names[0]
        if key == "control-predecessors":
            return self.names(key, value, pos)
        if key == "window":
            if not braced:
                raise self.error(f"window expects {{size=... stride=...}}, got {value!r}", pos)
            return self.window(value, pos)
        if key == "dim_labels" and not _DIM_LABELS.fullmatch(value):
            raise self.error(f"dim_labels expects e.g. b01f_01io->b01f, got {value!r}", pos)
        if key == "slice":
            if not braced:
                raise self.error(f"slice expects {{[start:limit:stride], ...}}, got {value!r}", pos)
            return tuple(self.bound(m[0], m[1], pos) for m in re.finditer(r"\[([^\]]*)\]", value))
        if key == "padding":
            if not _PADDING.fullmatch(value):
                raise self.error(f"padding expects low_high[_interior]x..., got {value!r}", pos)
            return tuple((*map(int, part.split("_")), 0)[:3] for part in value.split("x"))  # interior 0
        if key == "backend_config":
            raw = _unquote(value) if value.startswith('"') else value
            try:
                return json.loads(raw) if raw.startswith("{") else raw
            except (ValueError, RecursionError):
                return raw
        if key in ("metadata", "frontend_attributes"):
            if not value.startswith("{"):
                raise self.error(f"attribute {key!r} expects {{...}}, got {value!r}", pos)
            return _brace_dict(value)
        if key == "replica_groups":
            self.check_mesh(value, pos)
            return value
        return _unquote(value) if value.startswith('"') else value

    def int_list(self, key: str, value: str, pos: int) -> tuple[int, ...]:
        """``{1,2,3}`` -> (1, 2, 3)."""
        if not (value.startswith("{") and value.endswith("}")):
            raise self.error(f"attribute {key!r} expects {{int, ...}}, got {value!r}", pos)
        body = value[1:-1].strip()
        return tuple(self.int_of(s, pos, f"in {key}") for s in body.split(",")) if body else ()

    def names(self, key: str, value: str, pos: int) -> tuple[str, ...]:
        """``%f`` or ``{%f, %g}``: computation or instruction names."""
        items = [value]
        if value.startswith("{"):
            if not value.endswith("}"):
                raise self.error(f"attribute {key!r}: expected '}}'", pos)
            items = [s.strip() for s in value[1:-1].split(",")] if value[1:-1].strip() else []
        for item in items:
            if not _NAME.fullmatch(item):
                raise self.error(f"attribute {key!r}: {item!r} is not a name", pos)
        return tuple(_NAME.fullmatch(item)[1] for item in items)

    def window(self, value: str, pos: int) -> Window:
        """``{size=3x3 stride=2x2 pad=1_1x0_1 lhs_dilate=.. rhs_dilate=.. rhs_reversal=..}``."""
        fields: dict[str, Any] = {}
        for item in value[1:-1].split():
            key, eq, body = item.partition("=")
            if not eq or not body:
                raise self.error(f"window: expected key=value, got {item!r}", pos)
            if key == "pad":
                pads = []
                for part in body.split("x"):
                    if len(part.split("_")) != 2:
                        msg = f"window pad {part!r}: expects padding_low and padding_high separated by '_'"
                        raise self.error(msg, pos)
                    pads.append(tuple(self.int_of(s, pos, "padding") for s in part.split("_")))
                fields["pad"] = tuple(pads)
            elif key in ("size", "stride", "lhs_dilate", "rhs_dilate", "rhs_reversal"):
                ints = tuple(self.int_of(s, pos, f"window {key}") for s in body.split("x"))
                fields["reversal" if key == "rhs_reversal" else key] = ints
            else:
                raise self.error(f"window: unknown field {key!r}", pos)
        return Window(**fields)

    def bound(self, text: str, inside: str, pos: int) -> tuple[int, int, int]:
        """One slice bound ``[start:limit]`` or ``[start:limit:stride]`` (stride 1 by default)."""
        if len(parts := inside.split(":")) not in (2, 3):
            raise self.error(f"slice bound {text!r}: expected [start:limit] or [start:limit:stride]", pos)
        nums = [self.int_of(s, pos, "slice bound") for s in parts]
        return nums[0], nums[1], nums[2] if len(nums) == 3 else 1

    def check_mesh(self, value: str, pos: int) -> None:
        """``replica_groups=mesh['x'=2,'y'=2] {'x'}``: the axes in braces are axes of the mesh."""
        if not value.startswith("mesh"):
            return
        if not (m := _MESH.fullmatch(value)):
            raise self.error(f"replica_groups: malformed mesh {value!r}", pos)
        axes = set()
        for item in _split_top(m[1]):
            if not (axis := re.fullmatch(r"\s*'([^']*)'\s*=\s*\d+\s*", item)):
                msg = f"replica_groups mesh: expects string axis 'name'=size, got {item.strip()!r}"
                raise self.error(msg, pos)
            axes.add(axis[1])
        for item in _split_top(m[2]):
            axis = re.fullmatch(r"\s*'([^']*)'(?::\d+\(\d+\))?\s*", item)
            if not axis or axis[1] not in axes:
                raise self.error(f"replica_groups mesh: {item.strip()!r} is not an axis of the mesh", pos)

    # 6. Instructions: [ROOT] %name = shape opcode(operands), key=value, ... ---------------------

    def instruction(self) -> Instruction:
        line, _ = self.where(self.skip())
        is_root = self.keyword("ROOT")
        name = self.name("an instruction name")
        self.expect("=", "'=' after the instruction name")
        return self.instruction_rhs(name, is_root, line)

    def instruction_rhs(self, name: str, is_root: bool, line: int) -> Instruction:
        """``shape opcode(operands), attributes`` (an omitted shape is allowed, as in XLA)."""
        shape = self.shape() if self.looks_like_shape() else None
        op_start = self.skip()
        opcode = self.match(_OPCODE, "an opcode")[0]
        attributes: dict[str, Any] = {}
        if opcode not in _OPCODE_SET:
            if shape is None and self.text.startswith("[", self.pos):
                raise self.error(f"unknown element type {opcode!r}", op_start)
            # `custom-call-start(...)`: XLA's shorthand for an async op wrapping a custom-call
            m = re.fullmatch(r"(.+)-(start|update|done)", opcode)
            if not (m and m[1] in _OPCODE_SET):
                raise self.error(f"unknown opcode {opcode!r}", op_start)
            opcode, attributes["async_wrapped_opcode"] = f"async-{m[2]}", m[1]
        self.expect("(", f"'(' after opcode {opcode!r}")
        operands: list[str] = []
        if opcode == "constant":  # the literal: the text up to the ')' closing this '('
            start, self.pos = self.pos, self.group_end(self.pos - 1)
            if not (literal := self.text[start : self.pos - 1].strip()):
                raise self.error("a constant needs a literal", start)
            attributes["literal"] = literal
        elif opcode == "parameter":
            attributes["parameter_number"] = self.integer("a parameter number")
            self.expect(")")
        else:
            operands = self.operand_list()
        while self.skip() < len(self.text) and self.text[self.pos] == ",":
            if not _ATTR_START.match(self.text, _SKIP.match(self.text, self.pos + 1).end()):
                break  # not `, name=`: no more attributes
            self.expect(",")
            key_pos = self.pos
            key = self.match(_ATTR_NAME, "an attribute name")[0]
            self.expect("=", f"'=' after attribute {key!r}")
            if key in attributes:
                raise self.error(f"attribute {key!r} given twice", key_pos)
            value_pos = self.pos
            value = self.attribute_value(key)
            if key in _COMPUTATION_ATTRS and _INLINE_BODY.match(value):
                attributes[key] = self.inline_computation(value_pos)
            else:
                attributes[key] = self.convert(key, value, key_pos)
        called = _called(attributes)
        inst = Instruction(name, opcode, shape or _UNKNOWN, operands, attributes, called, is_root, line)
        self.check_instruction(inst, op_start)
        return inst

    def operand_list(self) -> list[str]:
        """``(f32[2]{0} %a, %b, /*index=2*/ %c)`` -> ["a", "b", "c"]; the '(' is consumed."""
        operands: list[str] = []
        if self.accept(")"):
            return operands
        while True:
            if self.looks_like_shape():
                self.shape()
            m = _INLINE_OP.match(self.text, self.skip())
            if m and m[1] in _OPCODE_SET:  # `f32[] parameter(0)` written in place
                self.inline_count += 1
                inline = self.instruction_rhs(
                    f"{m[1]}.anon#{self.inline_count}", False, self.where(self.pos)[0]
                )
                self.pending.append(inline)
                operands.append(inline.name)
            else:
                operands.append(self.name("an operand name"))
            if self.accept(")"):
                return operands
            self.expect(",", "',' or ')' in the operand list")

    def inline_computation(self, pos: int) -> str:
        """``calls={ p0 = f32[] parameter(0) ... }``: a computation body written in place; named
        ``_#<k>`` for now (``#`` is in no name of the text), ``_``, ``_.1``, ... in the end."""
        end, self.pos = self.pos, pos
        self.expect("{")
        instructions = self.instructions(None)
        if self.pos != end:
            raise self.error("unexpected text after an inline computation body")
        self.inline_bodies += 1
        comp = Computation(f"_#{self.inline_bodies}", instructions)
        self.check_computation(comp)
        self.inline_computations.append(comp)
        return comp.name

    def check_instruction(self, inst: Instruction, pos: int) -> None:
        """The few per-opcode rules of XLA's parser that a user can trip over."""
        op, attributes, name = inst.opcode, inst.attributes, inst.name
        if op in ("recv", "send") and not (inst.shape.is_tuple and len(inst.shape.tuple_shapes) == 3):
            raise self.error(f"{op} {name!r} must have a 3-tuple shape (data, context, token)", pos)
        if op == "conditional" and not inst.operands:
            raise self.error(f"conditional {name!r} needs a predicate or branch index operand", pos)
        if op == "conditional" and not {"branch_computations", "true_computation"} & attributes.keys():
            raise self.error(f"conditional {name!r} needs branch_computations", pos)
        if op == "while" and not {"body", "condition"} <= attributes.keys():
            raise self.error(f"while {name!r} needs body= and condition=", pos)
        if op in ("fusion", "call", "async-start") and not {"calls", "to_apply"} & attributes.keys():
            if op != "async-start" or "async_wrapped_opcode" not in attributes:
                raise self.error(f"{op} {name!r} needs calls=", pos)
        if op == "get-tuple-element" and "index" not in attributes:
            raise self.error(f"get-tuple-element {name!r} needs index=", pos)

    # 7. Computations: [ENTRY] %name (p: shape, ...) -> shape { instructions } ----------------

    def computation(self) -> Computation:
        is_entry = self.keyword("ENTRY")
        name = self.name("a computation name (or ENTRY)")
        parameters: list[tuple[str, Shape]] = []
        result_shape = None
        if self.accept("("):
            parameters = self.listed(self.parameter, ")", "the parameter list")
            self.expect("->", "'->' and the result shape")
            result_shape = self.shape()
        self.expect("{", "'{' to open the computation body")
        instructions = self.instructions(f"computation {name!r} is not closed with '}}'")
        if not instructions:
            raise self.error(f"computation {name!r} has no instructions")
        attributes: dict[str, Any] = {}
        while self.peek(",") and not self.text.startswith(",", self.pos + 1):
            self.expect(",")
            key = self.match(_ATTR_NAME, "a computation attribute name")[0]
            self.expect("=")
            attributes[key] = self.attribute_value(key)
        comp = Computation(name, instructions, parameters, result_shape, is_entry, attributes)
        self.check_computation(comp)
        return comp

    def parameter(self) -> tuple[str, Shape]:
        name = self.name("a parameter name")
        self.expect(":")
        return name, self.shape()

    def instructions(self, unclosed: str | None) -> list[Instruction]:
        """The instructions up to the closing '}', each after those written inline in it."""
        saved, self.pending = self.pending, []
        out: list[Instruction] = []
        while not self.accept("}"):
            if unclosed and self.pos >= len(self.text):
                raise self.error(unclosed)
            inst = self.instruction()
            out += [*self.pending, inst]
            self.pending.clear()
        self.pending = saved
        return out

    def check_computation(self, comp: Computation) -> None:
        """Names are unique, operands are defined, at most one ROOT."""
        defined: dict[str, Instruction] = {}
        for inst in comp.instructions:
            if inst.name in defined and "#" not in inst.name:
                where = f"in computation {comp.name!r} (line {inst.line})"
                raise self.error(f"instruction {inst.name!r} is defined twice {where}")
            defined[inst.name] = inst
        if sum(inst.is_root for inst in comp.instructions) > 1:
            raise self.error(f"computation {comp.name!r} has more than one ROOT")
        for inst in comp.instructions:
            for ref in [*inst.operands, *inst.attributes.get("control-predecessors", ())]:
                if ref not in defined:
                    where = f"(used by {inst.name!r} in computation {comp.name!r})"
                    raise HloParseError(
                        f"instruction {ref!r} is not defined {where}", inst.line, 1, self.source
                    )

    # 8. The module: HloModule name, attributes; stack frame tables; computations ------------

    def module(self) -> Module:
        name, attributes = "module", {}
        if self.keyword("HloModule"):
            name = self.name("a module name")
            self.accept(":")  # XLA also accepts `HloModule name:`
            while self.accept(","):
                key = self.match(_ATTR_NAME, "a module attribute name")[0]
                self.expect("=")
                start = self.pos
                attributes[key] = value = self.attribute_value(key)
                if key == "input_output_alias" and not (value.startswith("{") and value.endswith("}")):
                    raise self.error(
                        "input_output_alias expects { {output index}: (param, {param index}) ... }", start
                    )
                for item in _split_top(value[1:-1]) if key == "input_output_alias" else ():
                    if not _ALIAS.fullmatch(item.strip()):  # { {0}: (0, {}, may-alias), ... }
                        msg = f"input_output_alias: malformed entry {item.strip()!r}; expects '}}' at the end"
                        raise self.error(msg, start)
        computations: dict[str, Computation] = {}
        entry: Computation | None = None
        while self.skip() < len(self.text):
            if (word := self.word()) in _SECTIONS:
                self.stack_frames(word, attributes)
                continue
            if word == "HloModule":
                raise self.error("a second HloModule in one text (split files on '// -----' first)")
            start = self.pos
            comp = self.computation()
            if comp.name in computations:
                raise self.error(f"computation {comp.name!r} is defined twice", start)
            computations.update((c.name, c) for c in self.inline_computations)
            self.inline_computations.clear()
            computations.update((c.name, c) for c in _wrap_async_shorthand(comp, computations))
            computations[comp.name] = comp
            if comp.is_entry and entry is not None:
                raise self.error("more than one ENTRY computation", start)
            entry = comp if comp.is_entry else entry
        if not computations:
            raise self.error("expected at least one computation")
        if entry is None:
            entry = list(computations.values())[-1]
            entry.is_entry = True
        self.check_calls(computations)
        module = Module(name=name, computations=computations, entry=entry, attributes=attributes)
        _name_computations(module)
        _name_instructions(module)
        return module

    def stack_frames(self, word: str, attributes: dict[str, Any]) -> None:
        """A ``FileNames`` / ``FunctionNames`` / ``FileLocations`` / ``StackFrames`` table."""
        self.keyword(word)
        entries: dict[int, str] = {}
        while _INT.match(self.text, self.skip()):
            index = self.integer()
            if self.peek('"'):
                entries[index] = _unquote(self.match(_STRING, "a quoted string")[0])
            elif self.peek("{"):
                entries[index] = self.balanced()
            else:
                raise self.error(f"expected a string or {{...}} in the {word} table")
        attributes.setdefault("stack_frames", {})[word] = entries

    def check_calls(self, computations: dict[str, Computation]) -> None:
        """Every called computation exists; async ops of one chain call the same computation."""
        for comp in computations.values():
            by_name = {i.name: i for i in comp.instructions}
            for inst in comp.instructions:
                for callee in inst.called_computations:
                    if callee not in computations:
                        msg = f"computation {callee!r} called by {inst.name!r} is not defined"
                        raise HloParseError(msg, inst.line, 1, self.source)
                calls = inst.attributes.get("calls")
                if inst.opcode in ("async-update", "async-done") and calls is not None and inst.operands:
                    start = by_name.get(inst.operands[0])
                    if start is not None and start.attributes.get("calls") not in (None, calls):
                        msg = (
                            f"{inst.opcode} {inst.name!r} calls {calls!r} but its async-start {start.name!r}"
                        )
                        msg += f" calls {start.attributes['calls']!r}"
                        raise HloParseError(msg, inst.line, 1, self.source)


def _called(attributes: dict[str, Any]) -> list[str]:
    """The computations an instruction's attributes name, in attribute order."""
    named = (v for key, v in attributes.items() if key in _COMPUTATION_ATTRS)
    return [c for v in named for c in (v if isinstance(v, tuple) else (v,))]


def _brace_dict(value: str) -> dict[str, Any]:
    """``{op_name="a" source_line=3}`` or ``{a="b",c="d"}`` -> dict (values str or int)."""
    out: dict[str, Any] = {}
    for m in re.finditer(r'([A-Za-z_][A-Za-z0-9_.\-]*)=("(?:[^"\\]|\\.)*"|[^\s,}]+)', value[1:-1]):
        out[m[1]] = _unquote(m[2]) if m[2].startswith('"') else int(m[2]) if _INT.fullmatch(m[2]) else m[2]
    return out


def _split_top(text: str) -> list[str]:
    """Split on the commas that are not inside brackets."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += (c in "([{") - (c in ")]}")
        if c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [s for s in parts if s.strip()]


# 9. Names as XLA gives them, and its async shorthand spelled out --------------------------------


class _NameUniquer:
    """XLA's NameUniquer: a name keeps its text unless its (prefix, number) was taken before."""

    def __init__(self) -> None:
        self.used: dict[str, set[int]] = {}
        self.next: dict[str, int] = {}

    def unique(self, name: str) -> str:
        root, dot, suffix = name.rpartition(".")
        has_suffix = bool(dot and root and suffix.isdigit())
        root, number = (root, int(suffix)) if has_suffix else (name, 0)
        used = self.used.setdefault(root, set())
        if number in used:
            number = self.next.get(root, 0)
            while number in used:
                number += 1
            self.next[root] = number + 1
        used.add(number)
        return f"{root}.{number}" if number or has_suffix else root


def _name_computations(module: Module) -> None:
    """Name computations as XLA's parser does: inline bodies ``_``, ``_.1``, ...; clashes renamed.

    XLA names every computation written inline ``_`` and passes all computation names, in file
    order (an inline body before the computation holding it), through one NameUniquer: inline
    bodies become ``_``, ``_.1``, ... unless the text took those names, and a computation
    clashing with an earlier one (``g`` after ``g.0``) gets the next free suffix. References
    (``to_apply=``, ``calls=``, ...) follow the renaming.
    """
    uniquer, renamed = _NameUniquer(), {}
    for old, comp in module.computations.items():
        comp.name = renamed[old] = uniquer.unique(old.split("#")[0])  # "_#3" -> "_", "_.1", ...
    if all(old == new for old, new in renamed.items()):
        return
    module.computations = {comp.name: comp for comp in module.computations.values()}
    for inst in (i for c in module.computations.values() for i in c.instructions if i.called_computations):
        inst.called_computations = [renamed.get(c, c) for c in inst.called_computations]
        for key in _COMPUTATION_ATTRS & inst.attributes.keys():
            value = inst.attributes[key]
            if isinstance(value, tuple):
                inst.attributes[key] = tuple(renamed.get(c, c) for c in value)
            elif isinstance(value, str):
                inst.attributes[key] = renamed.get(value, value)


def _name_instructions(module: Module) -> None:
    """Make instruction names unique module-wide as XLA's parser does: the first instruction (in
    file order) keeps a name, a later one gets the next free suffix."""
    uniquer = _NameUniquer()
    for comp in module.computations.values():
        renamed = {}
        for inst in comp.instructions:
            new = uniquer.unique(inst.name.split("#")[0])  # inline operands: "negate.anon#3"
            if new != inst.name:
                renamed[inst.name] = new
                inst.name = new
        if not renamed:
            continue
        for inst in comp.instructions:
            inst.operands = [renamed.get(o, o) for o in inst.operands]
            if "control-predecessors" in inst.attributes:
                preds = inst.attributes["control-predecessors"]
                inst.attributes["control-predecessors"] = tuple(renamed.get(o, o) for o in preds)


def _wrap_async_shorthand(comp: Computation, existing: dict[str, Computation]) -> list[Computation]:
    """``custom-call-start(...)`` is shorthand for an async-start calling a one-op computation.

    As XLA's parser does, build that computation (``async_wrapped``: one ``async_param`` per
    operand, then the wrapped op) and let the async-start/update/done instructions call it.
    """
    created: list[Computation] = []
    by_name = {i.name: i for i in comp.instructions}
    for inst in comp.instructions:
        op = inst.attributes.get("async_wrapped_opcode")
        if op is None or "calls" in inst.attributes:
            continue
        if inst.opcode != "async-start":  # an update or done calls what its start calls
            start = by_name.get(inst.operands[0]) if inst.operands else None
            if start is not None and "calls" in start.attributes:
                inst.attributes["calls"] = start.attributes["calls"]
                inst.called_computations = [start.attributes["calls"]]
            continue
        name, k, taken = "async_wrapped", 0, set(existing) | {c.name for c in created}
        while name in taken:
            k += 1
            name = f"async_wrapped.{k}"
        shape = inst.shape  # ((operand shapes), result shape, context...)
        operand_shapes = list(shape.tuple_shapes[0].tuple_shapes) if shape.is_tuple else []
        result = shape.tuple_shapes[1] if shape.is_tuple and len(shape.tuple_shapes) > 1 else _UNKNOWN
        shapes = operand_shapes + [_UNKNOWN] * len(inst.operands)
        params = [
            Instruction(
                f"async_param#{i}", "parameter", shapes[i], [], {"parameter_number": i}, line=inst.line
            )
            for i in range(len(inst.operands))
        ]
        drop = ("async_wrapped_opcode", "async_execution_thread")
        attributes = {k: v for k, v in inst.attributes.items() if k not in drop}
        operands = [p.name for p in params]
        wrapped = Instruction(op, op, result, operands, attributes, _called(attributes), True, inst.line)
        created.append(Computation(name, [*params, wrapped], is_entry=False))
        inst.attributes["calls"] = name
        inst.called_computations = [name]
    return created


# 10. The entry points ---------------------------------------------------------------------------


def parse_module(text: str, source: str = "<hlo>") -> Module:
    """The `Module` of HLO text (with or without its ``HloModule`` header); `source` names the
    text in an `HloParseError`."""
    if not isinstance(text, str):
        raise TypeError(f"parse_module expects str, got {type(text).__name__}")
    parser = _Parser(text, source)
    return _run(parser, parser.module)


def parse_shape(text: str) -> Shape:
    """Parse one shape such as ``f32[2,3]{1,0}`` or ``(f32[], s32[4])``."""
    parser = _Parser(text)

    def whole_shape() -> Shape:
        shape = parser.shape()
        if parser.skip() != len(text):
            raise parser.error("unexpected text after shape")
        return shape

    return _run(parser, whole_shape)


def _run(parser: _Parser, read: Callable[[], Any]) -> Any:
    """`read()`, any exception but an `HloParseError` reported as one (with a position)."""
    try:
        return read()
    except HloParseError:
        raise
    except RecursionError:
        raise parser.error("input nested too deeply") from None
    except Exception as exc:  # a bug in this parser: still report it with a position
        raise parser.error(f"internal parser error ({type(exc).__name__}: {exc})") from exc


def split_modules(text: str) -> list[str]:
    """Split a file that holds several modules separated by ``// -----`` lines."""
    parts = re.split(r"^[ \t]*//[ \t]*-----[^\n]*$", text, flags=re.M)
    # keep a part with a line that is neither blank nor a comment
    return [p for p in parts if any(ln.strip() and not ln.strip().startswith("//") for ln in p.splitlines())]
