"""Channel vocabulary the orchestrator's config names, without the wire models.

Reading a config costs no import of the MCP types here; :mod:`shared.protocol.channel` keys
sessions by the same values.
"""

from __future__ import annotations

from typing import Literal

SessionScope = Literal["thread", "chat", "sender"]
"""Which conversation an inbound message continues: its thread, its whole chat, or its sender's."""

PULLS_EVENTS = "pulls_events"
"""A client's ``nexo/channel`` extension setting. True: the client reads a nexo channel's messages
and approval answers from its ``nexo/events`` log, so the channel pushes it neither (it would only
parse and drop them). Clients without it (Claude Code) are pushed both namespaces as before."""
