"""What an MCP client may have the running agent do for it: send a message, schedule a prompt.

``nexo mcp-server --tier act`` forwards its ``channel_send`` and ``cron_create`` here, as the control
socket's ``send`` and ``cron_create`` operations, so both pass the checks the agent's own sends and
schedules pass, in the daemon that owns them:

- the channel must be one the agent is bound to, and the chat one the agent may reach unasked: the
  operator's own chat, a sender paired on that channel (or one of its ``pairing.allow_from``), or a
  chat ``permissions.outbound_allowlist`` lists; the agent's permission policy (denied and allowed
  tools, rate limits, the allowlist) decides as it does for the agent's ``channel_send``;
- the text is screened like any text nexo sends (approval-prompt lookalikes refused, secrets redacted
  or withheld by ``secret_guard.outbound``) and carries an idempotency key of the client's own
  namespace, so a retried call is sent once and no client key can stand in for one of the agent's;
- a schedule is created on the agent's binding with its model pinned, the way the agent's own
  ``cron_create`` is (the cron server's per-binding limit applies), and its fires go to a chat that
  passes the same recipient check;
- every call, done or refused, is a ``tool_call`` entry in the ledger whose source names the client
  (``mcp-server`` or ``mcp-server:<client name>``).
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcp import MCPError

from orchestrator.intake.outbound import notify
from orchestrator.mesh import CatalogTool, Mesh, ServerUnavailable
from orchestrator.tools.impersonation import refuse_prompt_lookalike
from orchestrator.tools.local import LocalToolError
from shared.protocol import cron, pairing
from shared.protocol.audit.bodies import ToolCallBody
from shared.protocol.audit.digest import args_digest
from shared.protocol.audit.entries import EntryDraft
from shared.protocol.audit.terms import ToolOutcome
from shared.protocol.channel import MAX_CONTENT_CHARS
from shared.protocol.sources import SOURCE_PART, source

if TYPE_CHECKING:
    from orchestrator.goals import AuditSink
    from orchestrator.intake import Intake

logger = logging.getLogger("nexo.client_actions")

ORIGIN = "mcp-server"
CALL_TIMEOUT_S = 30.0
MAX_KEY_CHARS = 128
KEY_PREFIX = "mcp-server:"
"""Outbox keys of client sends: a client's key never equals one the agent uses for its own sends."""
SEND_TOOL = CatalogTool(
    server="",
    name="channel_send",
    qualified="channel_send",
    description="A message an MCP client sends through a channel.",
    input_schema={"type": "object"},
    read_only=False,
    destructive=False,
    classification="outbound",
)
"""The agent's own ``channel_send`` as the permission policy sees it: the same patterns match both."""
_CLIENT_NAME = re.compile(SOURCE_PART)


class Refused(Exception):
    """The call is not carried out; the message says why and what would make it pass."""


