"""The orchestrator admits the operator's own ``allow_from`` ids itself; everyone else is asked.

The pairing server here is the real store on a real SQLite file, reached through a connection
stand-in that counts requests: the orchestrator's verdict must equal the server's own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest

from orchestrator.config.nexo import NexoConfig
from orchestrator.intake.admission import Admissions
from servers.pairing.server import open_store
from servers.pairing.settings import PairingSettings
from servers.pairing.store import PairingStore
from shared.protocol.pairing import CheckParams, CheckRequest, CheckResult
from tests.servers.pairing.conftest import ManualClock

pytestmark = pytest.mark.anyio

OWNER = "123456789"
FRIEND = "555"


class PairingConnection:
    """Answers ``nexo/pairing/check`` from a real store, counting the requests it was sent."""

    def __init__(self, store: PairingStore) -> None:
        self.store = store
        self.asked: list[CheckParams] = []

    async def request(
        self, request: CheckRequest, result_type: type[CheckResult], timeout: float
    ) -> CheckResult:
        self.asked.append(request.params)
        return result_type.model_validate((await self.store.check(request.params)).model_dump())


class ChannelConnection:
    def has_capability(self, name: str) -> bool:
        return True  # a nexo channel: it names its chat type


class Mesh:
    def __init__(self, pairing: PairingConnection | None) -> None:
        self.pairing = pairing

    def get(self, name: str) -> Any:
        return self.pairing if name == "pairing" else ChannelConnection()


def config(policy: str = "pairing", allow_from: tuple[str, ...] = (OWNER,)) -> NexoConfig:
    return NexoConfig.model_validate(
        {
            "servers": {
                "telegram": {"transport": "stdio", "command": "x"},
                "pairing": {"transport": "stdio", "command": "x"},
            },
            "llm": {"providers": {"p": {"kind": "openai_compat", "base_url": "http://h/v1", "model": "m"}}},
            "agents": [{"id": "nexo", "model": {"provider": "p"}, "channels": ["telegram"]}],
            "channels": {"enabled": True, "approved": [{"server": "telegram"}]},
            "channel_options": {"telegram": {"pairing": {"policy": policy, "allow_from": list(allow_from)}}},
        }
    )


def admissions(nexo: NexoConfig, pairing: PairingConnection | None) -> Admissions:
    async def tell(text: str, key: str) -> None:
        raise AssertionError("a check tells the operator nothing")

    return Admissions(
        nexo,
        cast(Any, Mesh(pairing)),
        cast(Any, None),
        agent="nexo",
        sink=cast(Any, None),
        relays=list,
        tell_operator=tell,
    )


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[PairingStore]:
    async with open_store(PairingSettings(state_dir=tmp_path / "state"), clock=ManualClock()) as opened:
        yield opened


def dm(sender: str, **extra: str) -> dict[str, str]:
    return {"user_id": sender, "chat_id": sender, "chat_type": "private", **extra}


async def test_an_allow_from_sender_is_admitted_as_owner_without_asking_the_pairing_server(
    store: PairingStore,
) -> None:
    pairing = PairingConnection(store)
    gate = admissions(config(), pairing)
    result = await gate.check("telegram", dm(OWNER))
    assert (result.verdict, result.role, result.reason) == ("allow", "owner", "allow_from")
    assert pairing.asked == []


async def test_the_operator_is_heard_while_the_pairing_server_is_down() -> None:
    gate = admissions(config(), None)
    result = await gate.check("telegram", dm(OWNER))
    assert (result.verdict, result.role) == ("allow", "owner")
    assert (await gate.check("telegram", dm(FRIEND))).reason == "unknown_sender"
    assert (await gate.check("telegram", dm(f" {OWNER}"))).reason == "invalid_sender"
    assert (await gate.check("telegram", dm(OWNER, chat_type="group", chat_id="-100"))).verdict == "drop"


async def test_everyone_else_is_asked_each_time_so_a_pairing_or_revoke_counts_from_the_next_message(
    store: PairingStore,
) -> None:
    pairing = PairingConnection(store)
    gate = admissions(config(), pairing)
    first = await gate.check("telegram", dm(FRIEND))
    assert first.verdict == "challenge"
    await store.approve(pending_id=first.pending_id, by="test")
    assert (await gate.check("telegram", dm(FRIEND))).reason == "paired"
    await store.revoke(channel="telegram", sender=FRIEND, account=None, scope="dm", platform="telegram")
    assert (await gate.check("telegram", dm(FRIEND))).verdict != "allow"
    # A group message from the owner's own id is the group's, not the owner's: asked too.
    assert (await gate.check("telegram", dm(OWNER, chat_type="group", chat_id="-100"))).verdict == "drop"
    assert len(pairing.asked) == 4


def server_params(policy: str, meta: dict[str, str]) -> CheckParams:
    """What the orchestrator sends the pairing server for ``meta`` on the test's channel."""
    return CheckParams.model_validate(
        {
            "channel": "telegram",
            "platform": "telegram",
            "sender": meta["user_id"],
            "scope": "group" if meta["chat_type"] == "group" else "dm",
            "chat_id": meta["chat_id"],
            "mentioned": meta.get("mentioned") == "true",
            "policy": {"dm": policy, "group": "disabled", "require_mention": True},
            "allow_from": [OWNER],
        }
    )


@pytest.mark.parametrize("policy", ["pairing", "allowlist", "open", "disabled"])
@pytest.mark.parametrize(
    "meta",
    [
        dm(OWNER),
        dm(f"{OWNER} "),
        dm(FRIEND),
        dm("@operator"),
        dm(OWNER, chat_type="group", chat_id="-100"),
        dm(OWNER, chat_type="group", chat_id="-100", mentioned="true"),
    ],
    ids=["owner", "owner-padded", "stranger", "username", "owner-in-a-group", "owner-mentions-in-a-group"],
)
async def test_the_orchestrators_verdict_is_the_pairing_servers_own(
    tmp_path: Path, policy: str, meta: dict[str, str]
) -> None:
    verdicts = []
    for shortcut in (True, False):
        settings = PairingSettings(state_dir=tmp_path / f"state-{shortcut}")
        async with open_store(settings, clock=ManualClock()) as fresh:
            if shortcut:
                result = await admissions(config(policy), PairingConnection(fresh)).check("telegram", meta)
            else:
                result = await fresh.check(server_params(policy, meta))
        verdicts.append((result.verdict, result.role, result.reason))
    assert verdicts[0] == verdicts[1]
