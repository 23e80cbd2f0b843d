"""The state directory one-shot commands find without validating the whole config: always the one the
full load would give, and the full load's own report when the config cannot be read."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.cli.locate import state_dir
from orchestrator.config.loading import load

AGENTS = "agents:\n  - id: nexo\n    model: {provider: fake}\n"
LLM = "llm:\n  providers:\n    fake: {kind: openai_compat, base_url: 'http://127.0.0.1:9/v1', model: m}\n"


def _config(tmp_path: Path, state_line: str) -> Path:
    path = tmp_path / "agents.yaml"
    path.write_text(state_line + LLM + AGENTS)
    return path


@pytest.mark.parametrize(
    ("state_line", "env"),
    [
        ("state_dir: /srv/nexo\n", {}),
        ("state_dir: ${ROOT}/state\n", {"ROOT": "/data"}),
        ("state_dir: ${NEXO_STATE_DIR:-~/.local/state/nexo}\n", {}),
        ("state_dir: ${NEXO_STATE_DIR:-~/.local/state/nexo}\n", {"NEXO_STATE_DIR": "/run/nexo"}),
        ("state_dir: /srv/nexo\n", {"NEXO_STATE_DIR": "/run/nexo"}),
        ("", {}),
        ("", {"NEXO_STATE_DIR": "~/elsewhere"}),
    ],
)
def test_the_state_directory_is_the_one_the_full_load_gives(
    tmp_path: Path, state_line: str, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("NEXO_CONFIG", raising=False)
    path = _config(tmp_path, state_line)
    assert state_dir(str(path), env) == load(path, env).state_path


def test_the_built_in_defaults_give_the_same_state_directory_as_the_full_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NEXO_CONFIG", raising=False)
    env = {"NEXO_STATE_DIR": "/var/lib/nexo-test"}
    assert state_dir(None, env) == load(None, env).state_path == Path("/var/lib/nexo-test")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("state_dir: [unclosed\n", "invalid YAML"),
        ("state_dir: ${NOT_SET_ANYWHERE}\n" + LLM + AGENTS, "NOT_SET_ANYWHERE"),
    ],
)
def test_a_config_it_cannot_read_is_reported_by_the_full_load(
    tmp_path: Path, text: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "agents.yaml"
    path.write_text(text)
    with pytest.raises(SystemExit) as exited:
        state_dir(str(path), {})
    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert str(path) in err
    assert problem in err


def test_a_missing_config_file_is_reported_with_its_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(SystemExit):
        state_dir(str(missing), {})
    assert f"{missing}" in capsys.readouterr().err
