"""A parser for the HLO text that XLA prints.

`parse_module(text)` turns the text of one HLO module -- the optimized HLO of a jitted JAX
function (``jax.jit(f).lower(*args).compile().as_text()``) on CPU, GPU or TPU, or a module from
XLA's own tools and tests -- into plain Python objects::

    Module        .name, .attributes, .computations (name -> Computation, file order), .entry
    Computation   .name, .parameters, .result_shape, .instructions (file order), .root, .is_entry
    Instruction   .name, .opcode, .shape, .operands (names), .attributes, .called_computations
    Shape         .element_type, .dims, .dynamic_dims, .layout, .tuple_shapes
    Layout        .minor_to_major, .tiles, .memory_space, .extra

Attributes whose meaning later stages need are converted to Python values (``dimensions`` ->
tuple of ints, ``window`` -> `Window`, ``slice`` -> tuple of (start, limit, stride), ``padding``
-> tuple of (low, high, interior), ``backend_config`` -> dict when it is JSON, ``metadata`` ->
dict, ...); every other attribute keeps its text.

Malformed input raises `HloParseError` (a `ValueError`) with ``.line``, ``.column`` and a
message that quotes the offending text. No other exception escapes `parse_module`, and the
parser always advances, so no input makes it hang.

The grammar follows XLA's own parser (``xla/hlo/parser/hlo_parser.cc``); where XLA is stricter
than we need (for example it infers and checks many shapes) we accept more. Names follow it too:
instruction and computation names are made unique module-wide as XLA's NameUniquer does, and
computations written inline in attributes (``to_apply={...}``) are named ``_``, ``_.1``, ... in
file order, so the names agree with those XLA gives the same text.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "HloParseError",
    "Layout",
    "Shape",
    "Window",
    "Instruction",
    "Computation",
    "Module",
    "OPCODES",
    "ELEMENT_TYPES",
    "parse_module",
    "parse_shape",
    "split_modules",
]

# ---------------------------------------------------------------------------------------------
# Vocabulary
# ---------------------------------------------------------------------------------------------

#: Every opcode of XLA (jaxlib 0.10.2 knows these 133), in XLA's text spelling.
OPCODES: tuple[str, ...] = tuple(
    """abs acos acosh add add-dependency after-all all-gather all-gather-done all-gather-start
    all-reduce all-reduce-done all-reduce-start all-to-all and asin asinh async-done async-start
    async-update atan2 atanh batch-norm-grad batch-norm-inference batch-norm-training bitcast
    bitcast-convert broadcast call cbrt ceil cholesky clamp count-leading-zeros
    collective-broadcast collective-permute collective-permute-done collective-permute-start
    compare complex concatenate conditional constant convert convolution copy copy-done
    copy-start cosine cosh custom-call divide domain dot dynamic-reshape dynamic-slice
    dynamic-update-slice erf exponential exponential-minus-one fft floor fusion gather
    get-dimension-size get-tuple-element imag infeed iota is-finite log log-plus-one logistic map
    maximum minimum mulhi multiply negate not opt-barrier or outfeed pad parameter partition-id
    popcnt power ragged-all-to-all ragged-dot real recv recv-done reduce reduce-precision
    reduce-scatter reduce-window remainder replica-id reshape reverse rng rng-bit-generator
    rng-get-and-update-state round-nearest-afz round-nearest-even rsqrt scaled-dot scan scatter
    select select-and-scatter send send-done set-dimension-size shift-left
    shift-right-arithmetic shift-right-logical sign sine sinh slice sort sqrt stochastic-convert
    subtract tan tanh topk transpose triangular-solve tuple while xor""".split()
)
_OPCODE_SET = frozenset(OPCODES)
_ASYNC_SUFFIXES = {"-start": "async-start", "-update": "async-update", "-done": "async-done"}

#: Element types of array shapes, with their size in bits (token/opaque have none).
ELEMENT_TYPES: dict[str, int] = {
    "pred": 8, "s1": 1, "s2": 2, "s4": 4, "s8": 8, "s16": 16, "s32": 32, "s64": 64,
    "u1": 1, "u2": 2, "u4": 4, "u8": 8, "u16": 16, "u32": 32, "u64": 64,
    "f4e2m1fn": 4, "f8e3m4": 8, "f8e4m3": 8, "f8e4m3fn": 8, "f8e4m3b11fnuz": 8,
    "f8e4m3fnuz": 8, "f8e5m2": 8, "f8e5m2fnuz": 8, "f8e8m0fnu": 8,
    "f16": 16, "bf16": 16, "f32": 32, "f64": 64, "c64": 64, "c128": 128,
    "token": 0, "opaque": 0,
}  # fmt: skip

# Attributes holding a list of ints written `{1,2,3}`.
_INT_LIST_ATTRS = frozenset(
    """dimensions lhs_contracting_dims rhs_contracting_dims lhs_batch_dims rhs_batch_dims
    dynamic_slice_sizes fft_length slice_sizes offset_dims collapsed_slice_dims start_index_map
    update_window_dims inserted_window_dims scatter_dims_to_operand_dims operand_batching_dims
    start_indices_batching_dims input_batching_dims scatter_indices_batching_dims
    lhs_ragged_dims rhs_group_dims""".split()
)
_INT_ATTRS = frozenset(
    """index index_vector_dim feature_group_count batch_group_count channel_id exponent_bits
    mantissa_bits k num_carries""".split()
)
# Attributes naming one called computation, or a list of them.
_COMPUTATION_ATTRS = frozenset(
    """to_apply body condition calls branch_computations true_computation false_computation
    select scatter called_computations""".split()
)
_DIM_LABELS = re.compile(r"[0-9bf?]{2,}_[0-9io?]{2,}->[0-9bf?]{2,}")
_PADDING = re.compile(r"-?\d+_-?\d+(?:_-?\d+)?(?:x-?\d+_-?\d+(?:_-?\d+)?)*")
_MAX_NESTING = 200

# ---------------------------------------------------------------------------------------------
# Data model
# ---------------------------------------------------------------------------------------------


class HloParseError(ValueError):
    """Malformed HLO text; ``line`` and ``column`` are 1-based."""

    def __init__(self, message: str, line: int, column: int, source: str = "<hlo>"):
        self.message = message
        self.line = line
        self.column = column
        self.source = source
        super().__init__(f"{source}:{line}:{column}: {message}")


@dataclass(frozen=True)
class Layout:
    """Memory layout of an array: dimension order plus optional tiling and memory space.

    ``{1,0:T(8,128)(2,1)S(1)}`` -> minor_to_major=(1, 0), tiles=((8, 128), (2, 1)),
    memory_space=1. A ``*`` tile dimension is stored as -1. Other layout attributes (element
    size, dim level types, ...) are kept verbatim in ``extra``.
    """

    minor_to_major: tuple[int, ...]
    tiles: tuple[tuple[int, ...], ...] = ()
    memory_space: int = 0
    extra: str = ""


@dataclass(frozen=True)
class Shape:
    """An HLO shape: an array (element type, dims, layout), a tuple, a token or opaque."""

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
        if self.is_tuple:
            return sum(s.num_elements for s in self.tuple_shapes)
        n = 1
        for d in self.dims:
            n *= d
        return n

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
        dims = ",".join(
            f"<={d}" if dyn else str(d) for d, dyn in zip(self.dims, self.dynamic_dims, strict=False)
        )
        return f"{self.element_type}[{dims}]"


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
        return max(
            len(self.size), len(self.stride), len(self.pad), len(self.lhs_dilate), len(self.rhs_dilate)
        )


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
        for inst in self.instructions:
            if inst.is_root:
                return inst
        return self.instructions[-1]

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

# ---------------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------------


def parse_module(text: str, source: str = "<hlo>") -> Module:
    """Parse the HLO text of one module (with or without its ``HloModule`` header).

    Args:
      text: HLO text, e.g. ``jax.jit(f).lower(x).compile().as_text()``.
      source: a file name used in error messages.

    Raises:
      HloParseError: the text is not a well-formed HLO module; the error names line and column.
    """
    if not isinstance(text, str):
        raise TypeError(f"parse_module expects str, got {type(text).__name__}")
    parser = _Parser(text, source)
    try:
        return parser.module()
    except HloParseError:
        raise
    except RecursionError:
        raise parser.error("input nested too deeply") from None
    except Exception as exc:  # a bug in this parser: still report it with a position
        raise parser.error(f"internal parser error ({type(exc).__name__}: {exc})") from exc


def parse_shape(text: str) -> Shape:
    """Parse one shape such as ``f32[2,3]{1,0}`` or ``(f32[], s32[4])``."""
    parser = _Parser(text)
    try:
        shape = parser.shape()
        parser.skip()
        if parser.pos != len(text):
            raise parser.error("unexpected text after shape")
        return shape
    except HloParseError:
        raise
    except Exception as exc:
        raise parser.error(f"internal parser error ({type(exc).__name__}: {exc})") from exc


def split_modules(text: str) -> list[str]:
    """Split a file that holds several modules separated by ``// -----`` lines."""
    parts = re.split(r"^[ \t]*//[ \t]*-----[^\n]*$", text, flags=re.M)
    return [p for p in parts if p.strip() and not _only_comments(p)]


