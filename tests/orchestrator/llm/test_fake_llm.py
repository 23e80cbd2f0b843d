"""The fake provider server itself: scripting, recording and wire-shaped errors."""

from __future__ import annotations

from contextlib import aclosing
from typing import Any

import anyio
import anyio.to_thread
import httpx2
import pytest

from orchestrator.llm import ProviderUnavailable, UserMessage
from tests.fakes.llm import CallTool, Fail, FakeLLM, RecordedRequest, Reply
from tests.orchestrator.llm.support import VirtualTime, anthropic, openai

pytestmark = pytest.mark.anyio

MINIMAL = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}


def post(client: httpx2.Client, url: str, body: Any) -> httpx2.Response:
    return client.post(url, json=body)


def test_sync_context_serves_default_reply_repeatedly_and_shapes_both_wires() -> None:
    with FakeLLM(default=Reply("same")) as fake, httpx2.Client() as client:
        openai_reply = post(client, f"{fake.openai_base_url}/chat/completions", MINIMAL).json()
        anthropic_reply = post(client, f"{fake.anthropic_base_url}/v1/messages", MINIMAL).json()

    assert openai_reply["object"] == "chat.completion"
    assert openai_reply["choices"][0]["message"] == {"role": "assistant", "content": "same"}
    assert openai_reply["usage"]["total_tokens"] == 2
    assert anthropic_reply["type"] == "message"
    assert anthropic_reply["content"] == [{"type": "text", "text": "same"}]
    assert anthropic_reply["stop_reason"] == "end_turn"
    assert [request.wire for request in fake.requests] == ["openai", "anthropic"]


def test_base_urls_need_a_running_server() -> None:
    fake = FakeLLM()
    with pytest.raises(RuntimeError, match="not running"):
        _ = fake.openai_base_url
    fake.stop()


def test_exhausted_script_answers_500_with_a_wire_shaped_error() -> None:
    with FakeLLM([Reply("one")]) as fake, httpx2.Client() as client:
        post(client, f"{fake.openai_base_url}/chat/completions", MINIMAL)
        exhausted = post(client, f"{fake.anthropic_base_url}/v1/messages", MINIMAL)

    assert exhausted.status_code == 500
    assert exhausted.json() == {
        "type": "error",
        "error": {"type": "api_error", "message": "fake LLM script exhausted after 1 requests"},
    }


def test_fail_sets_status_retry_after_and_error_body() -> None:
    with FakeLLM([Fail(429, retry_after="3", message="slow down")] * 2) as fake, httpx2.Client() as client:
        openai_error = post(client, f"{fake.openai_base_url}/chat/completions", MINIMAL)
        anthropic_error = post(client, f"{fake.anthropic_base_url}/v1/messages", MINIMAL)

    assert openai_error.status_code == anthropic_error.status_code == 429
    assert openai_error.headers["retry-after"] == anthropic_error.headers["retry-after"] == "3"
    assert openai_error.json()["error"]["message"] == "slow down"
    assert anthropic_error.json()["error"] == {"type": "rate_limit_error", "message": "slow down"}


@pytest.mark.parametrize(
    ("path", "body", "problem"),
    [
        ("/v1/chat/completions", "not json", "JSON object"),
        ("/v1/chat/completions", {"messages": []}, "model"),
        ("/v1/chat/completions", {"model": "m"}, "messages"),
        ("/v1/messages", {"model": "m", "messages": []}, "max_tokens"),
    ],
)
def test_invalid_requests_are_refused_without_consuming_the_script(
    path: str, body: Any, problem: str
) -> None:
    with FakeLLM([Reply("kept")]) as fake, httpx2.Client() as client:
        url = f"{fake.anthropic_base_url}{path}"
        refused = client.post(url, content=body) if isinstance(body, str) else post(client, url, body)
        served = post(client, f"{fake.anthropic_base_url}/v1/messages", MINIMAL)

    assert refused.status_code == 400
    assert problem in refused.text
    assert served.json()["content"][0]["text"] == "kept"
    assert len(fake.requests) == 1


async def test_callables_see_the_request_and_push_extends_the_script(vtime: VirtualTime) -> None:
    seen: list[RecordedRequest] = []

    def decide(request: RecordedRequest) -> Reply:
        seen.append(request)
        return Reply(f"you said {request.last_user_text}")

    async with FakeLLM([decide]) as fake, aclosing(openai(fake, vtime)) as provider:
        first = await provider.complete(system="", messages=[UserMessage("ping")], tools=[])
        fake.push(CallTool("noop", {}, id="fixed"))
        second = await provider.complete(system="", messages=[UserMessage("again")], tools=[])

    assert first.text == "you said ping"
    assert seen[0].index == 0
    assert second.tool_calls[0].id == "fixed"


async def test_a_failing_callable_answers_500(vtime: VirtualTime, caplog: pytest.LogCaptureFixture) -> None:
    def explode(request: RecordedRequest) -> Reply:
        raise ValueError("boom")

    async with FakeLLM([explode]) as fake, aclosing(anthropic(fake, vtime, max_retries=0)) as provider:
        with pytest.raises(ProviderUnavailable, match="boom"):
            await provider.complete(system="", messages=[UserMessage("hi")], tools=[])

    assert "script callable failed" in caplog.text


async def test_wait_for_requests_blocks_until_they_arrive_or_times_out(vtime: VirtualTime) -> None:
    async with FakeLLM(default=Reply("ok")) as fake, aclosing(openai(fake, vtime)) as provider:
        with pytest.raises(TimeoutError, match="got 0 request"):
            fake.wait_for_requests(1, timeout=0.01)

        async def ask() -> None:
            await provider.complete(system="", messages=[UserMessage("hi")], tools=[])

        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            await anyio.to_thread.run_sync(fake.wait_for_requests, 1)

    assert len(fake.requests) == 1


def test_recorded_request_helpers_read_both_wires() -> None:
    openai_request = RecordedRequest(
        wire="openai",
        body={
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url"}]},
                {"role": "tool", "tool_call_id": "c1", "content": "ERROR: bad"},
                "junk",
            ],
            "tools": [{"type": "function", "function": {"name": "a"}}],
        },
        headers={},
        index=0,
    )
    anthropic_request = RecordedRequest(
        wire="anthropic",
        body={
            "system": [{"type": "text", "text": "sys"}],
            "messages": [
                {"role": "user", "content": "first"},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "r"}]},
            ],
            "tools": [{"name": "b"}],
        },
        headers={},
        index=1,
    )
    empty = RecordedRequest(wire="openai", body={"messages": None}, headers={}, index=2)

    assert openai_request.system == "sys"
    assert openai_request.last_user_text == "look"
    assert openai_request.tool_results == [("c1", "bad", True)]
    assert openai_request.tool_names == ["a"]
    assert anthropic_request.system == "sys"
    assert anthropic_request.last_user_text == "first"
    assert anthropic_request.tool_results == [("t", "r", False)]
    assert anthropic_request.tool_names == ["b"]
    assert anthropic_request.input_chars == len("sys") + len("first") + len("r")
    assert (empty.system, empty.last_user_text, empty.tool_results, empty.tool_names) == (None, None, [], [])
