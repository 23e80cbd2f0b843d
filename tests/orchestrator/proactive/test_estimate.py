"""The bound on a model call's cost, taken from its request before it is sent."""

from __future__ import annotations

import json
import random

import pytest

from orchestrator.llm import AssistantMessage, Message, ToolCall, ToolResultMessage, ToolSpec, UserMessage
from orchestrator.loop.goal import PendingCall
from orchestrator.proactive.estimate import BYTES_PER_TOKEN, FRAMING_TOKENS, estimate_call

TOOL = ToolSpec("memory__search", "Search the memories.", {"type": "object", "properties": {"q": {}}})


def test_every_byte_of_the_request_and_the_output_cap_are_counted() -> None:
    call = PendingCall("sys", [UserMessage("héllo")], [TOOL], max_tokens=64)
    text = len(b"sys") + len("héllo".encode()) + len(TOOL.name) + len(TOOL.description)
    text += len(json.dumps(TOOL.input_schema))
    bound = estimate_call(call, provider_max_tokens=4096)
    assert bound.input_tokens == -(-text // BYTES_PER_TOKEN) + FRAMING_TOKENS * 3
    assert bound.output_tokens == 64


def test_without_a_cap_of_its_own_the_call_is_bounded_by_the_providers() -> None:
    bound = estimate_call(PendingCall("", [UserMessage("x")], [], max_tokens=None), provider_max_tokens=4096)
    assert bound.output_tokens == 4096


@pytest.mark.parametrize("seed", range(20))
def test_the_bound_grows_with_the_conversation_and_stays_above_four_characters_a_token(seed: int) -> None:
    rng = random.Random(seed)
    messages: list[Message] = [UserMessage("go " * rng.randint(1, 200))]
    previous = 0
    for step in range(rng.randint(1, 10)):
        arguments = {"q": "ü" * rng.randint(0, 50)}
        messages.append(AssistantMessage(None, (ToolCall(f"c{step}", TOOL.name, arguments),)))
        messages.append(ToolResultMessage(f"c{step}", "r" * rng.randint(0, 2000)))
        bound = estimate_call(PendingCall("system", messages, [TOOL], 10), provider_max_tokens=10)
        chars = sum(
            len(m.content) if isinstance(m, UserMessage | ToolResultMessage) else len(json.dumps(arguments))
            for m in messages
        )
        assert bound.input_tokens > previous
        assert bound.input_tokens >= chars // 4
        previous = bound.input_tokens