def _only_comments(text: str) -> bool:
    return all(not ln.strip() or ln.strip().startswith("//") for ln in text.splitlines())


# ---------------------------------------------------------------------------------------------
# The parser
# ---------------------------------------------------------------------------------------------

_SKIP = re.compile(r"(?:[ \t\r\n\f\v]|/\*.*?\*/|//[^\n]*)*", re.S)
_NAME = re.compile(r"%?([A-Za-z_][A-Za-z0-9_.\-]*)")
_ATTR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_OPCODE = re.compile(r"[a-z][a-z0-9\-]*")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT = re.compile(r"[+-]?\d+")
_DIM = re.compile(r"(<=)?(\d+)|\?")
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"', re.S)
_QUOTED = {q: re.compile(rf"{q}(?:[^{q}\\]|\\.)*{q}", re.S) for q in "\"'"}
_SECTIONS = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_CLOSE = {"(": ")", "[": "]", "{": "}"}
_ATTR_START = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*[ \t]*=")
_INLINE_BODY = re.compile(r"\{\s*(?:ROOT\s+)?%?[A-Za-z_][A-Za-z0-9_.\-]*\s*=")
_INLINE_OP = re.compile(r"([a-z][a-z0-9\-]*)\(")
_LAYOUT_START = re.compile(r"-?\d|:")


