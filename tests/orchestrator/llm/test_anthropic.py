from __future__ import annotations

import json
from contextlib import aclosing

import pytest

from orchestrator.llm import (
    AssistantMessage,
    Message,
    ProviderResponseError,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from tests.fakes.llm import CallTool, FakeLLM, Raw, Reply, Step
from tests.orchestrator.llm.support import API_KEY, VirtualTime, anthropic

pytestmark = pytest.mark.anyio

WEATHER = ToolSpec(
    name="weather",
    description="Current weather for a city.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


async def test_anthropic_posts_messages_request_with_key_version_and_tools(
    fake: FakeLLM, vtime: VirtualTime
) -> None:
    fake.push(Reply("sunny"))
    async with aclosing(anthropic(fake, vtime, api_key=API_KEY, max_tokens=321)) as provider:
        await provider.complete(system="Be brief.", messages=[UserMessage("Weather?")], tools=[WEATHER])

    (request,) = fake.requests
    assert request.wire == "anthropic"
    assert request.headers["x-api-key"] == API_KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.headers["content-type"] == "application/json"
    assert request.body == {
        "model": "claude-test",
        "max_tokens": 321,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "Weather?"}],
        "tools": [
            {
                "name": "weather",
                "description": "Current weather for a city.",
                "input_schema": WEATHER.input_schema,
                "cache_control": {"type": "ephemeral"},
            }
        ],
    }


async def test_anthropic_marks_only_the_last_tool_as_the_cache_breakpoint(
    fake: FakeLLM, vtime: VirtualTime
) -> None:
    fake.push(Reply("ok"))
    other = ToolSpec(name="time", description="Now.", input_schema={"type": "object"})
    async with aclosing(anthropic(fake, vtime, api_key=API_KEY)) as provider:
        await provider.complete(system="s", messages=[UserMessage("hi")], tools=[WEATHER, other])
    (request,) = fake.requests
    assert ["cache_control" in tool for tool in request.body["tools"]] == [False, True]


async def test_anthropic_counts_tokens_read_from_and_written_to_the_prompt_cache(
    fake: FakeLLM, vtime: VirtualTime
) -> None:
    body = {
        "content": [{"type": "text", "text": "[idle]"}],
        "usage": {
            "input_tokens": 40,
            "output_tokens": 3,
            "cache_read_input_tokens": 1800,
            "cache_creation_input_tokens": 200,
        },
    }
    fake.push(Raw(json.dumps(body)))
    async with aclosing(anthropic(fake, vtime, api_key=API_KEY)) as provider:
        completion = await provider.complete(system="s", messages=[UserMessage("tick")], tools=[WEATHER])
    assert completion.usage == Usage(
        input_tokens=40, output_tokens=3, cache_read_tokens=1800, cache_write_tokens=200
    )
    assert completion.usage.total == 2043


async def test_anthropic_omits_empty_tools_and_system_and_honours_max_tokens_override(
    fake: FakeLLM, vtime: VirtualTime
) -> None:
    fake.push(Reply("ok"))
    async with aclosing(anthropic(fake, vtime, anthropic_version="2099-01-01")) as provider:
        await provider.complete(system="", messages=[UserMessage("hi")], tools=[], max_tokens=7)

    (request,) = fake.requests
    assert request.body == {
        "model": "claude-test",
        "max_tokens": 7,
        "messages": [{"role": "user", "content": "hi"}],
    }
    assert "x-api-key" not in request.headers
    assert request.headers["anthropic-version"] == "2099-01-01"


async def test_anthropic_text_reply_reports_usage_stop_reason_model_and_elapsed(
    fake: FakeLLM, vtime: VirtualTime
) -> None:
    fake.push(Reply("y" * 20))
    async with aclosing(anthropic(fake, vtime)) as provider:
        completion = await provider.complete(system="", messages=[UserMessage("x" * 40)], tools=[])

    assert completion.text == "y" * 20
    assert completion.tool_calls == ()
    assert completion.usage == Usage(input_tokens=10, output_tokens=5)
    assert completion.stop_reason == "end_turn"
    assert completion.model == "claude-test"
    assert completion.elapsed_s == 0.0


async def test_anthropic_tool_call_round_trip_sends_tool_use_and_tool_result_blocks(
    fake: FakeLLM, vtime: VirtualTime
) -> None:
    fake.push(CallTool("weather", {"city": "Oslo"}), Reply("It is sunny in Oslo."))
    history: list[Message] = [UserMessage("Weather in Oslo?")]
    async with aclosing(anthropic(fake, vtime)) as provider:
        first = await provider.complete(system="sys", messages=history, tools=[WEATHER])
        assert first.tool_calls == (ToolCall(id="toolu_1", name="weather", arguments={"city": "Oslo"}),)
        assert first.text is None
        assert first.stop_reason == "tool_use"
        history += [
            AssistantMessage(text=first.text, tool_calls=first.tool_calls),
            ToolResultMessage(call_id="toolu_1", content="sunny, 21C"),
        ]
        second = await provider.complete(system="sys", messages=history, tools=[WEATHER])

    assert second.text == "It is sunny in Oslo."
    assert fake.requests[1].body["messages"] == [
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny, 21C", "is_error": False}
            ],
        },
    ]


