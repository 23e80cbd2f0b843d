"""How configuration problems are reported: file, key path, what is wrong and the fix."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

KeySegment = str | int


def format_key_path(segments: Sequence[KeySegment]) -> str:
    """`("agents", 0, "model")` -> `"agents[0].model"`, the way a user would point at the key."""
    text = ""
    for segment in segments:
        if isinstance(segment, int):
            text += f"[{segment}]"
        else:
            text += f".{segment}" if text else segment
    return text


@dataclass(frozen=True)
class ConfigProblem:
    file: str
    key_path: str
    message: str
    fix: str

    def __str__(self) -> str:
        return f"{self.file}: {self.key_path or '(top level)'}: {self.message}. Fix: {self.fix}"


class ConfigError(Exception):
    """Every problem found in one configuration, one per line."""

    def __init__(self, problems: Sequence[ConfigProblem]) -> None:
        self.problems: tuple[ConfigProblem, ...] = tuple(problems)
        super().__init__(self.problems)

    def __str__(self) -> str:
        return "\n".join(str(problem) for problem in self.problems)
