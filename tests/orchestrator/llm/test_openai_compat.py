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
from tests.orchestrator.llm.support import API_KEY, VirtualTime, openai

pytestmark = pytest.mark.anyio

SEARCH = ToolSpec(
    name="search",
    description="Search the notes.",
    input_schema={"type": "object", "properties": {"query": {"type": "string"}}},
)


def tool_call_body(arguments: object, *, name: str = "search") -> str:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "function": {"name": name, "arguments": arguments}}],
    }
    return json.dumps({"choices": [{"message": message, "finish_reason": "tool_calls"}]})


async def test_openai_posts_chat_completions_without_authorization_when_no_key(
    fake: FakeLLM, vtime: VirtualTime
) -> None:
    fake.push(Reply("hello"))
    async with aclosing(openai(fake, vtime, max_tokens=99)) as provider:
        await provider.complete(system="You are nexo.", messages=[UserMessage("hi")], tools=[SEARCH])

    (request,) = fake.requests
    assert request.wire == "openai"
    assert "authorization" not in request.headers
    assert request.body == {
        "model": "qwen-test",
        "messages": [{"role": "system", "content": "You are nexo."}, {"role": "user", "content": "hi"}],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "search",
                    "description": "Search the notes.",
                    "parameters": SEARCH.input_schema,
                },
            }
        ],
        "max_tokens": 99,
    }
    assert request.system == "You are nexo."
    assert request.tool_names == ["search"]


async def test_openai_sends_bearer_key_and_temperature_when_configured(
    fake: FakeLLM, vtime: VirtualTime
) -> None:
    fake.push(Reply("hello"))
    base_url = fake.openai_base_url + "/"
    async with aclosing(openai(fake, vtime, api_key=API_KEY, temperature=0.2, base_url=base_url)) as provider:
        await provider.complete(system="", messages=[UserMessage("hi")], tools=[], max_tokens=5)

    (request,) = fake.requests
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert request.body == {
        "model": "qwen-test",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 5,
        "temperature": 0.2,
    }


async def test_openai_text_reply_reports_usage_finish_reason_and_model(
    fake: FakeLLM, vtime: VirtualTime
) -> None:
    fake.push(Reply("y" * 20))
    async with aclosing(openai(fake, vtime)) as provider:
        completion = await provider.complete(system="", messages=[UserMessage("x" * 40)], tools=[])

    assert completion.text == "y" * 20
    assert completion.tool_calls == ()
    assert completion.usage == Usage(input_tokens=10, output_tokens=5)
    assert completion.stop_reason == "stop"
    assert completion.model == "qwen-test"


async def test_openai_tool_call_round_trip_uses_tool_role_and_json_string_arguments(
    fake: FakeLLM, vtime: VirtualTime
) -> None:
    fake.push(
        Step(tool_calls=(CallTool("search", {"query": "cats"}), CallTool("search", {"query": "dogs"}))),
        Reply("Found both."),
    )
    history: list[Message] = [UserMessage("Find cats and dogs.")]
    async with aclosing(openai(fake, vtime)) as provider:
        first = await provider.complete(system="sys", messages=history, tools=[SEARCH])
        assert first.tool_calls == (
            ToolCall(id="call_1", name="search", arguments={"query": "cats"}),
            ToolCall(id="call_2", name="search", arguments={"query": "dogs"}),
        )
        assert first.stop_reason == "tool_calls"
        assert first.text is None
        history += [
            AssistantMessage(text=None, tool_calls=first.tool_calls),
            ToolResultMessage(call_id="call_1", content="3 notes"),
            ToolResultMessage(call_id="call_2", content="index offline", is_error=True),
        ]
        second = await provider.complete(system="sys", messages=history, tools=[SEARCH])

    assert second.text == "Found both."
    request = fake.requests[1]
    assert request.body["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Find cats and dogs."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"query": "cats"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"query": "dogs"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "3 notes"},
        {"role": "tool", "tool_call_id": "call_2", "content": "ERROR: index offline"},
    ]
    assert request.tool_results == [("call_1", "3 notes", False), ("call_2", "index offline", True)]
    assert request.last_user_text == "Find cats and dogs."


