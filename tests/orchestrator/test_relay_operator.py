"""The control socket's ``operator`` operation: what ``nexo pair``, ``nexo agent ps``, ``nexo audit
tail``, ``nexo cron list`` and ``nexo memory`` send while the daemon runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.config.loading import load
from orchestrator.mesh import Mesh, SupervisionConfig
from orchestrator.relay import relay_operator
from shared.protocol import cron, memory, memory_terms
from shared.protocol import pairing_methods as m
from shared.protocol.audit.methods import TailRequest
from shared.protocol.audit.terms import TAIL_METHOD
from shared.protocol.cron_terms import LIST_METHOD
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
    tail = await relay_operator(
        mesh, config, {"op": "operator", "method": TAIL_METHOD, "params": {"limit": 5}}
    )
    crons = await relay_operator(mesh, config, {"op": "operator", "method": LIST_METHOD, "params": {}})
    history = await relay_operator(
        mesh, config, {"op": "operator", "method": memory_terms.HISTORY_METHOD, "params": {"limit": 3}}
    )
    assert check == {
        "error": "operator requests are nexo/audit/goals/get, nexo/audit/goals/list, nexo/audit/tail, "
        "nexo/cron/list, nexo/memory/forget, nexo/memory/history, nexo/memory/list, nexo/memory/metrics, "
        "nexo/memory/rollback, nexo/memory/search, nexo/memory/stats, nexo/pairing/approve, "
        "nexo/pairing/deny, nexo/pairing/list, nexo/pairing/revoke, nexo/pairing/seed; "
        "not 'nexo/pairing/check'"
    }
    # About one agent's memory: the config's first agent when the command names none, and said so.
    assert history == {"error": "the running mesh has no server 'memory'; see `nexo status`", "agent": "nexo"}
    assert seed == {"error": "the running mesh has no server 'pairing'; see `nexo status`"}
    assert goals == tail == {"error": "the running mesh has no server 'audit'; see `nexo status`"}
    assert crons == {"error": "the running mesh has no server 'cron'; see `nexo status`"}


def test_the_names_the_commands_send_are_the_methods_the_servers_serve() -> None:
    # The commands import the names alone (no pydantic): they must not drift from the models.
    assert TailRequest.model_fields["method"].default == TAIL_METHOD
    assert cron.ListRequest.model_fields["method"].default == LIST_METHOD
    requests = (
        memory.SearchRequest,
        memory.ListRequest,
        memory.ForgetRequest,
        memory.HistoryRequest,
        memory.RollbackRequest,
        memory.StatsRequest,
        memory.MetricsRequest,
    )
    assert tuple(r.model_fields["method"].default for r in requests) == memory_terms.OPERATOR_METHODS
