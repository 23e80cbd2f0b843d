"""A bound on what a model call can cost, taken from its actual request before it is sent.

Spend budgets reserve this bound before every unattended call, so a budget is never overrun: a
call is sent only when what was spent plus the bound fits. The bound is conservative on purpose:

* input: every byte of the request's text (system prompt, messages, tool calls and results, and
  the tool list's names, descriptions and JSON schemas) over :data:`BYTES_PER_TOKEN`, plus
  :data:`FRAMING_TOKENS` per message and per tool for the roles and separators a provider adds.
  Tokenizers of the models in use average about four bytes of English or JSON per token and never
  fewer than three for text, so bytes/3 stays above what a provider counts;
* output: the call's ``max_tokens`` (else the provider's), the most the provider may generate.
"""

from __future__ import annotations

import json

from orchestrator.llm import AssistantMessage, Message, ToolResultMessage, ToolSpec, Usage, UserMessage
from orchestrator.loop.goal import PendingCall

BYTES_PER_TOKEN = 3
FRAMING_TOKENS = 8


def _size(text: str) -> int:
    return len(text.encode())


def _message_bytes(message: Message) -> int:
    if isinstance(message, UserMessage):
        return _size(message.content)
    if isinstance(message, AssistantMessage):
        calls = sum(
            _size(call.id) + _size(call.name) + _size(json.dumps(call.arguments, ensure_ascii=False))
            for call in message.tool_calls
        )
        return _size(message.text or "") + calls
    assert isinstance(message, ToolResultMessage)
    return _size(message.call_id) + _size(message.content)


def _tool_bytes(tool: ToolSpec) -> int:
    return _size(tool.name) + _size(tool.description) + _size(json.dumps(tool.input_schema))


def estimate_call(call: PendingCall, *, provider_max_tokens: int) -> Usage:
    """The most ``call`` can cost: input and output tokens, each an upper bound.

    ``provider_max_tokens`` is the output cap the provider applies when the call sets none.
    """
    text = _size(call.system) + sum(map(_message_bytes, call.messages)) + sum(map(_tool_bytes, call.tools))
    framing = FRAMING_TOKENS * (1 + len(call.messages) + len(call.tools))
    return Usage(
        input_tokens=-(-text // BYTES_PER_TOKEN) + framing,
        output_tokens=call.max_tokens or provider_max_tokens,
    )
