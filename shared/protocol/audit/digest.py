"""One canonical text per JSON value, and the digest a tool call records instead of its arguments."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 kept as is: one text per value."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def args_digest(arguments: Mapping[str, Any]) -> str:
    """What a tool_call entry records instead of the arguments themselves."""
    return hashlib.sha256(canonical_json(dict(arguments)).encode()).hexdigest()
