"""Provider-neutral conversation types and the provider protocol."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool the model may call; `input_schema` is a JSON Schema object."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool invocation requested by the model."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class UserMessage:
    content: str


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    text: str | None
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolResultMessage:
    call_id: str
    content: str
    is_error: bool = False


Message = UserMessage | AssistantMessage | ToolResultMessage


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    """Input tokens read at the full price (not from or into the prompt cache)."""
    output_tokens: int = 0
    cache_read_tokens: int = 0
    """Input tokens read from the provider's prompt cache."""
    cache_write_tokens: int = 0
    """Input tokens written to the provider's prompt cache."""

    @property
    def total(self) -> int:
        """Every token the call processed, cached or not."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )


@dataclass(frozen=True, slots=True)
class Completion:
    """One model turn. `elapsed_s` is wall time in the provider call, retries included."""

    text: str | None
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    stop_reason: str
    model: str
    elapsed_s: float


class Provider(Protocol):
    """A configured LLM endpoint."""

    name: str

    def describe(self) -> str:
        """Human-readable kind, name, model and URL; never contains a secret."""
        ...

    async def complete(
        self,
        *,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        max_tokens: int | None = None,
    ) -> Completion: ...

    async def aclose(self) -> None: ...

    async def warm(self) -> None:
        """Get ready for the first request now (a daemon calls it as it starts)."""
        ...
