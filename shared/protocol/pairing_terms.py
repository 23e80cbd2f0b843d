"""The pairing server's vocabulary, without the wire models.

The orchestrator's config and policy name roles and scopes; reading them costs no import of the MCP
types here. :mod:`shared.protocol.pairing` builds its models on the same values.
"""

from __future__ import annotations

from typing import Literal

Verdict = Literal["allow", "challenge", "drop"]
Role = Literal["owner", "contact"]
Scope = Literal["dm", "group"]
DmPolicy = Literal["pairing", "allowlist", "open", "disabled"]
