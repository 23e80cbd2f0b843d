"""Channel vocabulary the orchestrator's config names, without the wire models.

Reading a config costs no import of the MCP types here; :mod:`shared.protocol.channel` keys
sessions by the same values.
"""

from __future__ import annotations

from typing import Literal

SessionScope = Literal["thread", "chat", "sender"]
"""Which conversation an inbound message continues: its thread, its whole chat, or its sender's."""
