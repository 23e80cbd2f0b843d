"""One supervised MCP client per configured server, and the combined tool catalog."""

from orchestrator.mesh.catalog import Catalog, CatalogError, CatalogTool
from orchestrator.mesh.config import HttpServerConfig, ServerConfig, StdioServerConfig, SupervisionConfig
from orchestrator.mesh.connection import (
    ServerConnection,
    ServerSnapshot,
    ServerState,
    ServerUnavailable,
    describe_error,
)
from orchestrator.mesh.mesh import Mesh

__all__ = [
    "Catalog",
    "CatalogError",
    "CatalogTool",
    "HttpServerConfig",
    "Mesh",
    "ServerConfig",
    "ServerConnection",
    "ServerSnapshot",
    "ServerState",
    "ServerUnavailable",
    "StdioServerConfig",
    "SupervisionConfig",
    "describe_error",
]
