"""Permission prompts shown as a message with buttons in each of the operator's approval chats.

The platform supplies only its wire format: how to post a prompt into one chat, and how to update
that message once the prompt is settled (an edit that removes the buttons, or a follow-up message
where the platform cannot edit). This class keeps the bookkeeping every platform shares: which chats
to ask, the warning when none is configured, which messages showed each prompt, and closing them.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from shared.channelkit.delivery import SendFailed, Unreachable
from shared.channelkit.prompts import PromptClosed
from shared.protocol.channel import PermissionRequestParams

PostPrompt = Callable[[str, PermissionRequestParams], Awaitable[str | None]]
"""Show a prompt in one chat: the id of the message that shows it, or None when it cannot be shown
there (the platform logs why). Raises one of the ``failures`` when the platform refuses."""

UpdatePrompt = Callable[[str, str, PromptClosed], Awaitable[None]]
"""Make the message (chat id, message id) that showed a prompt say how it ended, without buttons."""


class ButtonPrompts:
    """Prompts shown per approval chat, each remembered until the host settles it."""

    def __init__(
        self,
        chat_ids: list[str],
        post: PostPrompt,
        update: UpdatePrompt,
        *,
        logger: logging.Logger,
        unconfigured: str,
        failures: tuple[type[Exception], ...] = (SendFailed, Unreachable),
    ) -> None:
        """``unconfigured`` tells the operator what to set when there is no approval chat."""
        self._chat_ids = chat_ids
        self._post = post
        self._update = update
        self._logger = logger
        self._unconfigured = unconfigured
        self._failures = failures
        self.shown: dict[str, list[tuple[str, str]]] = {}
        """request id -> (chat id, message id) of each prompt message, to update when it closes."""

    async def show(self, params: PermissionRequestParams) -> int:
        """Show the prompt in every approval chat; how many showed it (0: none configured or reached)."""
        request_id = params.request_id
        if not self._chat_ids:
            self._logger.warning("permission prompt %s not shown: %s", request_id, self._unconfigured)
        shown: list[tuple[str, str]] = []
        for chat_id in self._chat_ids:
            try:
                message_id = await self._post(chat_id, params)
            except self._failures as exc:
                self._logger.warning("prompt %s not shown in chat %s: %s", request_id, chat_id, exc)
                continue
            if message_id is not None:
                shown.append((chat_id, message_id))
        self.shown[request_id] = shown
        return len(shown)

    async def closed(self, closed: PromptClosed) -> None:
        """Update each message that showed the prompt; a failure is logged, the others still go."""
        for chat_id, message_id in self.shown.pop(closed.request_id, []):
            try:
                await self._update(chat_id, message_id, closed)
            except self._failures as exc:
                self._logger.info("prompt %s in chat %s not updated: %s", closed.request_id, chat_id, exc)
