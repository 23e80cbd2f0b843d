"""The doctors as tables: each config knob or setup fact, the finding it raises, and the exit code.

Configs go through the real loader (a YAML file, validation, cross-references), so no case here is
a config that `nexo` itself would refuse to load.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.config.loading import load
from orchestrator.config.nexo import NexoConfig
from orchestrator.doctor import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_WARNING,
    Finding,
    as_json,
    capabilities,
    exit_code,
)
from orchestrator.setup_doctor import PairedSender, SetupFacts, setup
from shared.settings import ConfigError

Row = tuple[str, str, str]
"""(level, check, subject) of one finding."""
ConfigOf = Callable[..., NexoConfig]

DROP = "<drop>"
"""A change value that removes the key instead of setting it."""
STDIO = {"transport": "stdio", "command": "x"}
PROVIDER = {"kind": "openai_compat", "base_url": "http://h/v1", "model": "m"}
OWNER = "owner-1"


def _base() -> dict[str, Any]:
    """Two bound channels with an owner each and a pairing server: nothing for either doctor to say."""
    return {
        "servers": {"console": STDIO, "chat": STDIO, "pairing": STDIO, "spare": STDIO},
        "llm": {"providers": {"p": PROVIDER}},
        "agents": [_agent()],
        "channels": {"enabled": True, "approved": [{"server": "console"}, {"server": "chat"}]},
        "channel_options": {
            "console": {"pairing": {"policy": "allowlist", "allow_from": ["operator"]}},
            "chat": {"pairing": {"allow_from": [OWNER]}},
        },
    }


def _agent(**keys: Any) -> dict[str, Any]:
    return {"id": "nexo", "model": {"provider": "p"}, "channels": ["console", "chat"], **keys}


def _merge(into: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``changes`` laid over ``into``: mappings merge, DROP removes a key, anything else replaces."""
    merged = dict(into)
    for key, value in changes.items():
        current = merged.get(key)
        if value == DROP:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(current, dict):
            merged[key] = _merge(current, value)
        else:
            merged[key] = value
    return merged


@pytest.fixture
def config_of(tmp_path: Path) -> ConfigOf:
    def build(changes: dict[str, Any] | None = None) -> NexoConfig:
        path = tmp_path / "agents.yaml"
        document = json.loads(json.dumps(_merge(_base(), changes or {})))
        path.write_text(yaml.safe_dump(document))
        return load(path, env={})

    return build


def _rows(findings: list[Finding]) -> list[Row]:
    return [(f.level, f.check, f.subject) for f in findings]


def _by_check(findings: list[Finding], check: str) -> Finding:
    return next(f for f in findings if f.check == check)


# -- nexo doctor capabilities ------------------------------------------------------------------

