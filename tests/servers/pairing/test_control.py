"""The control plane (``nexo/pairing/...`` requests), through the MCP protocol in memory."""

from __future__ import annotations

import sqlite3
from typing import Any, TypeVar

import mcp_types as types
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict

from servers.pairing.control import METHODS, as_mcp_error
from servers.pairing.errors import CodeRefused, LockedOut, PendingNotFound, SealBroken
from servers.pairing.server import build_server
from servers.pairing.settings import PairingSettings
from servers.pairing.store import iso
from shared.protocol.pairing import (
    APPROVE_METHOD,
    CHECK_METHOD,
    CODE_INVALID,
    DENY_METHOD,
    LIST_METHOD,
    LOCKED_OUT,
    PENDING_NOT_FOUND,
    REVOKE_METHOD,
    SEED_METHOD,
    ApproveParams,
    ApproveRequest,
    ApproveResult,
    CheckParams,
    CheckRequest,
    CheckResult,
    DenyParams,
    DenyRequest,
    DenyResult,
    ListParams,
    ListRequest,
    ListResult,
    PairedRecord,
    Policy,
    RevokeParams,
    RevokeRequest,
    RevokeResult,
    SeedParams,
    SeedRequest,
    SeedResult,
)
from tests.servers.pairing.conftest import CHANNEL, START, ManualClock, connected, dm

pytestmark = pytest.mark.anyio
R = TypeVar("R", bound=types.Result)


class RawParams(types.RequestParams):
    """Params sent as given, to reach the server's own checks past the client-side models."""

    model_config = ConfigDict(extra="allow")


class RawRequest(types.Request[RawParams, str]):
    pass


async def ask(client: Client, request: types.Request[Any, Any], result: type[R]) -> R:
    return await client.session.send_request(request, result)


async def check(client: Client, params: CheckParams) -> CheckResult:
    return await ask(client, CheckRequest(params=params), CheckResult)


async def listing(client: Client, **params: Any) -> ListResult:
    return await ask(client, ListRequest(params=ListParams(**params)), ListResult)


async def test_the_extension_is_advertised_in_both_eras_and_no_tool_exists(settings: PairingSettings) -> None:
    expected = {
        "methods": list(METHODS),
        "code_length": 8,
        "code_alphabet": "ABCDEFGHJKLMNPQRSTUVWXYZ23456789",
    }
    async with Client(build_server(settings, clock=ManualClock())) as modern:
        extensions = modern.server_capabilities.extensions or {}
        tools = (await modern.list_tools()).tools
    async with Client(build_server(settings, clock=ManualClock()), mode="legacy") as legacy:
        experimental = legacy.server_capabilities.experimental or {}
        legacy_tools = (await legacy.list_tools()).tools
    assert extensions["nexo/pairing"] == experimental["nexo/pairing"] == expected
    assert tools == legacy_tools == []
    assert METHODS == (CHECK_METHOD, APPROVE_METHOD, DENY_METHOD, REVOKE_METHOD, SEED_METHOD, LIST_METHOD)
    assert METHODS == (
        "nexo/pairing/check",
        "nexo/pairing/approve",
        "nexo/pairing/deny",
        "nexo/pairing/revoke",
        "nexo/pairing/seed",
        "nexo/pairing/list",
    )


async def test_a_sender_is_challenged_approved_and_revoked(settings: PairingSettings) -> None:
    clock = ManualClock()
    async with connected(settings, clock) as client:
        challenge = await check(client, dm("111", display_name="Alice"))
        waiting = await listing(client)
        assert challenge.code is not None
        approve = ApproveParams(code=challenge.code.lower(), by="channel:console")
        approved = await ask(client, ApproveRequest(params=approve), ApproveResult)
        allowed = await check(client, dm("111"))
        clock.advance(minutes=1)
        revoke = RevokeParams(channel=CHANNEL, sender="111", platform="telegram")
        revoked = await ask(client, RevokeRequest(params=revoke), RevokeResult)
        after = await listing(client, include_revoked=True)
        unknown = await check(client, dm("111"))
    assert (challenge.verdict, challenge.reason, challenge.new_pending) == ("challenge", "code_issued", True)
    assert [(p.sender, p.display_name, p.pending_id) for p in waiting.pending] == [
        ("111", "Alice", challenge.pending_id)
    ]
    assert challenge.code not in waiting.model_dump_json()
    assert approved.record == PairedRecord(
        channel=CHANNEL,
        account="default",
        scope="dm",
        sender="111",
        role="contact",
        paired_at=iso(START),
        via="approve",
        by="channel:console",
    )
    assert (approved.request.pending_id, approved.request.status) == (challenge.pending_id, "approved")
    assert (allowed.verdict, allowed.role, allowed.reason) == ("allow", "contact", "paired")
    assert revoked.revoked == 1
    assert after.records == [approved.record.model_copy(update={"revoked_at": iso(clock.now)})]
    assert after.pending == []
    # The earlier code was issued under ten minutes ago, so no new one yet.
    assert (unknown.verdict, unknown.reason) == ("drop", "code_rate")


