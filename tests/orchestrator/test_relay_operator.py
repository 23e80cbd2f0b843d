"""The control socket's ``operator`` operation: what ``nexo pair`` and ``nexo agent ps`` send while the
daemon runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.config.loading import load
from orchestrator.mesh import Mesh, SupervisionConfig
from orchestrator.relay import relay_operator
from shared.protocol import pairing_methods as m
from shared.protocol.goal_terms import GOAL_LIST_METHOD

pytestmark = pytest.mark.anyio


async def test_the_operator_operation_forwards_what_the_commands_send_and_refuses_the_gates_check(
    tmp_path: Path,
) -> None:
    """The gate's own ``check`` (which can issue codes) is no operator command; the rest go to the
    config's ``pairing.server`` and ``audit.server``, which this empty mesh lacks."""
    config = load(None, env={"NEXO_STATE_DIR": str(tmp_path)})
    mesh = Mesh({}, SupervisionConfig())
    check = await relay_operator(mesh, config, {"op": "operator", "method": m.CHECK_METHOD, "params": {}})
    seed = await relay_operator(
        mesh, config, {"op": "operator", "method": m.SEED_METHOD, "params": {"channel": "console"}}
    )
    goals = await relay_operator(
        mesh, config, {"op": "operator", "method": GOAL_LIST_METHOD, "params": {"active_only": True}}
    )
    assert check == {
        "error": "operator requests are nexo/audit/goals/get, nexo/audit/goals/list, nexo/pairing/approve, "
        "nexo/pairing/deny, nexo/pairing/list, nexo/pairing/revoke, nexo/pairing/seed; "
        "not 'nexo/pairing/check'"
    }
    assert seed == {"error": "the running mesh has no server 'pairing'; see `nexo status`"}
    assert goals == {"error": "the running mesh has no server 'audit'; see `nexo status`"}