async def test_openai_assistant_text_turns_are_sent_as_plain_content(
    fake: FakeLLM, vtime: VirtualTime
) -> None:
    fake.push(Reply("ok"))
    messages: list[Message] = [
        UserMessage("a"),
        AssistantMessage(text=None),
        AssistantMessage(text="b"),
        UserMessage("c"),
    ]
    async with aclosing(openai(fake, vtime)) as provider:
        await provider.complete(system="", messages=messages, tools=[])

    assert fake.requests[0].body["messages"] == [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": ""},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]


async def test_openai_malformed_tool_arguments_raise_provider_response_error_naming_the_tool(
    fake: FakeLLM, vtime: VirtualTime
) -> None:
    fake.push(Raw(tool_call_body('{"query": "cats"')), Raw(tool_call_body("{" + "x" * 300)))
    async with aclosing(openai(fake, vtime)) as provider:
        with pytest.raises(ProviderResponseError) as short:
            await provider.complete(system="", messages=[UserMessage("hi")], tools=[SEARCH])
        with pytest.raises(ProviderResponseError) as long:
            await provider.complete(system="", messages=[UserMessage("hi")], tools=[SEARCH])

    assert "arguments for tool 'search' are not valid JSON" in str(short.value)
    assert '{"query": "cats"' in str(short.value)
    assert "openai_compat 'local'" in str(short.value)
    assert "{" + "x" * 199 + "..." in str(long.value)
    assert "x" * 200 not in str(long.value)


async def test_openai_tolerates_missing_usage_and_ids_object_or_empty_arguments_and_content_parts(
    fake: FakeLLM, vtime: VirtualTime
) -> None:
    message = {
        "role": "assistant",
        "content": [{"type": "text", "text": "par"}, {"type": "image"}, {"type": "text", "text": "ts"}],
        "tool_calls": [
            {"function": {"name": "search", "arguments": {"query": "as object"}}},
            {"id": "", "function": {"name": "search", "arguments": "  "}},
        ],
    }
    fake.push(Raw(json.dumps({"model": "served-model", "choices": [{"message": message}], "usage": None})))
    async with aclosing(openai(fake, vtime)) as provider:
        completion = await provider.complete(system="", messages=[UserMessage("hi")], tools=[SEARCH])

    assert completion.text == "parts"
    assert completion.tool_calls == (
        ToolCall(id="call_0", name="search", arguments={"query": "as object"}),
        ToolCall(id="call_1", name="search", arguments={}),
    )
    assert completion.usage == Usage()
    assert completion.stop_reason == "tool_calls"
    assert completion.model == "served-model"


async def test_openai_empty_content_is_no_text(fake: FakeLLM, vtime: VirtualTime) -> None:
    fake.push(Raw(json.dumps({"choices": [{"message": {"content": ""}, "finish_reason": "length"}]})))
    async with aclosing(openai(fake, vtime)) as provider:
        completion = await provider.complete(system="", messages=[UserMessage("hi")], tools=[])

    assert completion.text is None
    assert completion.stop_reason == "length"


@pytest.mark.parametrize(
    ("body", "complaint"),
    [
        ("<html>proxy error</html>", "not JSON"),
        ("{}", "choices should be an array"),
        ('{"choices": []}', "choices is empty"),
        ('{"choices": [[]]}', "choices[0] should be an object"),
        ('{"choices": [{"message": "hi"}]}', "choices[0].message should be an object"),
        ('{"choices": [{"message": {"content": 3}}]}', "choices[0].message.content should be an array"),
        ('{"choices": [{"message": {"content": [{"type": "text"}]}}]}', "content[].text should be a string"),
        ('{"choices": [{"message": {"tool_calls": {}}}]}', "tool_calls should be an array"),
        ('{"choices": [{"message": {"tool_calls": [{"id": "x"}]}}]}', "tool_calls[0].function should be"),
        ('{"choices": [{"message": {}}], "usage": "lots"}', "usage should be an object"),
        ('{"choices": [{"message": {}}], "usage": {"prompt_tokens": 1.5}}', "usage.prompt_tokens"),
        (tool_call_body("[1, 2]"), "arguments for tool 'search' should be a JSON object"),
        (tool_call_body(42), "function.arguments should be a string"),
    ],
)
async def test_openai_malformed_success_body_raises_provider_response_error(
    fake: FakeLLM, vtime: VirtualTime, body: str, complaint: str
) -> None:
    fake.push(Raw(body))
    async with aclosing(openai(fake, vtime)) as provider:
        with pytest.raises(ProviderResponseError) as caught:
            await provider.complete(system="", messages=[UserMessage("hi")], tools=[])

    assert complaint in str(caught.value)
    assert "OpenAI-compatible API root" in str(caught.value)
