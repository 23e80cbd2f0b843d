"""What the cron server refuses, as exception types the MCP layers map to errors (no MCP imports)."""

from __future__ import annotations


class CronError(Exception):
    """Base class; every message names the bad value and what to do instead."""


class InvalidRequest(CronError, ValueError):
    """A value the caller can correct (bad schedule, timezone, misfire policy, text)."""


class LimitReached(InvalidRequest):
    """A binding holds as many unfinished entries as it may."""


class EntryNotFound(CronError, LookupError):
    """No entry with this id is visible to the caller."""


class FireNotFound(CronError, LookupError):
    """No fire row has this id."""


class StateRefused(CronError):
    """The entry's state does not allow this change (a finished entry cannot be paused or fired)."""


class OwnedByConfig(StateRefused):
    """The entry is a config-owned poller: change the configuration instead."""