class _Parser:
    """Recursive-descent parser over the text; `pos` always moves forward."""

    def __init__(self, text: str, source: str = "<hlo>"):
        self.text = text
        self.source = source
        self.pos = 0
        self.depth = 0
        self.pending: list[Instruction] = []  # instructions written inline as operands
        self.inline_count = 0
        self.inline_bodies = 0
        self.inline_computations: list[Computation] = []  # bodies written inside attributes
        self._line_starts: list[int] | None = None

    # -- positions and errors ---------------------------------------------------------------

    def where(self, pos: int) -> tuple[int, int]:
        if self._line_starts is None:
            self._line_starts = [0] + [m.end() for m in re.finditer("\n", self.text)]
        line = bisect.bisect_right(self._line_starts, pos)
        return line, pos - self._line_starts[line - 1] + 1

    def error(self, message: str, pos: int | None = None) -> HloParseError:
        pos = self.pos if pos is None else min(pos, len(self.text))
        line, col = self.where(pos)
        end = self.text.find("\n", pos)
        snippet = self.text[pos : end if end != -1 else len(self.text)][:60]
        found = (
            f"found {snippet!r}"
            if snippet.strip()
            else "found end of line"
            if end != -1
            else "found end of input"
        )
        return HloParseError(f"{message}; {found}", line, col, self.source)

    # -- tokens -----------------------------------------------------------------------------

    def skip(self) -> None:
        """Skip whitespace and comments."""
        self.pos = _SKIP.match(self.text, self.pos).end()
        if self.text.startswith("/*", self.pos):
            raise self.error("unterminated /* comment")

    def peek(self, s: str) -> bool:
        self.skip()
        return self.text.startswith(s, self.pos)

    def accept(self, s: str) -> bool:
        if self.peek(s):
            self.pos += len(s)
            return True
        return False

    def expect(self, s: str, what: str | None = None) -> None:
        if not self.accept(s):
            raise self.error(f"expected {what or repr(s)}")

    def match(self, pattern: re.Pattern[str], what: str) -> re.Match[str]:
        self.skip()
        m = pattern.match(self.text, self.pos)
        if not m:
            raise self.error(f"expected {what}")
        self.pos = m.end()
        return m

    def peek_word(self) -> str:
        self.skip()
        m = _WORD.match(self.text, self.pos)
        return m.group(0) if m else ""

    def accept_keyword(self, word: str) -> bool:
        self.skip()
        m = _WORD.match(self.text, self.pos)
        if m and m.group(0) == word:
            self.pos = m.end()
            return True
        return False

    def name(self, what: str = "a name") -> str:
        return self.match(_NAME, what).group(1)

    def integer(self, what: str = "an integer") -> int:
        return int(self.match(_INT, what).group(0))

    def string(self) -> str:
        return _unquote(self.match(_STRING, "a quoted string").group(0))

    def nested(self) -> _Nesting:
        return _Nesting(self)

    # -- module -----------------------------------------------------------------------------

    def module(self) -> Module:
        self.skip()
        name, attributes = "module", {}
        if self.accept_keyword("HloModule"):
            name = self.name("a module name")
            self.accept(":")  # XLA also accepts `HloModule name:`
            attributes = self.header_attributes()
        computations: dict[str, Computation] = {}
        entry: Computation | None = None
        while True:
            self.skip()
            if self.pos >= len(self.text):
                break
            word = self.peek_word()
            if word in _SECTIONS:
                self.stack_frame_section(word, attributes)
                continue
            if word == "HloModule":
                raise self.error("a second HloModule in one text (split files on '// -----' first)")
            start = self.pos
            comp = self.computation()
            if comp.name in computations:
                raise self.error(f"computation {comp.name!r} is defined twice", start)
            for inline in self.inline_computations:
                computations[inline.name] = inline
            self.inline_computations.clear()
            for wrapped in _wrap_async_shorthand(comp, computations):
                computations[wrapped.name] = wrapped
            computations[comp.name] = comp
            if comp.is_entry:
                if entry is not None:
                    raise self.error("more than one ENTRY computation", start)
                entry = comp
        if not computations:
            raise self.error("expected at least one computation")
        if entry is None:
            entry = list(computations.values())[-1]
            entry.is_entry = True
        _check_called_computations(self, computations)
        module = Module(name=name, computations=computations, entry=entry, attributes=attributes)
        _uniquify_computation_names(module)
        _uniquify_names(module)
        return module

    def header_attributes(self) -> dict[str, Any]:
        attributes: dict[str, Any] = {}
        while self.accept(","):
            key = self.match(_ATTR_NAME, "a module attribute name").group(0)
            self.expect("=")
            start = self.pos
            attributes[key] = self.attribute_value(key)
            if key == "input_output_alias":
                _check_alias(self, attributes[key], start)
        return attributes

    def stack_frame_section(self, word: str, attributes: dict[str, Any]) -> None:
        """``FileNames`` / ``FunctionNames`` / ``FileLocations`` / ``StackFrames`` tables."""
        self.accept_keyword(word)
        entries: dict[int, str] = {}
        while True:
            self.skip()
            if not _INT.match(self.text, self.pos):
                break
            index = self.integer()
            self.skip()
            if self.text.startswith('"', self.pos):
                entries[index] = self.string()
            elif self.text.startswith("{", self.pos):
                entries[index] = self.balanced()
            else:
                raise self.error(f"expected a string or {{...}} in the {word} table")
        attributes.setdefault("stack_frames", {})[word] = entries

    # -- computation ------------------------------------------------------------------------

    def computation(self) -> Computation:
        is_entry = self.accept_keyword("ENTRY")
        name = self.name("a computation name (or ENTRY)")
        parameters: list[tuple[str, Shape]] = []
        result_shape = None
        if self.accept("("):
            if not self.accept(")"):
                while True:
                    pname = self.name("a parameter name")
                    self.expect(":")
                    parameters.append((pname, self.shape()))
                    if self.accept(")"):
                        break
                    self.expect(",", "',' or ')' in the parameter list")
            self.expect("->", "'->' and the result shape")
            result_shape = self.shape()
        self.expect("{", "'{' to open the computation body")
        instructions: list[Instruction] = []
        while not self.accept("}"):
            if self.pos >= len(self.text):
                raise self.error(f"computation {name!r} is not closed with '}}'")
            inst = self.instruction()
            instructions.extend(self.pending)
            self.pending.clear()
            instructions.append(inst)
        if not instructions:
            raise self.error(f"computation {name!r} has no instructions")
        attributes: dict[str, Any] = {}
        while self.peek(",") and not self.text.startswith(",", self.pos + 1):
            self.expect(",")
            key = self.match(_ATTR_NAME, "a computation attribute name").group(0)
            self.expect("=")
            attributes[key] = self.attribute_value(key)
        comp = Computation(name, instructions, parameters, result_shape, is_entry, attributes)
        _check_computation(self, comp)
        return comp

    # -- instruction ------------------------------------------------------------------------

    def instruction(self) -> Instruction:
        self.skip()
        line, _ = self.where(self.pos)
        is_root = self.accept_keyword("ROOT")
        name = self.name("an instruction name")
        self.expect("=", "'=' after the instruction name")
        return self.instruction_rhs(name, is_root, line)

    def instruction_rhs(self, name: str, is_root: bool, line: int) -> Instruction:
        """``shape opcode(operands), attributes`` (an omitted shape is allowed, as in XLA)."""
        shape = self.shape() if self.looks_like_shape() else None
        self.skip()
        op_start = self.pos
        opcode = self.match(_OPCODE, "an opcode").group(0)
        attributes: dict[str, Any] = {}
        if opcode not in _OPCODE_SET:
            if shape is None and self.text.startswith("[", self.pos):
                raise self.error(f"unknown element type {opcode!r}", op_start)
            opcode = _async_opcode(self, opcode, op_start, attributes)
        self.expect("(", f"'(' after opcode {opcode!r}")
        operands: list[str] = []
        if opcode == "constant":
            attributes["literal"] = self.until_close_paren()
        elif opcode == "parameter":
            attributes["parameter_number"] = self.integer("a parameter number")
            self.expect(")")
        else:
            operands = self.operand_list()
        called: list[str] = []
        while self.attribute_follows():
            self.expect(",")
            key_pos = self.pos
            key = self.match(_ATTR_NAME, "an attribute name").group(0)
            self.expect("=", f"'=' after attribute {key!r}")
            if key in attributes:
                raise self.error(f"attribute {key!r} given twice", key_pos)
            value_pos = self.pos
            value = self.attribute_value(key)
            if key in _COMPUTATION_ATTRS and _INLINE_BODY.match(value):
                attributes[key] = self.inline_computation(value_pos)
            else:
                attributes[key] = _convert_attribute(self, key, value, key_pos)
            if key in _COMPUTATION_ATTRS:
                value = attributes[key]
                called.extend(value if isinstance(value, tuple) else (value,))
        inst = Instruction(name, opcode, shape or _UNKNOWN, operands, attributes, called, is_root, line)
        _check_instruction(self, inst, op_start)
        return inst

    def inline_computation(self, pos: int) -> str:
        """``calls={ p0 = f32[] parameter(0) ... }``: a computation body written in place.

        Returns the computation's provisional name ``_#<k>`` (``#`` cannot occur in a name of the
        text); `_uniquify_computation_names` later names it ``_``, ``_.1``, ... as XLA does.
        """
        end = self.pos
        self.pos = pos
        self.skip()
        self.expect("{")
        saved, self.pending = self.pending, []
        instructions: list[Instruction] = []
        while not self.accept("}"):
            inst = self.instruction()
            instructions.extend(self.pending)
            self.pending.clear()
            instructions.append(inst)
        self.pending = saved
        if self.pos != end:
            raise self.error("unexpected text after an inline computation body")
        self.inline_bodies += 1
        comp = Computation(f"_#{self.inline_bodies}", instructions)
        _check_computation(self, comp)
        self.inline_computations.append(comp)
        return comp.name

    def attribute_follows(self) -> bool:
        """True when the text continues with `, name=` (the next attribute)."""
        self.skip()
        if not self.text.startswith(",", self.pos):
            return False
        after = _SKIP.match(self.text, self.pos + 1).end()
        return bool(_ATTR_START.match(self.text, after))

    def operand_list(self) -> list[str]:
        """``(f32[2]{0} %a, %b, /*index=2*/ %c)`` -> ["a", "b", "c"]; the '(' is consumed."""
        operands: list[str] = []
        if self.accept(")"):
            return operands
        while True:
            self.skip()
            if self.looks_like_shape():
                self.shape()
            self.skip()
            m = _INLINE_OP.match(self.text, self.pos)
            if m and m.group(1) in _OPCODE_SET:  # `f32[] parameter(0)` written in place
                line, _ = self.where(self.pos)
                self.inline_count += 1
                inline = self.instruction_rhs(f"{m.group(1)}.anon#{self.inline_count}", False, line)
                self.pending.append(inline)
                operands.append(inline.name)
            else:
                operands.append(self.name("an operand name"))
            if self.accept(")"):
                return operands
            self.expect(",", "',' or ')' in the operand list")

    def looks_like_shape(self) -> bool:
        self.skip()
        if self.text.startswith("(", self.pos) or self.text.startswith("b(", self.pos):
            return True
        m = _WORD.match(self.text, self.pos)
        return bool(m) and m.group(0) in ELEMENT_TYPES and self.text.startswith("[", m.end())

    # -- shapes -----------------------------------------------------------------------------

    def shape(self) -> Shape:
        with self.nested():
            self.skip()
            if self.accept("("):
                leaves: list[Shape] = []
                if not self.accept(")"):
                    while True:
                        leaves.append(self.shape())
                        if self.accept(")"):
                            break
                        self.expect(",", "',' or ')' in a tuple shape")
                return Shape("tuple", tuple_shapes=tuple(leaves))
            if self.text.startswith("b(", self.pos):  # a buffer: b(f32[2,4])
                self.pos += 2
                inner = self.shape()
                self.expect(")", "')' to close the buffer shape")
                return Shape("buffer", tuple_shapes=(inner,))
            start = self.pos
            word = self.match(_WORD, "a shape").group(0)
            if word not in ELEMENT_TYPES:
                raise self.error(f"unknown element type {word!r}", start)
            if word in ("token", "opaque") and not self.peek("["):
                return Shape(word)
            self.expect("[", f"'[' after element type {word!r}")
            dims: list[int] = []
            dynamic: list[bool] = []
            if not self.accept("]"):
                while True:
                    m = self.match(_DIM, "a dimension size")
                    dims.append(int(m.group(2)) if m.group(2) else -1)
                    dynamic.append(m.group(0) != m.group(2))
                    if self.accept("]"):
                        break
                    self.expect(",", "',' or ']' in the dimensions")
            layout = self.layout(len(dims)) if self.layout_follows() else None
            return Shape(word, tuple(dims), tuple(dynamic), layout)

    def layout_follows(self) -> bool:
        """True when a layout ``{...}`` comes next, glued to the dims or after whitespace.

        As in XLA's parser, a ``{`` starts a layout only when an integer or ``:`` follows it
        (``f32[4] {0}``, ``f32[8,128] {1,0:T(8,128)}``); any other ``{`` is not part of the shape
        -- e.g. the body of ``ENTRY %main (p: f32[4]) -> f32[4] {``, whose next token is an
        instruction name. A glued ``{}`` is also read as an (empty) layout, which XLA rejects.
        """
        brace = _SKIP.match(self.text, self.pos).end()
        if not self.text.startswith("{", brace):
            return False
        after = _SKIP.match(self.text, brace + 1).end()
        if _LAYOUT_START.match(self.text, after):
            return True
        return brace == self.pos and self.text.startswith("}", brace + 1)

    def layout(self, rank: int) -> Layout:
        self.expect("{")
        minor_to_major: list[int] = []
        if not self.peek("}") and not self.peek(":"):
            while True:
                minor_to_major.append(self.integer("a layout dimension"))
                if not self.accept(","):
                    break
        tiles: list[tuple[int, ...]] = []
        memory_space = 0
        extra: list[str] = []
        if self.accept(":"):
            while not self.accept("}"):
                tag_start = self.pos
                tag = self.match(re.compile(r"[A-Z]+|[#*]"), "a layout attribute (T, S, E, L, D, ...)")
                groups = []
                while self.peek("("):
                    groups.append(self.balanced())
                if not groups:
                    raise self.error(f"expected '(' after layout attribute {tag.group(0)!r}")
                if tag.group(0) == "T":
                    tiles.extend(_tile(self, g, tag_start) for g in groups)
                elif tag.group(0) == "S":
                    memory_space = _int_or_error(self, groups[0][1:-1], tag_start, "memory space")
                else:
                    extra.append(tag.group(0) + "".join(groups))
        else:
            self.expect("}", "'}' to close the layout")
        if minor_to_major and sorted(minor_to_major) != list(range(rank)):
            raise self.error(
                f"layout {{{','.join(map(str, minor_to_major))}}} does not fit a rank-{rank} shape"
            )
        return Layout(tuple(minor_to_major), tuple(tiles), memory_space, "".join(extra))

    # -- attribute values -------------------------------------------------------------------

    def balanced(self) -> str:
        """Read one bracketed group ``(...)``, ``[...]`` or ``{...}`` (strings respected)."""
        self.skip()
        start = self.pos
        opener = self.text[self.pos : self.pos + 1]
        if opener not in _CLOSE:
            raise self.error("expected '(', '[' or '{'")
        self.pos = self._scan_group(self.pos)
        return self.text[start : self.pos]

    def _scan_group(self, pos: int) -> int:
        """Return the position after the group opened at `pos`."""
        text = self.text
        stack = [_CLOSE[text[pos]]]
        pos += 1
        n = len(text)
        while stack:
            if pos >= n:
                raise self.error(f"missing {stack[-1]!r}", pos)
            c = text[pos]
            if c == '"' or c == "'":
                pos = self._scan_string(pos)
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

    def _scan_string(self, pos: int) -> int:
        m = _QUOTED[self.text[pos]].match(self.text, pos)
        if not m:
            raise self.error("unterminated string", pos)
        return m.end()

    def until_close_paren(self) -> str:
        """Text up to the ')' that closes an already-consumed '(' (a constant's literal)."""
        start = self.pos
        end = self._scan_group(start - 1)  # `expect("(")` left pos just after the '('
        self.pos = end
        literal = self.text[start : end - 1].strip()
        if not literal:
            raise self.error("a constant needs a literal", start)
        return literal

    def attribute_value(self, key: str) -> str:
        """The text of one attribute value: brackets and strings balanced, ends at ',' or space."""
        self.skip()
        start = self.pos
        if key == "literal" and self.looks_like_shape():  # `literal=s32[] 1`: a shape, then a value
            self.shape()
            self.skip()
        text, n, pos = self.text, len(self.text), self.pos
        while pos < n:
            c = text[pos]
            if c in _CLOSE:
                pos = self._scan_group(pos)
            elif c == '"':
                pos = self._scan_string(pos)
            elif c in ",)]}" or c.isspace():
                # `replica_groups=mesh[...] {...}` is the one value with a space in it.
                if c.isspace() and text.startswith("mesh[", start):
                    nxt = _SKIP.match(text, pos).end()
                    if text.startswith("{", nxt):
                        pos = nxt
                        continue
                break
            elif text.startswith("/*", pos) or text.startswith("//", pos):
                break
            else:
                pos += 1
        if pos == start:
            raise self.error(f"expected a value for attribute {key!r}")
        self.pos = pos
        return text[start:pos]


