"""Channel sections: per-server options and pairing policy, the operator's channel, approved servers."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from orchestrator.config.strict import StrictModel

PAIRING_PLATFORMS = frozenset({"telegram", "slack", "whatsapp", "email", "discord"})
"""Platforms whose ids the pairing server normalises by their own rules (others: generic)."""


class ChannelPairing(StrictModel):
    policy: Literal["pairing", "allowlist", "open", "disabled"] = "pairing"
    """Direct messages from senders nobody paired: pairing (they get a code for the operator and the
    message is dropped), allowlist (no reply at all), open (everyone reaches the model: flagged by
    `nexo doctor capabilities`) or disabled (no direct message reaches the model)."""
    group_policy: Literal["allowlist", "open", "disabled"] = "disabled"
    """Group chats, keyed by the group's id (pairing a person grants no group): allowlist (groups
    seeded with `nexo pair seed --scope group`), open or disabled."""
    require_mention: bool = True
    """In an allowed group, only messages that mention the agent (meta ``mentioned=true``) count."""
    allow_from: list[str] = Field(default_factory=list)
    """The operator's own sender ids on this channel: always admitted, as the owner."""
    platform: str | None = None
    """How sender ids are normalised: telegram, slack, whatsapp, email, discord or generic; default:
    the server's name when it is one of those, otherwise generic."""
    account: str = "default"
    """The bot account of this channel server (pairings are per channel and account)."""
    no_sender: Literal["refuse", "source", "principal"] = "refuse"
    """Events that carry no sender id (no user_id, sender_id or from_id): refuse them (each refusal
    is audited, counted, shown by `nexo status` and `nexo channel doctor`, and told to the operator
    once per source); source: run each as the principal ``<server>:<source>``, the source being the
    event's ``source`` meta, named by a server that authenticated it (a webhook's verified signature,
    a configured poller); principal: run each as ``principal`` (a Claude Code channel whose messages
    carry no user id)."""
    principal: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$")
    """With ``no_sender: principal``, the name its events run as, e.g. ``claude-tg:operator``."""

    def platform_for(self, server: str) -> str:
        """The platform ``server``'s sender ids are normalised as (``platform``'s doc)."""
        if self.platform:
            return self.platform
        return server if server in PAIRING_PLATFORMS else "generic"

    @model_validator(mode="after")
    def _principal_named(self) -> ChannelPairing:
        if self.no_sender == "principal" and self.principal is None:
            raise ValueError(
                "no_sender: principal needs principal: NAME, the principal its events run as "
                "(e.g. principal: claude-tg:operator)"
            )
        if self.principal is not None and self.no_sender != "principal":
            raise ValueError(
                f"principal {self.principal!r} is used only with no_sender: principal; set that, "
                "or remove principal"
            )
        return self


class ChannelOptions(StrictModel):
    outbound_tool_name: str = "send_message"
    approval_timeout_s: float = Field(600.0, gt=0, le=600)
    rate_per_minute: float | None = Field(120.0, gt=0)
    """Messages taken from this channel per minute (a token bucket); null takes them as they come.
    It limits contacts and webhook sources; the owner's own messages are never throttled."""
    burst: int = Field(20, ge=1)
    overflow: Literal["queue", "refuse"] = "queue"
    """Over the rate: queue (messages wait in the channel server, in order) or refuse (the sender is
    told and the message is set aside)."""
    max_attempts: int = Field(3, ge=1, le=20)
    """Tries before a message whose handling keeps failing becomes a dead letter (`nexo dlq`)."""
    retry_backoff_s: float = Field(1.0, gt=0, le=300)
    """Wait before the second try; it doubles for each further one."""
    approvers: list[str] | None = None
    """Sender ids (the platform's stable user ids) whose answers to approval prompts count on this
    channel; null: the channel's owners (``pairing.allow_from`` and senders paired as owner)."""
    pairing: ChannelPairing = Field(default_factory=ChannelPairing)
    """Who may reach the model through this channel (see docs/security.md)."""
    claude_permission_relay: bool = False
    """Relay approval prompts to this Claude Code channel (``claude/channel/permission``) and count
    its verdicts. Such a verdict names nobody: the server vouches for whoever answered, so turn this
    on only when everyone the server lets answer is the operator (see docs/channels.md)."""
    quote_replies: Literal["always", "groups", "never"] | None = None
    """Whether an answer quotes the message it answers (the outbound tool's ``reply_to``): always, in
    group chats only, or never. Null: always for nexo channels (whose ``reply_to`` names the message
    answered), groups for Claude Code channels (where ``reply_to`` is a visible quote)."""


class OperatorOptions(StrictModel):
    channel: str = "console"
    """Where nexo tells the operator about problems (dead letters); a channel server's name."""
    chat_id: str = "operator"


class ApprovedChannel(StrictModel):
    server: str
    plugin_source: str | None = None
    """Optional pin: the name the server reports about itself (``serverInfo.name``) must equal this,
    so a config edit that points the same key at another program is not trusted silently."""


class ChannelsOptions(StrictModel):
    enabled: bool = False
    """The kill switch: with false, no channel server's messages reach any agent."""
    approved: list[ApprovedChannel] = Field(default_factory=list)
    """Channel servers the operator has approved; a bound server that is not here is skipped."""

    def approval(self, server: str) -> ApprovedChannel | None:
        return next((entry for entry in self.approved if entry.server == server), None)