CAPABILITIES: list[tuple[str, dict[str, Any], list[Row]]] = [
    ("nothing armed", {}, []),
    (
        "dangerous mode on the agent",
        {"agents": [_agent(permissions={"dangerous_mode": True})]},
        [("warning", "dangerous_mode", "agents.nexo")],
    ),
    (
        "dangerous mode on one binding",
        {"agents": [_agent(bindings={"chat": {"dangerous_mode": True}})]},
        [("warning", "dangerous_mode", "agents.nexo.bindings.chat")],
    ),
    (
        "auto-approve is information only",
        {"agents": [_agent(permissions={"auto_approve": True})]},
        [("info", "auto_approve", "agents.nexo")],
    ),
    (
        "outbound tools in tier safe",
        {"agents": [_agent(permissions={"tiers": {"outbound": "safe"}})]},
        [("warning", "tiers", "agents.nexo")],
    ),
    (
        "dangerous tools in tier safe on a binding",
        {"agents": [_agent(bindings={"chat": {"tiers": {"dangerous": "safe"}}})]},
        [("warning", "tiers", "agents.nexo.bindings.chat")],
    ),
    (
        "write tools in tier safe",
        {"agents": [_agent(permissions={"tiers": {"write": "safe"}})]},
        [],
    ),
    (
        "open direct messages",
        {"channel_options": {"chat": {"pairing": {"policy": "open"}}}},
        [("warning", "pairing.open", "chat")],
    ),
    (
        "open groups without mentions",
        {"channel_options": {"chat": {"pairing": {"group_policy": "open", "require_mention": False}}}},
        [("warning", "pairing.group_open", "chat"), ("warning", "pairing.require_mention", "chat")],
    ),
    (
        "allowlisted groups without mentions",
        {"channel_options": {"chat": {"pairing": {"group_policy": "allowlist", "require_mention": False}}}},
        [("warning", "pairing.require_mention", "chat")],
    ),
    (
        "require_mention off while groups are disabled",
        {"channel_options": {"chat": {"pairing": {"require_mention": False}}}},
        [],
    ),
    (
        "an open policy on a channel no agent is bound to",
        {"channel_options": {"spare": {"pairing": {"policy": "open"}}}},
        [],
    ),
    (
        "heartbeat with no daily budget",
        {
            "agents": [_agent(heartbeat={"enabled": True})],
            "autonomy": {"budgets": {"per_day": {"tokens": None}}},
        },
        [("warning", "autonomy.budget", "agents.nexo")],
    ),
    (
        "heartbeat under the default daily budget",
        {"agents": [_agent(heartbeat={"enabled": True})]},
        [],
    ),
    (
        "no daily budget while autonomy is switched off",
        {
            "agents": [_agent(proactive={"enabled": True})],
            "autonomy": {"enabled": False, "budgets": {"per_day": {"tokens": None}}},
        },
        [],
    ),
    (
        "plain http to a public address",
        {"servers": {"memory": {"transport": "http", "url": "http://93.184.215.14:8080/mcp"}}},
        [("warning", "http_without_tls", "memory")],
    ),
    (
        "plain http to a dotted host name",
        {"servers": {"memory": {"transport": "http", "url": "http://mcp.example.org/mcp"}}},
        [("warning", "http_without_tls", "memory")],
    ),
    (
        "plain http to loopback, a private address or a compose service; https anywhere",
        {
            "servers": {
                "a": {"transport": "http", "url": "http://127.0.0.1:8080/mcp"},
                "b": {"transport": "http", "url": "http://[::1]:8080/mcp"},
                "c": {"transport": "http", "url": "http://10.1.2.3:8080/mcp"},
                "d": {"transport": "http", "url": "http://memory:8080/mcp"},
                "e": {"transport": "http", "url": "https://mcp.example.org/mcp"},
            }
        },
        [],
    ),
    (
        "a stdio server told to listen on every address",
        {
            "servers": {
                "hook": {**STDIO, "env": {"NEXO_WEBHOOK_HOST": "0.0.0.0", "NEXO_HOOK_BIND": "[::]:80"}}
            }
        },
        [("warning", "non_loopback_bind", "hook"), ("warning", "non_loopback_bind", "hook")],
    ),
    (
        "loopback binds in every spelling",
        {
            "servers": {
                "hook": {
                    **STDIO,
                    "env": {
                        "A_HOST": "127.0.0.1",
                        "B_HOST": "localhost",
                        "C_BIND": "127.0.0.1:8776",
                        "D_BIND": "[::1]:8776",
                        "E_HOST": "::1",
                        "F_HOST": "",
                        "NEXO_WEBHOOK_SECRET_FILE": "/0.0.0.0",
                    },
                }
            }
        },
        [],
    ),
    (
        "the workspace sandbox switched off",
        {"servers": {"workspace": {**STDIO, "env": {"NEXO_WORKSPACE_SANDBOX": "none"}}}},
        [("warning", "sandbox_off", "workspace")],
    ),
    (
        "the workspace sandbox required",
        {"servers": {"workspace": {**STDIO, "env": {"NEXO_WORKSPACE_SANDBOX": "bwrap"}}}},
        [],
    ),
    (
        "no pairing server",
        {"servers": {"pairing": DROP}},
        [("info", "pairing.server", "pairing")],
    ),
    (
        "no pairing server and no channel",
        {"servers": {"pairing": DROP}, "agents": [_agent(channels=[])], "channels": {"approved": []}},
        [],
    ),
    (
        "several knobs at once, loudest first",
        {
            "agents": [_agent(permissions={"dangerous_mode": True, "auto_approve": True})],
            "channel_options": {"chat": {"pairing": {"policy": "open"}}},
        },
        [
            ("warning", "dangerous_mode", "agents.nexo"),
            ("warning", "pairing.open", "chat"),
            ("info", "auto_approve", "agents.nexo"),
        ],
    ),
]


