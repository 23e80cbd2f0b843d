"""The one exception every database problem is reported as."""

from __future__ import annotations


class DatabaseError(Exception):
    """A database cannot be used as asked; the message names the file and the fix."""


def problem(where: object, what: str, fix: str) -> DatabaseError:
    """The error for `what` went wrong at `where` (usually the database file), with its fix."""
    return DatabaseError(f"{where}: {what}. Fix: {fix}")
