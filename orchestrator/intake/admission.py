"""Who may reach the model: every inbound message passes the pairing gate before any turn.

A direct message from one of the channel's ``allow_from`` ids (the operator's own, from the config)
is admitted as owner here, by the pairing server's own first rule (``listed_owner``); every other
sender is decided by the pairing server, on every message.

An unknown sender causes no model turn and no memory write: the message is answered with a pairing
code (policy ``pairing``), or nothing at all, recorded in the ledger and acknowledged. Pairing state
changes only out of band (`nexo pair ...`, or the operator's one-tap answer on their own channel);
nothing a model or a message says can change it.

An event with no sender id (a webhook, a poller, a Claude Code channel without user ids) has no
person to pair. It runs as an explicit principal only when the operator said so for its channel
(``pairing.no_sender``); otherwise it is refused. Every refusal is recorded in the ledger, counted,
kept for `nexo status` and `nexo channel doctor`, and told to the operator once per source.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from anyio.abc import TaskGroup

from orchestrator.config.channels import ChannelPairing
from orchestrator.config.nexo import NexoConfig
from orchestrator.goals import AuditSink
from orchestrator.intake.chats import scope_of, sender_of
from orchestrator.intake.outbound import reply_sender
from orchestrator.intake.refusals import NO_SENDER, Refusals, describe
from orchestrator.mesh import CatalogTool, Mesh, ServerConnection, ServerUnavailable, describe_error
from orchestrator.permissions import ApprovalBroker
from orchestrator.permissions.answers import pairing_prompt_call
from orchestrator.permissions.claude_relay import Relay
from orchestrator.permissions.policy import Standing
from shared.protocol.audit.bodies import PairingBody
from shared.protocol.audit.entries import EntryDraft
from shared.protocol.channel import SOURCE_NAME_PATTERN, ChannelParams
from shared.protocol.identities import InvalidSender, listed_owner, normalize_sender
from shared.protocol.pairing import (
    ApproveParams,
    ApproveRequest,
    ApproveResult,
    CheckParams,
    CheckRequest,
    CheckResult,
    Policy,
)

logger = logging.getLogger("nexo.pairing")

CHECK_TIMEOUT_S = 10.0
NO_SOURCE = "no_source"
"""The reason of a sender-less event on a ``no_sender: source`` channel that names no valid source."""
PAIR_TOOL = CatalogTool(
    server="",
    name="pair_sender",
    qualified="nexo__pair_sender",
    description="Pair a new sender with the agent (asked by nexo itself, never by a model).",
    input_schema={"type": "object"},
    read_only=False,
    destructive=False,
)


@dataclass(frozen=True, slots=True)
class Admission:
    """What to do with one inbound message."""

    verdict: Literal["allow", "handled", "dead_letter"]
    role: Standing | None = None
    reason: str = ""
    principal: str | None = None
    """Set for an event that carries no sender id and runs as a configured principal."""


def principal_of(server: str, options: ChannelPairing, meta: Mapping[str, str]) -> str | None:
    """The principal a sender-less event runs as, by its channel's ``no_sender``; None: refused."""
    if options.no_sender == "principal":
        return options.principal
    if options.no_sender == "source":
        source = meta.get("source", "")
        return f"{server}:{source}" if re.fullmatch(SOURCE_NAME_PATTERN, source) else None
    return None


def source_of(meta: Mapping[str, str]) -> str:
    """What a refusal of a sender-less event is kept and told under: its source name, else ``-``."""
    source = meta.get("source", "")
    return source if re.fullmatch(SOURCE_NAME_PATTERN, source) else "-"


