"""``nexo audit tail | verify`` and ``nexo agent ps | attach | discover`` against a real audit server.

The ledger is seeded through the audit store, then each command starts ``python -m servers.audit``
itself, as it does on an operator's machine while the daemon is down.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from orchestrator.cli.audit import command_audit, parse_head, summarize
from orchestrator.cli.direct import CONNECT_TIMEOUT_S
from orchestrator.cli.goals import command_goals, goals_table, snapshot
from orchestrator.cli.main import build_parser
from servers.audit.goals import GoalRegistry
from shared.protocol.audit.goals import Budget, Goal, Origin
from tests.mesh.harness import python_server, write_config
from tests.servers.audit.conftest import ManualClock, notice, opened_ledger, tamper, tool_call, turn

CHAT = Origin(source="channel:console", chat_id="operator")


def parser() -> argparse.ArgumentParser:
    return build_parser()


def nexo(*argv: str) -> int:
    args = parser().parse_args(argv)
    return command_audit(args) if args.command == "audit" else command_goals(args)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(
        tmp_path / "nexo.yaml",
        state_dir=tmp_path / "state",
        llm_base_url="http://127.0.0.1:9/v1",
        servers={"audit": python_server("servers.audit")},
        agent={"channels": []},
    )


def database(config: Path) -> Path:
    return config.parent / "state" / "audit" / "audit.db"


def seed(config: Path) -> None:
    """Goals g-1 (bg, running), g-2 (interactive, running), g-3 (daemon, done) and their entries."""

    async def run() -> None:
        names = iter(["g-1", "g-2", "g-3"])
        async with opened_ledger(database(config), ManualClock()) as ledger:
            goals = GoalRegistry(ledger, max_running=4, new_id=lambda: next(names))
            await goals.create(
                agent="nexo", kind="bg", origin=Origin(source="cli"), prompt="tidy the inbox\nmore"
            )
            await goals.create(agent="nexo", kind="interactive", origin=CHAT, prompt="what time is it?")
            await goals.create(
                agent="nexo", kind="daemon", origin=Origin(source="cron"), prompt="nightly backup"
            )
            await goals.update("g-3", status="done", outcome="backed up")
            await goals.update(
                "g-1",
                phase="sorting",
                last_decision="archive newsletters",
                last_event="tool_call mail__list ok",
                budget=Budget(turns=2, tokens=1500, cost_usd=0.0123, wall_s=12.5),
            )
            await ledger.append([turn("g-1", 0, outcome="tool_calls"), tool_call("g-1", "mail__list")])
            await ledger.append([turn("g-1", 1, decision="archive newsletters"), notice("heartbeat ok")])

    anyio.run(run)


# -- without a server ----------------------------------------------------------------------------


def test_a_config_without_an_audit_server_says_how_to_add_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bare = write_config(
        tmp_path / "bare.yaml",
        state_dir=tmp_path / "s",
        llm_base_url="http://127.0.0.1:9/v1",
        servers={},
        agent={"channels": []},
    )
    code = nexo("audit", "verify", "--config", str(bare))
    assert (code, capsys.readouterr().err) == (
        1,
        "nexo: the config has no 'audit' server; add it under servers: in the config, e.g. "
        "audit: {transport: stdio, command: python, args: [-m, servers.audit]}\n",
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("audit", "tail", "--kind", "mail"), "nexo: unknown kind 'mail': use one of turn, tool_call"),
        (("audit", "tail", "-n", "0"), "nexo: -n must be between 1 and 1000; got 0"),
        (("agent", "ps", "--kind", "cron"), "nexo: unknown goal kind 'cron': use one of interactive, bg"),
    ],
)
def test_bad_arguments_are_refused_before_any_server_starts(
    config: Path, capsys: pytest.CaptureFixture[str], argv: Sequence[str], message: str
) -> None:
    code = nexo(*argv, "--config", str(config))
    assert code == 1
    assert capsys.readouterr().err.startswith(message)
    assert not database(config).exists()


def test_a_malformed_expected_head_is_a_usage_error(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        nexo("audit", "verify", "--expect-head", "12", "--config", str(config))
    assert caught.value.code == 64
    assert "expected SEQ:HASH as the line `head SEQ:HASH` of `nexo audit verify` prints it" in (
        capsys.readouterr().err
    )


def test_a_shortened_head_hash_is_refused_with_the_length_it_needs(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        nexo("audit", "verify", "--expect-head", "18342:3fa9c1d0", "--config", str(config))
    assert caught.value.code == 64
    assert (
        "argument --expect-head: the hash in '18342:3fa9c1d0' has 8 hex characters; give all 64 as "
        "`nexo audit verify` prints them"
    ) in capsys.readouterr().err
    assert not database(config).exists()


def test_the_head_shown_in_the_operations_guide_is_one_verify_accepts() -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    heads = [word for line in guide.splitlines() for word in line.split() if word.startswith("18342:")]
    assert len(heads) == 3
    assert {parse_head(head) for head in heads} == {(18342, heads[0].split(":")[1])}


def test_entries_without_a_subject_are_summarized_from_their_body() -> None:
    assert summarize("turn", {"index": 3, "outcome": "done", "decision": ""}) == "turn 3 done"
    assert (
        summarize("turn", {"index": 1, "outcome": "answered", "decision": "say hi"})
        == "turn 1 answered: say hi"
    )
    assert summarize("tool_call", {"tool": "t", "outcome": "ok", "duration_ms": 2.5}) == "t ok in 2.5 ms"
    assert (
        summarize("goal", {"previous": None, "status": "running", "reason": "created"})
        == "new -> running created"
    )
    assert (
        summarize("pairing", {"action": "paired", "detail": "", "sender": "bob"})
        == "action=paired sender=bob"
    )


def test_a_lost_goal_snapshot_says_whether_its_origin_was_told() -> None:
    goal = Goal(
        id="g-7",
        agent="nexo",
        kind="interactive",
        status="lost_on_restart",
        origin=CHAT,
        prompt="p",
        phase="",
        created_at="2026-11-21T12:00:00.000000+00:00",
        last_decision="",
        last_event="",
        budget=Budget(),
        outcome="",
        notified=False,
    )
    told = goal.model_copy(update={"notified": True})
    assert snapshot(goal.model_dump(mode="json")).splitlines()[-1] == "- **origin told:** not yet"
    assert snapshot(told.model_dump(mode="json")).splitlines()[-1] == "- **origin told:** yes"


@pytest.mark.parametrize("status", ["done", "failed", "cancelled", "lost_on_restart"])
def test_a_finished_goal_shows_no_phase_even_if_an_older_ledger_kept_one(status: str) -> None:
    goal = Goal(
        id="g-8",
        agent="nexo",
        kind="bg",
        status=status,
        origin=CHAT,
        prompt="p",
        phase="running",
        created_at="2026-11-21T12:00:00.000000+00:00",
        last_decision="",
        last_event="",
        budget=Budget(),
        outcome="",
        notified=False,
    )
    header, row = goals_table([goal.model_dump(mode="json")]).splitlines()
    assert header.split()[4] == "PHASE"
    assert row.split()[:5] == ["g-8", "bg", status, "nexo", "-"]
    assert "- **phase:** -" in snapshot(goal.model_dump(mode="json")).splitlines()
    live = goals_table([goal.model_copy(update={"status": "running"}).model_dump(mode="json")]).splitlines()[
        1
    ]
    assert live.split()[:5] == ["g-8", "bg", "running", "nexo", "running"]


# -- against real processes ----------------------------------------------------------------------


@pytest.mark.scenario
def test_an_audit_server_that_cannot_start_is_reported_after_a_few_attempts(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    broken = {"transport": "stdio", "command": sys.executable, "args": ["-c", "raise SystemExit(3)"]}
    config = write_config(
        tmp_path / "broken.yaml",
        state_dir=tmp_path / "s",
        llm_base_url="http://127.0.0.1:9/v1",
        servers={"audit": broken},
        agent={"channels": []},
    )
    started = time.monotonic()
    code = nexo("agent", "ps", "--config", str(config))
    elapsed = time.monotonic() - started
    err = capfd.readouterr().err.splitlines()[-1]
    assert (code, elapsed < CONNECT_TIMEOUT_S) == (1, True)
    assert err.startswith(
        f"nexo: the audit server ({sys.executable} -c raise SystemExit(3)) is not reachable: "
    )
    assert err.endswith("; check servers.audit in the config")


@pytest.mark.scenario
def test_a_server_that_is_not_an_audit_server_is_reported_as_such(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    config = write_config(
        tmp_path / "wrong.yaml",
        state_dir=tmp_path / "s",
        llm_base_url="http://127.0.0.1:9/v1",
        servers={"audit": python_server("servers.time")},
        agent={"channels": []},
    )
    code = nexo("agent", "attach", "g-1", "--config", str(config))
    assert (code, capfd.readouterr().err.splitlines()[-1]) == (1, "nexo: audit: Method not found")


@pytest.mark.scenario
def test_audit_tail_prints_the_newest_matching_entries_oldest_first(
    config: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    seed(config)
    code = nexo("audit", "tail", "--goal", "g-1", "-n", "3", "--config", str(config))
    out = capfd.readouterr().out
    json_code = nexo("audit", "tail", "--kind", "notice", "--json", "--config", str(config))
    entries = json.loads(capfd.readouterr().out)
    none_code = nexo("audit", "tail", "--source", "cron", "--config", str(config))
    none = capfd.readouterr().out
    at = "2026-11-21 12:00:00"
    goal_1 = "channel:console      g-1              "
    assert (code, out.splitlines()) == (
        0,
        [
            f"      5  {at}  turn               {goal_1}turn 0 tool_calls: decision 0",
            f"      6  {at}  tool_call          {goal_1}called mail__list",
            f"      7  {at}  turn               {goal_1}turn 1 answered: archive newsletters",
        ],
    )
    assert (json_code, none_code, none) == (0, 0, "no matching entries\n")
    assert [(e["seq"], e["kind"], e["subject"], e["body"]) for e in entries] == [
        (8, "notice", "heartbeat ok", {"level": "info", "limit": None, "message": "heartbeat ok"})
    ]


@pytest.mark.scenario
def test_audit_verify_passes_then_names_the_first_bad_entry_after_tampering(
    config: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    seed(config)
    intact = nexo("audit", "verify", "--config", str(config))
    intact_out = capfd.readouterr().out.splitlines()
    tamper(database(config), "UPDATE ledger SET subject = 'nothing to see' WHERE seq = 6")
    broken = nexo("audit", "verify", "--config", str(config))
    broken_out = capfd.readouterr().out
    assert intact == 0
    assert intact_out[0] == "audit ledger intact: 8 entries checked, 0 removed by retention (0 checkpoints)"
    assert intact_out[1].startswith("head 8:")
    assert broken == 1
    assert broken_out.startswith(
        "audit ledger BROKEN at entry 6 (hash_mismatch): entry 6 (tool_call) was edited: "
        "its content does not match its hash"
    )


@pytest.mark.scenario
def test_audit_verify_against_a_recorded_head_finds_a_truncated_tail(
    config: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    seed(config)
    nexo("audit", "verify", "--config", str(config))
    head = capfd.readouterr().out.splitlines()[1].split()[1]
    tamper(database(config), "DELETE FROM ledger WHERE seq = 8")
    code = nexo("audit", "verify", "--json", "--expect-head", head, "--config", str(config))
    report = json.loads(capfd.readouterr().out)
    assert (code, report["ok"], report["problem"]) == (
        1,
        False,
        {
            "seq": 8,
            "kind": "head_mismatch",
            "detail": "the ledger ends at entry 7 but the recorded head is entry 8: entries were removed "
            "from the end",
        },
    )


@pytest.mark.scenario
def test_agent_ps_lists_live_goals_and_all_of_them_with_all(
    config: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    seed(config)
    code = nexo("agent", "ps", "--config", str(config))
    out = capfd.readouterr().out
    all_code = nexo("agent", "ps", "--all", "--json", "--config", str(config))
    listing = json.loads(capfd.readouterr().out)
    started = "2026-11-21 12:00:00"
    assert (code, out.splitlines()) == (
        0,
        [
            "running 2 of at most 4",
            "ID   KIND         STATUS   AGENT  PHASE    STARTED              ORIGIN" + " " * 22 + "PROMPT",
            f"g-1  bg           running  nexo   sorting  {started}  cli" + " " * 25 + "tidy the inbox",
            f"g-2  interactive  running  nexo   -        {started}  channel:console (operator)  "
            "what time is it?",
        ],
    )
    assert all_code == 0
    assert ([g["id"] for g in listing["goals"]], listing["running"], listing["max_running"]) == (
        ["g-1", "g-2", "g-3"],
        2,
        4,
    )


@pytest.mark.scenario
def test_agent_attach_shows_a_markdown_snapshot_and_refuses_an_unknown_goal(
    config: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    seed(config)
    code = nexo("agent", "attach", "g-1", "--config", str(config))
    out = capfd.readouterr().out
    missing = nexo("agent", "attach", "g-9", "--config", str(config))
    err = capfd.readouterr().err
    at = "2026-11-21 12:00:00"
    assert (code, out) == (
        0,
        "\n".join(
            [
                "## Goal g-1: running (bg)",
                "",
                "- **agent:** nexo",
                "- **prompt:** tidy the inbox more",
                "- **origin:** cli",
                "- **phase:** sorting",
                f"- **created:** {at}",
                f"- **started:** {at}",
                "- **finished:** -",
                "- **last decision:** archive newsletters",
                "- **last event:** tool_call mail__list ok",
                "- **budget used:** 2 turns, 1500 tokens, $0.0123, 12.5 s wall",
                "- **outcome:** -",
                "",
            ]
        ),
    )
    assert (missing, err.splitlines()[-1]) == (
        1,
        "nexo: no goal 'g-9'; list the goals with `nexo agent ps --all`",
    )


@pytest.mark.scenario
def test_agent_discover_lists_live_background_goals_unless_asked_for_interactive_ones(
    config: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    seed(config)
    code = nexo("agent", "discover", "--json", "--config", str(config))
    background = json.loads(capfd.readouterr().out)
    everything = nexo("agent", "discover", "--include-interactive", "--config", str(config))
    out = capfd.readouterr().out
    assert (code, [g["id"] for g in background["goals"]]) == (0, ["g-1"])
    assert (everything, [line.split()[0] for line in out.splitlines()[2:]]) == (0, ["g-1", "g-2"])
