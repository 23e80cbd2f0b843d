"""Finding secrets in text and redacting them, with the rule table of :mod:`shared.secrets.rules`.

One detector for every process that must keep secrets out of what it stores or sends: the memory
server's guard, the audit ledger, and the orchestrator's outbound guard. Nothing here logs or
raises with the secret in it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from dataclasses import dataclass

from shared.secrets.rule import Rule
from shared.secrets.rules import RULE_IDS, RULES


@dataclass(frozen=True, slots=True)
class Finding:
    rule_id: str
    start: int
    end: int


def content_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class SecretDetector:
    """Scans text with every rule that is not switched off."""

    def __init__(self, *, disabled_rules: Collection[str] = ()) -> None:
        unknown = sorted(set(disabled_rules) - RULE_IDS)
        if unknown:
            raise ValueError(
                f"unknown secret guard rule id(s) {', '.join(map(repr, unknown))} in disabled_rules; "
                f"known ids: {', '.join(sorted(RULE_IDS))}"
            )
        self.disabled_rules = frozenset(disabled_rules)
        self._rules: tuple[Rule, ...] = tuple(r for r in RULES if r.id not in self.disabled_rules)
        # Each keyword is looked up once per text, not once per rule that lists it.
        self._keywords = tuple(sorted({keyword for rule in self._rules for keyword in rule.keywords}))

    def scan(self, text: str) -> list[Finding]:
        """Every finding, sorted by position; findings of different rules may overlap."""
        lowered = text.lower()
        found: set[Finding] = set()
        present = {keyword for keyword in self._keywords if keyword in lowered}
        for rule in self._rules:
            if rule.keywords and present.isdisjoint(rule.keywords):
                continue
            secret_group = "secret" in rule.pattern.groupindex
            for match in rule.pattern.finditer(text):
                group = "secret" if secret_group and match.group("secret") is not None else 0
                start, end = match.span(group)
                if rule.validate is not None and not rule.validate(text[start:end]):
                    continue
                found.add(Finding(rule.id, start, end))
        return sorted(found, key=lambda f: (f.start, -f.end, f.rule_id))

    def redacted(self, text: str) -> tuple[str, tuple[str, ...]]:
        """The text with every secret replaced by ``[REDACTED:<rule id>]``, and the rule ids found."""
        findings = self.scan(text)
        if not findings:
            return text, ()
        return redact(text, findings), tuple(dict.fromkeys(f.rule_id for f in findings))


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
