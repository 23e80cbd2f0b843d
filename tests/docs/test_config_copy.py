"""config/agents.yaml is the built-in defaults with a header of its own that says how to use it."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _split(path: Path) -> tuple[str, str]:
    """(the leading comment block, everything after it)."""
    lines = path.read_text().splitlines(keepends=True)
    header = 0
    while lines[header].startswith("#"):
        header += 1
    return "".join(lines[:header]), "".join(lines[header:])


def test_the_example_config_is_the_defaults_and_tells_how_to_start_with_it() -> None:
    header, body = _split(REPO / "config" / "agents.yaml")
    _, defaults = _split(REPO / "orchestrator" / "defaults.yaml")
    assert body == defaults
    assert "nexo run --config config/agents.yaml" in header
    assert "Copy it to config/agents.yaml" not in header
