"""A rule of the secret guard, and the pattern pieces the rule tables are written with.

A rule may name a ``secret`` group: then only that group is the finding (the keyword around it
stays readable after redaction). ``keywords`` is a cheap prefilter: the regex runs only when one of
them occurs in the lowercased text. ``validate`` rejects matches whose content cannot be the secret
(a git SHA after "aws secret", a ``eyJ...`` string that does not decode to a JWT header). Every
pattern is compiled with ``re.ASCII`` so ``\\w``, ``\\d`` and the boundaries mean what the formats mean.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

# Token boundaries: a token must not be glued to more token characters on either side, so a
# near-miss of the wrong length (one character more or less) is not reported.
START = r"(?<![A-Za-z0-9])"
END = r"(?![A-Za-z0-9])"
END_URLSAFE = r"(?![A-Za-z0-9_\-])"
# "key = value", "key: value", '"key": "value"', "key => value", "key is value".
ASSIGN = r"""["']?\s*(?:=>|:=|[:=]|\s(?:is\s)?)\s*["']?"""


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    description: str
    pattern: re.Pattern[str]
    keywords: tuple[str, ...] = ()
    validate: Callable[[str], bool] | None = None


def rule(
    rule_id: str,
    description: str,
    regex: str,
    keywords: tuple[str, ...] = (),
    validate: Callable[[str], bool] | None = None,
) -> Rule:
    return Rule(rule_id, description, re.compile(regex, re.ASCII), keywords, validate)