class Admissions:
    """The pairing gate of one agent's intake."""

    def __init__(
        self,
        config: NexoConfig,
        mesh: Mesh,
        broker: ApprovalBroker,
        *,
        agent: str,
        sink: AuditSink,
        relays: Callable[[], Sequence[Relay]],
        tell_operator: Callable[[str, str], Coroutine[Any, Any, None]],
    ) -> None:
        self._config = config
        self._mesh = mesh
        self._broker = broker
        self._agent = agent
        self._sink = sink
        self._relays = relays
        self._tell_operator = tell_operator
        self._tg: TaskGroup | None = None
        self.checks = 0
        self.refusals = Refusals()
        self.on_refused: Callable[[str, str], None] | None = None
        """Told (server, reason) of every refusal: the metrics counter."""

    def bind(self, tg: TaskGroup) -> None:
        """Where one-tap approval prompts wait for the operator's answer."""
        self._tg = tg

    @property
    def server(self) -> ServerConnection | None:
        return self._mesh.get(self._config.pairing.server)

    def says_no_chat_type(self, channel: str) -> bool:
        """A Claude Code channel (no nexo contract) never names its chat type: it is inferred."""
        connection = self._mesh.get(channel)
        return connection is not None and not connection.has_capability("nexo/channel")

    async def check(self, channel: str, meta: Mapping[str, str]) -> CheckResult:
        """The pairing server's verdict on the sender of ``meta``; without one, only allow_from passes."""
        self.checks += 1
        options = self._config.channel(channel).pairing
        sender = sender_of(meta)
        if sender is None:
            return CheckResult(verdict="drop", reason="invalid_sender")
        scope = scope_of(meta, infer=self.says_no_chat_type(channel))
        platform = options.platform_for(channel)
        if _owner_by_config(platform, sender, scope, options):
            # The pairing server's own first rule, decided here: allow_from lives in the config, which
            # no pairing command changes, so the answer cannot differ and the round trip is saved (and
            # the operator is heard while the pairing server is down). Everyone else is asked.
            return CheckResult(verdict="allow", role="owner", reason="allow_from")
        pairing = self.server
        if pairing is None:
            return _local_check(platform, sender, scope, options)
        params = CheckParams(
            channel=channel,
            account=meta.get("account") or options.account,
            platform=platform,
            sender=sender,
            display_name=meta.get("user") or meta.get("sender_name"),
            scope=scope,
            chat_id=meta.get("chat_id"),
            mentioned=meta.get("mentioned") == "true",
            policy=Policy(
                dm=options.policy, group=options.group_policy, require_mention=options.require_mention
            ),
            allow_from=options.allow_from,
        )
        while True:
            try:
                return await pairing.request(
                    CheckRequest(params=params), CheckResult, timeout=CHECK_TIMEOUT_S
                )
            except ServerUnavailable as exc:
                # Fail closed without losing anything: the message waits in its channel's log.
                logger.warning("pairing server unavailable, %s waits: %s", channel, exc)
                await pairing.wait_ready(timeout=3600)

    async def admit(
        self, connection: ServerConnection, params: ChannelParams, *, event_key: str
    ) -> Admission:
        if sender_of(params.meta) is None:
            return self._without_sender(connection.name, params.meta)
        try:
            result = await self.check(connection.name, params.meta)
        except Exception as exc:  # noqa: BLE001 -- refused by the pairing server: kept, never let through
            logger.warning("pairing check of a %s message failed: %s", connection.name, exc)
            return Admission("dead_letter", reason=f"the pairing check failed: {describe_error(exc)}")
        if result.verdict == "allow":
            return Admission("allow", role=result.role or "contact", reason=result.reason)
        sender = sender_of(params.meta) or "-"
        self._record(
            connection.name, "refused" if result.verdict == "drop" else "challenged", sender, result.reason
        )
        if result.verdict == "drop":
            self._refused(connection.name, result.reason, "-", f"sender {sender[:80]!r}")
        if result.verdict == "drop" and result.reason == "storage_error":
            # Failing closed must not lose a paired contact's message: the operator can replay it.
            return Admission("dead_letter", reason="the pairing server could not read its storage")
        if result.reply:
            sender_api = reply_sender(self._config, connection)
            try:
                await sender_api.send(
                    params.meta, result.reply, idempotency_key=f"pairing:{event_key}", notice=True
                )
            except Exception as exc:  # noqa: BLE001 -- the sender can write again; the code stays valid
                logger.warning("pairing code not sent on %s: %s", connection.name, exc)
        if result.new_pending and result.pending_id:
            self._ask_operator(connection.name, sender, params.meta, result)
        return Admission("handled", reason=result.reason)

    def _without_sender(self, channel: str, meta: Mapping[str, str]) -> Admission:
        options = self._config.channel(channel).pairing
        principal = principal_of(channel, options, meta)
        if principal is not None:
            return Admission(
                "allow", role="source", reason=f"no_sender: {options.no_sender}", principal=principal
            )
        reason = NO_SOURCE if options.no_sender == "source" else NO_SENDER
        source = source_of(meta)
        self._record(channel, "refused", f"source:{source}", reason)
        self._refused(channel, reason, source, f"source {source}")
        return Admission("handled", reason=reason)

    def _refused(self, channel: str, reason: str, source: str, who: str) -> None:
        """Count a refusal; the first of its source (or, for senders, of its reason) tells the operator."""
        if self.on_refused is not None:
            self.on_refused(channel, reason)
        first = self.refusals.note(channel, reason, source)
        # The first of its kind is a warning; the rest are in the ledger, the counter and the tally.
        logger.log(
            logging.DEBUG if first is None else logging.WARNING,
            "refused a %s event (%s): %s",
            channel,
            who,
            describe(reason),
            extra={"server": channel},
        )
        if first is not None:
            self._spawn_notice(
                f"[refused] {channel}: an event {describe(reason)} ({who}) did not reach the agent, and "
                f"later ones like it will not either. Fix: {first.fix}. `nexo status` counts them.",
                f"refused:{channel}:{reason}:{source}",
            )

    async def is_owner(self, channel: str, sender: object) -> bool:
        """Whether an approval answer from ``sender`` on ``channel`` comes from an owner."""
        if not isinstance(sender, str) or not sender:
            return False
        try:
            result = await self.check(channel, {"user_id": sender, "chat_type": "direct"})
        except Exception as exc:  # noqa: BLE001 -- an answer nobody can vouch for does not count
            logger.warning("approval answer from %r on %s not checked: %s", sender, channel, exc)
            return False
        return result.verdict == "allow" and result.role == "owner"

    def _record(self, channel: str, action: str, sender: str, reason: str) -> None:
        self._sink.record(
            EntryDraft.of(
                PairingBody(action=action, channel=channel, sender=sender[:200], detail=reason),
                source=f"channel:{channel}",
                agent=self._agent,
                subject=f"{action} {channel}:{sender}"[:500],
            )
        )

    def _ask_operator(self, channel: str, sender: str, meta: Mapping[str, str], result: CheckResult) -> None:
        """One prompt on the operator's own channel; the requester never sees it."""
        name = meta.get("user") or meta.get("sender_name") or "no name given"
        text = (
            f"[pairing] {channel} sender {sender} ({name}) asks to talk to the agent; code {result.code}. "
            f"Approve with `nexo pair approve {result.code}`"
        )
        relays = [r for r in self._relays() if r.name == self._config.operator.channel]
        if self._tg is None or not relays:
            self._spawn_notice(text + ".", f"pairing-ask:{result.pending_id}")
            return
        assert result.pending_id is not None
        self._tg.start_soon(self._one_tap, channel, sender, name, result.pending_id, relays)

    def _spawn_notice(self, text: str, key: str) -> None:
        if self._tg is not None:
            self._tg.start_soon(self._tell_operator, text, key)

    async def _one_tap(
        self, channel: str, sender: str, name: str, pending_id: str, relays: list[Relay]
    ) -> None:
        arguments = {"channel": channel, "sender": sender, "name": name}
        decision = await self._broker.ask(PAIR_TOOL, arguments, pairing_prompt_call(pending_id), relays)
        if not decision.allowed:
            logger.info("pairing of %s:%s not taken from the prompt: %s", channel, sender, decision.reason)
            return
        pairing = self.server
        if pairing is None:
            return
        try:
            approved = await pairing.request(
                ApproveRequest(params=ApproveParams(pending_id=pending_id, by=decision.reason[:200])),
                ApproveResult,
                timeout=CHECK_TIMEOUT_S,
            )
        except Exception as exc:  # noqa: BLE001 -- the operator can still approve with the CLI
            logger.warning("pairing approval of %s failed: %s", pending_id, exc)
            await self._tell_operator(
                f"[pairing] approving {channel}:{sender} failed: {exc}", f"pairing-failed:{pending_id}"
            )
            return
        self._sink.record(
            EntryDraft.of(
                PairingBody(action="paired", channel=channel, sender=sender[:200], detail="one-tap"),
                source=f"channel:{channel}",
                agent=self._agent,
                subject=f"paired {channel}:{approved.record.sender}"[:500],
            )
        )


def _owner_by_config(
    platform: str, sender: str, scope: Literal["dm", "group"], options: ChannelPairing
) -> bool:
    """The pairing server's first rule (``listed_owner``), applied to the channel's config."""
    try:
        return listed_owner(platform, sender, options.allow_from, scope=scope, dm_policy=options.policy)
    except InvalidSender:
        return False  # the pairing server names the problem (or, without one, the sender is dropped)


def _local_check(
    platform: str, sender: str, scope: Literal["dm", "group"], options: ChannelPairing
) -> CheckResult:
    """No pairing server configured, and not an ``allow_from`` sender: only ``open`` admits others."""
    if scope == "group" or options.policy == "disabled":
        return CheckResult(verdict="drop", reason="group_disabled" if scope == "group" else "dm_disabled")
    try:
        normalize_sender(platform, sender)
    except InvalidSender:
        return CheckResult(verdict="drop", reason="invalid_sender")
    if options.policy == "open":
        return CheckResult(verdict="allow", role="contact", reason="open_policy")
    return CheckResult(verdict="drop", reason="unknown_sender")
