"""What the doctors say about Claude Code channel plugins: who can approve through them, and their own
access control (a second gate in front of nexo's pairing).

A Claude Code channel plugin keeps an allowlist of its own (the official Telegram and Discord plugins:
``access.json`` in their state directory, ``dmPolicy`` pairing, allowlist or disabled, ``allowFrom``,
``groups``). nexo cannot change it and sees it only when the file is where the plugin's environment
says (``*_STATE_DIR``) or at the plugins' default place; these checks say what they could see.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.config.nexo import NexoConfig
from orchestrator.doctor import Finding
from orchestrator.mesh.config import StdioServerConfig

PLATFORMS = ("telegram", "discord")
"""Official plugins whose default state directory is ``~/.claude/channels/<platform>``."""


def claude_only(capabilities: Collection[str]) -> bool:
    """A Claude Code channel that does not speak nexo's contract."""
    return "claude/channel" in capabilities and "nexo/channel" not in capabilities


def approvals_line(config: NexoConfig, server: str, capabilities: Collection[str]) -> str:
    """Which contract relays approvals to ``server`` and whose answers count (for `nexo channel list`)."""
    if "nexo/channel/permission" in capabilities:
        who = "its approvers" if config.channel(server).approvers is not None else "its owners"
        return f"approvals in nexo's contract, answered by {who}"
    if "claude/channel/permission" in capabilities:
        if config.channel(server).claude_permission_relay:
            return (
                "approvals in Claude Code's contract: whoever the server lets answer counts as the operator"
            )
        return (
            "approvals not relayed (Claude Code's contract names no sender; claude_permission_relay is off)"
        )
    return "no approvals"


def relay_findings(config: NexoConfig, server: str, capabilities: Collection[str]) -> list[Finding]:
    setting = f"channel_options.{server}.claude_permission_relay"
    turned_on = config.channel(server).claude_permission_relay
    if not claude_only(capabilities) or "claude/channel/permission" not in capabilities:
        if not turned_on:
            return []
        return [
            Finding(
                "warning",
                "claude.relay",
                server,
                f"{setting} is on, but the server does not declare claude/channel/permission alone: "
                "no approval goes to it that way",
                f"remove {setting}",
            )
        ]
    if not turned_on:
        return [
            Finding(
                "info",
                "claude.relay",
                server,
                "declares claude/channel/permission, whose answers name nobody: nexo does not relay "
                "approvals to it, and answers from it are refused and recorded",
                f"if everyone {server} lets answer is the operator, set {setting}: true",
            )
        ]
    return [
        Finding(
            "info",
            "claude.relay",
            server,
            f"approvals are relayed in Claude Code's contract: {server} vouches for whoever answers, "
            "and that counts as the operator; the relay stops as soon as it lets through a message from "
            "anyone but an owner in a direct chat",
        )
    ]


@dataclass(frozen=True)
class PluginAccess:
    path: Path
    dm_policy: str
    allow_from: tuple[str, ...]
    groups: tuple[str, ...]


def access_candidates(config: NexoConfig, server: str, home: Path | None = None) -> list[Path]:
    """Where the plugin's ``access.json`` may be: its ``*_STATE_DIR``, else the official default."""
    spec = config.servers.get(server)
    env: Mapping[str, str] = spec.env if isinstance(spec, StdioServerConfig) else {}
    named = [Path(value).expanduser() for key, value in sorted(env.items()) if key.endswith("_STATE_DIR")]
    if named:
        return [path / "access.json" for path in named]
    words = " ".join([server, *(spec.args if isinstance(spec, StdioServerConfig) else [])]).lower()
    root = Path(env.get("CLAUDE_CONFIG_DIR") or (home or Path.home()) / ".claude")
    return [root / "channels" / platform / "access.json" for platform in PLATFORMS if platform in words]