async def test_anthropic_groups_consecutive_tool_results_in_one_user_message(
    fake: FakeLLM, vtime: VirtualTime
) -> None:
    fake.push(Reply("done"))
    calls = (
        ToolCall(id="toolu_a", name="weather", arguments={"city": "Oslo"}),
        ToolCall(id="toolu_b", name="weather", arguments={"city": "Rome"}),
    )
    messages: list[Message] = [
        UserMessage("Compare Oslo and Rome."),
        AssistantMessage(text="Checking both.", tool_calls=calls),
        ToolResultMessage(call_id="toolu_a", content="cold"),
        ToolResultMessage(call_id="toolu_b", content="no such city", is_error=True),
        UserMessage("Also, be quick."),
    ]
    async with aclosing(anthropic(fake, vtime)) as provider:
        await provider.complete(system="", messages=messages, tools=[WEATHER])

    (request,) = fake.requests
    wire = request.body["messages"]
    assert [turn["role"] for turn in wire] == ["user", "assistant", "user"]
    assert wire[1]["content"][0] == {"type": "text", "text": "Checking both."}
    assert wire[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "cold", "is_error": False},
        {"type": "tool_result", "tool_use_id": "toolu_b", "content": "no such city", "is_error": True},
        {"type": "text", "text": "Also, be quick."},
    ]
    assert request.tool_results == [("toolu_a", "cold", False), ("toolu_b", "no such city", True)]
    assert request.last_user_text == "Also, be quick."


async def test_anthropic_tool_results_of_separate_turns_stay_separate_and_empty_turns_are_dropped(
    fake: FakeLLM, vtime: VirtualTime
) -> None:
    fake.push(Reply("done"))
    messages: list[Message] = [
        UserMessage("go"),
        AssistantMessage(text=None, tool_calls=(ToolCall(id="t1", name="weather", arguments={}),)),
        ToolResultMessage(call_id="t1", content="one"),
        AssistantMessage(text=None, tool_calls=(ToolCall(id="t2", name="weather", arguments={}),)),
        ToolResultMessage(call_id="t2", content="two"),
        AssistantMessage(text=""),
        UserMessage("next"),
    ]
    async with aclosing(anthropic(fake, vtime)) as provider:
        await provider.complete(system="", messages=messages, tools=[])

    wire = fake.requests[0].body["messages"]
    assert [turn["role"] for turn in wire] == ["user", "assistant", "user", "assistant", "user"]
    assert [block["tool_use_id"] for block in wire[2]["content"]] == ["t1"]
    assert wire[4]["content"] == [
        {"type": "tool_result", "tool_use_id": "t2", "content": "two", "is_error": False},
        {"type": "text", "text": "next"},
    ]


async def test_anthropic_text_with_several_tool_calls_in_one_turn(fake: FakeLLM, vtime: VirtualTime) -> None:
    fake.push(Step(text="Let me look.", tool_calls=(CallTool("a", {"x": 1}), CallTool("b", {}, id="mine"))))
    async with aclosing(anthropic(fake, vtime)) as provider:
        completion = await provider.complete(system="", messages=[UserMessage("hi")], tools=[])

    assert completion.text == "Let me look."
    assert completion.tool_calls == (
        ToolCall(id="toolu_1", name="a", arguments={"x": 1}),
        ToolCall(id="mine", name="b", arguments={}),
    )


async def test_anthropic_joins_text_blocks_ignores_unknown_blocks_and_defaults_missing_fields(
    fake: FakeLLM, vtime: VirtualTime
) -> None:
    body = {
        "content": [
            {"type": "thinking", "thinking": "hmm"},
            {"type": "text", "text": "first"},
            {"type": "text", "text": "second"},
        ]
    }
    fake.push(Raw(json.dumps(body)), Raw(json.dumps({"content": [], "usage": None, "stop_reason": None})))
    async with aclosing(anthropic(fake, vtime)) as provider:
        joined = await provider.complete(system="", messages=[UserMessage("hi")], tools=[])
        empty = await provider.complete(system="", messages=[UserMessage("hi")], tools=[])

    assert joined.text == "first\nsecond"
    assert joined.usage == Usage()
    assert joined.stop_reason == "end_turn"
    assert joined.model == "claude-test"
    assert empty.text is None


@pytest.mark.parametrize(
    ("body", "complaint"),
    [
        ("this is not json", "not JSON"),
        ("[1, 2]", "the response should be an object"),
        ("{}", "content should be an array"),
        ('{"content": ["text"]}', "content[0] should be an object"),
        ('{"content": [{"type": "text", "text": 3}]}', "content[0].text should be a string"),
        ('{"content": [{"type": "tool_use", "id": "t", "name": "n", "input": []}]}', "content[0].input"),
        ('{"content": [{"type": "tool_use", "name": "n", "input": {}}]}', "content[0].id"),
        ('{"content": [], "usage": []}', "usage should be an object"),
        ('{"content": [], "usage": {"input_tokens": "12"}}', "usage.input_tokens"),
        ('{"content": [], "usage": {"output_tokens": true}}', "usage.output_tokens"),
        ('{"content": [], "stop_reason": 3}', "stop_reason should be a string"),
    ],
)
async def test_anthropic_malformed_success_body_raises_provider_response_error(
    fake: FakeLLM, vtime: VirtualTime, body: str, complaint: str
) -> None:
    fake.push(Raw(body))
    async with aclosing(anthropic(fake, vtime)) as provider:
        with pytest.raises(ProviderResponseError) as caught:
            await provider.complete(system="", messages=[UserMessage("hi")], tools=[])

    message = str(caught.value)
    assert complaint in message
    assert "anthropic 'claude'" in message
    assert "Anthropic Messages API" in message
    assert caught.value.provider == "claude"
