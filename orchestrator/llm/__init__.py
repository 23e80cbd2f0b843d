"""LLM providers: Anthropic Messages and OpenAI-compatible chat completions behind one protocol."""

from orchestrator.llm.anthropic import AnthropicProvider
from orchestrator.llm.config import AnthropicProviderConfig, OpenAICompatProviderConfig, ProviderConfig
from orchestrator.llm.errors import LLMError, ProviderRejected, ProviderResponseError, ProviderUnavailable
from orchestrator.llm.factory import build_provider
from orchestrator.llm.openai_compat import OpenAICompatProvider
from orchestrator.llm.types import (
    AssistantMessage,
    Completion,
    Message,
    Provider,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)

__all__ = [
    "AnthropicProvider",
    "AnthropicProviderConfig",
    "AssistantMessage",
    "Completion",
    "LLMError",
    "Message",
    "OpenAICompatProvider",
    "OpenAICompatProviderConfig",
    "Provider",
    "ProviderConfig",
    "ProviderRejected",
    "ProviderResponseError",
    "ProviderUnavailable",
    "ToolCall",
    "ToolResultMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "build_provider",
]
