"""The control plane (``nexo/cron/...``) and the event log (``nexo/events/...``), through the MCP
protocol in memory, with the scheduler running in the background at the test's pace."""

from __future__ import annotations

from pathlib import Path

import mcp_types as types
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from servers.cron.control import METHODS, as_mcp_error
from servers.cron.errors import OwnedByConfig
from servers.cron.jitter import JitterKnobs
from servers.cron.server import build_server
from servers.cron.settings import CronSettings
from shared.protocol.cron import (
    ENTRY_NOT_FOUND,
    FIRE_NOT_FOUND,
    STATE_REFUSED,
    ConfigureParams,
    ConfigureRequest,
    ConfigureResult,
    DropRequest,
    DropResult,
    EntryIdParams,
    EntryResult,
    FireOutcomeParams,
    FireOutcomeRequest,
    FireOutcomeResult,
    FireParams,
    FirePayload,
    FireRequest,
    FireResult,
    FiresParams,
    FiresRequest,
    FiresResult,
    ListParams,
    ListRequest,
    ListResult,
    PauseRequest,
    PollerSpec,
    ResumeRequest,
    SyncPollersParams,
    SyncPollersRequest,
    SyncPollersResult,
)
from shared.protocol.events import AckParams, AckRequest, AckResult, PullParams, PullRequest, PullResult
from tests.servers.cron.conftest import ManualClock, Pacer, ask, at, call, connected, stamp

pytestmark = pytest.mark.anyio
HOME = {"binding": "home", "agent": "nexo"}


async def create(client: Client, schedule: str = "every 1h", **meta: str) -> str:
    return str(
        (await call(client, "cron_create", {"schedule": schedule, "prompt": "p"}, **(meta or HOME)))["id"]
    )


async def pull(client: Client, wait_ms: int = 0) -> PullResult:
    return await ask(client, PullRequest(params=PullParams(wait_ms=wait_ms)), PullResult)


async def sync(client: Client, *pollers: PollerSpec) -> SyncPollersResult:
    params = SyncPollersParams(binding="home", agent="nexo", pollers=list(pollers))
    return await ask(client, SyncPollersRequest(params=params), SyncPollersResult)


def outcome(result: SyncPollersResult) -> tuple[list[str], ...]:
    return result.created, result.updated, result.unchanged, result.deleted


async def test_the_extensions_are_advertised_in_both_protocol_eras(
    settings: CronSettings, clock: ManualClock
) -> None:
    expected = {"methods": list(METHODS), "event_kinds": ["cron_fire", "cron_missed"]}
    async with connected(settings, clock) as modern:
        extensions = modern.server_capabilities.extensions or {}
    async with Client(build_server(settings, clock=clock, run_scheduler=False), mode="legacy") as legacy:
        experimental = legacy.server_capabilities.experimental or {}
    assert extensions["nexo/cron"] == experimental["nexo/cron"] == expected
    assert (
        extensions["nexo/events"]["kinds"]
        == experimental["nexo/events"]["kinds"]
        == ["cron_fire", "cron_missed"]
    )
    assert len(METHODS) == 9
    assert all(method.startswith("nexo/cron/") for method in METHODS)


async def test_a_fire_travels_from_the_schedule_to_the_event_log_and_back(
    settings: CronSettings, clock: ManualClock
) -> None:
    pacer = Pacer()
    async with connected(settings, clock, pacer=pacer) as client:
        await pacer.parked()
        created = await call(
            client, "reminder", {"when": "once_after 2m", "text": "tea", "channel": "tg"}, **HOME
        )
        await pacer.step()
        before = await pull(client)
        clock.advance(minutes=2)
        await pacer.step()
        pulled = await pull(client, wait_ms=1_000)
        [event] = pulled.events
        payload = FirePayload.model_validate(event.payload)
        acked = await ask(client, AckRequest(params=AckParams(seqs=[event.seq])), AckResult)
        reported = await ask(
            client,
            FireOutcomeRequest(params=FireOutcomeParams(fire_id=payload.fire_id, outcome="done", attempt=1)),
            FireOutcomeResult,
        )
        after = await pull(client)
        listed = await ask(client, ListRequest(params=ListParams(include_finished=True)), ListResult)
    assert before.events == []
    assert after.events == []
    assert pacer.requested[:3] == [settings.max_sleep_s, 120.0, settings.max_sleep_s]
    assert (event.kind, event.dedupe_key) == ("cron_fire", f"fire:{created['id']}:{stamp(at(12, 2))}:1")
    assert (payload.kind, payload.text, payload.channel, payload.due_at) == (
        "reminder",
        "tea",
        "tg",
        stamp(at(12, 2)),
    )
    assert acked.acked == 1
    assert (reported.fire.status, reported.entry.state, reported.entry.last_fire) == ("done", "done", "done")
    assert [(e.id, e.state) for e in listed.entries] == [(created["id"], "done")]


