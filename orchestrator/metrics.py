"""Prometheus metrics of the orchestrator, per agent, tool, channel and server.

One registry per orchestrator (no global state), served on a loopback port when ``metrics.port``
is set, and summarised in `nexo status`. Labels are bounded sets (configured agents, servers,
tools from the catalog, outcome words), never message content or goal ids.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from orchestrator.llm import Usage

if TYPE_CHECKING:
    from orchestrator.mesh import ServerConnection

logger = logging.getLogger("nexo.metrics")

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.turns = Counter(
            "nexo_turns", "Model calls made by goals.", ["agent", "source", "outcome"], registry=r
        )
        self.turn_seconds = Histogram(
            "nexo_turn_seconds",
            "Wall time of one turn (model call and tools).",
            ["agent"],
            registry=r,
            buckets=LATENCY_BUCKETS,
        )
        self.tokens = Counter("nexo_tokens", "Tokens used, by direction.", ["agent", "direction"], registry=r)
        self.tool_calls = Counter(
            "nexo_tool_calls",
            "Tool calls by outcome (ok, error, denied).",
            ["agent", "server", "tool", "outcome"],
            registry=r,
        )
        self.tool_seconds = Histogram(
            "nexo_tool_call_seconds",
            "Duration of tool calls that ran.",
            ["server", "tool"],
            registry=r,
            buckets=LATENCY_BUCKETS,
        )
        self.goals = Counter(
            "nexo_goals", "Goals ended, by kind and status.", ["agent", "kind", "status"], registry=r
        )
        self.messages = Counter(
            "nexo_channel_messages",
            "Chat messages received and replies sent.",
            ["server", "direction"],
            registry=r,
        )
        self.rate_limited = Counter(
            "nexo_channel_rate_limited",
            "Messages over a channel's rate, by what happened (queue, refuse).",
            ["server", "overflow"],
            registry=r,
        )
        self.refused = Counter(
            "nexo_channel_refused",
            "Inbound events the pairing gate refused, by reason (no_sender, unknown_sender, ...).",
            ["server", "reason"],
            registry=r,
        )
        self.pushes_skipped = Counter(
            "nexo_channel_pushes_skipped",
            "Pushed messages not answered, by reason (repeat, queue_full, not_taken, unbound).",
            ["server", "reason"],
            registry=r,
        )
        self.extractions = Counter(
            "nexo_memory_extractions",
            "Memories proposed by post-turn extraction, by outcome (stored, refused).",
            ["agent", "outcome"],
            registry=r,
        )
        self.interrupted = Counter(
            "nexo_unattended_interrupted",
            "Unattended goals (heartbeat, proactive tick, cron fire) cut short by a restart; never resumed.",
            ["agent", "source"],
            registry=r,
        )
        self.live_goals = Gauge("nexo_goals_live", "Goals in flight in this process.", ["kind"], registry=r)
        self.audit_queue = Gauge("nexo_audit_queue_depth", "Ledger entries waiting to be sent.", registry=r)
        self.audit_dropped = Gauge(
            "nexo_audit_dropped", "Ledger entries not recorded (queue full).", registry=r
        )
        self.server_up = Gauge(
            "nexo_server_up", "1 when the server is connected and ready.", ["server"], registry=r
        )
        self.server_restarts = Gauge(
            "nexo_server_restarts", "Reconnects since start.", ["server"], registry=r
        )
        self.approvals_pending = Gauge(
            "nexo_approvals_pending", "Approvals waiting for an answer.", ["agent"], registry=r
        )

    def turn(self, agent: str, source: str, outcome: str, seconds: float) -> None:
        self.turns.labels(agent, source, outcome).inc()
        self.turn_seconds.labels(agent).observe(seconds)

    def usage(self, agent: str, used: Usage) -> None:
        self.tokens.labels(agent, "input").inc(used.input_tokens)
        self.tokens.labels(agent, "output").inc(used.output_tokens)

    def tool(self, agent: str, qualified: str, outcome: str, seconds: float) -> None:
        server, _, tool = qualified.partition("__")
        self.tool_calls.labels(agent, server, tool or server, outcome).inc()
        if outcome != "denied":
            self.tool_seconds.labels(server, tool or server).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def summary(self) -> dict[str, Any]:
        """The counters `nexo status` shows: totals by their labels."""
        out: dict[str, Any] = {}
        for metric in self.registry.collect():
            if metric.type not in ("counter", "gauge"):
                continue
            rows = [
                {**sample.labels, "value": sample.value}
                for sample in metric.samples
                if not sample.name.endswith("_created")
            ]
            if rows:
                out[metric.name] = rows
        return out


async def serve_metrics(
    metrics: Metrics,
    host: str,
    port: int,
    refresh: Any,
    *,
    collect: Callable[[], Awaitable[str]] | None = None,
    task_status: anyio.abc.TaskStatus[tuple[str, int]] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """``GET /metrics`` in the Prometheus text format until cancelled; ``refresh()`` updates gauges,
    ``collect()`` gives the metrics servers export through their control plane, appended after ours."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    # Only when metrics are on: hosting brings the MCP server package with it.
    from shared.hosting.listener import listen, serve_asgi

    async def scrape(_: Request) -> Response:
        refresh()
        served = metrics.render() + (await collect()).encode() if collect is not None else metrics.render()
        return Response(served, media_type=CONTENT_TYPE_LATEST)

    app = Starlette(routes=[Route("/metrics", scrape, methods=["GET"])])
    async with serve_asgi(app, listen(host, port)) as bound:
        task_status.started(bound)
        await anyio.sleep_forever()


def server_gauges(metrics: Metrics, snapshots: Mapping[str, tuple[bool, int]]) -> None:
    for name, (up, restarts) in snapshots.items():
        metrics.server_up.labels(name).set(1 if up else 0)
        metrics.server_restarts.labels(name).set(restarts)


async def memory_server_metrics(connections: Mapping[str, ServerConnection], timeout_s: float = 2.0) -> str:
    """The metrics each connected memory server exports (``nexo/memory/metrics``), concatenated.

    A server that is down or does not answer in time is left out of this scrape (its
    ``nexo_server_up`` says why), so one slow server never stalls the orchestrator's own figures.
    """
    from mcp import MCPError

    from orchestrator.mesh import ServerUnavailable
    from shared.protocol.memory.admin import MetricsParams, MetricsRequest, MetricsResult

    parts: list[str] = []
    for name, connection in connections.items():
        if connection.client is None:
            continue
        try:
            result = await connection.request(
                MetricsRequest(params=MetricsParams()), MetricsResult, timeout=timeout_s
            )
        except (MCPError, ServerUnavailable) as exc:
            logger.debug("metrics of server %s not collected: %s", name, exc)
            continue
        parts.append(result.text)
    return "".join(parts)
