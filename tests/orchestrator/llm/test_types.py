from __future__ import annotations

import dataclasses

import pytest

from orchestrator.llm import AssistantMessage, ToolCall, ToolResultMessage, Usage


def test_usage_adds_up_and_reports_a_total() -> None:
    total = Usage(input_tokens=10, output_tokens=3) + Usage(input_tokens=5, output_tokens=1)

    assert total == Usage(input_tokens=15, output_tokens=4)
    assert total.total == 19
    assert Usage().total == 0


def test_usage_does_not_add_other_types() -> None:
    with pytest.raises(TypeError):
        _ = Usage() + 3  # type: ignore[operator]  # the point is the runtime refusal


def test_message_types_are_frozen_with_defaults() -> None:
    call = ToolCall(id="c1", name="search", arguments={"q": "x"})
    message = AssistantMessage(text=None, tool_calls=(call,))

    assert AssistantMessage(text="hi").tool_calls == ()
    assert ToolResultMessage(call_id="c1", content="ok").is_error is False
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.text = "changed"  # type: ignore[misc]  # the point is the runtime refusal