async def test_list_pause_resume_and_drop_reach_every_binding(
    settings: CronSettings, clock: ManualClock
) -> None:
    async with connected(settings, clock) as client:
        home = await create(client)
        work = await create(client, binding="work", agent="nexo")
        everyone = await ask(client, ListRequest(params=ListParams()), ListResult)
        only_work = await ask(client, ListRequest(params=ListParams(binding="work")), ListResult)
        paused = await ask(client, PauseRequest(params=EntryIdParams(id=work)), EntryResult)
        resumed = await ask(client, ResumeRequest(params=EntryIdParams(id=work)), EntryResult)
        dropped = await ask(client, DropRequest(params=EntryIdParams(id=home)), DropResult)
        with pytest.raises(MCPError) as unknown:
            await ask(client, PauseRequest(params=EntryIdParams(id=home)), EntryResult)
        left = await ask(client, ListRequest(params=ListParams()), ListResult)
    assert sorted(e.id for e in everyone.entries) == sorted([home, work])
    assert [e.id for e in only_work.entries] == [work]
    assert (paused.entry.state, resumed.entry.state) == ("paused", "active")
    assert (dropped.id, dropped.dropped) == (home, True)
    assert unknown.value.error.code == ENTRY_NOT_FOUND
    assert home in unknown.value.error.message
    assert [e.id for e in left.entries] == [work]


async def test_a_manual_fire_and_its_outcome_show_in_the_fire_history(
    settings: CronSettings, clock: ManualClock
) -> None:
    async with connected(settings, clock) as client:
        entry_id = await create(client)
        clock.advance(minutes=5)
        fired = await ask(client, FireRequest(params=FireParams(id=entry_id)), FireResult)
        [event] = (await pull(client)).events
        failed = await ask(
            client,
            FireOutcomeRequest(
                params=FireOutcomeParams(fire_id=fired.fire.id, outcome="failed", error="boom")
            ),
            FireOutcomeResult,
        )
        history = await ask(client, FiresRequest(params=FiresParams(entry_id=entry_id)), FiresResult)
        recent = await ask(
            client, FiresRequest(params=FiresParams(since="2026-11-21T12:05:00Z")), FiresResult
        )
        none = await ask(
            client, FiresRequest(params=FiresParams(since="2026-11-21T12:06:00+00:00")), FiresResult
        )
        with pytest.raises(MCPError) as bad_since:
            await ask(client, FiresRequest(params=FiresParams(since="yesterday")), FiresResult)
        with pytest.raises(MCPError) as unknown:
            await ask(
                client,
                FireOutcomeRequest(params=FireOutcomeParams(fire_id=99, outcome="done")),
                FireOutcomeResult,
            )
    assert (fired.fire.manual, fired.fire.slot, fired.fire.status) == (True, stamp(at(12, 5)), "delivered")
    assert event.payload["manual"] is True
    assert event.payload["reason"] == "manual"
    assert (failed.fire.status, failed.fire.error, failed.fire.retry_at) == ("failed", "boom", None)
    assert failed.entry.state == "active"
    assert [f.id for f in history.fires] == [f.id for f in recent.fires] == [fired.fire.id]
    assert none.fires == []
    assert bad_since.value.error.code == types.INVALID_PARAMS
    assert "'yesterday'" in bad_since.value.error.message
    assert unknown.value.error.code == FIRE_NOT_FOUND
    assert "nexo/cron/fires" in unknown.value.error.message


async def test_configure_changes_the_jitter_at_run_time_and_keeps_it(
    settings: CronSettings, clock: ManualClock
) -> None:
    async with connected(settings, clock) as client:
        entry_id = await create(client, "0 * * * *")
        configured = await ask(
            client, ConfigureRequest(params=ConfigureParams(jitter={"enabled": True})), ConfigureResult
        )
        with pytest.raises(MCPError) as bad:
            await ask(
                client, ConfigureRequest(params=ConfigureParams(jitter={"loudness": 11})), ConfigureResult
            )
        [moved] = (await ask(client, ListRequest(params=ListParams()), ListResult)).entries
    async with connected(settings, clock) as reconnected:
        [kept] = (await ask(reconnected, ListRequest(params=ListParams()), ListResult)).entries
    assert configured.jitter["enabled"] is True
    assert configured.rescheduled == 1
    assert bad.value.error.code == types.INVALID_PARAMS
    assert "loudness" in bad.value.error.message
    assert moved.id == entry_id
    assert moved.next_slot == stamp(at(13))
    assert moved.next_due != moved.next_slot
    assert kept.next_due == moved.next_due


