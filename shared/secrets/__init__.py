"""The secret detector every process uses: the rule table, scanning and redaction."""

from shared.secrets.detector import Finding, SecretDetector, content_sha256, redact
from shared.secrets.rules import RULE_IDS, RULES, Rule

__all__ = ["RULES", "RULE_IDS", "Finding", "Rule", "SecretDetector", "content_sha256", "redact"]
