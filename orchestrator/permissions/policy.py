"""The permission policy: what happens to each tool call (run, run and notify, ask, deny) and why.

Checks run in a fixed order and the first that decides wins:
denied/allowed lists -> rate limits -> outbound allowlist -> dangerous mode -> the tool's tier
(``safe`` runs, ``notify`` runs and tells the operator, ``confirm`` asks unless auto-approve vouches
for the call). An unattended turn (cron, heartbeat) has nobody to ask, so there an "ask" is a "deny".
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from orchestrator.mesh.tiers import Tier
from orchestrator.permissions.autoapprove import auto_approve
from orchestrator.permissions.commands import destructive_reason
from shared.protocol.classification import Classification
from shared.protocol.pairing_terms import Role

if TYPE_CHECKING:
    from orchestrator.mesh.catalog import CatalogTool

Standing = Role | Literal["source"]
"""Who a turn serves: pairing's role, or a source that authenticated itself (a webhook, a poller)."""
Action = Literal["run", "notify", "ask", "deny"]
PrivateDataGrant = Literal["owner", "everyone", "nobody"]
"""Who holds the private_data capability under a policy: the operator only, contacts too, or nobody."""
RECIPIENT_ARGS = ("chat_id", "recipient", "to", "channel_id")
"""Argument names an outbound call names its addressee with (also inside a nested ``arguments``)."""
_LABELS = ("read_only", "write", "outbound", "dangerous", "unclassified")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TierTable(_Strict):
    """The tier of each classification."""

    read_only: Tier = "safe"
    write: Tier = "confirm"
    outbound: Tier = "confirm"
    dangerous: Tier = "confirm"
    unclassified: Tier = "confirm"

    @field_validator("unclassified")
    @classmethod
    def _unclassified_never_safe(cls, value: Tier) -> Tier:
        if value == "safe":
            raise ValueError(
                "tiers.unclassified may not be 'safe': a tool that declares nothing could do anything. "
                "Use 'notify' or 'confirm', or classify the tools you trust under `classify:` "
                "(e.g. `notes__*: write`) or give them a tier under `tools:`"
            )
        return value

    def of(self, label: str) -> Tier:
        """The tier of a classification name (``unclassified`` included)."""
        tiers: dict[str, Tier] = {
            "read_only": self.read_only,
            "write": self.write,
            "outbound": self.outbound,
            "dangerous": self.dangerous,
            "unclassified": self.unclassified,
        }
        return tiers[label]


class RateLimit(_Strict):
    per_minute: float = Field(gt=0)
    burst: int = Field(1, ge=1)


class PermissionPolicy(_Strict):
    """The operator's permission settings; the defaults run read-only tools and ask for the rest."""

    tiers: TierTable = Field(default_factory=TierTable)
    tools: dict[str, Tier] = Field(default_factory=dict)
    """Tier per tool, by glob pattern over ``server__tool`` (or a local tool's name); first match wins."""
    classify: dict[str, Classification] = Field(default_factory=dict)
    """The operator's classification of tools, by pattern; wins over what the server declares."""
    allowed_tools: list[str] | None = None
    """Patterns of the tools that may run at all; None allows every tool."""
    denied_tools: list[str] = Field(default_factory=list)
    """Patterns of tools that never run."""
    outbound_allowlist: dict[str, list[str]] | None = None
    """Server -> the chat ids or recipients (patterns) outbound tools may address; None = anyone."""
    rate_limits: dict[str, RateLimit] = Field(default_factory=dict)
    """By tool pattern or classification name (``outbound``); one bucket per key."""
    auto_approve: bool = False
    """Let the auto-approve table run ``confirm`` calls it can vouch for (e.g. read-only shell commands)."""
    dangerous_mode: bool = False
    """Run every allowed call unasked. Unattended turns still refuse dangerous and destructive calls."""
    private_data: PrivateDataGrant = "owner"
    """Who may use tools that read the operator's private data (the ledger, transcripts, memories,
    workspace files): ``owner`` (the operator's own turns: their messages, `nexo agent run`, cron and
    heartbeat), ``everyone`` (a paired contact too) or ``nobody``. Refused tools are also hidden."""
    private_data_tools: list[str] = Field(default_factory=list)
    """Patterns of further tools that read private data (a server that does not declare it)."""

    @field_validator("tools", "classify", "rate_limits", "private_data_tools")
    @classmethod
    def _patterns_not_empty(cls, value: dict[str, Any] | list[str]) -> dict[str, Any] | list[str]:
        for key in value:
            if not key.strip():
                raise ValueError(
                    f"an empty pattern; use a tool pattern such as `notes__*` (rate_limits also take a "
                    f"classification: {', '.join(_LABELS)})"
                )
        return value


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    action: Action
    reason: str
    classification: str
    """The classification the decision used (``unclassified`` when there was none)."""
    tier: str


