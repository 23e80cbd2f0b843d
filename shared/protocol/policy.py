"""How a tool tells the orchestrator's permission policy what kind of action it is.

A server puts one of :data:`CLASSIFICATIONS` under :data:`CLASSIFICATION_META_KEY` in the tool's
``_meta``; the policy needs no special case per server. A tool without it is classified from its MCP
annotations when they say read-only, and otherwise stays unclassified (which always asks).
"""

from __future__ import annotations

from typing import Any

from mcp_types import ToolAnnotations

from shared.protocol.classification import CLASSIFICATIONS as CLASSIFICATIONS
from shared.protocol.classification import Classification as Classification

CLASSIFICATION_META_KEY = "nexo/classification"
"""The ``_meta`` key of a tool's classification."""

SHELL_META_KEY = "nexo/shell"
"""``_meta`` flag of a tool whose ``command`` argument is a shell command line (the policy inspects it)."""

PATH_ARGS_META_KEY = "nexo/path_args"
"""``_meta`` list of a tool's argument names that are file-system paths (the policy resolves them)."""

PRIVATE_DATA_META_KEY = "nexo/private_data"
"""``_meta`` flag of a tool that reads the operator's private data: the ledger, transcripts,
memories, workspace files. Read-only is not harmless: the policy runs such a tool only in a turn
whose principal holds the ``private_data`` capability (the operator, not a contact by default)."""


def classification_meta(
    classification: Classification,
    *,
    shell: bool = False,
    path_args: tuple[str, ...] = (),
    private_data: bool = False,
) -> dict[str, Any]:
    """The ``meta=`` a server passes to ``@server.tool`` to classify the tool."""
    if classification not in CLASSIFICATIONS:
        raise ValueError(
            f"unknown classification {classification!r}; use one of {', '.join(CLASSIFICATIONS)}"
        )
    meta: dict[str, Any] = {CLASSIFICATION_META_KEY: classification}
    if shell:
        meta[SHELL_META_KEY] = True
    if path_args:
        meta[PATH_ARGS_META_KEY] = list(path_args)
    if private_data:
        meta[PRIVATE_DATA_META_KEY] = True
    return meta


def reads_private_data(meta: dict[str, Any] | None) -> bool:
    """True when a tool's ``_meta`` declares that it reads the operator's private data."""
    return meta is not None and meta.get(PRIVATE_DATA_META_KEY) is True


def classification_of(meta: dict[str, Any] | None) -> Classification | None:
    """The declared classification in a tool's ``_meta``, or None when absent or unknown."""
    if not meta:
        return None
    value = meta.get(CLASSIFICATION_META_KEY)
    return value if value in CLASSIFICATIONS else None


def tool_hints(
    *, read_only: bool = False, destructive: bool = False, idempotent: bool = False, open_world: bool = False
) -> ToolAnnotations:
    """MCP tool annotations with every hint stated: a client guesses an unset hint, and its guesses
    (destructive, open world) are the worst case."""
    return ToolAnnotations(
        read_only_hint=read_only,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=open_world,
    )


READ_ONLY_HINTS = tool_hints(read_only=True, idempotent=True)
"""A tool that changes nothing; the policy classifies it read_only even without ``_meta``."""
