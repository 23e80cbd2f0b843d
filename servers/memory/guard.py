"""The secret guard: every write path of the memory server passes its text through ``check``.

Three modes. ``block`` (the default) refuses content with a secret in it; ``redact`` stores it with
each secret replaced by ``[REDACTED:<rule id>]``; ``warn`` stores it unchanged and logs. Nothing the
guard raises or logs contains the secret or any part of it: only rule ids, offsets and a SHA-256
of the whole content, which lets an operator match a refusal to the text without seeing the text.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal, get_args

from servers.memory.guard_rules import RULE_IDS, RULES, Rule

GuardMode = Literal["block", "redact", "warn"]
GUARD_MODES: tuple[GuardMode, ...] = get_args(GuardMode)

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Finding:
    rule_id: str
    start: int
    end: int


def content_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


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
    """Scans text with the rule table of ``guard_rules`` and applies one mode to what it finds."""

    def __init__(self, mode: GuardMode = "block", *, disabled_rules: Collection[str] = ()) -> None:
        if mode not in GUARD_MODES:
            raise ValueError(f"unknown secret guard mode {mode!r}; expected one of {', '.join(GUARD_MODES)}")
        unknown = sorted(set(disabled_rules) - RULE_IDS)
        if unknown:
            raise ValueError(
                f"unknown secret guard rule id(s) {', '.join(map(repr, unknown))} in disabled_rules; "
                f"known ids: {', '.join(sorted(RULE_IDS))}"
            )
        self.mode: GuardMode = mode
        self.disabled_rules = frozenset(disabled_rules)
        self._rules: tuple[Rule, ...] = tuple(r for r in RULES if r.id not in self.disabled_rules)

    def scan(self, text: str) -> list[Finding]:
        """Every finding, sorted by position; findings of different rules may overlap."""
        lowered = text.lower()
        found: set[Finding] = set()
        for rule in self._rules:
            if rule.keywords and not any(keyword in lowered for keyword in rule.keywords):
                continue
            secret_group = "secret" in rule.pattern.groupindex
            for match in rule.pattern.finditer(text):
                group = "secret" if secret_group and match.group("secret") is not None else 0
                start, end = match.span(group)
                if rule.validate is not None and not rule.validate(text[start:end]):
                    continue
                found.add(Finding(rule.id, start, end))
        return sorted(found, key=lambda f: (f.start, -f.end, f.rule_id))

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


def redact(text: str, findings: Collection[Finding]) -> str:
    """Replace each finding with ``[REDACTED:<rule id>]``.

    Overlapping findings (a key file matched both as a service-account key and as a PEM block)
    merge into one marker named after the finding that starts first (the longest, on a tie), so
    no fragment of either survives between two markers.
    """
    pieces: list[str] = []
    cursor = 0
    region: Finding | None = None
    for finding in sorted(findings, key=lambda f: (f.start, -f.end, f.rule_id)):
        if region is not None and finding.start < region.end:
            region = Finding(region.rule_id, region.start, max(region.end, finding.end))
            continue
        if region is not None:
            pieces.append(f"[REDACTED:{region.rule_id}]")
            cursor = region.end
        pieces.append(text[cursor : finding.start])
        region = finding
    if region is not None:
        pieces.append(f"[REDACTED:{region.rule_id}]")
        cursor = region.end
    pieces.append(text[cursor:])
    return "".join(pieces)