class _Nesting:
    """Context manager bounding recursion depth (deeply nested tuples must not crash Python)."""

    def __init__(self, parser: _Parser):
        self.parser = parser

    def __enter__(self) -> None:
        self.parser.depth += 1
        if self.parser.depth > _MAX_NESTING:
            raise self.parser.error("shapes nested too deeply")

    def __exit__(self, *exc: object) -> None:
        self.parser.depth -= 1


# ---------------------------------------------------------------------------------------------
# Attribute conversion and checks
# ---------------------------------------------------------------------------------------------


def _unquote(quoted: str) -> str:
    body = quoted[1:-1]
    if "\\" not in body:
        return body
    out, i = [], 0
    escapes = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "'": "'"}
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            out.append(escapes.get(body[i + 1], body[i + 1]))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _int_or_error(p: _Parser, text: str, pos: int, what: str) -> int:
    text = text.strip()
    if not _INT.fullmatch(text):
        raise p.error(f"expected an integer {what}, got {text!r}", pos)
    return int(text)


def _tile(p: _Parser, group: str, pos: int) -> tuple[int, ...]:
    parts = [s.strip() for s in group[1:-1].split(",")] if group[1:-1].strip() else []
    return tuple(-1 if s == "*" else _int_or_error(p, s, pos, "tile dimension") for s in parts)