class _Bucket:
    def __init__(self, limit: RateLimit, clock: Callable[[], float]) -> None:
        self._rate_per_s = limit.per_minute / 60.0
        self._burst = float(limit.burst)
        self._clock = clock
        self._tokens = self._burst
        self._at = clock()

    def available(self) -> bool:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate_per_s)
        self._at = now
        return self._tokens >= 1

    def take(self) -> None:
        self._tokens -= 1


def _matches(tool: CatalogTool, patterns: Iterable[str]) -> str | None:
    return next((p for p in patterns if fnmatch.fnmatchcase(tool.qualified, p)), None)


def _recipients(arguments: Mapping[str, Any]) -> list[str]:
    found: list[str] = []
    nested = arguments.get("arguments")
    for source in (arguments, nested if isinstance(nested, Mapping) else {}):
        for name in RECIPIENT_ARGS:
            value = source.get(name)
            if value is None:
                continue
            found.extend(str(v) for v in (value if isinstance(value, list) else [value]))
    return found


class PolicyEngine:
    """Decides tool calls under one :class:`PermissionPolicy`; holds the rate-limit buckets."""

    def __init__(
        self,
        policy: PermissionPolicy | None = None,
        *,
        workspace: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.policy = policy or PermissionPolicy()
        self.workspace = workspace
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}

    def classification(self, tool: CatalogTool) -> Classification | None:
        """The operator's classification when a ``classify`` pattern matches, else the tool's own."""
        pattern = _matches(tool, self.policy.classify)
        return self.policy.classify[pattern] if pattern is not None else tool.classification

    def reads_private_data(self, tool: CatalogTool) -> bool:
        """The tool declares it reads private data, or the operator listed it in ``private_data_tools``."""
        return tool.private_data or _matches(tool, self.policy.private_data_tools) is not None

    def grants_private_data(self, role: Standing) -> bool:
        """Whether a turn for a principal of ``role`` holds the private_data capability."""
        grant = self.policy.private_data
        return grant == "everyone" or (grant == "owner" and role == "owner")

    def tier(self, tool: CatalogTool, classification: Classification | None) -> Tier:
        """Operator's per-tool tier, else the tier the orchestrator fixed for its own tool, else by class."""
        pattern = _matches(tool, self.policy.tools)
        if pattern is not None:
            return self.policy.tools[pattern]
        if tool.tier is not None and not tool.server:
            return tool.tier
        return self.policy.tiers.of(classification or "unclassified")

    def _bucket(self, key: str) -> _Bucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(self.policy.rate_limits[key], self._clock)
        return bucket

    def _outbound_denial(self, tool: CatalogTool, arguments: Mapping[str, Any]) -> str | None:
        allowlist = self.policy.outbound_allowlist
        if allowlist is None:
            return None
        server = tool.server or arguments.get("server")
        if not isinstance(server, str) or not server:
            # The orchestrator's own reply tools answer the conversation or the operator: no addressee.
            return None
        allowed = allowlist.get(server)
        if allowed is None:
            return (
                f"{tool.qualified} sends through {server!r}, which permissions.outbound_allowlist does not "
                f"list; add `{server}: [<chat id>]` to allow it"
            )
        recipients = _recipients(arguments)
        if not recipients and "*" not in allowed:
            return (
                f"{tool.qualified} names no recipient ({', '.join(RECIPIENT_ARGS)}), so "
                f"permissions.outbound_allowlist.{server} cannot be checked"
            )
        for recipient in recipients:
            if not any(fnmatch.fnmatchcase(recipient, pattern) for pattern in allowed):
                return (
                    f"{tool.qualified} may not address {recipient!r} on {server!r}: it is not in "
                    f"permissions.outbound_allowlist.{server}"
                )
        return None

    @staticmethod
    def _hazard(
        tool: CatalogTool, classification: Classification | None, arguments: Mapping[str, Any]
    ) -> str | None:
        """Why the call is dangerous or destructive, if it is; a shell is judged by its command line."""
        if tool.shell:
            command = arguments.get("command")
            if not isinstance(command, str):
                return f"{tool.qualified} was called without a command string to inspect"
            return destructive_reason(command)
        if classification == "dangerous":
            return f"{tool.qualified} is classified dangerous"
        return None

    def decide(
        self,
        tool: CatalogTool,
        arguments: Mapping[str, Any],
        *,
        unattended: bool,
        approval_live: bool = False,
        private_data: bool = True,
    ) -> PolicyDecision:
        """The decision for one call. ``unattended``: no human is in the loop (cron, heartbeat).

        ``approval_live``: an unattended turn can still reach an operator who answers approval prompts;
        its asks stay asks, and dangerous or destructive calls ask instead of being refused.
        ``private_data``: the turn's principal holds the private_data capability.
        """
        classification = self.classification(tool)
        label = classification or "unclassified"
        tier = self.tier(tool, classification)

        def decision(action: Action, reason: str) -> PolicyDecision:
            return PolicyDecision(action, reason, label, tier)

        name = tool.qualified
        if pattern := _matches(tool, self.policy.denied_tools):
            return decision("deny", f"{name} is denied by permissions.denied_tools ({pattern!r})")
        allowed = self.policy.allowed_tools
        if allowed is not None and _matches(tool, allowed) is None:
            return decision("deny", f"{name} is not in permissions.allowed_tools")
        if not private_data and self.reads_private_data(tool):
            return decision(
                "deny",
                f"{name} reads the operator's private data, and this conversation's sender does not hold "
                "the private_data capability; answer without it (the operator can grant it with "
                "`private_data: everyone` in the binding's permissions)",
            )
        limits = [key for key in self.policy.rate_limits if key == label or fnmatch.fnmatchcase(name, key)]
        for key in limits:
            if not self._bucket(key).available():
                per_minute = self.policy.rate_limits[key].per_minute
                return decision("deny", f"rate limited: {per_minute:g} per minute ({key}); try again later")
        if label == "outbound" and (denial := self._outbound_denial(tool, arguments)):
            return decision("deny", denial)

        result = self._by_tier(tool, classification, tier, arguments, unattended, approval_live)
        if result[0] != "deny":
            for key in limits:
                self._bucket(key).take()
        return decision(*result)

    def _by_tier(
        self,
        tool: CatalogTool,
        classification: Classification | None,
        tier: Tier,
        arguments: Mapping[str, Any],
        unattended: bool,
        approval_live: bool,
    ) -> tuple[Action, str]:
        name = tool.qualified
        hazard = self._hazard(tool, classification, arguments) if unattended else None
        if hazard is not None:
            # Whatever the tier or mode: nothing dangerous or destructive runs with nobody watching.
            if approval_live:
                return "ask", f"unattended turn: {hazard}; it needs an operator's approval"
            return "deny", (
                f"unattended turn: {hazard}; dangerous and destructive calls never run unattended, even in "
                "dangerous mode. Run it from a conversation"
            )
        if self.policy.dangerous_mode:
            return "run", f"dangerous mode: {name} runs unasked"
        if tier == "safe":
            return "run", f"{name} is tier safe"
        if tier == "notify":
            return "notify", f"{name} is tier notify: it runs and the operator is told"
        reason = f"{name} is {classification or 'unclassified'}: tier confirm asks the operator"
        if self.policy.auto_approve:
            auto = auto_approve(replace(tool, classification=classification), arguments, self.workspace)
            if auto.allow:
                return "run", f"auto-approved: {auto.reason}"
            reason = f"{reason} ({auto.reason})"
        if unattended and not approval_live:
            return "deny", (
                f"unattended turn: {name} needs approval; nobody is there to give it. Give the tool tier "
                "'safe' or 'notify' under permissions.tools, or run it from a conversation"
            )
        return "ask", reason
