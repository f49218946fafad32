"""Reading protocol buffers without their schemas: the few fields of XLA's and xprof's files we use.

Notebook 02, section 6 (a real TPU profile). A serialized protobuf message is a list of
``(field number, wire type, value)`` records (https://protobuf.dev/programming-guides/encoding/):
wire type 0 is a varint, 1 a fixed 8-byte value, 2 a length-delimited byte string (a string, a
nested message or a packed repeated field), 5 a fixed 4-byte value. `fields` splits one message
into those records; a caller that knows which field numbers it wants (from the ``.proto`` file)
reads them with `field_values` and recurses into nested messages itself.

Why not the ``protobuf`` package with compiled ``.proto`` files: the two files tpucost reads
(xprof's ``XSpace`` trace and TpuGraphs' ``TuningData``) import XLA's ``hlo.proto`` and its
imports, a dozen files to vendor and compile at build time, for a handful of fields. The HLO
modules inside both are handed, as bytes, to XLA itself (`tpucost.compat.hlo_text`), which knows its
own format.

A damaged or truncated file raises `WireError` (a ValueError) saying where, never an IndexError.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

__all__ = ["WireError", "fields", "field_values", "packed_varints", "signed", "as_double"]

Record = tuple[int, int, "int | bytes"]


class WireError(ValueError):
    """A byte string that is not a well-formed protobuf message."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise WireError(f"a varint runs past the end of the data at byte {pos}")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise WireError(f"a varint longer than 10 bytes ends at byte {pos}")


def fields(buf: bytes) -> Iterator[Record]:
    """The ``(field number, wire type, value)`` records of one message, in order (varints as int,
    fixed and length-delimited values as bytes); WireError where the bytes are not a message."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise WireError(f"field number 0 at byte {pos}")
        if wire_type == 0:
            value, pos = _varint(buf, pos)
        elif wire_type in (1, 5):
            size = 8 if wire_type == 1 else 4
            value, pos = buf[pos : pos + size], pos + size
        elif wire_type == 2:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + size], pos + size
        else:
            raise WireError(f"unknown wire type {wire_type} of field {number} at byte {pos}")
        if pos > end:
            raise WireError(f"field {number} runs past the end of the data ({pos} > {end} bytes)")
        yield number, wire_type, value


def field_values(buf: bytes, number: int) -> list[int | bytes]:
    """Every value of field ``number`` in one message (a repeated field's items, in order)."""
    return [value for n, _, value in fields(buf) if n == number]


def packed_varints(values: list[int | bytes]) -> list[int]:
    """A repeated integer field's numbers, whether written packed (one byte string) or one by one."""
    out: list[int] = []
    for value in values:
        if isinstance(value, int):
            out.append(value)
            continue
        pos = 0
        while pos < len(value):
            number, pos = _varint(value, pos)
            out.append(number)
    return out


def signed(value: int) -> int:
    """An ``int64`` read as a varint (negative numbers come as their 64-bit two's complement)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def as_double(value: bytes) -> float:
    """A ``double`` field's fixed 8 bytes."""
    return struct.unpack("<d", value)[0]