def _int_list(p: _Parser, key: str, value: str, pos: int) -> tuple[int, ...]:
    if not (value.startswith("{") and value.endswith("}")):
        raise p.error(f"attribute {key!r} expects {{int, ...}}, got {value!r}", pos)
    body = value[1:-1].strip()
    if not body:
        return ()
    return tuple(_int_or_error(p, s, pos, f"in {key}") for s in body.split(","))


def _names_in_braces(p: _Parser, key: str, value: str, pos: int) -> tuple[str, ...]:
    if value.startswith("{"):
        if not value.endswith("}"):
            raise p.error(f"attribute {key!r}: expected '}}'", pos)
        body = value[1:-1].strip()
        items = [s.strip() for s in body.split(",")] if body else []
    else:
        items = [value]
    names = []
    for item in items:
        m = _NAME.fullmatch(item)
        if not m:
            raise p.error(f"attribute {key!r}: {item!r} is not a name", pos)
        names.append(m.group(1))
    return tuple(names)


def _window(p: _Parser, value: str, pos: int) -> Window:
    if not (value.startswith("{") and value.endswith("}")):
        raise p.error(f"window expects {{size=... stride=...}}, got {value!r}", pos)
    fields: dict[str, Any] = {}
    for item in value[1:-1].split():
        key, eq, body = item.partition("=")
        if not eq or not body:
            raise p.error(f"window: expected key=value, got {item!r}", pos)
        parts = body.split("x")
        if key == "pad":
            pads = []
            for part in parts:
                lo_hi = part.split("_")
                if len(lo_hi) != 2:
                    raise p.error(
                        f"window pad {part!r}: expects padding_low and padding_high separated by '_'", pos
                    )
                pads.append(tuple(_int_or_error(p, s, pos, "padding") for s in lo_hi))
            fields["pad"] = tuple(pads)
        elif key in ("size", "stride", "lhs_dilate", "rhs_dilate", "rhs_reversal"):
            fields["reversal" if key == "rhs_reversal" else key] = tuple(
                _int_or_error(p, s, pos, f"window {key}") for s in parts
            )
        else:
            raise p.error(f"window: unknown field {key!r}", pos)
    return Window(**fields)


