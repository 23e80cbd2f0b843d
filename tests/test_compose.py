"""compose.yaml and the orchestrator config it ships are valid and wire every server securely."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import compose  # type: ignore[import-untyped]  # ships the binary, no type information

from orchestrator.cli.serve import BUILT_IN
from orchestrator.config.loading import load
from orchestrator.mesh.config import HttpServerConfig

REPO = Path(__file__).resolve().parents[1]
COMPOSE_BIN = Path(compose.__file__).parent / "docker-compose"
TOKEN_PATH = "/run/nexo/token"


def compose_config() -> dict[str, Any]:
    # The bundled Compose v2 binary validates without a Docker engine.
    result = subprocess.run(
        [str(COMPOSE_BIN), "-f", str(REPO / "compose.yaml"), "config", "--format", "json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_every_server_service_serves_a_built_in_over_http_with_the_token_and_its_host_allowed() -> None:
    services = compose_config()["services"]
    servers = {name: s for name, s in services.items() if s["command"][:2] == ["nexo", "serve"]}
    assert sorted(servers) == ["audit", "cron", "memory", "pairing", "time"]
    for name, service in servers.items():
        assert service["command"] == ["nexo", "serve", name, "--http", "0.0.0.0:8080"]
        assert name in BUILT_IN
        assert service["environment"]["NEXO_SERVER_TOKEN_FILE"] == TOKEN_PATH
        assert f"{name}:*" in service["environment"]["NEXO_SERVER_ALLOWED_HOSTS"].split(",")
        assert "ports" not in service, "servers are reachable only inside the compose network"
        assert service["healthcheck"]["test"][-1].endswith(
            "urlopen('http://127.0.0.1:8080/healthz', timeout=3)"
        )
    orchestrator = services["orchestrator"]
    assert sorted(orchestrator["depends_on"]) == ["audit", "cron", "memory", "pairing", "time"]
    assert all(dep["condition"] == "service_healthy" for dep in orchestrator["depends_on"].values())


def test_the_orchestrator_config_reaches_each_service_by_name_with_the_generated_token(
    tmp_path: Path,
) -> None:
    token = tmp_path / "token"
    token.write_text("compose-token")
    token.chmod(0o600)
    text = (REPO / "config" / "compose.yaml").read_text().replace(TOKEN_PATH, str(token))
    path = tmp_path / "agents.yaml"
    path.write_text(text)
    config = load(path)
    http = {name: s for name, s in config.servers.items() if isinstance(s, HttpServerConfig)}
    assert sorted(http) == ["audit", "cron", "memory", "pairing", "time"]
    for name, server in http.items():
        assert server.url == f"http://{name}:8080/mcp"
        assert server.token is not None
        assert server.token.get_secret_value() == "compose-token"
    assert config.servers["console"].transport == "stdio"
    assert str(config.state_path) == "/var/lib/nexo"


def test_the_image_ships_the_compose_config_and_runs_as_an_unprivileged_user() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "COPY config/compose.yaml /etc/nexo/agents.yaml" in dockerfile
    assert "USER nexo" in dockerfile
    services = compose_config()["services"]
    assert {s.get("user") for s in services.values()} == {"10001"}
