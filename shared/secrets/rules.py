"""The secret guard's rule table: one precise pattern per credential format.

Patterns follow the gitleaks approach: anchor on what the issuer makes distinctive (a prefix, a
fixed length, an embedded marker such as OpenAI's ``T3BlbkFJ``), and fall back to a keyword anchor
(``aws_secret_access_key = ...``) only for formats that have no shape of their own.

The table is kept by family: :mod:`~shared.secrets.issuer_rules` (formats an issuer made
distinctive), :mod:`~shared.secrets.prose_rules` (credentials given in words) and
:mod:`~shared.secrets.format_rules` (PEM keys, JWTs); :mod:`~shared.secrets.rule` holds the
``Rule`` type and the pattern pieces, :mod:`~shared.secrets.validators` the checks on a match.
"""

from __future__ import annotations

from shared.secrets.format_rules import FORMAT_RULES
from shared.secrets.issuer_rules import ISSUER_RULES
from shared.secrets.prose_rules import PROSE_RULES
from shared.secrets.rule import Rule

RULES: tuple[Rule, ...] = (*ISSUER_RULES, *PROSE_RULES, *FORMAT_RULES)
"""Every rule, in a stable order. Ids are part of the interface (config, logs, redaction markers)."""

RULE_IDS: frozenset[str] = frozenset(rule.id for rule in RULES)
