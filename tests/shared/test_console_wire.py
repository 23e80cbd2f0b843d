"""The console's line protocol: every frame survives a round trip; a bad line names what is wrong."""

from __future__ import annotations

import json

import pytest

from shared.protocol.console_wire import (
    MAX_SAY_CHARS,
    Approval,
    Error,
    Frame,
    FrameError,
    Hello,
    Queued,
    Reply,
    Say,
    Verdict,
    Welcome,
    decode_client,
    decode_server,
    encode,
)

SERVER_FRAMES: list[Frame] = [
    Welcome(server="console", chat_id="operator"),
    Queued(id="m1", seq=3, duplicate=True),
    Reply(message_id="7", text="héllo\nwörld", reply_to="m1", notice=True),
    Reply(message_id="8", text="plain"),
    Approval(request_id="kmpqr", tool_name="shell", description="run it", input_preview='{"cmd": "ls"}'),
    Verdict(request_id="kmpqr", behavior="deny"),
    Error(message="no pending approval"),
]


@pytest.mark.parametrize("frame", SERVER_FRAMES, ids=lambda f: type(f).__name__)
def test_every_server_frame_round_trips_on_one_line(frame: Frame) -> None:
    line = encode(frame)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert decode_server(line) == frame


@pytest.mark.parametrize("frame", [Hello(), Hello(chat_id="ops:2"), Say(id="m-1", text="hi")])
def test_every_client_frame_round_trips(frame: Frame) -> None:
    assert decode_client(encode(frame)) == frame


def test_defaults_are_filled_and_the_wire_keeps_the_field_names() -> None:
    assert decode_client(b'{"type": "hello"}') == Hello(chat_id="operator")
    assert json.loads(encode(Say(id="a", text="b"))) == {"type": "say", "id": "a", "text": "b"}


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b"not json", "not JSON"),
        (b"[1, 2]", "a frame is a JSON object"),
        (b'{"type": "reply", "message_id": "1", "text": "x"}', "type: must be one of hello, say"),
        (b'{"text": "x"}', "type: must be one of hello, say, not None"),
        (b'{"type": "say", "id": "m1"}', "text: missing from a say frame"),
        (b'{"type": "say", "id": "m1", "text": "x", "admin": true}', "admin: unknown field of a say frame"),
        (b'{"type": "say", "id": "m1", "text": 5}', "text: wrong type int"),
        (b'{"type": "say", "id": "m 1", "text": "x"}', "id: must match"),
        (b'{"type": "say", "id": "m1", "text": ""}', "text: must be 1 to"),
        (b'{"type": "hello", "chat_id": "../etc"}', "chat_id: must match"),
        (b'{"type": "hello", "chat_id": null}', "chat_id: wrong type NoneType"),
    ],
)
def test_a_bad_client_line_is_refused_with_the_field_it_got_wrong(line: bytes, problem: str) -> None:
    with pytest.raises(FrameError, match="^" + problem.replace("(", r"\(").replace("[", r"\[")):
        decode_client(line)


def test_a_say_may_be_as_long_as_the_limit_and_no_longer() -> None:
    longest = Say(id="m", text="x" * MAX_SAY_CHARS)
    assert decode_client(encode(longest)) == longest
    with pytest.raises(FrameError, match="text: must be 1 to 64000 characters, not 64001"):
        Say(id="m", text="x" * (MAX_SAY_CHARS + 1))


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b'{"type": "queued", "id": "m1", "seq": true}', "seq: wrong type bool"),
        (b'{"type": "queued", "id": "m1", "seq": 1, "duplicate": 1}', "duplicate: wrong type int"),
        (
            b'{"type": "verdict", "request_id": "k", "behavior": "maybe"}',
            "behavior: must be 'allow' or 'deny'",
        ),
        (b'{"type": "reply", "message_id": "1", "text": "x", "reply_to": 3}', "reply_to: wrong type int"),
    ],
)
def test_a_bad_server_line_is_refused(line: bytes, problem: str) -> None:
    with pytest.raises(FrameError, match="^" + problem):
        decode_server(line)
