"""The secret guard: every write path of the memory server passes its text through ``check``.

Three modes. ``block`` (the default) refuses content with a secret in it; ``redact`` stores it with
each secret replaced by ``[REDACTED:<rule id>]``; ``warn`` stores it unchanged and logs. Nothing the
guard raises or logs contains the secret or any part of it: only rule ids, offsets and a SHA-256
of the whole content, which lets an operator match a refusal to the text without seeing the text.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Literal, get_args

from shared.secrets import SecretDetector, content_sha256, redact
from shared.secrets.detector import Finding

GuardMode = Literal["block", "redact", "warn"]
GUARD_MODES: tuple[GuardMode, ...] = get_args(GuardMode)

logger = logging.getLogger(__name__)


class SecretBlocked(Exception):
    """Content was refused because it holds a secret. The message never quotes the content."""

    def __init__(self, rule_ids: tuple[str, ...], content_sha256: str, where: str) -> None:
        self.rule_ids = rule_ids
        self.content_sha256 = content_sha256
        self.where = where
        super().__init__(
            f"refused to store this {where} content: it contains what looks like a secret "
            f"({', '.join(rule_ids)}; content sha256:{content_sha256}). "
            "Remove the secret and store the rest, or store a reference to where the secret lives "
            "instead of its value (for example the environment variable name GITHUB_TOKEN or the "
            "secret manager entry), then try again."
        )


class SecretGuard:
    """Scans text with the shared secret detector and applies one mode to what it finds."""

    def __init__(self, mode: GuardMode = "block", *, disabled_rules: Collection[str] = ()) -> None:
        if mode not in GUARD_MODES:
            raise ValueError(f"unknown secret guard mode {mode!r}; expected one of {', '.join(GUARD_MODES)}")
        self._detector = SecretDetector(disabled_rules=disabled_rules)
        self.mode: GuardMode = mode
        self.disabled_rules = self._detector.disabled_rules

    def scan(self, text: str) -> list[Finding]:
        """Every finding, sorted by position; findings of different rules may overlap."""
        return self._detector.scan(text)

    def check(self, text: str, *, where: str) -> str:
        """The text to store: unchanged, redacted, or refused with ``SecretBlocked``."""
        findings = self.scan(text)
        if not findings:
            return text
        rule_ids = tuple(dict.fromkeys(f.rule_id for f in findings))
        if self.mode == "block":
            raise SecretBlocked(rule_ids, content_sha256(text), where)
        if self.mode == "redact":
            logger.info("%s: redacted %d secret(s) (%s)", where, len(findings), ", ".join(rule_ids))
            return redact(text, findings)
        logger.warning(
            "%s: stored content that looks like it holds a secret (%s; content sha256:%s) "
            "because the secret guard is in warn mode",
            where,
            ", ".join(rule_ids),
            content_sha256(text),
        )
        return text
