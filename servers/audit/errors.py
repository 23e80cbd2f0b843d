"""What the audit stores refuse, as exception types the MCP layers map to errors (no MCP imports)."""

from __future__ import annotations


class AuditError(Exception):
    """Base class; every message names the bad value and what to do instead."""


class InvalidRequest(AuditError, ValueError):
    """A value the caller can correct (bad id, empty query, out-of-range count)."""


class InvalidEntry(InvalidRequest):
    """An entry the ledger refuses (unknown kind, bad source, a body its kind's model rejects)."""


class GoalNotFound(AuditError, LookupError):
    """No goal has this id."""


class TransitionRefused(AuditError):
    """The goal lifecycle does not allow this status change (terminal states are final)."""


class WriterStopped(AuditError):
    """The group-commit writer is not running (the server is shutting down); nothing was recorded."""
