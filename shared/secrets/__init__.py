"""The secret detector every process uses: the rule table, scanning and redaction."""

from shared.secrets.detector import Finding, SecretDetector, content_sha256, redact
from shared.secrets.rule import Rule
from shared.secrets.rules import RULE_IDS, RULES

__all__ = ["RULES", "RULE_IDS", "Finding", "Rule", "SecretDetector", "content_sha256", "redact"]
