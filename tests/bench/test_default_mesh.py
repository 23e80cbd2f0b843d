"""The benches that say "the default mesh" start the servers `nexo run` starts with no --config."""

from __future__ import annotations

from bench.mesh_run import default_servers
from orchestrator.config.loading import load
from orchestrator.mesh import StdioServerConfig


def test_the_bench_mesh_has_every_server_of_the_built_in_defaults() -> None:
    built_in = load(None, env={"HOME": "/nonexistent"})
    assert set(default_servers()) == set(built_in.servers)
    for name, module in default_servers().items():
        server = built_in.servers[name]
        assert isinstance(server, StdioServerConfig)
        assert list(server.args) == ["-m", module]
