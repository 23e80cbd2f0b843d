"""The model-facing tools through the MCP protocol in memory: identity from ``_meta``, bindings kept
apart, useful refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import MCPError

from servers.cron.settings import CronSettings
from shared.protocol.cron import (
    ListParams,
    ListRequest,
    ListResult,
    PollerSpec,
    SyncPollersParams,
    SyncPollersRequest,
    SyncPollersResult,
)
from shared.protocol.policy import CLASSIFICATION_META_KEY
from tests.servers.cron.conftest import ManualClock, ask, call, connected, make_settings, refused

pytestmark = pytest.mark.anyio
README = (Path(__file__).resolve().parents[3] / "servers" / "cron" / "README.md").read_text()
HOME = {"binding": "home", "agent": "nexo", "model": "anthropic/claude-sonnet-4-5"}
WORK = {"binding": "work", "agent": "nexo"}


async def test_every_tool_is_annotated_and_classified(settings: CronSettings, clock: ManualClock) -> None:
    async with connected(settings, clock) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    classes = {name: (tool.meta or {}).get(CLASSIFICATION_META_KEY) for name, tool in tools.items()}
    assert classes == {
        "cron_create": "write",
        "cron_list": "read_only",
        "cron_delete": "write",
        "cron_pause": "write",
        "cron_resume": "write",
        "reminder": "outbound",
    }
    hints = {
        name: (a.read_only_hint, a.destructive_hint, a.open_world_hint)
        for name, tool in tools.items()
        if (a := tool.annotations) is not None
    }
    assert hints == {
        "cron_create": (False, False, False),
        "cron_list": (True, False, False),
        "cron_delete": (False, True, False),
        "cron_pause": (False, False, False),
        "cron_resume": (False, False, False),
        "reminder": (False, False, True),
    }
    assert "misfire" in tools["cron_create"].input_schema["properties"]


async def test_cron_create_returns_the_next_fire_in_utc_and_in_the_entry_s_timezone(
    settings: CronSettings, clock: ManualClock
) -> None:
    async with connected(settings, clock) as client:
        created = await call(
            client,
            "cron_create",
            {"schedule": "cron 0 9 * * mon-fri", "prompt": "Plan my day", "timezone": "Europe/Madrid"},
            **HOME,
        )
        listed = await ask(client, ListRequest(params=ListParams()), ListResult)
    assert created == {
        "id": created["id"],
        "kind": "prompt",
        "schedule": "cron 0 9 * * mon-fri",
        "timezone": "Europe/Madrid",
        "recurring": True,
        "preview": "Plan my day",
        "channel": None,
        "recipient": None,
        "state": "active",
        "misfire": "park",
        "next_fire_utc": "2026-11-23T08:00:00.000000+00:00",
        "next_fire_local": "2026-11-23T09:00:00+01:00",
        "last_fire": None,
    }
    [entry] = listed.entries
    assert (entry.binding, entry.agent, entry.provider, entry.model) == (
        "home",
        "nexo",
        "anthropic",
        "claude-sonnet-4-5",
    )


async def test_a_binding_never_sees_or_changes_another_binding_s_entries(
    settings: CronSettings, clock: ManualClock
) -> None:
    async with connected(settings, clock) as client:
        entry_id = (await call(client, "cron_create", {"schedule": "every 1h", "prompt": "p"}, **HOME))["id"]
        other_list = await call(client, "cron_list", **WORK)
        own_list = await call(client, "cron_list", **HOME)
        messages = [
            await refused(client, tool, {"id": entry_id}, **WORK)
            for tool in ("cron_delete", "cron_pause", "cron_resume")
        ]
        default_list = await call(client, "cron_list")
        still = await call(client, "cron_list", **HOME)
    assert other_list == {"entries": [], "limit": 50}
    assert [e["id"] for e in own_list["entries"]] == [entry_id] == [e["id"] for e in still["entries"]]
    assert default_list["entries"] == []
    for message in messages:
        assert entry_id in message
        assert "'work'" in message
        assert "cron_list" in message


async def test_a_client_without_meta_works_on_the_default_binding(
    settings: CronSettings, clock: ManualClock
) -> None:
    async with connected(settings, clock) as client:
        await call(client, "cron_create", {"schedule": "every 2h", "prompt": "p"})
        listed = await ask(client, ListRequest(params=ListParams(binding="default")), ListResult)
    [entry] = listed.entries
    assert (entry.binding, entry.agent, entry.provider, entry.model) == ("default", "default", None, None)


@pytest.mark.parametrize(
    ("meta", "named"),
    [
        ({"nexo/binding": "Not A Binding"}, "nexo/binding"),
        ({"nexo/agent": 7}, "nexo/agent"),
        ({"nexo/model": "no-slash"}, "nexo/model"),
    ],
)
async def test_malformed_meta_is_refused_as_a_request_error(
    settings: CronSettings, clock: ManualClock, meta: dict[str, object], named: str
) -> None:
    async with connected(settings, clock) as client:
        with pytest.raises(MCPError, match=named):
            await client.call_tool("cron_list", {}, meta=meta)  # type: ignore[arg-type]


async def test_schedules_closer_than_the_minimum_gap_come_back_as_tool_errors(
    settings: CronSettings, clock: ManualClock
) -> None:
    async with connected(settings, clock) as client:
        interval = await refused(client, "cron_create", {"schedule": "every 30s", "prompt": "p"}, **HOME)
        cron = await refused(client, "cron_create", {"schedule": "not a schedule", "prompt": "p"}, **HOME)
        zone = await refused(
            client, "cron_create", {"schedule": "every 1h", "prompt": "p", "timezone": "Mars/Base"}, **HOME
        )
        policy = await refused(
            client, "cron_create", {"schedule": "every 1h", "prompt": "p", "misfire": "later"}, **HOME
        )
        empty = await refused(client, "cron_create", {"schedule": "every 1h", "prompt": "  "}, **HOME)
    assert "every 1m" in interval
    assert "60 s" in interval
    assert "'not a schedule'" in cron
    assert "every 30m" in cron
    assert "'Mars/Base'" in zone
    assert "'later'" in policy
    assert "catch_up_once" in policy
    assert "empty" in empty


async def test_a_binding_holds_at_most_fifty_unfinished_entries(
    settings: CronSettings, clock: ManualClock
) -> None:
    async with connected(settings, clock) as client:
        for n in range(50):
            await call(client, "cron_create", {"schedule": f"{n} * * * *", "prompt": f"p{n}"}, **HOME)
        refusal = await refused(client, "cron_create", {"schedule": "every 1h", "prompt": "one more"}, **HOME)
        elsewhere = await call(client, "cron_create", {"schedule": "every 1h", "prompt": "p"}, **WORK)
        first = (await call(client, "cron_list", **HOME))["entries"][0]["id"]
        await call(client, "cron_delete", {"id": first}, **HOME)
        room_again = await call(client, "cron_create", {"schedule": "every 1h", "prompt": "p"}, **HOME)
    assert "'home'" in refusal
    assert "50" in refusal
    assert "cron_delete" in refusal
    assert elsewhere["state"] == room_again["state"] == "active"


async def test_reminder_takes_one_time_forms_and_refuses_repeating_ones(
    settings: CronSettings, clock: ManualClock
) -> None:
    async with connected(settings, clock) as client:
        later = await call(
            client, "reminder", {"when": "once_after 2h", "text": "Stretch!", "channel": "tg"}, **HOME
        )
        bare = await call(
            client,
            "reminder",
            {"when": "09:00", "text": "Pills", "channel": "tg", "timezone": "Europe/Madrid"},
            **HOME,
        )
        stamp = await call(
            client, "reminder", {"when": "2026-11-30T10:00:00Z", "text": "x", "channel": "tg"}, **HOME
        )
        repeating = await refused(
            client, "reminder", {"when": "every 1h", "text": "x", "channel": "tg"}, **HOME
        )
        nonsense = await refused(
            client, "reminder", {"when": "someday", "text": "x", "channel": "tg"}, **HOME
        )
    assert (later["kind"], later["recurring"], later["next_fire_utc"]) == (
        "reminder",
        False,
        "2026-11-21T14:00:00.000000+00:00",
    )
    assert bare["next_fire_local"] == "2026-11-22T09:00:00+01:00"
    assert stamp["schedule"] == "once_at 2026-11-30T10:00:00Z"
    assert "repeats" in repeating
    assert "once_after 2h" in repeating
    assert "'someday'" in nonsense


async def test_pause_resume_and_delete_act_on_the_caller_s_entry(
    settings: CronSettings, clock: ManualClock
) -> None:
    async with connected(settings, clock) as client:
        entry_id = (await call(client, "cron_create", {"schedule": "every 1h", "prompt": "p"}, **HOME))["id"]
        paused = await call(client, "cron_pause", {"id": entry_id}, **HOME)
        resumed = await call(client, "cron_resume", {"id": entry_id}, **HOME)
        deleted = await call(client, "cron_delete", {"id": entry_id}, **HOME)
        unknown = await refused(client, "cron_delete", {"id": entry_id}, **HOME)
    assert (paused["state"], resumed["state"]) == ("paused", "active")
    assert deleted == {"id": entry_id, "deleted": True}
    assert f"no cron entry {entry_id!r}" in unknown
    assert "cron_list" in unknown


async def test_config_owned_pollers_cannot_be_changed_from_a_tool(tmp_path: Path, clock: ManualClock) -> None:
    settings = make_settings(tmp_path)
    async with connected(settings, clock) as client:
        await ask(
            client,
            SyncPollersRequest(
                params=SyncPollersParams(
                    binding="home",
                    agent="nexo",
                    pollers=[PollerSpec(name="inbox", schedule="every 15m", prompt="p")],
                )
            ),
            SyncPollersResult,
        )
        listed = await call(client, "cron_list", **HOME)
        refusals = [
            await refused(client, tool, {"id": "poller:home:inbox"}, **HOME)
            for tool in ("cron_delete", "cron_pause", "cron_resume")
        ]
    assert [(e["id"], e["kind"]) for e in listed["entries"]] == [("poller:home:inbox", "agent_turn")]
    assert all("owned by the configuration" in message for message in refusals)


async def test_every_tool_is_in_the_readme(settings: CronSettings, clock: ManualClock) -> None:
    async with connected(settings, clock) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
    assert len(names) == 6
    assert [name for name in names if f"`{name}(" not in README] == []
