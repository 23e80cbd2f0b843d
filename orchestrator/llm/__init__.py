"""LLM providers: Anthropic Messages and OpenAI-compatible chat completions behind one protocol.

The provider clients load on first use (PEP 562): reading a config needs the provider settings, not
the HTTP clients behind them, so ``nexo mcp-server`` and the one-shot commands never import them.
"""

from typing import TYPE_CHECKING

from orchestrator.llm.config import AnthropicProviderConfig, OpenAICompatProviderConfig, ProviderConfig
from orchestrator.llm.errors import LLMError, ProviderRejected, ProviderResponseError, ProviderUnavailable
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
from shared.lazy import lazy_names

if TYPE_CHECKING:
    from orchestrator.llm.anthropic import AnthropicProvider
    from orchestrator.llm.factory import build_provider
    from orchestrator.llm.openai_compat import OpenAICompatProvider

_CLIENTS = {
    "AnthropicProvider": "orchestrator.llm.anthropic",
    "OpenAICompatProvider": "orchestrator.llm.openai_compat",
    "build_provider": "orchestrator.llm.factory",
}


__getattr__ = lazy_names(__name__, _CLIENTS)


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
