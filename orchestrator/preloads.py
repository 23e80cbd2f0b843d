"""Which of the fork server's preloads (``shared.forkserver.PRELOAD``) each command imports itself.

A command that forks the template imports first what of the list it uses anyway, so those pages are
shared with the template; the rest the template imports after the fork, on the other core, and the
command never holds a second copy. Tests run each command in a fresh interpreter and compare.
"""

from __future__ import annotations

DAEMON_LEAVES = (
    "pydantic_settings",
    "rich.console",
    "rich.logging",
    "shared.hosting.main",
    "shared.protocol.control",
    "shared.protocol.memory.methods",
    "shared.serverkit",
)
"""What of ``shared.forkserver.PRELOAD`` the daemon never imports (the servers' settings, logging,
hosting and kit, and the requests only the CLI sends): the template imports it after the fork, on
its own core; ``nexo run`` imports the rest before the fork, as its daemon needs it anyway."""

SERVERS_ONLY = (
    *DAEMON_LEAVES,
    "aiosqlite",
    "shared.db",
    "shared.events",
    "shared.protocol.audit.methods",
    "shared.protocol.cron",
    "shared.protocol.events",
    "shared.protocol.memory.admin",
    "shared.protocol.memory.sessions",
    "shared.protocol.pairing",
    "shared.protocol.storage",
)
"""What of ``shared.forkserver.PRELOAD`` a foreground goal never imports: the template imports it
after the fork, on its own core; this process imports the rest before, as it needs it anyway."""
