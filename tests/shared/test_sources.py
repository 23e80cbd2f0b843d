"""Every source name the orchestrator can produce is accepted by the audit server.

The names are generated exhaustively from the grammars of their parts (agent and server names,
poller bindings and names, cron entry ids): every allowed character in every position class, at the
shortest and the longest length, so a grammar that drifts on either side fails here.
"""

from __future__ import annotations

import base64
import re
import string
from collections.abc import Iterator
from pathlib import Path
from typing import get_args

import pytest
from mcp.client import Client

from orchestrator.config.agents import NAME_PATTERN
from orchestrator.proactive.ticks import TickReason
from servers.audit.drafts import validate_draft
from servers.audit.errors import InvalidEntry
from servers.audit.server import build_server
from servers.audit.settings import AuditSettings
from shared.protocol.audit.bodies import CronFireBody, NoticeBody, TurnBody
from shared.protocol.audit.entries import EntryDraft
from shared.protocol.audit.goals import Origin
from shared.protocol.audit.methods import (
    AppendParams,
    AppendRequest,
    AppendResult,
    GoalCreateParams,
    GoalCreateRequest,
    GoalCreateResult,
)
from shared.protocol.cron import BINDING_PATTERN, POLLER_NAME_PATTERN, poller_id
from shared.protocol.sources import MAX_SOURCE, channel_source, cron_source, is_source, source
from tests.servers.audit.conftest import ManualClock

LOWER = string.ascii_lowercase
DIGITS = string.digits
ENTRY_ID_ALPHABET = base64.b32encode(bytes(range(256))).decode().lower().rstrip("=")


def _names(first: str, rest: str, longest: int) -> Iterator[str]:
    """Names of the grammar ``[first][rest]{0,longest-1}``: each allowed character in each position
    class, and the longest name ending in each of them."""
    yield from first
    for char in rest:
        yield first[0] + char
        yield first[-1] + char * (longest - 1)


def _matching(pattern: str, names: Iterator[str]) -> list[str]:
    compiled = re.compile(pattern)
    produced = list(names)
    assert all(compiled.match(name) for name in produced), "the generator left its grammar"
    return produced


AGENT_OR_SERVER = _matching(NAME_PATTERN, _names(LOWER, LOWER + DIGITS + "_-", 32))
BINDINGS = _matching(BINDING_PATTERN, _names(LOWER + DIGITS, LOWER + DIGITS + "_.-", 64))
POLLER_NAMES = _matching(POLLER_NAME_PATTERN, _names(LOWER + DIGITS, LOWER + DIGITS + "_.-", 64))
ENTRY_IDS = sorted({"c_" + (char * 10) for char in ENTRY_ID_ALPHABET})
WORDS = ["orchestrator", "cli", "cron", *get_args(TickReason)]


def _every_source() -> Iterator[str]:
    yield from WORDS
    for server in AGENT_OR_SERVER:
        yield channel_source(server)
    for entry_id in ENTRY_IDS:
        yield cron_source(entry_id)
    for binding in BINDINGS:
        for name in POLLER_NAMES:
            yield cron_source(poller_id(binding, name))


def _draft(name: str) -> EntryDraft:
    return EntryDraft.of(NoticeBody(level="info", message="m"), source=name, subject="s")


def test_every_source_the_orchestrator_produces_is_accepted_by_the_audit_server() -> None:
    produced = list(_every_source())
    assert f"cron:poller:{BINDINGS[-1]}:{POLLER_NAMES[-1]}" in produced
    refused = []
    for name in produced:
        try:
            validate_draft(_draft(name))
        except InvalidEntry:
            refused.append(name)
    assert refused == []


def test_the_longest_poller_source_fits_the_ledger() -> None:
    longest = cron_source(poller_id("b" * 64, "n" * 64))
    assert longest == f"cron:poller:{'b' * 64}:{'n' * 64}"
    assert len(longest) <= MAX_SOURCE


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "empty"),
        ("Channel:console", "upper-case word"),
        ("channel:", "empty qualifier"),
        ("channel::x", "empty qualifier"),
        ("channel:-x", "qualifier starting with a dash"),
        ("a:b:c:d:e", "four qualifiers"),
        ("channel:con sole", "a space"),
        ("c" * 32 + (":" + "x" * 64) * 3, "over 200 characters"),
    ],
)
def test_malformed_source_names_are_refused_on_both_sides(name: str, problem: str) -> None:
    assert not is_source(name), problem
    with pytest.raises(InvalidEntry, match="is not a source name"):
        validate_draft(_draft(name))


def test_building_a_malformed_source_says_what_a_source_looks_like() -> None:
    with pytest.raises(
        ValueError, match=r"'cron:bad id' is not a source name: a word .* e\.g\. 'channel:console'"
    ):
        source("cron", "bad id")


@pytest.mark.anyio
async def test_a_poller_fire_is_recorded_with_its_turn_and_goal(tmp_path: Path) -> None:
    poller = cron_source(poller_id("main", "inbox-check"))
    settings = AuditSettings(state_dir=tmp_path, trim_interval_s=0)
    async with Client(build_server(settings, clock=ManualClock())) as client:
        created = await client.session.send_request(
            GoalCreateRequest(
                params=GoalCreateParams(
                    id="cron-7-1", agent="main", kind="daemon", origin=Origin(source=poller), prompt="check"
                )
            ),
            GoalCreateResult,
        )
        appended = await client.session.send_request(
            AppendRequest(
                params=AppendParams(
                    entries=[
                        EntryDraft.of(
                            TurnBody(index=1, outcome="answered", decision="d"),
                            source=poller,
                            agent="main",
                            goal_id="cron-7-1",
                        ),
                        EntryDraft.of(
                            CronFireBody(
                                job_id="poller:main:inbox-check",
                                fire_id="7",
                                scheduled_for="2026-11-21T12:00",
                                status="done",
                            ),
                            source=poller,
                            agent="main",
                            goal_id="cron-7-1",
                        ),
                    ]
                )
            ),
            AppendResult,
        )
    assert created.goal.origin.source == "cron:poller:main:inbox-check"
    assert [entry.created for entry in appended.entries] == [True, True]
