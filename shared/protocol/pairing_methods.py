"""The pairing server's method names, without the wire models.

A command that hands a pairing request to the running daemon as JSON names the method and imports
neither pydantic nor the MCP types; :mod:`shared.protocol.pairing` builds its models on the same names.
"""

from __future__ import annotations

PAIRING_EXTENSION = "nexo/pairing"

CHECK_METHOD = "nexo/pairing/check"
APPROVE_METHOD = "nexo/pairing/approve"
DENY_METHOD = "nexo/pairing/deny"
REVOKE_METHOD = "nexo/pairing/revoke"
SEED_METHOD = "nexo/pairing/seed"
LIST_METHOD = "nexo/pairing/list"