async def test_seed_deny_and_list_round_trip(settings: PairingSettings) -> None:
    async with connected(settings) as client:
        seed = SeedParams(
            channel=CHANNEL,
            platform="telegram",
            senders=["111", "-1001"],
            role="owner",
            by="cli",
            scope="group",
        )
        seeded = await ask(client, SeedRequest(params=seed), SeedResult)
        owner_dm = await check(client, dm("222", allow_from=["222"]))
        pending = await check(client, dm("333"))
        deny = DenyParams(pending_id=str(pending.pending_id), by="cli")
        denied = await ask(client, DenyRequest(params=deny), DenyResult)
        again = await ask(client, DenyRequest(params=deny), DenyResult)
        listed = await listing(client, channel=CHANNEL)
        other = await listing(client, channel="slack")
    assert ([r.sender for r in seeded.records], seeded.changed) == (["111", "-1001"], 2)
    assert {(r.scope, r.role, r.via) for r in seeded.records} == {("group", "owner", "seed")}
    assert (owner_dm.verdict, owner_dm.role) == ("allow", "owner")
    assert (denied.changed, denied.status, again.changed, again.status) == (True, "denied", False, "denied")
    assert (listed.records, listed.pending) == (seeded.records[::-1], [])
    assert (other.records, other.pending, other.lockout.failures) == ([], [], 0)


async def test_five_wrong_codes_lock_approvals_with_their_own_error_codes(settings: PairingSettings) -> None:
    async with connected(settings) as client:
        issued = await check(client, dm("111"))
        codes: list[int] = []
        for _ in range(5):
            with pytest.raises(MCPError) as wrong:
                await ask(
                    client, ApproveRequest(params=ApproveParams(code="2345-6789", by="cli")), ApproveResult
                )
            codes.append(wrong.value.code)
        with pytest.raises(MCPError) as locked:
            await ask(client, ApproveRequest(params=ApproveParams(code=issued.code, by="cli")), ApproveResult)
        listed = await listing(client)
    assert codes == [CODE_INVALID] * 5
    assert locked.value.code == LOCKED_OUT
    assert locked.value.message.startswith("approvals are locked until 2026-11-21 13:00:00 UTC (in 1 h)")
    assert (listed.lockout.until, listed.lockout.failures) == (iso(START.replace(hour=13)), 0)
    assert [p.sender for p in listed.pending] == ["111"]


async def test_mistyped_codes_never_lock_approvals(settings: PairingSettings) -> None:
    async with connected(settings) as client:
        issued = await check(client, dm("111"))
        for typo in ("2345-678", "2345-67O9", "2345 6789 1", "", "I0I0I0I0"):
            with pytest.raises(MCPError) as refused:
                await ask(client, ApproveRequest(params=ApproveParams(code=typo, by="cli")), ApproveResult)
            assert refused.value.code == CODE_INVALID
            assert refused.value.message.endswith("(a malformed code does not count toward the lockout)")
        lockout = (await listing(client)).lockout
        approved = await ask(
            client, ApproveRequest(params=ApproveParams(code=issued.code, by="cli")), ApproveResult
        )
    assert (lockout.until, lockout.failures) == (None, 0)
    assert approved.record.sender == "111"