def _slice(p: _Parser, value: str, pos: int) -> tuple[tuple[int, int, int], ...]:
    if not (value.startswith("{") and value.endswith("}")):
        raise p.error(f"slice expects {{[start:limit:stride], ...}}, got {value!r}", pos)
    out = []
    for m in re.finditer(r"\[([^\]]*)\]", value):
        parts = m.group(1).split(":")
        if len(parts) not in (2, 3):
            raise p.error(f"slice bound {m.group(0)!r}: expected [start:limit] or [start:limit:stride]", pos)
        nums = [_int_or_error(p, s, pos, "slice bound") for s in parts]
        out.append((nums[0], nums[1], nums[2] if len(nums) == 3 else 1))
    return tuple(out)


def _padding(p: _Parser, value: str, pos: int) -> tuple[tuple[int, int, int], ...]:
    if not _PADDING.fullmatch(value):
        raise p.error(f"padding expects low_high[_interior]x..., got {value!r}", pos)
    out = []
    for part in value.split("x"):
        nums = [int(s) for s in part.split("_")]
        out.append((nums[0], nums[1], nums[2] if len(nums) == 3 else 0))
    return tuple(out)


def _brace_dict(value: str) -> dict[str, Any]:
    """``{op_name="a" source_line=3}`` or ``{a="b",c="d"}`` -> dict (values str or int)."""
    out: dict[str, Any] = {}
    for m in re.finditer(r'([A-Za-z_][A-Za-z0-9_.\-]*)=("(?:[^"\\]|\\.)*"|[^\s,}]+)', value[1:-1]):
        raw = m.group(2)
        if raw.startswith('"'):
            out[m.group(1)] = _unquote(raw)
        elif _INT.fullmatch(raw):
            out[m.group(1)] = int(raw)
        else:
            out[m.group(1)] = raw
    return out


def _backend_config(value: str) -> Any:
    raw = _unquote(value) if value.startswith('"') else value
    if raw.startswith("{"):
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            return raw
    return raw


def _convert_attribute(p: _Parser, key: str, value: str, pos: int) -> Any:
    """Turn an attribute's text into a Python value for the attributes later stages read."""
    if key == "dimensions":
        dims = _int_list(p, key, value, pos)
        if any(d < 0 for d in dims):
            raise p.error(f"dimensions must not be negative, got {value!r}", pos)
        return dims
    if key in _INT_LIST_ATTRS:
        if value.startswith("{{"):  # a list of lists, e.g. slice_sizes={{2,4},{2,4}}
            return tuple(_int_list(p, key, "{" + g + "}", pos) for g in re.findall(r"\{([^{}]*)\}", value))
        return _int_list(p, key, value, pos)
    if key in _INT_ATTRS:
        return _int_or_error(p, value, pos, f"for {key}")
    if key in _COMPUTATION_ATTRS:
        names = _names_in_braces(p, key, value, pos)
        if key in ("branch_computations", "calls", "called_computations") and value.startswith("{"):
            return names
        if len(names) != 1:
            raise p.error(f"attribute {key!r} names one computation", pos)
        return names[0]
    if key == "control-predecessors":
        return _names_in_braces(p, key, value, pos)
    if key == "window":
        return _window(p, value, pos)
    if key == "dim_labels":
        if not _DIM_LABELS.fullmatch(value):
            raise p.error(f"dim_labels expects e.g. b01f_01io->b01f, got {value!r}", pos)
        return value
    if key == "slice":
        return _slice(p, value, pos)
    if key == "padding":
        return _padding(p, value, pos)
    if key == "backend_config":
        return _backend_config(value)
    if key in ("metadata", "frontend_attributes"):
        if not value.startswith("{"):
            raise p.error(f"attribute {key!r} expects {{...}}, got {value!r}", pos)
        return _brace_dict(value)
    if key == "replica_groups":
        _check_replica_groups(p, value, pos)
        return value
    if value.startswith('"'):
        return _unquote(value)
    return value


