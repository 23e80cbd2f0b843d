"""The pairing store: the gate's policy table, the code limits, the lockout, and failing closed."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from servers.pairing.errors import CodeRefused, InvalidRequest, LockedOut, PendingNotFound
from servers.pairing.server import open_store
from servers.pairing.settings import PairingSettings
from servers.pairing.store import PairingStore, iso
from shared.protocol.pairing import CheckParams, CheckResult, PairedRecord, Policy, Role, Scope
from tests.servers.pairing.conftest import CHANNEL, START, ManualClock, dm, group, stored_bytes

pytestmark = pytest.mark.anyio

GROUP_CHAT = "-1001234567890"


async def seed(
    store: PairingStore,
    *senders: str,
    role: Role = "contact",
    scope: Scope = "dm",
    account: str = "default",
    platform: str = "telegram",
) -> list[PairedRecord]:
    records, _ = await store.seed(
        channel=CHANNEL,
        account=account,
        platform=platform,
        senders=senders,
        role=role,
        scope=scope,
        by="test",
    )
    return records


async def open_requests(store: PairingStore) -> list[tuple[str, int]]:
    _, pending, _ = await store.listing()
    return [(request.sender, request.replies) for request in pending]


def verdict(result: CheckResult) -> tuple[str, str | None, str]:
    return result.verdict, result.role, result.reason


# -- the policy table ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "paired", "owner", "expected"),
    [
        ("disabled", None, False, ("drop", None, "dm_disabled")),
        ("disabled", "contact", True, ("drop", None, "dm_disabled")),
        ("pairing", None, False, ("challenge", None, "code_issued")),
        ("pairing", "contact", False, ("allow", "contact", "paired")),
        ("pairing", "owner", False, ("allow", "owner", "paired")),
        ("pairing", None, True, ("allow", "owner", "allow_from")),
        ("pairing", "contact", True, ("allow", "owner", "allow_from")),
        ("allowlist", None, False, ("drop", None, "unknown_sender")),
        ("allowlist", "contact", False, ("allow", "contact", "paired")),
        ("allowlist", None, True, ("allow", "owner", "allow_from")),
        ("open", None, False, ("allow", "contact", "open_policy")),
        ("open", "owner", False, ("allow", "owner", "paired")),
        ("open", None, True, ("allow", "owner", "allow_from")),
    ],
)
async def test_direct_messages_follow_the_policy_table(
    store: PairingStore, policy: str, paired: Role | None, owner: bool, expected: tuple[str, str | None, str]
) -> None:
    if paired is not None:
        await seed(store, "111", role=paired)
    allow_from = ["111"] if owner else ["999"]
    result = await store.check(dm("111", policy=Policy.model_validate({"dm": policy}), allow_from=allow_from))
    assert verdict(result) == expected
    challenged = expected[0] == "challenge"
    assert (result.reply is not None, result.code is not None, result.new_pending) == (challenged,) * 3
    assert await open_requests(store) == ([("111", 1)] if challenged else [])


@pytest.mark.parametrize("padded", ["owner1 ", " owner1", "owner1\t", "owner1\n", "\u00a0owner1"])
async def test_a_sender_id_padded_with_whitespace_is_not_the_owner_and_gets_no_code(
    store: PairingStore, padded: str
) -> None:
    params = dm(padded, allow_from=["owner1"]).model_copy(update={"platform": "generic"})
    assert verdict(await store.check(params)) == ("drop", None, "invalid_sender")
    assert await open_requests(store) == []


async def test_a_padded_id_is_refused_at_pairing_and_at_the_gate_alike(store: PairingStore) -> None:
    with pytest.raises(InvalidRequest, match="leading or trailing whitespace"):
        await seed(store, "alice ", platform="generic")
    with pytest.raises(InvalidRequest, match="leading or trailing whitespace"):
        await store.check(dm("111", allow_from=[" 111"]))
    await seed(store, "alice", platform="generic")
    padded = dm("alice ").model_copy(update={"platform": "generic"})
    assert verdict(await store.check(padded)) == ("drop", None, "invalid_sender")


@pytest.mark.parametrize(
    ("policy", "group_paired", "require_mention", "mentioned", "expected"),
    [
        ("disabled", True, False, True, ("drop", None, "group_disabled")),
        ("allowlist", False, True, True, ("drop", None, "group_not_allowed")),
        ("allowlist", False, False, False, ("drop", None, "group_not_allowed")),
        ("allowlist", True, True, True, ("allow", "contact", "paired_group")),
        ("allowlist", True, True, False, ("drop", None, "mention_required")),
        ("allowlist", True, False, False, ("allow", "contact", "paired_group")),
        ("open", False, True, True, ("allow", "contact", "open_policy")),
        ("open", False, True, False, ("drop", None, "mention_required")),
        ("open", False, False, False, ("allow", "contact", "open_policy")),
    ],
)
async def test_group_messages_follow_the_policy_table_and_never_get_codes(
    store: PairingStore,
    policy: str,
    group_paired: bool,
    require_mention: bool,
    mentioned: bool,
    expected: tuple[str, str | None, str],
) -> None:
    if group_paired:
        await seed(store, GROUP_CHAT, scope="group")
    rules = Policy.model_validate({"group": policy, "require_mention": require_mention})
    result = await store.check(group("555", GROUP_CHAT, policy=rules, mentioned=mentioned))
    assert verdict(result) == expected
    assert (result.reply, result.code, result.pending_id) == (None, None, None)
    assert await open_requests(store) == []


async def test_a_dm_paired_sender_or_owner_gets_no_access_to_an_unpaired_group(store: PairingStore) -> None:
    await seed(store, "111")
    rules = Policy(group="allowlist", require_mention=False)
    # On Telegram a private chat's id equals the user's id: the dm record still opens no group.
    same_id = await store.check(group("111", "111", policy=rules))
    other = await store.check(group("111", GROUP_CHAT, policy=rules))
    owner = await store.check(group("222", GROUP_CHAT, policy=rules, allow_from=["222"]))
    assert verdict(same_id) == verdict(other) == verdict(owner) == ("drop", None, "group_not_allowed")


async def test_an_owner_in_an_allowed_group_is_a_contact_there(store: PairingStore) -> None:
    await seed(store, GROUP_CHAT, scope="group")
    result = await store.check(group("222", GROUP_CHAT, policy=Policy(group="allowlist"), allow_from=["222"]))
    assert verdict(result) == ("allow", "contact", "paired_group")


async def test_group_chat_ids_use_the_platform_rules(store: PairingStore) -> None:
    await seed(store, "c024be7lh", scope="group", platform="slack")
    rules = Policy(group="allowlist", require_mention=False)

    def slack_group(chat_id: str) -> CheckParams:
        return CheckParams(
            channel=CHANNEL,
            platform="slack",
            sender="U024BE7LH",
            scope="group",
            chat_id=chat_id,
            policy=rules,
        )

    allowed = await store.check(slack_group("C024BE7LH"))
    invalid = await store.check(slack_group("#general"))
    assert verdict(allowed) == ("allow", "contact", "paired_group")
    assert verdict(invalid) == ("drop", None, "invalid_chat")


async def test_a_group_check_without_a_chat_id_is_refused(store: PairingStore) -> None:
    with pytest.raises(InvalidRequest) as caught:
        await store.check(CheckParams(channel=CHANNEL, platform="telegram", sender="111", scope="group"))
    assert str(caught.value) == "scope 'group' needs chat_id: pass the group's chat id, which keys the group"


@pytest.mark.parametrize("sender", ["@alice", "１１１", "111\u200b", "", "1" * 300])
async def test_an_invalid_sender_is_dropped_without_a_reply_and_nothing_is_stored(
    store: PairingStore, sender: str
) -> None:
    await seed(store, "111")
    result = await store.check(dm(sender, allow_from=["111"]))
    assert result == CheckResult(verdict="drop", reason="invalid_sender")
    assert await open_requests(store) == []


async def test_a_bad_allow_from_entry_is_refused_naming_it(store: PairingStore) -> None:
    with pytest.raises(InvalidRequest) as caught:
        await store.check(dm("111", allow_from=["111", "@owner"]))
    assert str(caught.value).startswith("sender id '@owner' is a Telegram username")
    assert str(caught.value).endswith("(platform 'telegram')")


async def test_display_names_never_match_and_are_shown_cleaned(store: PairingStore) -> None:
    await seed(store, "111")
    result = await store.check(dm("222", display_name="111"))
    spoof = await store.check(dm("333", display_name="Eve\u202e\n  (owner)\x07"))
    _, pending, _ = await store.listing()
    assert verdict(result) == verdict(spoof) == ("challenge", None, "code_issued")
    assert [(request.sender, request.display_name) for request in pending] == [
        ("222", "111"),
        ("333", "Eve (owner)"),
    ]


# -- codes and their limits ----------------------------------------------------------------------


async def test_a_new_sender_gets_a_code_and_the_same_code_when_writing_again(store: PairingStore) -> None:
    first = await store.check(dm("111", display_name="Alice"))
    second = await store.check(dm("111"))
    assert first.code is not None
    assert first == CheckResult(
        verdict="challenge",
        reason="code_issued",
        reply=(
            f"I only talk with people my operator has approved. Your pairing code is {first.code}. Give it "
            f"to the operator, who approves you with: nexo pair approve {first.code}. "
            "The code expires in 1 h."
        ),
        code=first.code,
        pending_id=first.pending_id,
        new_pending=True,
    )
    assert second == first.model_copy(update={"reason": "code_resent", "new_pending": False})


async def test_a_pending_sender_gets_at_most_two_replies(store: PairingStore) -> None:
    first = await store.check(dm("111"))
    await store.check(dm("111"))
    third = await store.check(dm("111"))
    fourth = await store.check(dm("111"))
    assert third == CheckResult(verdict="challenge", reason="reply_cap", pending_id=first.pending_id)
    assert fourth == third
    assert await open_requests(store) == [("111", 2)]


async def test_at_most_three_requests_wait_per_channel_account(store: PairingStore) -> None:
    issued = [await store.check(dm(sender)) for sender in ("111", "222", "333")]
    full = await store.check(dm("444"))
    again = await store.check(dm("222"))
    other_account = await store.check(dm("444", account="work"))
    await store.deny(str(issued[0].pending_id), by="test")
    after_deny = await store.check(dm("444"))
    assert [result.reason for result in issued] == ["code_issued"] * 3
    assert full == CheckResult(verdict="drop", reason="pending_full")
    assert (again.reason, again.code) == ("code_resent", issued[1].code)
    assert (other_account.reason, after_deny.reason) == ("code_issued", "code_issued")


async def test_a_code_expires_after_its_ttl(store: PairingStore, clock: ManualClock) -> None:
    first = await store.check(dm("111"))
    clock.advance(minutes=59, seconds=59)
    before = await store.check(dm("111"))
    clock.advance(seconds=1)
    with pytest.raises(CodeRefused) as caught:
        await store.approve(code=first.code, by="cli")
    renewed = await store.check(dm("111"))
    assert (before.reason, before.code) == ("code_resent", first.code)
    assert str(caught.value).startswith(
        f"code {first.code!r} is expired; the sender gets a new code when they write again"
    )
    assert (renewed.reason, renewed.new_pending) == ("code_issued", True)
    assert (renewed.code, renewed.pending_id) != (first.code, first.pending_id)


async def test_a_code_pairs_once(store: PairingStore) -> None:
    issued = await store.check(dm("111", display_name="Alice"))
    assert issued.code is not None
    record, request = await store.approve(code=issued.code.lower()[:4] + "-" + issued.code[4:], by="cli")
    with pytest.raises(CodeRefused) as by_code:
        await store.approve(code=issued.code, by="cli")
    with pytest.raises(PendingNotFound) as by_id:
        await store.approve(pending_id=issued.pending_id, by="cli")
    allowed = await store.check(dm("111"))
    assert record == PairedRecord(
        channel=CHANNEL,
        account="default",
        scope="dm",
        sender="111",
        role="contact",
        paired_at=iso(START),
        via="approve",
        by="cli",
    )
    assert (request.pending_id, request.sender, request.display_name, request.status) == (
        issued.pending_id,
        "111",
        "Alice",
        "approved",
    )
    assert str(by_code.value).startswith(
        f"code {issued.code!r} was already used: each code pairs one sender once"
    )
    assert str(by_id.value).startswith(f"pending request {issued.pending_id!r} is approved")
    assert verdict(allowed) == ("allow", "contact", "paired")


async def test_a_sender_gets_one_new_code_per_ten_minutes(store: PairingStore, clock: ManualClock) -> None:
    first = await store.check(dm("111"))
    clock.advance(minutes=1)
    assert await store.deny(str(first.pending_id), by="cli") == (True, "denied")
    clock.advance(minutes=8, seconds=59)
    too_soon = await store.check(dm("111"))
    clock.advance(seconds=1)
    renewed = await store.check(dm("111"))
    assert too_soon == CheckResult(verdict="drop", reason="code_rate")
    assert (renewed.reason, renewed.new_pending) == ("code_issued", True)
    assert renewed.pending_id != first.pending_id


async def test_approve_by_pending_id_and_as_owner(store: PairingStore) -> None:
    issued = await store.check(dm("111"))
    record, _ = await store.approve(pending_id=issued.pending_id, by="channel:console", role="owner")
    allowed = await store.check(dm("111"))
    assert (record.role, record.via, record.by) == ("owner", "approve", "channel:console")
    assert verdict(allowed) == ("allow", "owner", "paired")


@pytest.mark.parametrize(("code", "pending_id"), [(None, None), ("ABCDEFGH", "pr_0000000000000000")])
async def test_approve_needs_exactly_one_of_code_and_pending_id(
    store: PairingStore, code: str | None, pending_id: str | None
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        await store.approve(code=code, pending_id=pending_id, by="cli")
    _, _, lockout = await store.listing()
    assert str(caught.value) == (
        "give exactly one of code (as the sender passed it on) or pending_id (from `nexo pair list`)"
    )
    assert lockout.failures == 0


async def test_deny_closes_a_request_once(store: PairingStore, clock: ManualClock) -> None:
    denied = await store.check(dm("111"))
    expired = await store.check(dm("222"))
    first = await store.deny(str(denied.pending_id), by="cli")
    second = await store.deny(str(denied.pending_id), by="cli")
    with pytest.raises(CodeRefused) as caught:
        await store.approve(code=denied.code, by="cli")
    clock.advance(hours=1)
    late = await store.deny(str(expired.pending_id), by="cli")
    with pytest.raises(PendingNotFound) as unknown:
        await store.deny("pr_unknown", by="cli")
    assert (first, second, late) == ((True, "denied"), (False, "denied"), (False, "expired"))
    assert str(caught.value).startswith(f"code {denied.code!r} is denied")
    assert str(unknown.value) == "no pending request 'pr_unknown': list the open ones with `nexo pair list`"


# -- the lockout ---------------------------------------------------------------------------------


async def test_five_failed_approvals_lock_every_approval_for_an_hour(
    store: PairingStore, clock: ManualClock
) -> None:
    messages: list[str] = []
    for typed in ("AAAAAAAA", "BBBBBBBB", "DDDDDDDD", "CCCCCCCC"):
        with pytest.raises(CodeRefused) as caught:
            await store.approve(code=typed, by="cli")
        messages.append(str(caught.value))
    with pytest.raises(PendingNotFound) as fifth:
        await store.approve(pending_id="pr_guess", by="cli")
    clock.advance(minutes=30)
    issued = await store.check(dm("111"))
    with pytest.raises(LockedOut) as locked:
        await store.approve(code=issued.code, by="cli")
    _, _, lockout = await store.listing()
    clock.advance(minutes=30)
    record, _ = await store.approve(code=issued.code, by="cli")
    assert messages[0].endswith("(4 more failed attempt(s) within 1 h lock approvals for 1 h)")
    assert messages[3].endswith("(1 more failed attempt(s) within 1 h lock approvals for 1 h)")
    assert str(fifth.value) == (
        "no pending request 'pr_guess': list the open ones with `nexo pair list` (5 failed attempts within "
        "1 h: approvals are now locked until 2026-11-21 13:00:00 UTC)"
    )
    assert str(locked.value) == (
        "approvals are locked until 2026-11-21 13:00:00 UTC (in 30 min) after 5 failed attempts; wait until "
        "then, and check the code with the sender first (`nexo pair list` shows who is waiting)"
    )
    assert (lockout.until, lockout.failures) == (iso(START.replace(hour=13)), 0)
    assert record.sender == "111"


async def test_refusals_during_a_lockout_do_not_extend_it(store: PairingStore, clock: ManualClock) -> None:
    for _ in range(5):
        with pytest.raises(CodeRefused):
            await store.approve(code="AAAAAAAA", by="cli")
    for _ in range(3):
        with pytest.raises(LockedOut):
            await store.approve(code="AAAAAAAA", by="cli")
    clock.advance(hours=1)
    with pytest.raises(CodeRefused) as caught:
        await store.approve(code="AAAAAAAA", by="cli")
    assert str(caught.value).endswith("(4 more failed attempt(s) within 1 h lock approvals for 1 h)")


async def test_failures_older_than_the_window_do_not_count(store: PairingStore, clock: ManualClock) -> None:
    for _ in range(4):
        with pytest.raises(CodeRefused):
            await store.approve(code="AAAAAAAA", by="cli")
    clock.advance(hours=1)
    with pytest.raises(CodeRefused) as caught:
        await store.approve(code="AAAAAAAA", by="cli")
    _, _, lockout = await store.listing()
    assert str(caught.value).endswith("(4 more failed attempt(s) within 1 h lock approvals for 1 h)")
    assert (lockout.until, lockout.failures) == (None, 1)


# -- records: seed, revoke, list -----------------------------------------------------------------


async def test_seeding_is_idempotent_and_reactivates_revoked_records(store: PairingStore) -> None:
    first, added = await store.seed(
        channel=CHANNEL, account="default", platform="telegram", senders=["111", "222", "111"],
        role="contact", scope="dm", by="cli",
    )  # fmt: skip
    _, again = await store.seed(
        channel=CHANNEL, account="default", platform="telegram", senders=["111"], role="contact", scope="dm",
        by="cli",
    )  # fmt: skip
    assert (
        await store.revoke(channel=CHANNEL, sender="111", account=None, scope="dm", platform="telegram") == 1
    )
    reactivated, after_revoke = await store.seed(
        channel=CHANNEL, account="default", platform="telegram", senders=["111"], role="owner", scope="dm",
        by="cli",
    )  # fmt: skip
    assert [record.sender for record in first] == ["111", "222"]
    assert (added, again, after_revoke) == (2, 0, 1)
    assert (reactivated[0].role, reactivated[0].revoked_at) == ("owner", None)


async def test_seeding_an_invalid_id_names_it_and_stores_nothing(store: PairingStore) -> None:
    with pytest.raises(InvalidRequest) as caught:
        await seed(store, "111", "@bob")
    records, _, _ = await store.listing()
    assert str(caught.value).startswith("senders[1]: sender id '@bob' is a Telegram username")
    assert str(caught.value).endswith("(platform 'telegram'); nothing was seeded")
    assert records == []


async def test_a_revoked_sender_is_unknown_again(store: PairingStore, clock: ManualClock) -> None:
    await seed(store, "111")
    await seed(store, "111", account="work")
    before = await store.check(dm("111"))
    clock.advance(minutes=5)
    revoked = await store.revoke(
        channel=CHANNEL, sender="111", account="default", scope="dm", platform="telegram"
    )
    after = await store.check(dm("111"))
    elsewhere = await store.check(dm("111", account="work"))
    again = await store.revoke(
        channel=CHANNEL, sender="111", account="default", scope="dm", platform="telegram"
    )
    everywhere = await store.revoke(
        channel=CHANNEL, sender="111", account=None, scope="dm", platform="telegram"
    )
    active, _, _ = await store.listing()
    kept, _, _ = await store.listing(include_revoked=True)
    assert verdict(before) == ("allow", "contact", "paired")
    assert (revoked, again, everywhere) == (1, 0, 1)
    assert verdict(after) == ("challenge", None, "code_issued")
    assert verdict(elsewhere) == ("allow", "contact", "paired")
    assert active == []
    assert [(r.account, r.revoked_at) for r in kept] == [
        ("default", iso(clock.now)),
        ("work", iso(clock.now)),
    ]


async def test_revoking_an_invalid_id_is_refused(store: PairingStore) -> None:
    with pytest.raises(InvalidRequest) as caught:
        await store.revoke(channel=CHANNEL, sender="#general", account=None, scope="group", platform="slack")
    assert str(caught.value).startswith("chat id '#general' is not a Slack id")


async def test_listing_filters_by_channel_and_shows_open_requests_only(
    store: PairingStore, clock: ManualClock
) -> None:
    await seed(store, "111")
    await store.seed(
        channel="slack",
        account="default",
        platform="slack",
        senders=["U1AA"],
        role="owner",
        scope="dm",
        by="cli",
    )
    await store.check(dm("222", display_name="Bob"))
    expired = await store.check(dm("333"))
    clock.advance(minutes=59)
    await store.check(dm("444"))
    clock.advance(minutes=1)
    records, pending, lockout = await store.listing(channel=CHANNEL)
    slack, none, _ = await store.listing(channel="slack")
    assert [record.sender for record in records] == ["111"]
    assert [record.sender for record in slack] == ["U1AA"]
    assert [request.sender for request in pending] == ["444"]
    assert expired.pending_id not in {request.pending_id for request in pending}
    assert none == []
    assert pending[0].model_dump() == {
        "pending_id": pending[0].pending_id,
        "channel": CHANNEL,
        "account": "default",
        "sender": "444",
        "display_name": None,
        "created_at": iso(START.replace(minute=59)),
        "expires_at": iso(START.replace(hour=13, minute=59)),
        "replies": 1,
        "status": "pending",
    }
    assert (lockout.until, lockout.failures) == (None, 0)


# -- secrecy and failing closed ------------------------------------------------------------------


async def test_no_issued_code_is_ever_written_to_disk(settings: PairingSettings, clock: ManualClock) -> None:
    codes: list[str] = []
    async with open_store(settings, clock=clock) as store:
        for channel in ("telegram", "slack", "email"):
            for sender in ("111111", "222222", "333333"):
                result = await store.check(dm(sender).model_copy(update={"channel": channel}))
                assert result.code is not None
                codes.append(result.code)
        await store.check(dm("111111"))
        await store.approve(code=codes[0], by="cli")
        await store.deny(str((await store.check(dm("222222"))).pending_id), by="cli")
        live = stored_bytes(settings)
    closed = stored_bytes(settings)
    assert len(set(codes)) == 9
    for code in codes:
        assert code.encode() not in live
        assert code.encode() not in closed
        assert code.lower().encode() not in closed


async def test_a_locked_database_drops_the_message_and_logs_why(
    tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    settings = PairingSettings(state_dir=tmp_path, busy_timeout_ms=0)
    async with open_store(settings, clock=clock) as store:
        other = sqlite3.connect(settings.database, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            with caplog.at_level(logging.ERROR, logger="nexo.pairing"):
                locked = await store.check(dm("111"))
            owner = await store.check(dm("222", allow_from=["222"]))
        finally:
            other.close()
        after = await store.check(dm("111"))
    assert locked == CheckResult(verdict="drop", reason="storage_error")
    assert verdict(owner) == ("allow", "owner", "allow_from")
    assert verdict(after) == ("challenge", None, "code_issued")
    assert [record.getMessage() for record in caplog.records] == [
        "pairing check failed closed (message dropped): channel=telegram account=default scope=dm: "
        "database is locked"
    ]


async def test_a_damaged_database_drops_every_message_it_must_read(
    store: PairingStore, settings: PairingSettings, caplog: pytest.LogCaptureFixture
) -> None:
    other = sqlite3.connect(settings.database)
    try:
        other.execute("DROP TABLE paired")
        other.commit()
    finally:
        other.close()
    with caplog.at_level(logging.ERROR, logger="nexo.pairing"):
        dm_result = await store.check(dm("111", policy=Policy(dm="open")))
        group_result = await store.check(group("111", GROUP_CHAT, policy=Policy(group="allowlist")))
    assert dm_result == group_result == CheckResult(verdict="drop", reason="storage_error")
    assert [record.levelno for record in caplog.records] == [logging.ERROR, logging.ERROR]
    assert "no such table: paired" in caplog.records[0].getMessage()