async def test_sync_pollers_upserts_the_binding_s_pollers_and_deletes_the_rest(
    settings: CronSettings, clock: ManualClock
) -> None:
    inbox = PollerSpec(name="inbox", schedule="every 15m", prompt="check the inbox")
    news = PollerSpec(name="news", schedule="0 8 * * *", timezone="Europe/Madrid", prompt="news")
    async with connected(settings, clock) as client:
        first = await sync(client, inbox, news)
        clock.advance(minutes=3)
        second = await sync(client, inbox.model_copy(update={"prompt": "check the inbox twice"}), news)
        third = await sync(client, inbox.model_copy(update={"prompt": "check the inbox twice"}))
        [entry] = (await ask(client, ListRequest(params=ListParams(binding="home")), ListResult)).entries
        fast = PollerSpec(name="x", schedule="every 10s", prompt="p")
        once = PollerSpec(name="y", schedule="once_after 1h", prompt="p")
        checked = await ask(
            client,
            SyncPollersRequest(
                params=SyncPollersParams(binding="home", agent="nexo", pollers=[fast], dry_run=True)
            ),
            SyncPollersResult,
        )
        refused = await sync(client, inbox.model_copy(update={"prompt": "check the inbox twice"}), fast, once)
        dropped = await ask(client, DropRequest(params=EntryIdParams(id="poller:home:inbox")), DropResult)
    assert outcome(first) == (["poller:home:inbox", "poller:home:news"], [], [], [])
    assert outcome(second) == ([], ["poller:home:inbox"], ["poller:home:news"], [])
    assert outcome(third) == ([], [], ["poller:home:inbox"], ["poller:home:news"])
    assert (entry.kind, entry.text, entry.permanent, entry.misfire) == (
        "agent_turn",
        "check the inbox twice",
        True,
        "skip",
    )
    assert entry.next_slot == stamp(at(12, 15))
    # A refused poller is named with the reason; the binding's valid pollers are synced all the same.
    every_10s = "'every 10s' fires more often than once every 60 s; use 'every 1m' or longer"
    assert (outcome(checked), checked.refused) == (([], [], [], []), {"x": every_10s})
    assert (outcome(refused), refused.refused) == (
        ([], [], ["poller:home:inbox"], []),
        {
            "x": every_10s,
            "y": "'once_after 1h' fires once; pollers repeat, e.g. 'every 15m' or '*/30 * * * *'",
        },
    )
    assert dropped.dropped is True


async def test_a_finished_entry_cannot_be_paused_or_fired(settings: CronSettings, clock: ManualClock) -> None:
    pacer = Pacer()
    async with connected(settings, clock, pacer=pacer) as client:
        entry_id = (
            await call(client, "reminder", {"when": "once_after 1m", "text": "t", "channel": "c"}, **HOME)
        )["id"]
        clock.advance(minutes=1)
        await pacer.step()
        [event] = (await pull(client)).events
        done = await ask(
            client,
            FireOutcomeRequest(params=FireOutcomeParams(fire_id=event.payload["fire_id"], outcome="done")),
            FireOutcomeResult,
        )
        refusals = []
        for request in (
            PauseRequest(params=EntryIdParams(id=entry_id)),
            FireRequest(params=FireParams(id=entry_id)),
        ):
            with pytest.raises(MCPError) as refused:
                await ask(client, request, EntryResult)
            refusals.append(refused.value.error)
        dropped = await ask(client, DropRequest(params=EntryIdParams(id=entry_id)), DropResult)
    assert done.entry.state == "done"
    assert [(error.code, "is done" in error.message) for error in refusals] == [(STATE_REFUSED, True)] * 2
    assert dropped.dropped is True


def test_only_refusals_become_request_errors() -> None:
    error = as_mcp_error(OwnedByConfig("owned"))
    assert error is not None
    assert error.error.code == STATE_REFUSED
    assert as_mcp_error(RuntimeError("bug")) is None


README = (Path(__file__).resolve().parents[3] / "servers" / "cron" / "README.md").read_text()


def test_every_method_setting_and_error_code_is_in_the_readme() -> None:
    variables = [f"NEXO_CRON_{name.upper()}" for name in CronSettings.model_fields if name != "jitter"]
    variables += [f"NEXO_CRON_JITTER__{name.upper()}" for name in JitterKnobs.model_fields]
    codes = (ENTRY_NOT_FOUND, FIRE_NOT_FOUND, STATE_REFUSED)
    assert [method for method in METHODS if f"`{method}`" not in README] == []
    assert [variable for variable in variables if f"`{variable}`" not in README] == []
    assert [code for code in codes if f"`{code}`" not in README] == []


def test_settings_come_from_the_environment_with_nested_jitter_knobs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("NEXO_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("NEXO_CRON_MAX_ENTRIES_PER_BINDING", "7")
    monkeypatch.setenv("NEXO_CRON_JITTER__ENABLED", "false")
    monkeypatch.setenv("NEXO_CRON_JITTER__ONE_SHOT_MAX_MS", "5000")
    settings = CronSettings()
    assert settings.database == tmp_path / "cron" / "cron.db"
    assert settings.max_entries_per_binding == 7
    assert (settings.jitter.enabled, settings.jitter.one_shot_max_ms) == (False, 5000)
    monkeypatch.setenv("NEXO_CRON_DEFAULT_TIMEZONE", "Mars/Base")
    with pytest.raises(ValueError, match="NEXO_CRON_DEFAULT_TIMEZONE"):
        CronSettings()
