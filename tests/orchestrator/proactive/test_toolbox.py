"""Tools on demand for ticks: a few tools offered, the rest named and loaded when the tick asks."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.mesh import Catalog, CatalogTool
from orchestrator.proactive.toolbox import LOAD_TOOLS_NAME, on_demand
from orchestrator.tools.local import GoalContext, LocalToolError

pytestmark = pytest.mark.anyio
CONTEXT = GoalContext("nexo", "tick-1")


def _tool(qualified: str) -> CatalogTool:
    server, _, name = qualified.rpartition("__")
    return CatalogTool(
        server=server,
        name=name,
        qualified=qualified,
        description=f"{name} does things",
        input_schema={"type": "object", "properties": {"x": {"type": "string"}}},
        read_only=True,
        destructive=False,
    )


FULL = Catalog(
    [
        _tool(name)
        for name in ("memory__recall", "memory__remember", "cron__cron_create", "time__now", "sleep")
    ]
)


def _names(catalog: Catalog) -> list[str]:
    return sorted(tool.qualified for tool in catalog)


async def test_a_tick_catalog_offers_sleep_and_load_tools_and_names_the_rest() -> None:
    catalog, loader = on_demand(FULL, [], always=["sleep"])
    assert _names(catalog) == ["load_tools", "sleep"]
    assert loader.name == LOAD_TOOLS_NAME
    assert loader.description.endswith(
        "Tools you can load: cron__cron_create, memory__recall, memory__remember, time__now."
    )


async def test_configured_patterns_are_offered_up_front() -> None:
    catalog, _ = on_demand(FULL, ["memory__*"], always=["sleep"])
    assert _names(catalog) == ["load_tools", "memory__recall", "memory__remember", "sleep"]


async def test_loading_by_pattern_offers_those_tools_from_the_next_step() -> None:
    catalog, loader = on_demand(FULL, [], always=["sleep"])
    answer = await loader.handler(CONTEXT, {"names": ["memory__*"]})
    assert answer == "Loaded memory__recall, memory__remember: call them from your next step."
    assert _names(catalog) == ["load_tools", "memory__recall", "memory__remember", "sleep"]
    again = await loader.handler(CONTEXT, {"names": ["memory__recall"]})
    assert again == "Those tools are already loaded: call them."


async def test_a_tool_called_without_loading_is_loaded_by_the_call() -> None:
    catalog, _ = on_demand(FULL, [], always=["sleep"])
    tool = catalog.get("time__now")
    assert tool is not None
    assert tool.qualified == "time__now"
    assert "time__now" in _names(catalog)
    assert catalog.get("nope__missing") is None


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"names": ["web__*"]}, "no tool matches 'web__*'; the tools you can load are: cron__cron_create, "),
        ({"names": []}, "names must be a non-empty list of tool names or patterns"),
        ({"names": "memory__recall"}, "names must be a non-empty list"),
    ],
)
async def test_a_bad_load_says_what_can_be_loaded(arguments: dict[str, Any], message: str) -> None:
    _, loader = on_demand(FULL, [], always=["sleep"])
    with pytest.raises(LocalToolError) as raised:
        await loader.handler(CONTEXT, arguments)
    assert str(raised.value).startswith(message)
