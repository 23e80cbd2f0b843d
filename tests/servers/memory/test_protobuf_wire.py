"""The protobuf wire reader the model rewrite uses: every wire type, packed runs, and broken input."""

from __future__ import annotations

import struct

import pytest

from servers.memory.protobuf_wire import (
    FIXED32,
    FIXED64,
    LENGTH_DELIMITED,
    VARINT,
    WireError,
    encode_bytes,
    encode_varint,
    fields,
    packed_varints,
)


def key(number: int, wire_type: int) -> bytes:
    return encode_varint(number << 3 | wire_type)


def test_each_field_keeps_its_payload_and_its_exact_encoding() -> None:
    message = (
        key(1, VARINT)
        + encode_varint(300)
        + encode_bytes(2, b"Gather")
        + key(3, FIXED32)
        + struct.pack("<f", 1.5)
        + key(4, FIXED64)
        + struct.pack("<d", -2.0)
        + key(5, VARINT)
        + encode_varint(-1)
    )
    read = list(fields(memoryview(message)))
    assert [(f.number, f.wire_type) for f in read] == [
        (1, VARINT),
        (2, LENGTH_DELIMITED),
        (3, FIXED32),
        (4, FIXED64),
        (5, VARINT),
    ]
    assert read[0].varint() == 300
    assert read[1].text() == "Gather"
    assert struct.unpack("<f", read[2].value) == (1.5,)
    assert struct.unpack("<d", read[3].value) == (-2.0,)
    assert read[4].varint() == 2**64 - 1  # int64 -1 as protobuf sends it: ten bytes
    assert b"".join(bytes(f.raw) for f in read) == message


def test_repeated_integers_read_alike_packed_or_one_by_one() -> None:
    packed = encode_bytes(1, encode_varint(30522) + encode_varint(384))
    unpacked = key(1, VARINT) + encode_varint(30522) + key(1, VARINT) + encode_varint(384)
    assert packed_varints(next(fields(memoryview(packed)))) == [30522, 384]
    assert [v for f in fields(memoryview(unpacked)) for v in packed_varints(f)] == [30522, 384]


@pytest.mark.parametrize(
    ("message", "error"),
    [
        (b"\x08\x80", "the varint at byte 1 runs past the end of the message"),
        (encode_bytes(2, b"abc")[:-1], "field 2 at byte 0 runs past the end of the message"),
        (key(7, 3), "field 7 at byte 0 has the unsupported wire type 3"),
        (key(1, FIXED32) + b"\x00\x00", "field 1 at byte 0 runs past the end of the message"),
    ],
)
def test_a_broken_message_is_refused_naming_where(message: bytes, error: str) -> None:
    with pytest.raises(WireError, match=error):
        list(fields(memoryview(message)))


def test_reading_a_string_as_an_integer_is_refused() -> None:
    with pytest.raises(WireError, match="field 2 has wire type 2, expected a varint"):
        next(fields(memoryview(encode_bytes(2, b"x")))).varint()