def _async_opcode(p: _Parser, opcode: str, pos: int, attributes: dict[str, Any]) -> str:
    """``custom-call-start`` etc.: XLA's shorthand for an async op wrapping `custom-call`."""
    for suffix, async_opcode in _ASYNC_SUFFIXES.items():
        wrapped = opcode[: -len(suffix)]
        if opcode.endswith(suffix) and wrapped in _OPCODE_SET:
            attributes["async_wrapped_opcode"] = wrapped
            return async_opcode
    raise p.error(f"unknown opcode {opcode!r}", pos)


_MESH = re.compile(r"mesh\[(.*)\]\s*\{(.*)\}", re.S)


def _check_replica_groups(p: _Parser, value: str, pos: int) -> None:
    """``mesh['x'=2,'y'=2] {'x'}``: the axes in braces must be axes of the mesh."""
    if not value.startswith("mesh"):
        return
    m = _MESH.fullmatch(value)
    if not m:
        raise p.error(f"replica_groups: malformed mesh {value!r}", pos)
    axes = set()
    for item in _split_top(m.group(1)):
        am = re.fullmatch(r"\s*'([^']*)'\s*=\s*\d+\s*", item)
        if not am:
            raise p.error(f"replica_groups mesh: expects string axis 'name'=size, got {item.strip()!r}", pos)
        axes.add(am.group(1))
    for item in _split_top(m.group(2)):
        am = re.fullmatch(r"\s*'([^']*)'(?::\d+\(\d+\))?\s*", item)
        if not am or am.group(1) not in axes:
            raise p.error(f"replica_groups mesh: {item.strip()!r} is not an axis of the mesh", pos)


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [s for s in parts if s.strip()]


_ALIAS_ENTRY = re.compile(
    r"\{[\d,\s]*\}\s*:\s*\(\s*\d+\s*,\s*\{[\d,\s]*\}\s*(?:,\s*(?:may-alias|must-alias)\s*)?\)"
)


def _check_alias(p: _Parser, value: str, pos: int) -> None:
    """``input_output_alias={ {0}: (0, {}, may-alias), ... }``."""
    if not (value.startswith("{") and value.endswith("}")):
        raise p.error("input_output_alias expects { {output index}: (param, {param index}) ... }", pos)
    for item in _split_top(value[1:-1]):
        if not _ALIAS_ENTRY.fullmatch(item.strip()):
            raise p.error(
                f"input_output_alias: malformed entry {item.strip()!r}; expects '}}' at the end", pos
            )


def _check_instruction(p: _Parser, inst: Instruction, pos: int) -> None:
    """The few per-opcode rules that XLA's parser enforces and our users can trip over."""
    op = inst.opcode
    if op in ("recv", "send") and not (inst.shape.is_tuple and len(inst.shape.tuple_shapes) == 3):
        raise p.error(f"{op} {inst.name!r} must have a 3-tuple shape (data, context, token)", pos)
    if op == "conditional":
        if not inst.operands:
            raise p.error(f"conditional {inst.name!r} needs a predicate or branch index operand", pos)
        if "branch_computations" not in inst.attributes and "true_computation" not in inst.attributes:
            raise p.error(f"conditional {inst.name!r} needs branch_computations", pos)
    if op == "while" and not {"body", "condition"} <= inst.attributes.keys():
        raise p.error(f"while {inst.name!r} needs body= and condition=", pos)
    if (
        op in ("fusion", "call", "async-start")
        and "calls" not in inst.attributes
        and "to_apply" not in inst.attributes
    ):
        if op != "async-start" or "async_wrapped_opcode" not in inst.attributes:
            raise p.error(f"{op} {inst.name!r} needs calls=", pos)
    if op == "get-tuple-element" and "index" not in inst.attributes:
        raise p.error(f"get-tuple-element {inst.name!r} needs index=", pos)


def _check_computation(p: _Parser, comp: Computation) -> None:
    """Names are unique, operands are defined, at most one ROOT."""
    defined: dict[str, Instruction] = {}
    roots = 0
    for inst in comp.instructions:
        if inst.name in defined and "#" not in inst.name:
            raise p.error(
                f"instruction {inst.name!r} is defined twice in computation {comp.name!r} (line {inst.line})"
            )
        defined[inst.name] = inst
        roots += inst.is_root
    if roots > 1:
        raise p.error(f"computation {comp.name!r} has more than one ROOT")
    for inst in comp.instructions:
        refs = list(inst.operands) + list(inst.attributes.get("control-predecessors", ()))
        for ref in refs:
            if ref not in defined:
                raise HloParseError(
                    f"instruction {ref!r} is not defined (used by {inst.name!r} in computation {comp.name!r})",
                    inst.line,
                    1,
                    p.source,
                )


def _check_called_computations(p: _Parser, computations: dict[str, Computation]) -> None:
    """Every called computation exists; async ops of one chain call the same computation."""
    for comp in computations.values():
        by_name = {i.name: i for i in comp.instructions}
        for inst in comp.instructions:
            for callee in inst.called_computations:
                if callee not in computations:
                    raise HloParseError(
                        f"computation {callee!r} called by {inst.name!r} is not defined",
                        inst.line,
                        1,
                        p.source,
                    )
            if inst.opcode in ("async-update", "async-done") and "calls" in inst.attributes and inst.operands:
                start = by_name.get(inst.operands[0])
                if start is not None and start.attributes.get("calls") not in (
                    None,
                    inst.attributes["calls"],
                ):
                    raise HloParseError(
                        f"{inst.opcode} {inst.name!r} calls {inst.attributes['calls']!r} but its async-start "
                        f"{start.name!r} calls {start.attributes['calls']!r}",
                        inst.line,
                        1,
                        p.source,
                    )


