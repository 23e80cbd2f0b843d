"""The ``_meta`` of each memory tool call: whose memories, and how far the words are trusted.

Model-facing tools (``memory_remember``, ``memory_recall``, ...) never take the agent id or the
provenance as arguments: a model must not choose whose memories it reads or how far its words are
trusted. The orchestrator puts both in the ``_meta`` of each ``tools/call`` under
:data:`AGENT_META_KEY` and :data:`PROVENANCE_META_KEY`.
"""

from __future__ import annotations

from typing import Annotated, Literal, cast

import mcp_types as types
from pydantic import Field

AGENT_META_KEY = "nexo/agent"
PROVENANCE_META_KEY = "nexo/provenance"

Provenance = Literal["owner", "paired_contact", "untrusted", "tool", "agent"]
PROVENANCES: tuple[Provenance, ...] = ("owner", "paired_contact", "untrusted", "tool", "agent")
QUOTED_PROVENANCES: frozenset[str] = frozenset({"paired_contact", "untrusted", "tool"})
"""Memories from these sources come back to a model wrapped as quoted data, never as instructions."""

AGENT_PATTERN = r"^[a-z][a-z0-9_-]{0,31}$"
"""Agent ids as the orchestrator's config allows them; they also name a directory on disk."""
AgentId = Annotated[str, Field(pattern=AGENT_PATTERN)]


def tool_meta(agent: str, provenance: Provenance) -> types.RequestParamsMeta:
    """The ``_meta`` the orchestrator sends with every memory tool call."""
    # RequestParamsMeta is an open TypedDict (PEP 728 extra_items) that mypy does not model yet.
    return cast(types.RequestParamsMeta, {AGENT_META_KEY: agent, PROVENANCE_META_KEY: provenance})
