"""The control socket's ``pairing`` operation: what ``nexo pair`` sends while the daemon runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.config import load
from orchestrator.mesh import Mesh, SupervisionConfig
from orchestrator.relay import relay_pairing
from shared.protocol import pairing_methods as m

pytestmark = pytest.mark.anyio


async def test_the_pairing_operation_forwards_what_nexo_pair_sends_and_refuses_the_gates_check(
    tmp_path: Path,
) -> None:
    """The gate's own ``check`` (which can issue codes) is no operator command; the rest go to the
    config's ``pairing.server``, which this empty mesh lacks."""
    config = load(None, env={"NEXO_STATE_DIR": str(tmp_path)})
    mesh = Mesh({}, SupervisionConfig())
    check = await relay_pairing(mesh, config, {"op": "pairing", "method": m.CHECK_METHOD, "params": {}})
    seed = await relay_pairing(
        mesh, config, {"op": "pairing", "method": m.SEED_METHOD, "params": {"channel": "console"}}
    )
    assert check == {
        "error": "`nexo pair` sends nexo/pairing/approve, nexo/pairing/deny, nexo/pairing/list, "
        "nexo/pairing/revoke, nexo/pairing/seed; not 'nexo/pairing/check'"
    }
    assert seed == {"error": "the running mesh has no server 'pairing'; see `nexo status`"}
