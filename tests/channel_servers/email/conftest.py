from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.channel_servers.email.dovecot import Dovecot, running_dovecot
from tests.channel_servers.email.mailserver import ReceivingMta, running_mta

AGENTS = [f"agent{n}" for n in range(11)]
SIGNED = {"ana@example.org", "eve@lists.example.org"}


@pytest.fixture(scope="package")
def dovecot() -> Iterator[Dovecot]:
    with running_dovecot([*AGENTS, "ana", "bob"]) as server:
        yield server


@pytest.fixture(scope="package")
def mta(dovecot: Dovecot) -> Iterator[tuple[ReceivingMta, int]]:
    receiving = ReceivingMta(dovecot, signed=set(SIGNED))
    with running_mta(receiving) as port:
        yield receiving, port
