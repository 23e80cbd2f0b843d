"""The tools ``nexo mcp-server`` offers at each tier, as every test of it expects them."""

from __future__ import annotations

from typing import Final

READ_TOOLS: Final = frozenset(
    {
        "audit_search",
        "audit_verify",
        "channels_status",
        "cron_list",
        "goal_get",
        "goal_turns",
        "goals_list",
        "memory_file",
        "memory_recall",
        "pairing_list",
    }
)
ACT_TOOLS: Final = frozenset(
    {
        "channel_send",
        "cron_create",
        "cron_delete",
        "cron_pause",
        "cron_resume",
        "goal_cancel",
        "goal_run",
        "memory_forget",
        "memory_remember",
    }
)
ADMIN_TOOLS: Final = frozenset({"pairing_approve", "pairing_revoke"})