@pytest.mark.parametrize(
    ("method", "params", "code", "message"),
    [
        (
            "nexo/pairing/approve",
            {"code": "ABCDEFGH", "pendingId": "pr_1", "by": "cli"},
            types.INVALID_PARAMS,
            "give exactly one of code (as the sender passed it on) or pending_id (from `nexo pair list`)",
        ),
        (
            "nexo/pairing/approve",
            {"pendingId": "pr_1", "by": "cli"},
            PENDING_NOT_FOUND,
            "no pending request 'pr_1': list the open ones with `nexo pair list` "
            "(4 more failed attempt(s) within 1 h lock approvals for 1 h)",
        ),
        (
            "nexo/pairing/approve",
            {"code": "ABCD-EFG0", "by": "cli"},
            CODE_INVALID,
            "'ABCD-EFG0' is not a pairing code: codes are 8 characters from ABCDEFGHJKLMNPQRSTUVWXYZ23456789 "
            "(no I, O, 0 or 1), e.g. 7KQ2-MXHD; copy it from the sender's message "
            "(a malformed code does not count toward the lockout)",
        ),
        (
            "nexo/pairing/deny",
            {"pendingId": "pr_1"},
            PENDING_NOT_FOUND,
            "no pending request 'pr_1': list the open ones with `nexo pair list`",
        ),
        (
            "nexo/pairing/check",
            {"channel": CHANNEL, "sender": "111", "scope": "group"},
            types.INVALID_PARAMS,
            "scope 'group' needs chat_id: pass the group's chat id, which keys the group",
        ),
        (
            "nexo/pairing/seed",
            {"channel": CHANNEL, "platform": "email", "senders": ["a@example.org", "bob"], "by": "cli"},
            types.INVALID_PARAMS,
            "senders[1]: sender id 'bob' is not an email address: use the bare address with exactly one '@' "
            "and a dotted domain, e.g. alice@example.org (no display name, no angle brackets) "
            "(platform 'email'); nothing was seeded",
        ),
        (
            "nexo/pairing/revoke",
            {"channel": CHANNEL, "sender": "@bob", "platform": "telegram"},
            types.INVALID_PARAMS,
            "sender id '@bob' is a Telegram username: usernames change and can be taken over by someone "
            "else, so pairing uses the numeric id (e.g. 123456789); find it in the message's from.id "
            "(platform 'telegram')",
        ),
        (
            "nexo/pairing/check",
            {"channel": CHANNEL, "sender": "111", "policy": {"dm": "everyone"}},
            types.INVALID_PARAMS,
            "Invalid request parameters",
        ),
    ],
)
async def test_refusals_come_back_as_json_rpc_errors_with_their_own_codes(
    settings: PairingSettings, method: str, params: dict[str, Any], code: int, message: str
) -> None:
    async with connected(settings) as client:
        with pytest.raises(MCPError) as caught:
            await ask(client, RawRequest(method=method, params=RawParams(**params)), CheckResult)
    assert (caught.value.code, caught.value.message) == (code, message)


async def test_a_storage_failure_is_a_drop_not_an_error(settings: PairingSettings) -> None:
    async with connected(settings) as client:
        await check(client, dm("111"))
        conn = sqlite3.connect(settings.database)
        try:
            conn.execute("DROP TABLE pending")
            conn.commit()
        finally:
            conn.close()
        result = await check(client, dm("222"))
        owner = await check(client, dm("333", allow_from=["333"]))
    assert (result.verdict, result.reason, result.reply) == ("drop", "storage_error", None)
    assert (owner.verdict, owner.reason) == ("allow", "allow_from")


async def test_an_unexpected_failure_of_an_operator_call_is_an_internal_error(
    settings: PairingSettings,
) -> None:
    async with connected(settings) as client:
        conn = sqlite3.connect(settings.database)
        try:
            conn.execute("DROP TABLE lockout")
            conn.commit()
        finally:
            conn.close()
        with pytest.raises(MCPError) as caught:
            await ask(client, ApproveRequest(params=ApproveParams(code="ABCDEFGH", by="cli")), ApproveResult)
    assert (caught.value.code, caught.value.message) == (types.INTERNAL_ERROR, "Internal server error")


def test_store_refusals_map_to_error_codes_and_anything_else_stays_internal() -> None:
    mapped = {
        type(exc).__name__: (error.code, error.message)
        for exc in (CodeRefused("c"), LockedOut("l"), PendingNotFound("p"))
        if (error := as_mcp_error(exc)) is not None
    }
    assert mapped == {
        "CodeRefused": (CODE_INVALID, "c"),
        "LockedOut": (LOCKED_OUT, "l"),
        "PendingNotFound": (PENDING_NOT_FOUND, "p"),
    }
    assert as_mcp_error(SealBroken("s")) is None
    assert as_mcp_error(RuntimeError("bug")) is None


async def test_policy_travels_as_a_nested_object(settings: PairingSettings) -> None:
    async with connected(settings) as client:
        open_dm = await check(client, dm("111", policy=Policy(dm="open")))
        raw = await ask(
            client,
            RawRequest(
                method="nexo/pairing/check",
                params=RawParams(channel=CHANNEL, sender="111", policy={"dm": "disabled"}),
            ),
            CheckResult,
        )
    assert (open_dm.verdict, open_dm.reason) == ("allow", "open_policy")
    assert (raw.verdict, raw.reason) == ("drop", "dm_disabled")