@pytest.mark.parametrize(
    ("changes", "expected"), [case[1:] for case in CAPABILITIES], ids=[case[0] for case in CAPABILITIES]
)
def test_capabilities_reports_each_armed_knob_loudest_first(
    config_of: ConfigOf, changes: dict[str, Any], expected: list[Row]
) -> None:
    assert _rows(capabilities(config_of(changes))) == expected


@pytest.mark.parametrize(
    ("changes", "check", "fix"),
    [
        (
            {"agents": [_agent(permissions={"dangerous_mode": True})]},
            "dangerous_mode",
            "remove agents[0].permissions.dangerous_mode or set it to false",
        ),
        (
            {"agents": [_agent(bindings={"chat": {"dangerous_mode": True}})]},
            "dangerous_mode",
            "remove agents[0].bindings.chat.dangerous_mode or set it to false",
        ),
        (
            {"agents": [_agent(bindings={"chat": {"auto_approve": True}})]},
            "auto_approve",
            "set agents[0].bindings.chat.auto_approve: false to be asked for every side effect",
        ),
        (
            {"agents": [_agent(permissions={"tiers": {"outbound": "safe", "dangerous": "safe"}})]},
            "tiers",
            "set agents[0].permissions.tiers.outbound and agents[0].permissions.tiers.dangerous to notify "
            "or confirm",
        ),
        (
            {"channel_options": {"chat": {"pairing": {"group_policy": "open"}}}},
            "pairing.group_open",
            "set channel_options.chat.pairing.group_policy to allowlist",
        ),
    ],
)
def test_capabilities_fixes_name_keys_that_exist(
    config_of: ConfigOf, changes: dict[str, Any], check: str, fix: str
) -> None:
    assert _by_check(capabilities(config_of(changes)), check).fix == fix


def test_capabilities_name_the_second_agent_by_its_own_index(config_of: ConfigOf) -> None:
    second = {"id": "helper", "model": {"provider": "p"}, "permissions": {"dangerous_mode": True}}
    found = capabilities(config_of({"agents": [_agent(), second]}))
    assert [(f.subject, f.fix) for f in found] == [
        ("agents.helper", "remove agents[1].permissions.dangerous_mode or set it to false")
    ]


def test_dangerous_mode_with_autonomy_needs_the_second_confirmation_before_any_doctor_runs(
    config_of: ConfigOf,
) -> None:
    risky = _agent(permissions={"dangerous_mode": True}, heartbeat={"enabled": True})
    with pytest.raises(ConfigError, match="confirm_dangerous_autonomy"):
        config_of({"agents": [risky]})
    confirmed = capabilities(config_of({"agents": [{**risky, "confirm_dangerous_autonomy": True}]}))
    assert _rows(confirmed) == [("warning", "dangerous_mode", "agents.nexo")]


def test_the_built_in_defaults_arm_nothing() -> None:
    findings = capabilities(load(None, env={}))
    assert findings == []
    assert exit_code(findings) == EXIT_OK


# -- nexo setup doctor -------------------------------------------------------------------------


def _facts(**changes: Any) -> SetupFacts:
    """What a healthy mesh reports: every server answered, the console relays approvals."""
    facts = SetupFacts(
        paired=[],
        outbound_tools={"console": {"send_message"}, "chat": {"send_message"}},
        relay_capable={"console"},
    )
    for name, value in changes.items():
        setattr(facts, name, value)
    return facts


def _dm(sender: str, role: str = "contact", channel: str = "chat", account: str = "default") -> PairedSender:
    return PairedSender(channel, account, "dm", sender, role)


def _group(chat: str, channel: str = "chat", account: str = "default") -> PairedSender:
    return PairedSender(channel, account, "group", chat, "contact")


NO_OWNER: dict[str, Any] = {"channel_options": {"chat": {"pairing": {"allow_from": []}}}}
GROUPS: dict[str, Any] = {"channel_options": {"chat": {"pairing": {"group_policy": "allowlist"}}}}