@dataclass(frozen=True)
class ClientActions:
    """The daemon's side: its mesh, the agents' intakes (policy, secret guard) and the ledger."""

    mesh: Mesh
    intakes: Mapping[str, Intake]
    sink: AuditSink

    async def send(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """``{"op": "send", "server", "chat_id", "text", "idempotency_key"?, "agent"?, "client"?}``."""
        started = time.monotonic()
        client = client_source(request.get("client"))
        facts = {k: request.get(k) for k in ("agent", "server", "chat_id", "text", "idempotency_key")}
        agent = ""
        try:
            intake = self._intake(request.get("agent"))
            agent = intake.agent.id
            server = _text(request, "server")
            chat_id = _text(request, "chat_id")
            text = _text(request, "text")
            if len(text) > MAX_CONTENT_CHARS:
                raise Refused(f"text has {len(text)} characters; the limit is {MAX_CONTENT_CHARS}")
            key = _key(request.get("idempotency_key"))
            await self._check_recipient(intake, server, chat_id)
            try:
                refuse_prompt_lookalike(text, intake.broker.open_requests)
                screened = intake.secret_guard.screen(text, server=server, chat_id=chat_id)
            except LocalToolError as exc:
                raise Refused(str(exc)) from exc
            await notify(
                self.mesh,
                intake.config,
                server,
                chat_id,
                screened,
                key=KEY_PREFIX + key,
                notice=False,
                sink=self.sink,
                agent=agent,
            )
        except Refused as exc:
            self._record("channel_send", client, agent, facts, started, "denied", str(exc))
            return {"error": f"not sent: {exc}", "refused": True}
        except (ServerUnavailable, MCPError, RuntimeError, TimeoutError) as exc:
            message = exc.message if isinstance(exc, MCPError) else str(exc)
            self._record("channel_send", client, agent, facts, started, "error", message)
            return {"error": f"not sent: {message}"}
        self._record("channel_send", client, agent, facts, started, "ok", None)
        return {
            "sent": True,
            "agent": agent,
            "server": server,
            "chat_id": chat_id,
            "idempotency_key": key,
            "redacted": screened != text,
        }

    async def cron_create(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """``{"op": "cron_create", "schedule", "prompt", "channel"?, "recipient"?, "recurring"?,
        "misfire"?, "timezone"?, "agent"?, "client"?}``: the entry as ``nexo cron list`` shows it."""
        started = time.monotonic()
        client = client_source(request.get("client"))
        names = ("schedule", "prompt", "channel", "recipient", "recurring", "misfire", "timezone")
        arguments = {k: request[k] for k in names if request.get(k) is not None}
        agent = ""
        try:
            intake = self._intake(request.get("agent"))
            agent = intake.agent.id
            _text(request, "schedule")
            _text(request, "prompt")
            operator = intake.config.operator
            channel, recipient = request.get("channel"), request.get("recipient")
            # Where its fires go, as the cron runner decides: each part defaults to the operator's.
            await self._check_recipient(
                intake,
                channel if isinstance(channel, str) else operator.channel,
                recipient if isinstance(recipient, str) else operator.chat_id,
            )
            created = await self._created(intake, arguments)
        except Refused as exc:
            self._record("cron_create", client, agent, arguments, started, "denied", str(exc))
            return {"error": f"not scheduled: {exc}", "refused": True}
        except (ServerUnavailable, MCPError, TimeoutError) as exc:
            message = exc.message if isinstance(exc, MCPError) else str(exc)
            self._record("cron_create", client, agent, arguments, started, "error", message)
            return {"error": f"not scheduled: {message}"}
        self._record("cron_create", client, agent, arguments, started, "ok", None)
        return {"entry": created.model_dump(mode="json")}

    def _intake(self, agent: object) -> Intake:
        if not self.intakes:
            raise Refused(
                "the running agent is still starting (see `nexo status`); call again once it is ready"
            )
        if agent is None:
            return next(iter(self.intakes.values()))
        intake = self.intakes.get(str(agent))
        if intake is None:
            raise Refused(f"no agent {agent!r} in the running config; use one of {', '.join(self.intakes)}")
        return intake

    async def _check_recipient(self, intake: Intake, server: str, chat_id: str) -> None:
        """Refused unless the agent may reach ``chat_id`` on ``server`` without asking anyone."""
        agent, config = intake.agent, intake.config
        operator = config.operator
        if (server, chat_id) == (operator.channel, operator.chat_id):
            return
        if server not in agent.channels:
            bound = ", ".join(agent.channels) or "(none)"
            raise Refused(f"agent {agent.id} is not bound to a channel {server!r}; its channels: {bound}")
        engine = intake.gate_for(server).engine
        decision = engine.decide(
            SEND_TOOL, {"server": server, "arguments": {"chat_id": chat_id}}, unattended=False
        )
        if decision.action == "deny":
            raise Refused(decision.reason)
        allowlist = engine.policy.outbound_allowlist
        if allowlist is not None and server in allowlist:
            return  # the policy just matched the chat against the operator's own list
        if chat_id in config.channel(server).pairing.allow_from or await self._paired(
            config, server, chat_id
        ):
            return
        raise Refused(
            f"{chat_id!r} on {server} is not a chat the agent may reach unasked: it is neither the "
            f"operator's chat ({operator.channel}:{operator.chat_id}), nor a sender paired on {server} "
            f"(`nexo pair list`), nor in permissions.outbound_allowlist.{server}; pair the contact or "
            "add the chat to the allowlist"
        )

    async def _paired(self, config: Any, server: str, chat_id: str) -> bool:
        connection = self.mesh.get(config.pairing.server)
        if connection is None:
            return False
        try:
            listed = await connection.request(
                pairing.ListRequest(params=pairing.ListParams(channel=server)),
                pairing.ListResult,
                timeout=CALL_TIMEOUT_S,
            )
        except (ServerUnavailable, MCPError) as exc:
            message = exc.message if isinstance(exc, MCPError) else str(exc)
            raise Refused(f"the paired senders of {server} could not be checked ({message})") from exc
        return any(r.sender == chat_id and r.revoked_at is None for r in listed.records)

    async def _created(self, intake: Intake, arguments: dict[str, Any]) -> cron.Entry:
        """The agent's own ``cron_create``, on its binding with its model, then the entry in full."""
        name = intake.config.cron.server
        connection = self.mesh.get(name)
        if connection is None:
            raise Refused(f"the running mesh has no cron server {name!r}; add servers.{name} to the config")
        agent = intake.agent.id
        meta = cron.tool_meta(binding=agent, agent=agent, model=intake.model_label)
        result = await connection.call_tool("cron_create", arguments, timeout=CALL_TIMEOUT_S, meta=dict(meta))
        if result.is_error:
            raise Refused(" ".join(getattr(block, "text", "") for block in result.content).strip())
        entry_id = str((result.structured_content or {}).get("id", ""))
        listed = await connection.request(
            cron.ListRequest(params=cron.ListParams(binding=agent)), cron.ListResult, timeout=CALL_TIMEOUT_S
        )
        for entry in listed.entries:
            if entry.id == entry_id:
                return entry
        raise Refused(f"the cron server created {entry_id!r} but does not list it; see `nexo cron list`")

    def _record(
        self,
        tool: str,
        client: str,
        agent: str,
        arguments: Mapping[str, Any],
        started: float,
        outcome: ToolOutcome,
        error: str | None,
    ) -> None:
        body = ToolCallBody(
            tool=tool,
            args_sha256=args_digest(arguments),
            duration_ms=(time.monotonic() - started) * 1000,
            outcome=outcome,
            error=None if error is None else error[:4000],
        )
        self.sink.record(EntryDraft.of(body, source=client, agent=agent, subject=f"{tool} {outcome}"))
        logger.info("%s for %s: %s%s", tool, client, outcome, f" ({error})" if error else "")


def client_source(name: object) -> str:
    """The ledger source of a client's call: ``mcp-server``, qualified by the client's name when it
    gave one that fits the source grammar."""
    if isinstance(name, str):
        cleaned = re.sub(r"[^A-Za-z0-9_.@-]+", "-", name).strip("-._@")[:64]
        if cleaned and _CLIENT_NAME.fullmatch(cleaned):
            return source(ORIGIN, cleaned)
    return ORIGIN


def _text(request: Mapping[str, Any], name: str) -> str:
    value = request.get(name)
    if not isinstance(value, str) or not value.strip():
        raise Refused(f"{name} must be non-empty text; got {value!r}")
    return value


def _key(value: object) -> str:
    if value is None:
        return uuid.uuid4().hex
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_KEY_CHARS:
        raise Refused(f"idempotency_key must be text of 1 to {MAX_KEY_CHARS} characters; got {value!r}")
    return value
