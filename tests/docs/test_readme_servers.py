"""README's lists of servers come from the code and compose.yaml, so they cannot drift again."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from orchestrator.cli.serve import BUILT_IN

REPO = Path(__file__).resolve().parents[2]


def _names_in_sentence(opening: str) -> list[str]:
    """The backticked names of the README sentence (up to its first full stop) that starts so."""
    text = " ".join((REPO / "README.md").read_text().split())
    start = text.index(opening)
    sentence = text[start : text.index(". ", start)]
    return re.findall(r"`([a-z_]+)`", sentence)


def test_the_built_in_servers_sentence_names_every_server_nexo_serve_runs() -> None:
    assert sorted(_names_in_sentence("The built-in servers are")) == sorted(BUILT_IN)


def test_make_run_names_the_servers_of_the_built_in_defaults() -> None:
    defaults = yaml.safe_load((REPO / "orchestrator" / "defaults.yaml").read_text())
    assert _names_in_sentence("`make run` creates `.venv`") == list(defaults["servers"])


def test_the_compose_section_names_every_server_service() -> None:
    services = yaml.safe_load((REPO / "compose.yaml").read_text())["services"]
    served = [
        name for name, service in services.items() if service.get("command", [])[:2] == ["nexo", "serve"]
    ]
    assert _names_in_sentence("`compose.yaml` runs the servers") == served
