"""The Anthropic Messages API (`POST /v1/messages`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar

import httpx2

from orchestrator.llm.base import (
    HTTPProvider,
    WireFormatError,
    expect_dict,
    expect_list,
    expect_str,
    token_count,
)
from orchestrator.llm.config import AnthropicProviderConfig
from orchestrator.llm.types import (
    Completion,
    Message,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)

CACHE_CONTROL: dict[str, str] = {"type": "ephemeral"}
"""Anthropic's prompt-cache breakpoint: the prefix up to the marked block is cached for 5 minutes."""


def _is_tool_result_turn(message: dict[str, Any]) -> bool:
    content = message["content"]
    return (
        message["role"] == "user"
        and isinstance(content, list)
        and any(block["type"] == "tool_result" for block in content)
    )


def to_wire_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Map neutral messages to Messages-API turns.

    Tool results that answer one assistant turn share one user turn, as the API requires; a user
    message right after them joins that turn as a trailing text block.
    """
    wire: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, UserMessage):
            if wire and _is_tool_result_turn(wire[-1]):
                wire[-1]["content"].append({"type": "text", "text": message.content})
            else:
                wire.append({"role": "user", "content": message.content})
        elif isinstance(message, ToolResultMessage):
            block = {
                "type": "tool_result",
                "tool_use_id": message.call_id,
                "content": message.content,
                "is_error": message.is_error,
            }
            if wire and _is_tool_result_turn(wire[-1]):
                wire[-1]["content"].append(block)
            else:
                wire.append({"role": "user", "content": [block]})
        else:
            blocks: list[dict[str, Any]] = []
            if message.text:
                blocks.append({"type": "text", "text": message.text})
            blocks.extend(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
                for call in message.tool_calls
            )
            # The API refuses empty assistant turns; an empty turn carries nothing worth keeping.
            if blocks:
                wire.append({"role": "assistant", "content": blocks})
    return wire


class AnthropicProvider(HTTPProvider):
    kind: ClassVar[str] = "anthropic"
    wire_hint: ClassVar[str] = "Check that base_url points at the Anthropic Messages API (without /v1)."

    def __init__(
        self,
        name: str,
        config: AnthropicProviderConfig,
        *,
        transport: httpx2.AsyncBaseTransport | None,
        sleep: Callable[[float], Awaitable[None]],
        clock: Callable[[], float],
    ) -> None:
        super().__init__(name, config, transport=transport, sleep=sleep, clock=clock)
        self.anthropic_version = config.anthropic_version

    def endpoint(self) -> str:
        return f"{self.base_url}/v1/messages"

    def headers(self) -> dict[str, str]:
        headers = {"anthropic-version": self.anthropic_version, "content-type": "application/json"}
        if self._api_key is not None:
            headers["x-api-key"] = self._api_key
        return headers

    def request_body(
        self, *, system: str, messages: Sequence[Message], tools: Sequence[ToolSpec], max_tokens: int
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens}
        # Cache breakpoints after the tool definitions and after the system prompt: the prefix
        # that repeats across turns and ticks is read from the cache, not billed in full again.
        if system:
            body["system"] = [{"type": "text", "text": system, "cache_control": CACHE_CONTROL}]
        body["messages"] = to_wire_messages(messages)
        if tools:
            body["tools"] = [
                {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}
                for tool in tools
            ]
            body["tools"][-1]["cache_control"] = CACHE_CONTROL
        return body

    def parse(self, data: dict[str, Any], *, elapsed_s: float) -> Completion:
        texts: list[str] = []
        calls: list[ToolCall] = []
        for index, raw in enumerate(expect_list(data.get("content"), "content")):
            block = expect_dict(raw, f"content[{index}]")
            kind = block.get("type")
            if kind == "text":
                texts.append(expect_str(block.get("text"), f"content[{index}].text"))
            elif kind == "tool_use":
                calls.append(
                    ToolCall(
                        id=expect_str(block.get("id"), f"content[{index}].id"),
                        name=expect_str(block.get("name"), f"content[{index}].name"),
                        arguments=expect_dict(block.get("input"), f"content[{index}].input"),
                    )
                )
            # Other block kinds (thinking, citations) carry nothing the agent loop acts on.
        usage = data.get("usage")
        usage = expect_dict(usage, "usage") if usage is not None else {}
        stop_reason = data.get("stop_reason")
        model = data.get("model")
        if stop_reason is not None and not isinstance(stop_reason, str):
            raise WireFormatError(f"stop_reason should be a string, got {type(stop_reason).__name__}")
        text = "\n".join(texts)
        return Completion(
            text=text or None,
            tool_calls=tuple(calls),
            usage=Usage(
                input_tokens=token_count(usage.get("input_tokens"), "usage.input_tokens"),
                output_tokens=token_count(usage.get("output_tokens"), "usage.output_tokens"),
                cache_read_tokens=token_count(
                    usage.get("cache_read_input_tokens"), "usage.cache_read_input_tokens"
                ),
                cache_write_tokens=token_count(
                    usage.get("cache_creation_input_tokens"), "usage.cache_creation_input_tokens"
                ),
            ),
            stop_reason=stop_reason or ("tool_use" if calls else "end_turn"),
            model=model if isinstance(model, str) else self.model,
            elapsed_s=elapsed_s,
        )
