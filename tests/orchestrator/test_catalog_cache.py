"""Every goal asks the mesh for its tools: the catalog is built again only when a server's tool list
changed (a connect or a health check's listing brings a new list) or the filter did."""

from __future__ import annotations

import sys
from typing import Any, cast

from mcp import types

from orchestrator.mesh import Mesh
from orchestrator.mesh.config import StdioServerConfig


def tool(name: str) -> types.Tool:
    return types.Tool(name=name, input_schema={"type": "object"})


def ready(mesh: Mesh, name: str, tools: list[types.Tool]) -> None:
    connection = mesh.connections[name]
    connection._client = cast(Any, object())
    connection.tools = tools


def test_the_catalog_is_kept_until_a_tool_list_or_the_filter_changes() -> None:
    config = StdioServerConfig(transport="stdio", command=sys.executable, args=["-m", "servers.time"])
    mesh = Mesh({"a": config, "b": config})
    ready(mesh, "a", [tool("x"), tool("y")])
    first = mesh.catalog()
    assert first.names() == ["a__x", "a__y"]
    assert mesh.catalog() is first

    ready(mesh, "b", [tool("z")])  # a server connects
    second = mesh.catalog()
    assert second.names() == ["a__x", "a__y", "b__z"]
    assert mesh.catalog() is second

    mesh.connections["a"].tools = [tool("x")]  # listed again: a tool is gone
    assert mesh.catalog().names() == ["a__x", "b__z"]

    assert mesh.catalog(allowed=["b__*"]).names() == ["b__z"]
    assert mesh.catalog(hidden={("a", "x")}).names() == ["b__z"]

    mesh.connections["b"]._client = None
    assert mesh.catalog().names() == ["a__x"]
