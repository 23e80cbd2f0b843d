"""The permission policy: lists, rate limits, outbound allowlist, dangerous mode, tiers, unattended turns."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from pydantic import ValidationError

from orchestrator.mesh import Catalog, CatalogTool
from orchestrator.mesh.catalog import Tier
from orchestrator.permissions import PermissionPolicy, PolicyDecision, PolicyEngine, PolicyGate
from orchestrator.tools.local import LocalTool, local_catalog_tools
from shared.protocol.policy import Classification, classification_meta


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _tool(
    qualified: str,
    classification: Classification | None,
    *,
    shell: bool = False,
    tier: Tier | None = None,
    path_args: tuple[str, ...] = (),
) -> CatalogTool:
    server, _, name = qualified.rpartition("__")
    return CatalogTool(
        server,
        name,
        qualified,
        "",
        {},
        read_only=False,
        destructive=False,
        classification=classification,
        shell=shell,
        tier=tier,
        path_args=path_args,
    )


SEARCH = _tool("notes__search", "read_only")
WRITE = _tool("notes__write", "write", path_args=("path",))
SEND = _tool("telegram__reply", "outbound")
DEPLOY = _tool("ops__deploy", "dangerous")
MYSTERY = _tool("misc__thing", None)
SHELL = _tool("sh__run", "dangerous", shell=True)  # noqa: S604 -- a catalog flag, no subprocess


def _engine(clock: Clock | None = None, workspace: Path | None = None, **policy: Any) -> PolicyEngine:
    return PolicyEngine(PermissionPolicy.model_validate(policy), workspace=workspace, clock=clock or Clock())


def _decide(
    engine: PolicyEngine,
    tool: CatalogTool,
    arguments: Mapping[str, Any] | None = None,
    *,
    unattended: bool = False,
    approval_live: bool = False,
) -> PolicyDecision:
    return engine.decide(tool, arguments or {}, unattended=unattended, approval_live=approval_live)


# -- tiers -------------------------------------------------------------------------------------------


def test_the_default_policy_runs_read_only_tools_and_asks_for_everything_else() -> None:
    engine = PolicyEngine()
    assert _decide(engine, SEARCH) == PolicyDecision("run", "notes__search is tier safe", "read_only", "safe")
    assert _decide(engine, WRITE) == PolicyDecision(
        "ask", "notes__write is write: tier confirm asks the operator", "write", "confirm"
    )
    assert _decide(engine, SEND).action == "ask"
    assert _decide(engine, DEPLOY).action == "ask"
    assert _decide(engine, MYSTERY) == PolicyDecision(
        "ask", "misc__thing is unclassified: tier confirm asks the operator", "unclassified", "confirm"
    )


def test_a_classification_tier_can_be_changed() -> None:
    engine = _engine(tiers={"write": "notify", "outbound": "safe"})
    assert _decide(engine, WRITE) == PolicyDecision(
        "notify", "notes__write is tier notify: it runs and the operator is told", "write", "notify"
    )
    assert _decide(engine, SEND).action == "run"


def test_a_per_tool_tier_overrides_the_classification_tier_first_match_wins() -> None:
    engine = _engine(tools={"notes__write": "safe", "notes__*": "notify", "channel_send": "notify"})
    assert _decide(engine, WRITE) == PolicyDecision("run", "notes__write is tier safe", "write", "safe")
    assert _decide(engine, SEARCH).tier == "notify"
    local = _tool("channel_send", "outbound")
    assert _decide(engine, local).action == "notify"


def test_the_operator_may_classify_tools_over_what_the_server_declares() -> None:
    engine = _engine(classify={"misc__*": "read_only", "notes__search": "dangerous"})
    assert _decide(engine, MYSTERY) == PolicyDecision("run", "misc__thing is tier safe", "read_only", "safe")
    assert _decide(engine, SEARCH) == PolicyDecision(
        "ask", "notes__search is dangerous: tier confirm asks the operator", "dangerous", "confirm"
    )


def test_only_the_orchestrator_can_fix_a_tools_tier() -> None:
    engine = PolicyEngine()
    local = _tool("notify_origin", "outbound", tier="safe")
    assert _decide(engine, local) == PolicyDecision("run", "notify_origin is tier safe", "outbound", "safe")
    from_server = _tool("evil__send", "outbound", tier="safe")
    assert _decide(engine, from_server).action == "ask"
    assert _decide(_engine(tools={"notify_origin": "confirm"}), local).action == "ask"


# -- lists -------------------------------------------------------------------------------------------


def test_denied_tools_are_denied_before_anything_else() -> None:
    engine = _engine(denied_tools=["ops__*"], tools={"ops__deploy": "safe"}, dangerous_mode=True)
    assert _decide(engine, DEPLOY) == PolicyDecision(
        "deny", "ops__deploy is denied by permissions.denied_tools ('ops__*')", "dangerous", "safe"
    )


def test_a_tool_outside_allowed_tools_is_denied_without_asking() -> None:
    engine = _engine(allowed_tools=["notes__*", "channel_*"])
    assert _decide(engine, SEARCH).action == "run"
    assert _decide(engine, _tool("channel_list", "read_only")).action == "run"
    assert _decide(engine, SEND) == PolicyDecision(
        "deny", "telegram__reply is not in permissions.allowed_tools", "outbound", "confirm"
    )
    assert _decide(_engine(allowed_tools=[]), SEARCH).action == "deny"


# -- outbound allowlist ------------------------------------------------------------------------------


def test_outbound_calls_may_address_only_allowlisted_recipients() -> None:
    engine = _engine(outbound_allowlist={"telegram": ["42", "team-*"]}, tiers={"outbound": "safe"})
    assert _decide(engine, SEND, {"chat_id": "42", "text": "hi"}).action == "run"
    assert _decide(engine, SEND, {"chat_id": 42}).action == "run"
    assert _decide(engine, SEND, {"recipient": "team-ops"}).action == "run"
    assert _decide(engine, SEND, {"chat_id": "7"}) == PolicyDecision(
        "deny",
        "telegram__reply may not address '7' on 'telegram': it is not in "
        "permissions.outbound_allowlist.telegram",
        "outbound",
        "safe",
    )
    assert _decide(engine, SEND, {"to": ["42", "99"]}).action == "deny"
    assert _decide(engine, SEND, {"text": "to whom?"}) == PolicyDecision(
        "deny",
        "telegram__reply names no recipient (chat_id, recipient, to, channel_id), so "
        "permissions.outbound_allowlist.telegram cannot be checked",
        "outbound",
        "safe",
    )


def test_an_outbound_server_missing_from_the_allowlist_is_denied() -> None:
    engine = _engine(outbound_allowlist={"slack": ["*"]})
    assert _decide(engine, SEND, {"chat_id": "42"}) == PolicyDecision(
        "deny",
        "telegram__reply sends through 'telegram', which permissions.outbound_allowlist does not list; "
        "add `telegram: [<chat id>]` to allow it",
        "outbound",
        "confirm",
    )
    slack = _tool("slack__post", "outbound")
    assert _decide(engine, slack, {}).action == "ask"  # "*" allows any recipient, or none


def test_the_orchestrators_channel_tools_are_checked_against_the_server_they_name() -> None:
    engine = _engine(outbound_allowlist={"telegram": ["42"]})
    channel_send = _tool("channel_send", "outbound")
    allowed = {"server": "telegram", "content": "hi", "arguments": {"chat_id": "42"}}
    assert _decide(engine, channel_send, allowed).action == "ask"
    refused = {"server": "telegram", "content": "hi", "arguments": {"chat_id": "7"}}
    assert _decide(engine, channel_send, refused).action == "deny"
    notify_channel = _tool("notify_channel", "outbound")
    assert _decide(engine, notify_channel, {"server": "email", "chat_id": "a@b"}).action == "deny"
    reply = _tool("notify_origin", "outbound", tier="safe")
    assert _decide(engine, reply, {"content": "working on it"}).action == "run"


def test_without_an_allowlist_outbound_calls_go_anywhere_their_tier_allows() -> None:
    assert _decide(_engine(tiers={"outbound": "safe"}), SEND, {"chat_id": "x"}).action == "run"


# -- rate limits -------------------------------------------------------------------------------------


def test_a_rate_limit_by_classification_denies_past_the_burst_and_refills_with_time() -> None:
    clock = Clock()
    engine = _engine(
        clock, tiers={"outbound": "safe"}, rate_limits={"outbound": {"per_minute": 6, "burst": 2}}
    )
    other = _tool("slack__post", "outbound")
    assert [_decide(engine, SEND).action, _decide(engine, other).action] == ["run", "run"]
    assert _decide(engine, SEND) == PolicyDecision(
        "deny", "rate limited: 6 per minute (outbound); try again later", "outbound", "safe"
    )
    assert _decide(engine, SEARCH).action == "run"  # other classifications are not limited
    clock.now += 9.9
    assert _decide(engine, SEND).action == "deny"
    clock.now += 0.1
    assert _decide(engine, SEND).action == "run"
    assert _decide(engine, SEND).action == "deny"


def test_a_rate_limit_by_pattern_and_denied_calls_take_no_token() -> None:
    clock = Clock()
    engine = _engine(clock, rate_limits={"notes__*": {"per_minute": 1, "burst": 1}})
    assert _decide(engine, WRITE, unattended=True).action == "deny"  # nobody to ask: no token used
    assert _decide(engine, WRITE).action == "ask"
    assert _decide(engine, SEARCH) == PolicyDecision(
        "deny", "rate limited: 1 per minute (notes__*); try again later", "read_only", "safe"
    )
    clock.now += 60
    assert _decide(engine, SEARCH).action == "run"


# -- dangerous mode ----------------------------------------------------------------------------------


def test_dangerous_mode_runs_everything_in_a_conversation() -> None:
    engine = _engine(dangerous_mode=True)
    for tool in (WRITE, SEND, DEPLOY, MYSTERY):
        decision = _decide(engine, tool)
        assert (decision.action, decision.reason) == ("run", f"dangerous mode: {tool.qualified} runs unasked")
    assert _decide(engine, SHELL, {"command": "rm -rf build"}).action == "run"


def test_dangerous_mode_still_honours_lists_rate_limits_and_the_allowlist() -> None:
    engine = _engine(
        dangerous_mode=True,
        denied_tools=["ops__*"],
        outbound_allowlist={"telegram": ["42"]},
        rate_limits={"write": {"per_minute": 1, "burst": 1}},
    )
    assert _decide(engine, DEPLOY).action == "deny"
    assert _decide(engine, SEND, {"chat_id": "7"}).action == "deny"
    assert [_decide(engine, WRITE).action, _decide(engine, WRITE).action] == ["run", "deny"]


def test_unattended_turns_refuse_dangerous_and_destructive_calls_even_in_dangerous_mode() -> None:
    engine = _engine(dangerous_mode=True)
    assert _decide(engine, DEPLOY, unattended=True) == PolicyDecision(
        "deny",
        "unattended turn: ops__deploy is classified dangerous; dangerous and destructive calls never run "
        "unattended, even in dangerous mode. Run it from a conversation",
        "dangerous",
        "confirm",
    )
    destructive = _decide(engine, SHELL, {"command": "git push --force"}, unattended=True)
    assert destructive.action == "deny"
    assert destructive.reason.startswith(
        "unattended turn: git push --force rewrites the remote branch's history;"
    )
    assert _decide(engine, SHELL, {"command": "ls"}, unattended=True).action == "run"
    assert _decide(engine, WRITE, unattended=True).action == "run"


def test_with_a_live_approver_unattended_dangerous_calls_ask_instead() -> None:
    engine = _engine(dangerous_mode=True)
    assert _decide(engine, DEPLOY, unattended=True, approval_live=True) == PolicyDecision(
        "ask",
        "unattended turn: ops__deploy is classified dangerous; it needs an operator's approval",
        "dangerous",
        "confirm",
    )


# -- unattended turns --------------------------------------------------------------------------------


def test_an_unattended_ask_becomes_a_deny_that_names_the_fix() -> None:
    engine = PolicyEngine()
    assert _decide(engine, WRITE, unattended=True) == PolicyDecision(
        "deny",
        "unattended turn: notes__write needs approval; nobody is there to give it. Give the tool tier "
        "'safe' or 'notify' under permissions.tools, or run it from a conversation",
        "write",
        "confirm",
    )
    assert _decide(engine, SEARCH, unattended=True).action == "run"
    assert _decide(engine, WRITE, unattended=True, approval_live=True).action == "ask"


def test_unattended_turns_run_safe_and_notify_tiers_but_never_destructive_commands() -> None:
    engine = _engine(tools={"notes__write": "notify", "sh__run": "safe"})
    assert _decide(engine, WRITE, unattended=True).action == "notify"
    assert _decide(engine, SHELL, {"command": "git status"}, unattended=True).action == "run"
    assert _decide(engine, SHELL, {"command": "rm -rf /"}, unattended=True).action == "deny"
    assert _decide(engine, SHELL, {"cmd": "ls"}, unattended=True).reason == (
        "unattended turn: sh__run was called without a command string to inspect; dangerous and "
        "destructive calls never run unattended, even in dangerous mode. Run it from a conversation"
    )


# -- auto-approve ------------------------------------------------------------------------------------


def test_auto_approve_runs_what_the_table_vouches_for_and_explains_the_rest(tmp_path: Path) -> None:
    engine = _engine(workspace=tmp_path, auto_approve=True)
    assert _decide(engine, SHELL, {"command": "git log -n 3"}) == PolicyDecision(
        "run", "auto-approved: read-only shell command", "dangerous", "confirm"
    )
    assert _decide(engine, WRITE, {"path": "notes/today.md"}).reason == (
        f"auto-approved: writes only inside the workspace {tmp_path.resolve()}"
    )
    assert _decide(engine, SHELL, {"command": "rm -rf x"}) == PolicyDecision(
        "ask",
        "sh__run is dangerous: tier confirm asks the operator "
        "(destructive command: rm -r/-f deletes files and directories without asking)",
        "dangerous",
        "confirm",
    )
    assert _decide(engine, SHELL, {"command": "ls"}, unattended=True).action == "run"
    assert _decide(engine, WRITE, {"path": "/etc/hosts"}, unattended=True).action == "deny"


def test_auto_approve_sees_the_operators_classification() -> None:
    engine = _engine(auto_approve=True, classify={"misc__*": "write"})
    decision = _decide(engine, MYSTERY, {"path": "x"})
    assert decision == PolicyDecision(
        "ask",
        "misc__thing is write: tier confirm asks the operator "
        "(no workspace is configured, so file writes always ask)",
        "write",
        "confirm",
    )


def test_auto_approve_is_off_by_default() -> None:
    assert _decide(PolicyEngine(), SHELL, {"command": "ls"}).action == "ask"


# -- configuration -----------------------------------------------------------------------------------


def test_unclassified_may_not_be_safe_and_the_error_names_the_fix() -> None:
    with pytest.raises(ValidationError) as raised:
        PermissionPolicy.model_validate({"tiers": {"unclassified": "safe"}})
    message = str(raised.value)
    assert "tiers.unclassified may not be 'safe'" in message
    assert "Use 'notify' or 'confirm', or classify the tools you trust under `classify:`" in message
    assert (
        PermissionPolicy.model_validate({"tiers": {"unclassified": "notify"}}).tiers.unclassified == "notify"
    )


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        ({"tier": {}}, "Extra inputs are not permitted"),
        ({"tiers": {"writes": "safe"}}, "Extra inputs are not permitted"),
        ({"tiers": {"write": "always"}}, "Input should be 'safe', 'notify' or 'confirm'"),
        ({"tools": {"x": "maybe"}}, "Input should be 'safe', 'notify' or 'confirm'"),
        ({"classify": {"x": "harmless"}}, "Input should be 'read_only', 'write', 'outbound' or 'dangerous'"),
        ({"rate_limits": {"outbound": {"per_minute": 0}}}, "Input should be greater than 0"),
        ({"rate_limits": {"outbound": {"per_minute": 1, "burst": 0}}}, "greater than or equal to 1"),
        ({"tools": {" ": "safe"}}, "an empty pattern; use a tool pattern such as `notes__*`"),
    ],
)
def test_bad_policies_are_refused_with_the_problem(config: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValidationError, match=fragment.replace("(", r"\(").replace("*", r"\*")):
        PermissionPolicy.model_validate(config)


def test_a_full_policy_validates_from_configuration_data() -> None:
    policy = PermissionPolicy.model_validate(
        {
            "tiers": {"write": "notify"},
            "tools": {"notes__*": "safe"},
            "classify": {"misc__*": "write"},
            "allowed_tools": ["*"],
            "denied_tools": ["ops__*"],
            "outbound_allowlist": {"telegram": ["42"]},
            "rate_limits": {"outbound": {"per_minute": 10, "burst": 3}},
            "auto_approve": True,
            "dangerous_mode": False,
        }
    )
    assert (policy.tiers.write, policy.tiers.read_only, policy.rate_limits["outbound"].burst) == (
        "notify",
        "safe",
        3,
    )


# -- how tools get their classification --------------------------------------------------------------


def _server_tool(name: str, meta: dict[str, Any] | None = None, read_only: bool | None = None) -> types.Tool:
    annotations = types.ToolAnnotations(read_only_hint=read_only) if read_only is not None else None
    return types.Tool(name=name, input_schema={"type": "object"}, annotations=annotations, _meta=meta)


def test_the_catalog_reads_classification_shell_and_path_args_from_meta() -> None:
    catalog = Catalog.build(
        {
            "fs": [
                _server_tool("write", classification_meta("write", path_args=("path", "target"))),
                _server_tool("shell", classification_meta("dangerous", shell=True)),  # noqa: S604
                _server_tool("read", read_only=True),
                _server_tool("lying", classification_meta("write"), read_only=True),
                _server_tool("bare"),
                _server_tool("odd", {"nexo/classification": "harmless", "nexo/path_args": "path"}),
                _server_tool("shell_only", {"nexo/shell": True, "nexo/path_args": ["p", 3, ""]}),
            ]
        }
    )
    summary = {t.name: (t.classification, t.shell, t.path_args, t.tier) for t in catalog}
    assert summary == {
        "write": ("write", False, ("path", "target"), None),
        "shell": ("dangerous", True, (), None),
        "read": ("read_only", False, (), None),
        "lying": ("write", False, (), None),
        "bare": (None, False, (), None),
        "odd": (None, False, (), None),
        "shell_only": ("dangerous", True, ("p",), None),
    }


def test_catalog_tools_built_the_old_way_keep_working() -> None:
    tool = CatalogTool("notes", "search", "notes__search", "", {}, read_only=True, destructive=False)
    assert (tool.classification, tool.shell, tool.path_args, tool.tier) == ("read_only", False, (), None)
    assert CatalogTool("n", "w", "n__w", "", {}, read_only=False, destructive=True).classification is None


def test_local_tools_carry_their_classification_and_tier() -> None:
    async def handler(context: Any, arguments: Mapping[str, Any]) -> str:
        return ""

    tools = local_catalog_tools(
        [
            LocalTool("channel_list", "", {}, handler, read_only=True),
            LocalTool("channel_send", "", {}, handler, read_only=False, classification="outbound"),
            LocalTool(
                "notify_origin", "", {}, handler, read_only=True, classification="outbound", tier="safe"
            ),
            LocalTool("other", "", {}, handler, read_only=False),
        ]
    )
    assert [(t.qualified, t.server, t.classification, t.tier) for t in tools] == [
        ("channel_list", "", "read_only", None),
        ("channel_send", "", "outbound", None),
        ("notify_origin", "", "outbound", "safe"),
        ("other", "", None, None),
    ]
    engine = PolicyEngine()
    assert [_decide(engine, t).action for t in tools] == ["run", "ask", "run", "ask"]


# -- the private_data capability -----------------------------------------------------------------

LEDGER = CatalogTool(
    "audit",
    "audit_search",
    "audit__audit_search",
    "",
    {},
    read_only=True,
    destructive=False,
    private_data=True,
)


def test_a_contact_may_not_run_a_read_only_tool_that_reads_the_operators_private_data() -> None:
    engine = _engine()
    contact = engine.decide(LEDGER, {}, unattended=False, private_data=engine.grants_private_data("contact"))
    owner = engine.decide(LEDGER, {}, unattended=False, private_data=engine.grants_private_data("owner"))
    assert (contact.action, owner.action) == ("deny", "run")
    assert contact.reason == (
        "audit__audit_search reads the operator's private data, and this conversation's sender does not "
        "hold the private_data capability; answer without it (the operator can grant it with "
        "`private_data: everyone` in the binding's permissions)"
    )
    assert engine.decide(SEARCH, {}, unattended=False, private_data=False).action == "run"


@pytest.mark.parametrize(
    ("grant", "owner", "contact"),
    [("owner", True, False), ("everyone", True, True), ("nobody", False, False)],
)
def test_the_binding_says_who_holds_the_private_data_capability(
    grant: str, owner: bool, contact: bool
) -> None:
    engine = _engine(private_data=grant)
    assert (engine.grants_private_data("owner"), engine.grants_private_data("contact")) == (owner, contact)


def test_the_operator_can_mark_a_servers_tools_as_reading_private_data() -> None:
    engine = _engine(private_data_tools=["notes__*"])
    assert (engine.reads_private_data(SEARCH), engine.reads_private_data(SEND)) == (True, False)
    assert engine.decide(SEARCH, {}, unattended=False, private_data=False).action == "deny"


def test_a_contacts_gate_hides_private_data_tools_from_the_model() -> None:
    catalog = Catalog([LEDGER, SEARCH, SEND])
    gate = PolicyGate(_NoApprover(), list, _engine())
    contact, owner = gate.for_principal("contact"), gate.for_principal("owner")
    assert [t.qualified for t in contact.visible(catalog)] == ["notes__search", "telegram__reply"]
    assert [t.qualified for t in owner.visible(catalog)] == [t.qualified for t in catalog]
    assert contact.for_turn(unattended=False).private_data is False
    assert gate.for_turn(unattended=True).private_data is True
    assert (
        PolicyGate(_NoApprover(), list, _engine(private_data="nobody")).for_turn(unattended=True).private_data
        is False
    )


def test_a_gate_keeps_its_principal_and_origin_through_every_derivation() -> None:
    gate = PolicyGate(_NoApprover(), list, _engine())
    contact = gate.for_principal("contact").for_origin('inbox chat "c7", sender "alice" (contact)')
    turn = contact.for_turn(unattended=False, approval_live=True)
    source = gate.for_origin('webhook chat "github", sender "webhook:github" (source)').for_principal(
        "source"
    )
    assert (turn.private_data, turn.origin, turn.approval_live) == (
        False,
        'inbox chat "c7", sender "alice" (contact)',
        True,
    )
    assert (source.private_data, source.origin) == (
        False,
        'webhook chat "github", sender "webhook:github" (source)',
    )
    assert gate.for_principal("owner").private_data is True


def test_private_data_is_declared_in_the_tools_meta_and_read_into_the_catalog() -> None:
    tool = types.Tool(
        name="audit_search",
        input_schema={"type": "object"},
        meta=classification_meta("read_only", private_data=True),
    )
    plain = types.Tool(name="now", input_schema={"type": "object"}, meta=classification_meta("read_only"))
    catalog = Catalog.build({"audit": [tool], "time": [plain]})
    assert [(t.qualified, t.private_data) for t in catalog] == [
        ("audit__audit_search", True),
        ("time__now", False),
    ]


class _NoApprover:
    async def ask(self, *_: object, origin: str = "") -> Any:
        raise AssertionError("nothing in these tests asks")
