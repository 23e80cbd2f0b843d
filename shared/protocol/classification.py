"""The four kinds of action a tool can be, without the MCP types.

The orchestrator's config names them (``permissions.classify``); reading it costs no import of the
MCP SDK. :mod:`shared.protocol.policy` puts them in a tool's ``_meta``.
"""

from __future__ import annotations

from typing import Literal

Classification = Literal["read_only", "write", "outbound", "dangerous"]
CLASSIFICATIONS: tuple[Classification, ...] = ("read_only", "write", "outbound", "dangerous")
"""read_only: changes nothing; write: changes local state (files, memory, schedules);
outbound: speaks to someone outside (a chat, an email, an HTTP call); dangerous: can do anything
(a shell, code execution, configuration)."""
