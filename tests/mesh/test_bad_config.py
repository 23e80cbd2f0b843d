"""Bad configuration: one clear error per problem, naming the key path and the fix, exit code 1."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.mesh.harness import free_port, nexo, python_server

pytestmark = pytest.mark.scenario


def _config(tmp_path: Path, **changes: object) -> dict[str, object]:
    config: dict[str, object] = {
        "state_dir": str(tmp_path / "state"),
        "servers": {"time": python_server("servers.time")},
        "llm": {
            "providers": {
                "local": {"kind": "openai_compat", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
            }
        },
        "agents": [{"id": "nexo", "model": {"provider": "local"}}],
    }
    config.update(changes)
    return config


def _check(tmp_path: Path, config: dict[str, object]) -> tuple[int, list[str]]:
    path = tmp_path / "agents.yaml"
    path.write_text(yaml.safe_dump(config))
    result = nexo("run", "--check-config", "--config", str(path))
    return result.returncode, [line for line in result.stderr.splitlines() if line.strip()]


def test_an_unknown_key_names_its_path_and_the_allowed_keys(tmp_path: Path) -> None:
    servers = {"time": {**python_server("servers.time"), "comand": "x"}}
    code, lines = _check(tmp_path, _config(tmp_path, servers=servers))
    assert code == 1
    assert len(lines) == 1
    assert "servers.time.comand" in lines[0]
    assert "Fix:" in lines[0]
    assert "command" in lines[0]


def test_a_wrong_type_names_its_path_and_the_expected_type(tmp_path: Path) -> None:
    agents = [{"id": "nexo", "model": {"provider": "local"}, "budgets": {"max_turns": "many"}}]
    code, lines = _check(tmp_path, _config(tmp_path, agents=agents))
    assert code == 1
    assert len(lines) == 1
    assert "agents[0].budgets.max_turns" in lines[0]
    assert "Fix:" in lines[0]


def test_a_missing_environment_variable_names_the_key_and_how_to_set_it(tmp_path: Path) -> None:
    providers = {"local": {"kind": "openai_compat", "base_url": "${NEXO_TEST_UNSET_URL}", "model": "m"}}
    code, lines = _check(tmp_path, _config(tmp_path, llm={"providers": providers}))
    assert code == 1
    assert len(lines) == 1
    assert "llm.providers.local.base_url" in lines[0]
    assert "NEXO_TEST_UNSET_URL" in lines[0]


def test_an_unreachable_server_names_its_key_and_the_fix(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    servers = {"remote": {"transport": "http", "url": url}}
    code, lines = _check(tmp_path, _config(tmp_path, servers=servers))
    assert code == 1
    assert len(lines) == 1
    assert lines[0].startswith(f"{tmp_path / 'agents.yaml'}: servers.remote: cannot reach {url}")
    assert "Fix: start it or correct the url" in lines[0]


def test_an_agent_using_an_undefined_provider_lists_the_defined_ones(tmp_path: Path) -> None:
    code, lines = _check(tmp_path, _config(tmp_path, agents=[{"id": "nexo", "model": {"provider": "cloud"}}]))
    assert code == 1
    assert lines == [
        f"{tmp_path / 'agents.yaml'}: agents[0].model.provider: no provider named 'cloud'. "
        "Fix: use one of: local, or add it under llm.providers"
    ]


def test_a_valid_config_reaches_every_server(tmp_path: Path) -> None:
    path = tmp_path / "agents.yaml"
    path.write_text(yaml.safe_dump(_config(tmp_path)))
    result = nexo("run", "--check-config", "--config", str(path))
    assert (result.returncode, result.stdout) == (0, f"{path}: ok (1 servers reachable)\n")
