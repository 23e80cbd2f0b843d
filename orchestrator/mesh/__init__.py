"""One supervised MCP client per configured server, and the combined tool catalog.

The server settings load with the package; the clients, the catalog and the mesh on first use
(PEP 562): reading a config needs the settings, not the MCP SDK behind the clients.
"""

from typing import TYPE_CHECKING

from orchestrator.mesh.config import HttpServerConfig, ServerConfig, StdioServerConfig, SupervisionConfig
from shared.lazy import lazy_names

if TYPE_CHECKING:
    from orchestrator.mesh.catalog import Catalog, CatalogError, CatalogTool
    from orchestrator.mesh.connection import ServerConnection
    from orchestrator.mesh.errors import ServerUnavailable, describe_error
    from orchestrator.mesh.mesh import Mesh
    from orchestrator.mesh.status import ServerSnapshot, ServerState

_MACHINERY = {
    "Catalog": "orchestrator.mesh.catalog",
    "CatalogError": "orchestrator.mesh.catalog",
    "CatalogTool": "orchestrator.mesh.catalog",
    "Mesh": "orchestrator.mesh.mesh",
    "ServerConnection": "orchestrator.mesh.connection",
    "ServerSnapshot": "orchestrator.mesh.status",
    "ServerState": "orchestrator.mesh.status",
    "ServerUnavailable": "orchestrator.mesh.errors",
    "describe_error": "orchestrator.mesh.errors",
}


__getattr__ = lazy_names(__name__, _MACHINERY)


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
