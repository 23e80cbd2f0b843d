"""Secrets never reach the ledger: every text the audit server stores passes through here first.

Entries (subject and every string of the body) and goals (prompt, phase, last decision, last event,
outcome) are redacted with the shared secret detector: each secret becomes ``[REDACTED:<rule id>]``.
The ledger is read back by ``audit_search`` and by the operator's CLI, and it is hash-chained, so a
secret written once could never be removed without breaking the chain.
"""

from __future__ import annotations

import logging
from functools import cache
from typing import Any

from shared.protocol.audit.entries import EntryDraft
from shared.secrets import SecretDetector

logger = logging.getLogger("nexo.audit")

_MIN_FIELD = 200
"""The smallest length limit of a ledger text field: a redacted text may grow up to it."""


@cache
def _detector() -> SecretDetector:
    return SecretDetector()


def redact_text(text: str) -> str:
    """``text`` with its secrets replaced, never longer than ``max(len(text), 200)`` characters."""
    redacted, rule_ids = _detector().redacted(text)
    if not rule_ids:
        return text
    logger.info(
        "redacted %d kind(s) of secret before writing to the ledger (%s)", len(rule_ids), ", ".join(rule_ids)
    )
    return redacted[: max(len(text), _MIN_FIELD)]


def _redact_value(value: Any) -> Any:
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, list):
        return [_redact_value(item) for item in value]
    if isinstance(value, dict):
        return {key: _redact_value(item) for key, item in value.items()}
    return value


def redact_draft(draft: EntryDraft) -> EntryDraft:
    """The draft with its subject and every string in its body redacted."""
    return draft.model_copy(update={"subject": redact_text(draft.subject), "body": _redact_value(draft.body)})
