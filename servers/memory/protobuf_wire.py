"""Just enough of the protobuf wire format to read and re-assemble an ONNX model without a schema.

A message is a run of fields, each a key (field number and wire type) and a value. A field read
here keeps the exact bytes it came from, so a message can be rebuilt with a few fields changed and
every other one (known to this module or not) copied as it was. Values are never decoded unless
asked for: the tensors of a model stay slices of the original buffer.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

VARINT = 0
FIXED64 = 1
LENGTH_DELIMITED = 2
FIXED32 = 5
_FIXED_SIZES = {FIXED64: 8, FIXED32: 4}


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message."""


@dataclass(frozen=True, slots=True)
class Field:
    number: int
    wire_type: int
    value: memoryview
    """The payload: a varint's own bytes, a fixed value, or a length-delimited field's contents."""
    raw: memoryview
    """The whole field as encoded (key, length and payload), to be copied unchanged."""

    def varint(self) -> int:
        if self.wire_type != VARINT:
            raise WireError(f"field {self.number} has wire type {self.wire_type}, expected a varint")
        value, _ = read_varint(self.value, 0)
        return value

    def text(self) -> str:
        return bytes(self.value).decode("utf-8")


def read_varint(data: memoryview, at: int) -> tuple[int, int]:
    """The varint starting at ``at`` and the offset just past it."""
    start = at
    value = 0
    shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise WireError(f"the varint at byte {start} runs past the end of the message")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def fields(data: memoryview) -> Iterator[Field]:
    """The fields of one message, in order."""
    at = 0
    while at < len(data):
        start = at
        key, at = read_varint(data, at)
        number, wire_type = key >> 3, key & 7
        if wire_type == VARINT:
            begin = at
            _, at = read_varint(data, at)
        elif wire_type == LENGTH_DELIMITED:
            size, begin = read_varint(data, at)
            at = begin + size
        elif wire_type in _FIXED_SIZES:
            begin = at
            at += _FIXED_SIZES[wire_type]
        else:
            raise WireError(f"field {number} at byte {start} has the unsupported wire type {wire_type}")
        if at > len(data):
            raise WireError(f"field {number} at byte {start} runs past the end of the message")
        yield Field(number, wire_type, data[begin:at], data[start:at])


def packed_varints(field: Field) -> list[int]:
    """A repeated integer field's values: one varint, or a packed run of them."""
    if field.wire_type == VARINT:
        return [field.varint()]
    values: list[int] = []
    at = 0
    while at < len(field.value):
        value, at = read_varint(field.value, at)
        values.append(value)
    return values


def encode_varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # protobuf's two's-complement int64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_length_key(number: int, size: int) -> bytes:
    """The key and length that precede ``size`` bytes of a length-delimited field."""
    return encode_varint(number << 3 | LENGTH_DELIMITED) + encode_varint(size)


def encode_bytes(number: int, payload: bytes) -> bytes:
    """A length-delimited field (a string, bytes or a nested message)."""
    return encode_length_key(number, len(payload)) + payload