class _NameUniquer:
    """XLA's NameUniquer: a name keeps its text unless its (prefix, number) was taken before."""

    def __init__(self) -> None:
        self.used: dict[str, set[int]] = {}
        self.next: dict[str, int] = {}

    def unique(self, name: str) -> str:
        root, sep, suffix = name.rpartition(".")
        has_suffix = bool(sep) and bool(root) and suffix.isdigit()
        if has_suffix:
            number = int(suffix)
        else:
            root, number = name, 0
        used = self.used.setdefault(root, set())
        if number in used:
            number = self.next.get(root, 0)
            while number in used:
                number += 1
            self.next[root] = number + 1
        used.add(number)
        if number == 0:
            return f"{root}.0" if has_suffix else root
        return f"{root}.{number}"


def _uniquify_computation_names(module: Module) -> None:
    """Name computations as XLA's parser does: inline bodies ``_``, ``_.1``, ...; clashes renamed.

    XLA names every computation written inline in an attribute (``to_apply={...}``) ``_`` and
    then passes all computation names of the module, in file order (an inline body comes before
    the computation holding it), through one NameUniquer. So inline bodies become ``_``, ``_.1``,
    ``_.2``, ... unless a computation of the text already took one of those names, and a named
    computation clashing with an earlier one (``_`` after an inline body, ``g`` after ``g.0``)
    gets the next free suffix. References (``to_apply=``, ``calls=``, ...) follow the renaming.
    """
    uniquer = _NameUniquer()
    renamed: dict[str, str] = {}
    for old, comp in module.computations.items():
        comp.name = uniquer.unique(old.split("#")[0])  # inline bodies: "_#3" -> "_", "_.1", ...
        renamed[old] = comp.name
    if all(old == new for old, new in renamed.items()):
        return
    module.computations = {comp.name: comp for comp in module.computations.values()}
    for comp in module.computations.values():
        for inst in comp.instructions:
            if not inst.called_computations:
                continue
            inst.called_computations = [renamed.get(c, c) for c in inst.called_computations]
            for key in _COMPUTATION_ATTRS & inst.attributes.keys():
                value = inst.attributes[key]
                if isinstance(value, tuple):
                    inst.attributes[key] = tuple(renamed.get(c, c) for c in value)
                elif isinstance(value, str):
                    inst.attributes[key] = renamed.get(value, value)


def _uniquify_names(module: Module) -> None:
    """Rename clashing instruction names module-wide, as XLA's parser does.

    XLA's parser gives every instruction of a module a unique name: the first instruction (in
    file order) to use a name keeps it; a later one gets the next free numeric suffix. Compiled
    modules already have unique names, so this only changes hand-written test modules.
    """
    uniquer = _NameUniquer()
    for comp in module.computations.values():
        renamed = {}
        for inst in comp.instructions:
            new = uniquer.unique(inst.name.split("#")[0])  # inline operands: "negate.anon#3"
            if new != inst.name:
                renamed[inst.name] = new
                inst.name = new
        if renamed:
            for inst in comp.instructions:
                inst.operands = [renamed.get(o, o) for o in inst.operands]
                if "control-predecessors" in inst.attributes:
                    preds = inst.attributes["control-predecessors"]
                    inst.attributes["control-predecessors"] = tuple(renamed.get(o, o) for o in preds)


def _wrap_async_shorthand(comp: Computation, existing: dict[str, Computation]) -> list[Computation]:
    """``custom-call-start(...)`` is shorthand for an async-start calling a one-op computation.

    Like XLA's parser, build that computation (``async_wrapped``: one ``async_param`` per operand
    and the wrapped op) and let the async-start/update/done instructions call it.
    """
    created: list[Computation] = []
    by_name = {i.name: i for i in comp.instructions}
    for inst in comp.instructions:
        wrapped_op = inst.attributes.get("async_wrapped_opcode")
        if wrapped_op is None or "calls" in inst.attributes:
            continue
        if inst.opcode != "async-start":
            start = by_name.get(inst.operands[0]) if inst.operands else None
            if start is not None and "calls" in start.attributes:
                inst.attributes["calls"] = start.attributes["calls"]
                inst.called_computations = [start.attributes["calls"]]
            continue
        name, k = "async_wrapped", 0
        taken = set(existing) | {c.name for c in created}
        while name in taken:
            k += 1
            name = f"async_wrapped.{k}"
        operand_shapes = list(inst.shape.tuple_shapes[0].tuple_shapes) if inst.shape.is_tuple else []
        result = (
            inst.shape.tuple_shapes[1]
            if inst.shape.is_tuple and len(inst.shape.tuple_shapes) > 1
            else _UNKNOWN
        )
        params = [
            Instruction(
                "async_param",
                "parameter",
                operand_shapes[i] if i < len(operand_shapes) else _UNKNOWN,
                attributes={"parameter_number": i},
                line=inst.line,
            )
            for i in range(len(inst.operands))
        ]
        keep = {
            k: v
            for k, v in inst.attributes.items()
            if k not in ("async_wrapped_opcode", "async_execution_thread")
        }
        called = [
            c
            for k, v in keep.items()
            if k in _COMPUTATION_ATTRS
            for c in (v if isinstance(v, tuple) else (v,))
        ]
        op = Instruction(
            wrapped_op,
            wrapped_op,
            result,
            [f"async_param#{i}" for i in range(len(params))],
            keep,
            called,
            True,
            inst.line,
        )
        for i, param in enumerate(params):
            param.name = f"async_param#{i}"
        created.append(Computation(name, [*params, op], is_entry=False))
        inst.attributes["calls"] = name
        inst.called_computations = [name]
    return created
