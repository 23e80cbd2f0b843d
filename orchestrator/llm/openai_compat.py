"""OpenAI-compatible chat completions (`POST {base_url}/chat/completions`): Ollama, vLLM, OpenAI."""

from __future__ import annotations

import json
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
from orchestrator.llm.config import OpenAICompatProviderConfig
from orchestrator.llm.types import (
    Completion,
    Message,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)

ERROR_PREFIX = "ERROR: "
_MAX_SHOWN_ARGUMENTS = 200


def to_wire_messages(system: str, messages: Sequence[Message]) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = []
    if system:
        wire.append({"role": "system", "content": system})
    for message in messages:
        if isinstance(message, UserMessage):
            wire.append({"role": "user", "content": message.content})
        elif isinstance(message, ToolResultMessage):
            # The wire has no error flag, so the model learns it from the text.
            content = f"{ERROR_PREFIX}{message.content}" if message.is_error else message.content
            wire.append({"role": "tool", "tool_call_id": message.call_id, "content": content})
        elif message.tool_calls:
            wire.append(
                {
                    "role": "assistant",
                    "content": message.text,
                    "tool_calls": [
                        {
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                        }
                        for call in message.tool_calls
                    ],
                }
            )
        else:
            wire.append({"role": "assistant", "content": message.text or ""})
    return wire


def _content_text(content: object) -> str | None:
    if content is None or isinstance(content, str):
        return content or None
    parts = expect_list(content, "choices[0].message.content")
    texts = [
        expect_str(part.get("text"), "choices[0].message.content[].text")
        for part in parts
        if isinstance(part, dict) and part.get("type") == "text"
    ]
    return "".join(texts) or None


def _arguments(raw: object, tool: str, where: str) -> dict[str, Any]:
    if isinstance(raw, dict):
        # Some servers send the object itself rather than its JSON text.
        return raw
    text = expect_str(raw, where)
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        shown = text if len(text) <= _MAX_SHOWN_ARGUMENTS else f"{text[:_MAX_SHOWN_ARGUMENTS]}..."
        raise WireFormatError(
            f"arguments for tool '{tool}' are not valid JSON ({exc.msg}): {shown!r}"
        ) from exc
    if not isinstance(value, dict):
        raise WireFormatError(f"arguments for tool '{tool}' should be a JSON object, got {text!r}")
    return value


def _tool_call(raw: object, index: int) -> ToolCall:
    where = f"choices[0].message.tool_calls[{index}]"
    call = expect_dict(raw, where)
    function = expect_dict(call.get("function"), f"{where}.function")
    name = expect_str(function.get("name"), f"{where}.function.name")
    call_id = call.get("id")
    return ToolCall(
        # A few local servers omit ids; the loop still needs one to pair results with calls.
        id=call_id if isinstance(call_id, str) and call_id else f"call_{index}",
        name=name,
        arguments=_arguments(function.get("arguments"), name, f"{where}.function.arguments"),
    )


class OpenAICompatProvider(HTTPProvider):
    kind: ClassVar[str] = "openai_compat"
    wire_hint: ClassVar[str] = (
        "Check that base_url points at an OpenAI-compatible API root (usually ending in /v1) "
        "and that the model supports tool calling."
    )

    def __init__(
        self,
        name: str,
        config: OpenAICompatProviderConfig,
        *,
        transport: httpx2.AsyncBaseTransport | None,
        sleep: Callable[[float], Awaitable[None]],
        clock: Callable[[], float],
    ) -> None:
        super().__init__(name, config, transport=transport, sleep=sleep, clock=clock)
        self.temperature = config.temperature

    def endpoint(self) -> str:
        return f"{self.base_url}/chat/completions"

    def headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if self._api_key is not None:
            headers["authorization"] = f"Bearer {self._api_key}"
        return headers

    def request_body(
        self, *, system: str, messages: Sequence[Message], tools: Sequence[ToolSpec], max_tokens: int
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": to_wire_messages(system, messages)}
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.input_schema,
                    },
                }
                for tool in tools
            ]
        body["max_tokens"] = max_tokens
        if self.temperature is not None:
            body["temperature"] = self.temperature
        return body

    def parse(self, data: dict[str, Any], *, elapsed_s: float) -> Completion:
        choices = expect_list(data.get("choices"), "choices")
        if not choices:
            raise WireFormatError("choices is empty")
        choice = expect_dict(choices[0], "choices[0]")
        message = expect_dict(choice.get("message"), "choices[0].message")
        raw_calls = message.get("tool_calls")
        raw_calls = expect_list(raw_calls, "choices[0].message.tool_calls") if raw_calls is not None else []
        calls = tuple(_tool_call(raw, index) for index, raw in enumerate(raw_calls))
        usage = data.get("usage")
        usage = expect_dict(usage, "usage") if usage is not None else {}
        finish_reason = choice.get("finish_reason")
        model = data.get("model")
        return Completion(
            text=_content_text(message.get("content")),
            tool_calls=calls,
            usage=Usage(
                input_tokens=token_count(usage.get("prompt_tokens"), "usage.prompt_tokens"),
                output_tokens=token_count(usage.get("completion_tokens"), "usage.completion_tokens"),
            ),
            stop_reason=finish_reason
            if isinstance(finish_reason, str) and finish_reason
            else ("tool_calls" if calls else "stop"),
            model=model if isinstance(model, str) and model else self.model,
            elapsed_s=elapsed_s,
        )