SETUP: list[tuple[str, dict[str, Any], dict[str, Any], list[Row]]] = [
    ("consistent", {}, {}, []),
    (
        "a server that could not be reached",
        {},
        {"unreachable": {"chat": "connection refused"}, "outbound_tools": {"console": {"send_message"}}},
        [("error", "reachable", "chat")],
    ),
    (
        "a pairing server that answered but did not list",
        NO_OWNER,
        {"paired": None},
        [("error", "pairing.list", "pairing")],
    ),
    (
        "an unreachable pairing server: coverage is not guessed",
        NO_OWNER,
        {"paired": None, "unreachable": {"pairing": "timed out"}},
        [("error", "reachable", "pairing")],
    ),
    (
        "a display name in allow_from on telegram",
        {"channel_options": {"chat": {"pairing": {"platform": "telegram", "allow_from": ["@alice"]}}}},
        {},
        [("error", "pairing.allow_from", "chat:default")],
    ),
    (
        "a confusable id in allow_from",
        {"channel_options": {"chat": {"pairing": {"allow_from": ["l\u043ecal"]}}}},
        {},
        [("error", "pairing.allow_from", "chat:default")],
    ),
    (
        "nobody paired and no allow_from",
        NO_OWNER,
        {},
        [("warning", "pairing.coverage", "chat:default")],
    ),
    (
        "nobody in allow_from but a paired contact",
        NO_OWNER,
        {"paired": [_dm("alice")]},
        [],
    ),
    (
        "a pairing on another account does not cover this one",
        _merge(NO_OWNER, {"channel_options": {"chat": {"pairing": {"account": "bot2"}}}}),
        {"paired": [_dm("alice")]},
        [("warning", "pairing.coverage", "chat:bot2")],
    ),
    (
        "an open channel with an owner",
        {"channel_options": {"chat": {"pairing": {"policy": "open"}}}},
        {},
        [("info", "pairing.open", "chat:default")],
    ),
    (
        "policy pairing without the pairing server",
        {"servers": {"pairing": DROP}},
        {"paired": None},
        [("error", "pairing.server", "chat:default")],
    ),
    (
        "policy allowlist without the pairing server and without owners",
        {
            "servers": {"pairing": DROP},
            "channel_options": {"chat": {"pairing": {"policy": "allowlist", "allow_from": []}}},
        },
        {"paired": None},
        [("warning", "pairing.coverage", "chat:default")],
    ),
    (
        "codes cannot be sent without the outbound tool",
        {},
        {"outbound_tools": {"console": {"send_message"}, "chat": {"reply", "react"}}},
        [("error", "pairing.reply", "chat:default")],
    ),
    (
        "the outbound tool named in channel_options",
        {"channel_options": {"chat": {"outbound_tool_name": "reply"}}},
        {"outbound_tools": {"console": {"send_message"}, "chat": {"reply"}}},
        [],
    ),
    ("allowlisted groups but none seeded", GROUPS, {}, [("warning", "pairing.groups", "chat:default")]),
    ("allowlisted groups with one seeded", GROUPS, {"paired": [_group("team-1")]}, []),
    (
        "an approver who is not an owner",
        {"channel_options": {"chat": {"approvers": [OWNER, "alice", "bob"]}}},
        {"paired": [_dm("alice", "contact"), _dm("bob", "owner")]},
        [("warning", "approvers", "chat:default")],
    ),
    (
        "the operator's channel is not a server",
        {"operator": {"channel": "telegram"}},
        {},
        [("error", "operator.channel", "telegram")],
    ),
    (
        "the operator's channel is bound to no agent",
        {"operator": {"channel": "spare"}},
        {},
        [("warning", "operator.channel", "spare")],
    ),
    (
        "the operator's channel cannot relay approvals",
        {},
        {"relay_capable": set()},
        [("info", "operator.relay", "console")],
    ),
    (
        "a pairing left on a channel no agent is bound to",
        {},
        {"paired": [_dm("alice", channel="old"), _group("team-1", channel="old", account="bot2")]},
        [("warning", "pairing.stale", "old:bot2"), ("warning", "pairing.stale", "old:default")],
    ),
    (
        "requests wait for the operator",
        {},
        {"pending": 2},
        [("info", "pairing.pending", "pairing")],
    ),
]


@pytest.mark.parametrize(
    ("changes", "facts", "expected"), [case[1:] for case in SETUP], ids=[case[0] for case in SETUP]
)
def test_setup_reports_each_inconsistency(
    config_of: ConfigOf, changes: dict[str, Any], facts: dict[str, Any], expected: list[Row]
) -> None:
    assert _rows(setup(config_of(changes), _facts(**facts))) == expected


