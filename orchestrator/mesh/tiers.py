"""What the operator is asked before a tool runs: its tier, as the config and the catalog name it."""

from __future__ import annotations

from typing import Literal

Tier = Literal["safe", "notify", "confirm"]
"""How a call is gated: safe runs unasked, notify runs and tells the operator, confirm asks first."""