def read_access(path: Path) -> PluginAccess | str:
    """The file's gate, or why it could not be read."""
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"{path} could not be read: {exc}"
    if not isinstance(data, dict):
        return f"{path} is not a JSON object"
    allow = data.get("allowFrom") or []
    groups = data.get("groups") or {}
    return PluginAccess(
        path=path,
        dm_policy=str(data.get("dmPolicy") or "pairing"),
        allow_from=tuple(str(x) for x in allow) if isinstance(allow, list) else (),
        groups=tuple(str(g) for g in groups) if isinstance(groups, dict) else (),
    )


def access_findings(config: NexoConfig, server: str, home: Path | None = None) -> list[Finding]:
    """The plugin's own gate next to nexo's pairing: double gates, and who can approve."""
    candidates = access_candidates(config, server, home)
    found = [path for path in candidates if path.exists()]
    if not found:
        looked = ", ".join(str(p) for p in candidates) or "no place known for this server"
        return [
            Finding(
                "info",
                "claude.access",
                server,
                f"nexo cannot see this plugin's own access control (looked at: {looked}); a Claude Code "
                "plugin usually gates senders itself, before nexo's pairing",
                "set its *_STATE_DIR in servers." + server + ".env so the doctor can read it "
                "(docs/channels.md: two gates, one person)",
            )
        ]
    access = read_access(found[0])
    if isinstance(access, str):
        return [Finding("warning", "claude.access", server, access, "fix or remove the file")]
    options = config.channel(server)
    setting = f"channel_options.{server}.claude_permission_relay"
    owners = set(options.pairing.allow_from) | set(options.approvers or ())
    where = str(access.path)
    findings: list[Finding] = []
    if access.dm_policy == "pairing":
        findings.append(
            Finding(
                "warning",
                "claude.double_gate",
                server,
                f"two gates: the plugin runs its own pairing ({where}: dmPolicy pairing), so a stranger "
                "gets the plugin's code (approved in Claude Code, never seen by nexo), then meets "
                "nexo's pairing too",
                f'set "dmPolicy": "allowlist" in {where}, list in allowFrom exactly the senders nexo '
                "pairs (`nexo pair list`), and let nexo's pairing decide who is owner or contact",
            )
        )
    elif access.dm_policy == "disabled":
        findings.append(
            Finding(
                "warning",
                "claude.access",
                server,
                f"the plugin drops every message ({where}: dmPolicy disabled): nothing reaches nexo",
                f'set "dmPolicy": "allowlist" in {where}',
            )
        )
    missing = sorted(owners - set(access.allow_from))
    if missing:
        findings.append(
            Finding(
                "warning",
                "claude.access",
                server,
                f"owner(s) {', '.join(missing)} are not in the plugin's allowFrom ({where}): the plugin "
                "drops their direct messages before nexo sees them",
                f"add them to allowFrom in {where}",
            )
        )
    others = sorted(set(access.allow_from) - owners)
    if options.claude_permission_relay and others:
        findings.append(
            Finding(
                "error",
                "claude.relay",
                server,
                f"the plugin sends approval prompts to everyone in its allowFrom ({where}), and "
                f"{', '.join(others)} are not owners here: their answers would count as the operator's",
                f"remove them from allowFrom, or turn {setting} off",
            )
        )
    if options.claude_permission_relay and access.groups:
        findings.append(
            Finding(
                "warning",
                "claude.relay",
                server,
                f"the plugin admits group chats ({', '.join(access.groups)}), whose members can type "
                "an approval answer; nexo stops the relay at their first message",
                f"remove the groups from {where}, or turn {setting} off",
            )
        )
    return findings


def plugin_findings(
    config: NexoConfig, server: str, capabilities: Collection[str] | None, home: Path | None = None
) -> list[Finding]:
    """Everything the doctors say about one Claude Code channel plugin (nothing for other servers)."""
    if capabilities is None:
        return []
    findings = relay_findings(config, server, capabilities)
    if claude_only(capabilities):
        findings.extend(access_findings(config, server, home))
    return findings
