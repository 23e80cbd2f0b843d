"""The outbound secret guard: text nexo sends to anyone but the operator is checked for secrets.

A reply to a contact, a ``channel_send`` to some chat, a notice to the chat a goal came from: each
is scanned with the shared secret detector. ``redact`` (the default) sends the text with every
secret replaced by ``[REDACTED:<rule id>]``; ``block`` refuses to send it. The operator's own
conversations are exempt: a reply to a sender paired as owner, and anything sent to the operator's
chat (``operator.channel`` / ``operator.chat_id``). Nothing logged here contains the secret.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from orchestrator.config.nexo import NexoConfig
from orchestrator.mesh import CatalogTool
from orchestrator.permissions.policy import RECIPIENT_ARGS
from orchestrator.tools.local import LocalToolError
from shared.secrets import SecretDetector

logger = logging.getLogger("nexo.secrets")


class SecretWithheld(LocalToolError):
    """Text was not sent because it holds a secret; the message never quotes the text."""

    def __init__(self, rule_ids: tuple[str, ...], destination: str) -> None:
        self.rule_ids = rule_ids
        self.destination = destination
        super().__init__(
            f"refused to send this text to {destination}: it contains what looks like a secret "
            f"({', '.join(rule_ids)}). Send it without the secret; only the operator's own chat receives "
            "secrets (secret_guard.outbound in the config, docs/secret-guard.md)"
        )


class OutboundGuard:
    """Applies ``secret_guard`` of the config to text about to leave for someone else."""

    def __init__(self, config: NexoConfig) -> None:
        self._config = config
        self.mode = config.secret_guard.outbound
        self._detector = SecretDetector(disabled_rules=config.secret_guard.disabled_rules)

    def is_operators(self, server: str, chat_id: str | None) -> bool:
        """The operator's own chat, where secrets may go."""
        operator = self._config.operator
        return server == operator.channel and chat_id == operator.chat_id

    def screen(self, text: str, *, server: str, chat_id: str | None, to_owner: bool = False) -> str:
        """The text to send: unchanged for the operator, redacted, or refused with SecretWithheld."""
        if to_owner or self.is_operators(server, chat_id):
            return text
        redacted, rule_ids = self._detector.redacted(text)
        if not rule_ids:
            return text
        destination = f"{server}:{chat_id or '-'}"
        if self.mode == "block":
            logger.warning(
                "withheld a message to %s: it looks like it holds a secret (%s)",
                destination,
                ", ".join(rule_ids),
            )
            raise SecretWithheld(rule_ids, destination)
        logger.info("redacted %s in a message to %s", ", ".join(rule_ids), destination)
        return redacted

    def reply(self, text: str, *, server: str, chat_id: str | None, to_owner: bool) -> str:
        """A reply to a conversation: redacted, or (block mode) a short notice in place of the answer."""
        try:
            return self.screen(text, server=server, chat_id=chat_id, to_owner=to_owner)
        except SecretWithheld as withheld:
            return (
                "[nexo] I held back my answer: it contained what looks like a secret "
                f"({', '.join(withheld.rule_ids)})."
            )

    def arguments(self, tool: CatalogTool, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        """The arguments of a server's outbound tool with every string screened (raises SecretWithheld).

        A call addressed only to the operator's chat on the operator's channel passes unchanged.
        """
        if tool.classification != "outbound" or not tool.server:
            return arguments
        chats = {str(arguments[name]) for name in RECIPIENT_ARGS if name in arguments}
        chat_id = chats.pop() if len(chats) == 1 else None
        return {key: self._screened(value, tool.server, chat_id) for key, value in arguments.items()}

    def _screened(self, value: Any, server: str, chat_id: str | None) -> Any:
        if isinstance(value, str):
            return self.screen(value, server=server, chat_id=chat_id)
        if isinstance(value, list):
            return [self._screened(item, server, chat_id) for item in value]
        if isinstance(value, dict):
            return {key: self._screened(item, server, chat_id) for key, item in value.items()}
        return value