def test_setup_findings_say_what_to_run(config_of: ConfigOf) -> None:
    facts = _facts(
        paired=[_dm("alice", channel="old"), _group("team-1", channel="old", account="bot2")],
        outbound_tools={"console": {"send_message"}, "chat": {"reply", "react"}},
    )
    found = setup(config_of(_merge(NO_OWNER, GROUPS)), facts)
    assert [(f.check, f.fix) for f in found] == [
        ("pairing.reply", "set channel_options.chat.outbound_tool_name to one of: react, reply"),
        (
            "pairing.coverage",
            "add your own id to channel_options.chat.pairing.allow_from or `nexo pair seed chat default ID`",
        ),
        ("pairing.groups", "`nexo pair seed chat default GROUP_ID --scope group`"),
        (
            "pairing.stale",
            "`nexo pair revoke old:team-1 --account bot2 --scope group` if it is no longer wanted",
        ),
        ("pairing.stale", "`nexo pair revoke old:alice --account default` if it is no longer wanted"),
    ]


def test_setup_catches_options_for_a_server_the_loader_would_refuse(config_of: ConfigOf) -> None:
    config = config_of()
    # The loader refuses this outright; the doctor still names it for a config built another way.
    options = {**config.channel_options, "ghost": config.channel("chat")}
    found = setup(config.model_copy(update={"channel_options": options}), _facts())
    assert _rows(found) == [("error", "channel_options", "ghost")]
    with pytest.raises(ConfigError, match=r"channel_options\.ghost"):
        config_of({"channel_options": {"ghost": {}}})


# -- exit codes and output ---------------------------------------------------------------------


def _finding(level: Any) -> Finding:
    return Finding(level, "check", "subject", "detail")


@pytest.mark.parametrize(
    ("levels", "code"),
    [
        ([], EXIT_OK),
        (["info"], EXIT_OK),
        (["warning"], EXIT_WARNING),
        (["info", "warning"], EXIT_WARNING),
        (["error"], EXIT_ERROR),
        (["warning", "error", "info"], EXIT_ERROR),
    ],
)
def test_exit_code_is_1_on_errors_2_on_warnings_only_0_otherwise(levels: list[str], code: int) -> None:
    assert exit_code(_finding(level) for level in levels) == code


def test_doctor_exit_codes_follow_the_findings(config_of: ConfigOf) -> None:
    auto = config_of({"agents": [_agent(permissions={"auto_approve": True})]})
    dangerous = config_of({"agents": [_agent(permissions={"dangerous_mode": True})]})
    assert [exit_code(capabilities(config)) for config in (config_of(), auto, dangerous)] == [0, 0, 2]
    no_owner = config_of(NO_OWNER)
    assert exit_code(setup(no_owner, _facts())) == 2
    assert exit_code(setup(no_owner, _facts(unreachable={"chat": "down"}))) == 1


def test_json_holds_every_finding_and_the_counts(config_of: ConfigOf) -> None:
    found = setup(config_of(NO_OWNER), _facts(pending=1, unreachable={"spare": "down"}))
    document = json.loads(json.dumps(as_json(found)))
    assert document == {
        "findings": [
            {
                "level": "error",
                "check": "reachable",
                "subject": "spare",
                "detail": "could not be reached: down",
                "fix": "correct servers.spare as the message says, then run `nexo setup doctor` again "
                "(`nexo status` shows a running nexo's view)",
            },
            {
                "level": "warning",
                "check": "pairing.coverage",
                "subject": "chat:default",
                "detail": "nobody is paired and allow_from is empty: no direct message reaches the model "
                "(policy: pairing)",
                "fix": "add your own id to channel_options.chat.pairing.allow_from or "
                "`nexo pair seed chat default ID`",
            },
            {
                "level": "info",
                "check": "pairing.pending",
                "subject": "pairing",
                "detail": "1 pairing request(s) wait for the operator",
                "fix": "`nexo pair list` shows them; `nexo pair approve CODE` admits one",
            },
        ],
        "errors": 1,
        "warnings": 1,
    }
    assert as_json([]) == {"findings": [], "errors": 0, "warnings": 0}


def test_a_finding_prints_as_one_aligned_line() -> None:
    finding = Finding("warning", "pairing.open", "chat", "anyone reaches the model", "use pairing")
    assert finding.line() == "WARNING pairing.open             chat: anyone reaches the model -> use pairing"
    assert Finding("info", "x", "y", "z").line() == "INFO    x                        y: z"
